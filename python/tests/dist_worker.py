"""One rank of test_distributed.py's torchrun test (not a test module itself): the same
problem and updates on every rank, results saved to OUT/rank{r}.npz; rank 0 also saves one
GPU's results for the whole problem to OUT/one_gpu.npz."""

import os
import sys

import numpy as np

import cuqr
import cuqr.distributed as cd

out = sys.argv[1]
rank, world = int(os.environ["RANK"]), int(os.environ["WORLD_SIZE"])
rng = np.random.default_rng(77)
m, n = 2003, 29
A, b = rng.standard_normal((m, n)), rng.standard_normal(m)
steps = [(rng.standard_normal((37, n)), rng.standard_normal(37)) for _ in range(4)]
U = rng.standard_normal((m, 2))
share = [m // world + (r < m % world) for r in range(world)]
r0 = sum(share[:rank])
mine = slice(r0, r0 + share[rank])


def run(qr, tag, got):
    got[f"{tag}_factorize"] = qr.solve()
    for i, (rows, rhs) in enumerate(steps):
        qr.slide(rows, rhs)
        got[f"{tag}_slide{i}"] = qr.solve()
    try:
        qr.delete_rows(0, qr.shape[0])  # refused alike on every rank; nothing changes
        raise SystemExit("deleting every row was accepted")
    except ValueError:
        pass
    got[f"{tag}_after_refusal"] = qr.solve()
    m_now = qr.shape[0]
    qr.insert_cols(3, U[:m_now])
    got[f"{tag}_insert_cols"] = qr.solve()


got = {}
# 1: no torch.distributed yet: NCCL's id over TCP next to MASTER_PORT
run(cd.QR(A[mine], b[mine], keep_data=True), "tcp", got)
# 2: with torch.distributed: its store (the communicator made again through it); rows as
# torch CUDA tensors, thin Q
import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

torch.cuda.set_device(int(os.environ["LOCAL_RANK"]))
dist.init_process_group("gloo")
cd._comms.clear()  # so that the next state makes its communicator through the store
dev = torch.device("cuda", int(os.environ["LOCAL_RANK"]))
qr = cd.QR(torch.from_numpy(A[mine]).to(dev), torch.from_numpy(b[mine]).to(dev), q="thin")
assert qr.world == world and qr.rank == rank and sum(qr.rows_per_rank) == m
run(qr, "torch", got)
# 2b: the communicator of an NCCL process group, used instead of making one (where this
# PyTorch shares it); rows as NumPy arrays, R only with the data kept
nccl_group = dist.new_group(backend="nccl")
if hasattr(nccl_group._get_backend(dev), "_comm_ptr"):
    qr = cd.QR(A[mine], b[mine], keep_data=True, group=nccl_group)
    assert qr.world == world and qr.rank == rank
    run(qr, "group", got)
    # torch's own collectives on the group still work after cuqr's
    t = torch.ones(1, device=dev)
    dist.all_reduce(t, group=nccl_group)
    assert t.item() == world
# 3: one rank's rows hold a NaN (refused in the library), or are 1-D (refused in Python):
# every rank raises, none waits
bad = A[mine].copy()
if rank == 1:
    bad[2, 3] = np.nan
for what, rows in (("nan", bad), ("one_d", A[mine][:, 0] if rank == 1 else A[mine])):
    try:
        cd.QR(rows, b[mine])
        msg = "accepted"
    except Exception as e:  # the type is the point
        msg = f"{type(e).__name__}: {e}"
    with open(os.path.join(out, f"refusal_{what}{rank}.txt"), "w") as f:
        f.write(msg)
# the communicator still serves a state after the refusals
got["after_refusals"] = cd.QR(A[mine], b[mine]).solve()
np.savez(os.path.join(out, f"rank{rank}.npz"), **got)

if rank == 0:
    one = {}
    for tag, q, keep in (("tcp", None, True), ("torch", "thin", False)):
        s = cuqr.QR(A, b, q=q, keep_data=keep, device="cuda:0")
        one[f"{tag}_factorize"] = s.solve()
        for i, (rows, rhs) in enumerate(steps):
            s.slide(rows, rhs)
            one[f"{tag}_slide{i}"] = s.solve()
        one[f"{tag}_after_refusal"] = s.solve()
        s.insert_cols(3, U[: s.shape[0]])
        one[f"{tag}_insert_cols"] = s.solve()
    one["after_refusals"] = cuqr.QR(A, b, q=None, device="cuda:0").solve()
    if "group_factorize" in got:
        one.update({k.replace("tcp_", "group_"): v for k, v in one.items() if k.startswith("tcp_")})
    np.savez(os.path.join(out, "one_gpu.npz"), **one)
dist.barrier()
dist.destroy_process_group()
