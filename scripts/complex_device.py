"""Updates of complex factors from Python on the GPU: the held state cuqr.ExplicitQR (Q
kept in device memory between updates), and the SciPy-style cuqr.qr_insert, qr_delete and
qr_update on CuPy complex128 arrays (Q updated in device memory) against the same calls on
NumPy arrays (the CPU) and against refactorising the updated matrix with cupy.linalg.qr
(cuSOLVER geqrf + ungqr), in one process; median of --reps after a warm-up, each function
call on the same input factors.

    python3 scripts/complex_device.py [--m 6000] [--n 600] [--reps 7] [--mode economic]
"""

import argparse
import statistics
import time

import numpy as np
import scipy.linalg as sl

import cuqr


def median_ms(f, reps, sync):
    f()
    sync()
    out = []
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        sync()
        out.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(out)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--m", type=int, default=6000)
    ap.add_argument("--n", type=int, default=600)
    ap.add_argument("--reps", type=int, default=7)
    ap.add_argument("--mode", choices=["economic", "full"], default="economic")
    a = ap.parse_args()
    import cupy

    sync = cupy.cuda.Device().synchronize
    rng = np.random.default_rng(7)
    m, n = a.m, a.n
    c = lambda *s: rng.standard_normal(s) + 1j * rng.standard_normal(s)  # noqa: E731
    A = c(m, n)
    Q, R = sl.qr(A, mode=a.mode)
    Qd, Rd = cupy.asfortranarray(cupy.asarray(Q)), cupy.asarray(R)
    row, col, u, v = c(n), c(m), c(m), c(n)
    k, kc = m // 3, n // 2
    ops = [
        ("insert_row", lambda x: cuqr.qr_insert(*x[:2], x[2](row), k, which="row"),
         np.insert(A, k, row, axis=0)),
        ("delete_row", lambda x: cuqr.qr_delete(*x[:2], k, 1, which="row"),
         np.delete(A, k, axis=0)),
        ("insert_col", lambda x: cuqr.qr_insert(*x[:2], x[2](col), kc, which="col"),
         np.insert(A, kc, col, axis=1)),
        ("delete_col", lambda x: cuqr.qr_delete(*x[:2], kc, 1, which="col"),
         np.delete(A, kc, axis=1)),
        ("rank_one", lambda x: cuqr.qr_update(*x[:2], x[2](u), x[2](v)),
         A + np.outer(u, v.conj())),
    ]
    host = (Q, R, np.asarray)
    dev = (Qd, Rd, cupy.asarray)
    mode = "complete" if a.mode == "full" else "reduced"
    # the held state: the same updates on cuqr.ExplicitQR with Q kept on the GPU (each
    # update and its inverse, so that the state returns to its shape; half the pair's time)
    held = cuqr.ExplicitQR(Qd, Rd)
    pairs = [
        ("insert_row", lambda: (held.insert_rows(k, cupy.asarray(row)), held.delete_rows(k))),
        ("insert_col", lambda: (held.insert_cols(kc, cupy.asarray(col)), held.delete_cols(kc))),
        ("rank_one", lambda: (held.update(cupy.asarray(u), cupy.asarray(v)),
                              held.update(cupy.asarray(-u), cupy.asarray(v)))),
    ]
    print(f"cuqr.ExplicitQR on CuPy complex128 {m}×{n} ({a.mode} Q kept on the GPU); ms an "
          f"update (half an update-and-inverse pair), median of {a.reps}")
    print("| update pair | ms an update |")
    print("|---|---:|")
    for name, f in pairs:
        print(f"| {name} and its inverse | {median_ms(f, a.reps, sync) / 2:.2f} |")
    print()
    print(f"complex128 {m}×{n}, {a.mode} Q; ms, median of {a.reps}")
    print("| op | CuPy (GPU) | NumPy (CPU) | cupy.linalg.qr of the updated A | refactor / GPU | ‖QᴴQ − I‖ | ‖A − QR‖/‖A‖ |")
    print("|---|---:|---:|---:|---:|---:|---:|")
    for name, f, A1 in ops:
        t_gpu = median_ms(lambda: f(dev), a.reps, sync)
        t_cpu = median_ms(lambda: f(host), max(1, a.reps // 2), sync)
        A1d = cupy.asarray(A1)
        t_ref = median_ms(lambda: cupy.linalg.qr(A1d, mode=mode), a.reps, sync)
        Q1, R1 = (cupy.asnumpy(x) for x in f(dev))
        orth = np.linalg.norm(Q1.conj().T @ Q1 - np.eye(Q1.shape[1]))
        res = np.linalg.norm(A1 - Q1 @ R1) / np.linalg.norm(A1)
        print(f"| {name} | {t_gpu:.2f} | {t_cpu:.2f} | {t_ref:.2f} | {t_ref / t_gpu:.1f} "
              f"| {orth:.1e} | {res:.1e} |")


if __name__ == "__main__":
    main()
