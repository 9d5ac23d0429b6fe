#!/usr/bin/env python3
"""Overhead of the Python package over the same Rust calls (docs/performance.md#python).

For each update pair (insert a row then delete it; insert a column then delete it; a rank-one
change then its reverse) on a 2000×200 float64 problem, times the loop through `cuqr.QR`
and the identical loop in Rust (the `cuqr-bench python` program, run once a round on the
same data, written to .npy files), best of several alternating rounds each, and prints a
Markdown table with the ratio. Build the program first (`cargo build --release -p cuqr-bench`;
the script looks in target/release, then on PATH, or takes --bench-exe). Usage:

    python scripts/python_overhead.py [--device cpu|cuda] [--q thin|full] [--threads T] [--reps N]
"""

import argparse
import json
import os
import platform
import shutil
import subprocess
import tempfile
import time

import numpy as np

import cuqr

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def bench_exe(given):
    """The cuqr-bench program: --bench-exe, else target/release, else PATH."""
    if given:
        return given
    built = os.path.join(REPO, "target", "release", "cuqr-bench")
    found = built if os.path.isfile(built) else shutil.which("cuqr-bench")
    if not found:
        raise SystemExit("cuqr-bench not found: cargo build --release -p cuqr-bench, or --bench-exe")
    return found


def rust_loop(exe, files, op, args):
    """Seconds a pair of one round of the Rust loop (a fresh factorisation, one untimed pair)."""
    device = "cpu" if args.device == "cpu" else "cuda"
    cmd = [exe, "python", "--op", op, "--q", args.q, "--device", device,
           "--reps", str(args.reps), "--rounds", "1"]
    for name, path in files.items():
        cmd += [f"--{name}", path]
    if args.threads > 0:
        cmd += ["--threads", str(args.threads)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])["seconds"]


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
    ap.add_argument("--bench-exe", default=None, help="the cuqr-bench program")
    args = ap.parse_args()
    exe = bench_exe(args.bench_exe)
    cuqr.set_threads(args.threads)
    rng = np.random.default_rng(0)
    m, n = args.m, args.n
    A = rng.standard_normal((m, n))
    b = rng.standard_normal((m, 1))
    row = rng.standard_normal(n)
    col = rng.standard_normal(m)
    tmp = tempfile.mkdtemp(prefix="cuqr-overhead-")
    files = {"a": A, "b": b, "col": col.reshape(m, 1), "row": row.reshape(n, 1)}
    for name, arr in files.items():
        files[name] = os.path.join(tmp, f"{name}.npy")
        np.save(files[name], arr)
    print(f"# cuqr {cuqr.__version__}, Python {platform.python_version()}, {args.device}, "
          f"q={args.q}, {cuqr.threads()} CPU threads, {m}×{n} float64, {args.reps} pairs × best of {args.rounds} rounds\n")
    print("| update pair | Rust (µs) | Python (µs) | Python / Rust |")
    print("|---|---|---|---|")
    for op in ("rows", "cols", "rank_one"):
        # Every round starts from a fresh factorisation on both sides,
        # with one untimed warm-up pair, so that both loops see the same states (drift checks
        # included); rounds alternate between the two loops, so that drifts of the machine
        # hit both.
        rust, py = float("inf"), float("inf")
        for _ in range(args.rounds):
            rust = min(rust, rust_loop(exe, files, op, args))
            qr = cuqr.QR(A, b, q=args.q, device=args.device)
            python_loop(qr, op, m, n, row, col, col, row, 1)
            py = min(py, python_loop(qr, op, m, n, row, col, col, row, args.reps))
        print(f"| {op} | {rust * 1e6:.1f} | {py * 1e6:.1f} | {py / rust:.3f} |")
    shutil.rmtree(tmp)


if __name__ == "__main__":
    main()
