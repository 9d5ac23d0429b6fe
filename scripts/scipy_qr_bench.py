#!/usr/bin/env python3
"""NumPy/SciPy QR timings on the shapes of `cuqr bench cpu`, for a side-by-side table.

Run with the project's virtual environment (git-ignored):

    python3 -m venv .venv && .venv/bin/pip install numpy scipy
    .venv/bin/python scripts/scipy_qr_bench.py [--quick] [--large] [--shapes MxN,...]
        [--threads 1,all] [--reps R] [--csv FILE]

Per shape m x n and thread count (OpenBLAS threads pinned with OPENBLAS_NUM_THREADS;
OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are unset together for those runs, each thread
count in a fresh interpreter because OpenBLAS reads them once at load):

* factorize: numpy.linalg.qr (modes complete, reduced, r) and scipy.linalg.qr (modes
  full, economic, r) of A (m x n);
* updates of scipy.linalg.qr(A) in modes full and economic: qr_insert rows at
  k0 = m/3 and columns at k0 = n/2, qr_delete rows at m/3 and columns at n/2, each with
  p = 1 and p = n/10, and qr_update (rank one, random u and v).

Entries are random in +-[0.1, 1) (one right-hand side is not part of SciPy's API and is
not timed). Times: one warm-up, then the median of --reps runs (default 5) of the call
alone (its inputs prepared before, untimed); SciPy copies its inputs inside the call
(overwrite_qru=False), as cuqr's updates write new buffers.

Columns: shape, threads, library, mode, op, p, ms. cuqr's matching kinds: full <-> Q m x m
(QPolicy::Full), economic <-> thin Q1 (QPolicy::Thin), r <-> R only (QPolicy::None).
"""

import argparse
import os
import subprocess
import sys
import time

SHAPES = [(1000, 100), (2000, 200), (4000, 400)]


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--quick", action="store_true", help="one shape, 1000x100")
    ap.add_argument("--large", action="store_true", help="also 8000x800")
    ap.add_argument("--shapes", help="m x n shapes (default 1000x100,2000x200,4000x400)")
    ap.add_argument("--threads", default="1,all", help="OpenBLAS thread counts (default 1,all)")
    ap.add_argument("--reps", type=int, default=5, help="timed runs, at least 5 (default 5)")
    ap.add_argument("--csv", help="also write the rows as CSV")
    ap.add_argument("--child", help=argparse.SUPPRESS)
    a = ap.parse_args(argv)
    if a.reps < 5:
        ap.error("--reps must be at least 5")
    return a


def shapes_of(a):
    if a.shapes:
        out = []
        for t in a.shapes.split(","):
            m, n = (int(x) for x in t.strip().split("x"))
            out.append((m, n))
    elif a.quick:
        out = [SHAPES[0]]
    else:
        out = list(SHAPES)
    if a.large:
        out.append((8000, 800))
    return out


def median_ms(fn, reps):
    fn()
    ts = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        ts.append((time.perf_counter() - t0) * 1e3)
    ts.sort()
    return ts[len(ts) // 2]


def child(a):
    """Times every case at the thread count this interpreter was started with."""
    import numpy as np
    import scipy.linalg as sl

    threads = int(os.environ["OPENBLAS_NUM_THREADS"])
    rng = np.random.default_rng(7)

    def rand(*shape):
        x = 0.1 + 0.9 * rng.random(shape)
        return np.where(rng.random(shape) < 0.5, -x, x)

    for m, n in shapes_of(a):
        A = np.asfortranarray(rand(m, n))
        rows = []
        for mode in ("complete", "reduced", "r"):
            rows.append(("numpy", mode, "factorize", n, median_ms(lambda: np.linalg.qr(A, mode=mode), a.reps)))
        for mode in ("full", "economic", "r"):
            rows.append(("scipy", mode, "factorize", n, median_ms(lambda: sl.qr(A, mode=mode), a.reps)))
        pb = max(n // 10, 1)
        for mode in ("full", "economic"):
            Q, R = sl.qr(A, mode=mode)
            for p in (1, pb):
                U = rand(p, n)
                rows.append(("scipy", mode, "insert_rows", p,
                             median_ms(lambda: sl.qr_insert(Q, R, U, m // 3, "row"), a.reps)))
                rows.append(("scipy", mode, "delete_rows", p,
                             median_ms(lambda: sl.qr_delete(Q, R, m // 3, p, "row"), a.reps)))
                C = rand(m, p)
                rows.append(("scipy", mode, "insert_cols", p,
                             median_ms(lambda: sl.qr_insert(Q, R, C, n // 2, "col"), a.reps)))
                rows.append(("scipy", mode, "delete_cols", p,
                             median_ms(lambda: sl.qr_delete(Q, R, n // 2, p, "col"), a.reps)))
            u, v = rand(m), rand(n)
            rows.append(("scipy", mode, "rank_one", 1, median_ms(lambda: sl.qr_update(Q, R, u, v), a.reps)))
        for lib, mode, op, p, ms in rows:
            print(f"{m},{n},{threads},{lib},{mode},{op},{p},{ms:.4f}", flush=True)


def main(argv):
    a = parse_args(argv)
    if a.child:
        child(a)
        return
    counts = []
    for t in a.threads.split(","):
        counts.append(os.cpu_count() if t.strip() == "all" else int(t))
    import numpy
    import scipy

    print(f"date: {time.strftime('%Y-%m-%d %H:%M:%S UTC', time.gmtime())}")
    print(f"numpy {numpy.__version__}, scipy {scipy.__version__}, {os.cpu_count()} cores")
    print("command: scripts/scipy_qr_bench.py " + " ".join(argv))
    print()
    print("| shape | threads | library | mode | op | p | ms |")
    print("|---|---:|---|---|---|---:|---:|")
    lines = ["m,n,threads,library,mode,op,p,ms"]
    for t in counts:
        env = dict(os.environ)
        env["OPENBLAS_NUM_THREADS"] = str(t)
        env.pop("OPENBLAS_CORETYPE", None)
        env.pop("OPENBLAS_L2_SIZE", None)
        args = [sys.executable, os.path.abspath(__file__), "--child", "1"] + [
            x for x in argv if x != "--child"
        ]
        proc = subprocess.Popen(args, env=env, stdout=subprocess.PIPE, text=True)
        for line in proc.stdout:
            line = line.strip()
            m, n, th, lib, mode, op, p, ms = line.split(",")
            print(f"| {m}×{n} | {th} | {lib} | {mode} | {op} | {p} | {float(ms):.3f} |", flush=True)
            lines.append(line)
            if a.csv:
                with open(a.csv, "w") as f:
                    f.write("\n".join(lines) + "\n")
        if proc.wait() != 0:
            sys.exit(f"scipy_qr_bench: the run with {t} threads failed")


if __name__ == "__main__":
    main(sys.argv[1:])
