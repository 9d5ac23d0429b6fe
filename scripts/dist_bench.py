"""Times cuqr.distributed.QR from Python, one process a GPU, for comparison with the Rust
path's `cuqr bench dist` on the same shapes. Start it with torchrun:

    torchrun --nproc-per-node G scripts/dist_bench.py --rows 8000000 --cols 512 --step 1000

Each rank makes its m/G rows as torch CUDA tensors (handed over through DLPack, no host
copy); the communicator is made once, before the timings (as `cuqr bench dist` makes its
group once). Printed by rank 0: the median factorisation time over --reps, and the median
window step (--step rows in on one rank, the oldest out) over --steps, with the data kept.
"""

import argparse
import os
import statistics
import time

import numpy as np
import torch

import cuqr.distributed as cd

p = argparse.ArgumentParser()
p.add_argument("--rows", type=int, default=8_000_000)
p.add_argument("--cols", type=int, default=512)
p.add_argument("--step", type=int, default=1000)
p.add_argument("--steps", type=int, default=20)
p.add_argument("--reps", type=int, default=3)
p.add_argument("--c-order", action="store_true",
               help="hand the window's rows over as C-ordered slices (default: Fortran order, "
                    "as the Rust path holds them)")
args = p.parse_args()
args.m, args.n = args.rows, args.cols

rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
local = int(os.environ.get("LOCAL_RANK", rank))
torch.cuda.set_device(local)
dev = torch.device("cuda", local)
rows = args.m // world + (rank < args.m % world)
gen = torch.Generator(device=dev).manual_seed(1 + rank)
A = torch.randn(rows, args.n, device=dev, dtype=torch.float64, generator=gen)
b = torch.randn(rows, 1, device=dev, dtype=torch.float64, generator=gen)
A = A.T.contiguous().T  # column-major, as the factorisation reads it
torch.cuda.synchronize()

# the communicator, once (NCCL's set-up is not the factorisation's time)
cd.QR(A[: 2 * args.n], b[: 2 * args.n]).synchronize()


def timed(f):
    torch.cuda.synchronize()
    t = time.perf_counter()
    out = f()
    out.synchronize()
    return out, (time.perf_counter() - t) * 1e3


fact = []
for _ in range(args.reps):
    qr, ms = timed(lambda: cd.QR(A, b))
    fact.append(ms)
    del qr
steps = []
if args.steps > 0:
    qr, _ = timed(lambda: cd.QR(A, b, keep_data=True))
    rng = np.random.default_rng(99)
    for s in range(args.steps + 1):
        new = rng.standard_normal((args.step, args.n + 1))
        rows, rhs = new[:, : args.n], new[:, args.n:]
        if not args.c_order:
            rows, rhs = np.asfortranarray(rows), np.asfortranarray(rhs)
        t = time.perf_counter()
        qr.slide(rows, rhs)
        qr.synchronize()
        if s > 0:  # the first step sizes the kept rows' room
            steps.append((time.perf_counter() - t) * 1e3)
if rank == 0:
    window = (f"; window step of {args.step} rows median {statistics.median(steps):.3f} ms "
              f"(of {args.steps})" if steps else "")
    print(f"python dist: G={world} m={args.m} n={args.n}: factorisation median "
          f"{statistics.median(fact):.1f} ms (of {args.reps}){window}", flush=True)
