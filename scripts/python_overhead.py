#!/usr/bin/env python3
"""Overhead of the Python package over the same Rust calls (docs/performance.md#python).

For each update pair (insert a row then delete it; insert a column then delete it; a rank-one
change then its reverse) on a 2000×200 float64 problem, times the loop through `cuqr.QR`
and the identical loop inside the extension (`time_rust_updates`, Rust with the interpreter
lock released), on the same data, in this process, best of several alternating rounds each, and prints
a Markdown table with the ratio. Usage:

    python scripts/python_overhead.py [--device cpu|cuda] [--q thin|full] [--threads T] [--reps N]
"""

import argparse
import platform
import time

import numpy as np

import cuqr
from cuqr import _cuqr


def python_loop(qr, op, m, n, row, col, u, v, reps):
    neg = -u
    t = time.perf_counter()
    for _ in range(reps):
        if op == "rows":
            qr.insert_rows(m, row)
            qr.delete_rows(m, 1)
        elif op == "cols":
            qr.insert_cols(n, col)
            qr.delete_cols(n, 1)
        else:
            qr.rank_one(u, v)
            qr.rank_one(neg, v)
    qr._st.synchronize()  # waits for the device, as the Rust loop does
    return (time.perf_counter() - t) / reps


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--q", default="thin")
    ap.add_argument("--m", type=int, default=2000)
    ap.add_argument("--n", type=int, default=200)
    ap.add_argument("--reps", type=int, default=50)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--threads", type=int, default=0, help="CPU threads (0: all cores)")
    args = ap.parse_args()
    cuqr.set_threads(args.threads)
    rng = np.random.default_rng(0)
    m, n = args.m, args.n
    A = rng.standard_normal((m, n))
    b = rng.standard_normal((m, 1))
    row = rng.standard_normal(n)
    col = rng.standard_normal(m)
    ordinal = None if args.device == "cpu" else 0
    print(f"# cuqr {cuqr.__version__}, Python {platform.python_version()}, {args.device}, "
          f"q={args.q}, {cuqr.threads()} CPU threads, {m}×{n} float64, {args.reps} pairs × best of {args.rounds} rounds\n")
    print("| update pair | Rust (µs) | Python (µs) | Python / Rust |")
    print("|---|---|---|---|")
    for op in ("rows", "cols", "rank_one"):
        # Every round starts from a fresh factorisation on both sides (as the Rust loop does),
        # with one untimed warm-up pair, so that both loops see the same states (drift checks
        # included); rounds alternate between the two loops, so that drifts of the machine
        # hit both.
        rust, py = float("inf"), float("inf")
        for _ in range(args.rounds):
            rust = min(rust, _cuqr.time_rust_updates(
                op, A, b, col.reshape(m, 1), row.reshape(n, 1), args.q, ordinal, args.reps, 1
            ))
            qr = cuqr.QR(A, b, q=args.q, device=args.device)
            python_loop(qr, op, m, n, row, col, col, row, 1)
            py = min(py, python_loop(qr, op, m, n, row, col, col, row, args.reps))
        print(f"| {op} | {rust * 1e6:.1f} | {py * 1e6:.1f} | {py / rust:.3f} |")


if __name__ == "__main__":
    main()
