"""B small problems on the GPU from Python, data already on the device (torch CUDA
tensors): cuqr.GpuBatchQR's factorisation with the thin Q and its updates against
torch.linalg.qr (reduced) of the whole batch and torch.geqrf (R and reflectors only) of the
updated batch, in one process. Median wall-clock of repeated calls, each synchronised.

    python3 scripts/batch_gpu.py [--batch B] [--m M] [--n N] [--reps R]
"""

import argparse
import statistics
import time

import numpy as np
import torch

import cuqr


def timed(f, reps):
    f()
    torch.cuda.synchronize()
    t = []
    for _ in range(reps):
        t0 = time.perf_counter()
        f()
        torch.cuda.synchronize()
        t.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(t)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=10000)
    ap.add_argument("--m", type=int, default=64)
    ap.add_argument("--n", type=int, default=8)
    ap.add_argument("--reps", type=int, default=11)
    a = ap.parse_args()
    B, m, n, reps = a.batch, a.m, a.n, a.reps
    g = torch.Generator(device="cuda").manual_seed(5)
    A = torch.rand((B, m, n), dtype=torch.float64, device="cuda", generator=g) * 2 - 1
    b = torch.rand((B, m), dtype=torch.float64, device="cuda", generator=g) * 2 - 1
    u = torch.rand((B, m), dtype=torch.float64, device="cuda", generator=g) * 2 - 1
    v = torch.rand((B, n), dtype=torch.float64, device="cuda", generator=g) * 2 - 1
    rows = torch.rand((B, 1, n), dtype=torch.float64, device="cuda", generator=g) * 2 - 1
    rhs = torch.rand((B, 1), dtype=torch.float64, device="cuda", generator=g) * 2 - 1
    print(f"torch {torch.__version__}, {torch.cuda.get_device_name()}, B = {B}, m = {m}, "
          f"n = {n}, float64, data on the device")
    t_qr = timed(lambda: torch.linalg.qr(A, mode="reduced"), reps)
    t_geqrf = timed(lambda: torch.geqrf(A), reps)
    t_fact = timed(lambda: cuqr.GpuBatchQR(A, b), reps)
    bank = cuqr.GpuBatchQR(A, b)
    t_r1 = timed(lambda: bank.rank_one(u, v), reps)
    state = {"m": m}

    def ins_del():
        bank.insert_rows(state["m"], rows, rhs)
        bank.delete_rows(state["m"], 1)

    t_insdel = timed(ins_del, reps)
    t_slide = timed(lambda: bank.slide(rows, rhs), reps)
    t_solve = timed(lambda: bank.solve(), reps)
    # Accuracy of the factorisation against torch's (same A).
    fresh = cuqr.GpuBatchQR(A, b)
    Q, R, _ = fresh.factors()
    err = np.linalg.norm(Q @ R - A.cpu().numpy()) / np.linalg.norm(A.cpu().numpy())
    print()
    print("| call | ms | torch.linalg.qr / this | torch.geqrf / this |")
    print("|---|---:|---:|---:|")
    print(f"| torch.linalg.qr (reduced Q and R) | {t_qr:.3f} | 1.0 | – |")
    print(f"| torch.geqrf (R and reflectors) | {t_geqrf:.3f} | – | 1.0 |")
    for what, t in [("cuqr.GpuBatchQR (factorise, thin Q)", t_fact), ("rank_one", t_r1),
                    ("insert_rows + delete_rows (1 row each)", t_insdel),
                    ("slide (1 in, 1 out)", t_slide), ("solve (to NumPy)", t_solve)]:
        print(f"| {what} | {t:.3f} | {t_qr / t:.1f}x | {t_geqrf / t:.1f}x |")
    print()
    print(f"‖QR − A‖/‖A‖ of cuqr's factorisation: {err:.1e}")


if __name__ == "__main__":
    main()
