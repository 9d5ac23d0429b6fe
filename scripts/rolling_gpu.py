"""Rolling least squares of many series on one GPU: cuqr.rolling_lstsq on PyTorch CUDA
tensors against torch.linalg.lstsq batched over the same windows, in one process
(docs/performance.md#rolling-least-squares).

Usage: python scripts/rolling_gpu.py [--series S] [--nobs T] [--k K] [--window W]
                                     [--chunk C] [--reps R]

Data: X per series (T, S, k) with a column of ones, y = X beta + 0.1 noise, float64, on
the GPU. cuqr: median of R runs after one warm-up, CUDA-synchronised wall clock around
the call (inputs and outputs stay on the device). torch: every window of every series
as one batched least-squares problem ((T - W + 1) windows of W x k per series), C series
a batch (memory), the batches timed once after a warm-up batch (past --budget seconds the
rest is scaled linearly from the series done, and the table says so); the same windows'
params are compared with cuqr's.
"""

import argparse
import datetime
import statistics
import subprocess
import time

import torch

import cuqr


def sync_time(f):
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    out = f()
    torch.cuda.synchronize()
    return time.perf_counter() - t0, out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--series", type=int, default=5000)
    ap.add_argument("--nobs", type=int, default=2520)
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--window", type=int, default=252)
    ap.add_argument("--chunk", type=int, default=250)
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--budget", type=float, default=120.0, help="seconds for torch")
    a = ap.parse_args()
    S, T, k, W = a.series, a.nobs, a.k, a.window
    dev = torch.device("cuda")
    g = torch.Generator(device=dev).manual_seed(0)
    X = torch.randn(T, S, k, generator=g, device=dev, dtype=torch.float64)
    X[:, :, 0] = 1.0
    beta = torch.randn(S, k, generator=g, device=dev, dtype=torch.float64)
    y = torch.einsum("tsk,sk->ts", X, beta) + 0.1 * torch.randn(
        T, S, generator=g, device=dev, dtype=torch.float64
    )
    smi = subprocess.run(
        ["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"],
        capture_output=True, text=True,
    ).stdout.strip()
    print(f"date: {datetime.datetime.now(datetime.timezone.utc):%Y-%m-%d %H:%M} UTC; GPU, driver: {smi}")
    print(f"torch {torch.__version__}, cuqr {cuqr.__version__}; S={S} T={T} k={k} W={W}, float64")

    cuqr.rolling_lstsq(y, X, W)  # warm-up: opens the device, loads the module
    times = []
    for _ in range(a.reps):
        dt, params = sync_time(lambda: cuqr.rolling_lstsq(y, X, W))
        times.append(dt)
    t_cuqr = statistics.median(times)

    # torch: windows ending at t = W-1 .. T-1 of C series at a time.
    nwin = T - W + 1

    def torch_chunk(s0, s1):
        Xc = X[:, s0:s1, :].permute(1, 0, 2)  # (C, T, k)
        yc = y[:, s0:s1].permute(1, 0)  # (C, T)
        Aw = Xc.unfold(1, W, 1).permute(0, 1, 3, 2)  # (C, nwin, W, k)
        bw = yc.unfold(1, W, 1).unsqueeze(-1)  # (C, nwin, W, 1)
        sol = torch.linalg.lstsq(Aw.reshape(-1, W, k), bw.reshape(-1, W, 1)).solution
        return sol.reshape(s1 - s0, nwin, k)

    torch_chunk(0, min(a.chunk, S))  # warm-up
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    worst, done = 0.0, 0
    for s0 in range(0, S, a.chunk):
        s1 = min(s0 + a.chunk, S)
        sol = torch_chunk(s0, s1)
        ref = params[W - 1 :, s0:s1, :].permute(1, 0, 2)
        err = (torch.linalg.norm(sol - ref) / torch.linalg.norm(ref)).item()
        worst = max(worst, err)
        done = s1
        if time.perf_counter() - t0 > a.budget:
            break
    torch.cuda.synchronize()
    t_torch = (time.perf_counter() - t0) * S / done
    scaled = "" if done == S else f", {done} of {S} series timed and scaled linearly"

    print()
    print("| method | ms | vs torch | max rel. difference of params |")
    print("|---|---|---|---|")
    print(f"| torch.linalg.lstsq (batched windows, {a.chunk} series a batch{scaled}) | {1e3 * t_torch:.1f} | 1.0 | - |")
    print(f"| cuqr.rolling_lstsq (torch CUDA tensors) | {1e3 * t_cuqr:.2f} | {t_torch / t_cuqr:.0f}x | {worst:.1e} |")


if __name__ == "__main__":
    main()
