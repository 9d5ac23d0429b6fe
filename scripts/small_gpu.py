"""Per-step time of cuqr.SmallState from Python on the GPU: a window step (slide, solution
recorded on the device) with host rows (NumPy) and with rows already on the device (CuPy),
against the general state cuqr.QR (R only, kept data) slide + solve on the same rows.

    python3 scripts/small_gpu.py [--steps S]
"""

import argparse
import time

import numpy as np

import cuqr


def per_step(st, X, y, start, steps, sync):
    t0 = time.perf_counter()
    for t in range(start, start + steps):
        st.slide(X[t], y[t])
    sync()
    return (time.perf_counter() - t0) / steps * 1e6


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--steps", type=int, default=20000)
    a = ap.parse_args()
    import cupy

    print("| m×n | rows | µs a step (slide, solution recorded) |")
    print("|---|---|---|")
    for m, n in [(252, 5), (1000, 50)]:
        rng = np.random.default_rng(1)
        T = m + 2 * a.steps + 400
        X = rng.uniform(-1, 1, (T, n))
        y = rng.uniform(-1, 1, T)
        st = cuqr.SmallState(X[:m], y[:m], record=a.steps + 200)
        yf = [float(v) for v in y]
        per_step(st, X, yf, m, 200, st.sync)
        st.clear_recording()
        host = per_step(st, X, yf, m + 200, a.steps, st.sync)
        print(f"| {m}×{n} | NumPy x, float y | {host:.1f} |")
        Xd, yd = cupy.asarray(X), cupy.asarray(y)
        ycols = [yd[t : t + 1] for t in range(T)]
        st = cuqr.SmallState(X[:m], y[:m], record=a.steps + 200)
        xrows = [Xd[t] for t in range(T)]
        per_step(st, xrows, ycols, m, 200, st.sync)
        st.clear_recording()
        dev = per_step(st, xrows, ycols, m + 200, a.steps, st.sync)
        print(f"| {m}×{n} | CuPy x, CuPy y[t:t+1] | {dev:.1f} |")
        q = cuqr.QR(Xd[:m], yd[:m], q=None, keep_data=True)
        count = 300
        t0 = time.perf_counter()
        for t in range(m, m + count):
            q.slide(Xd[t : t + 1], yd[t : t + 1], drop=1)
            q.solve()
        gen = (time.perf_counter() - t0) / count * 1e6
        print(f"| {m}×{n} | CuPy rows, cuqr.QR slide + solve (the general GPU state) | {gen:.1f} |")


if __name__ == "__main__":
    main()
