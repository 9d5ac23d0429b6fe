"""cuqr.distributed: finding the rank, handing NCCL's id round, and the one-process-a-GPU
form under torchrun on two GPUs (skipped with fewer)."""

import os
import shutil
import socket
import subprocess
import sys

import numpy as np
import pytest

import cuqr
import cuqr.distributed as cd
from cuqr import _cuqr

HERE = os.path.dirname(os.path.abspath(__file__))

LAUNCH_VARS = [
    "RANK", "WORLD_SIZE", "LOCAL_RANK", "OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE",
    "OMPI_COMM_WORLD_LOCAL_RANK", "PMI_RANK", "PMI_SIZE", "MPI_LOCALRANKID", "SLURM_PROCID",
    "SLURM_NTASKS", "SLURM_LOCALID", "CUQR_RENDEZVOUS", "MASTER_ADDR", "MASTER_PORT",
]


@pytest.fixture
def clean_env(monkeypatch):
    for k in LAUNCH_VARS:
        monkeypatch.delenv(k, raising=False)
    return monkeypatch


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_launch_env_reads_the_launchers(clean_env):
    assert cd.launch_env() is None
    clean_env.setenv("OMPI_COMM_WORLD_RANK", "1")
    clean_env.setenv("OMPI_COMM_WORLD_SIZE", "4")
    clean_env.setenv("OMPI_COMM_WORLD_LOCAL_RANK", "1")
    assert cd.launch_env() == (1, 4, 1)
    clean_env.setenv("RANK", "3")
    clean_env.setenv("WORLD_SIZE", "8")
    clean_env.setenv("LOCAL_RANK", "3")
    assert cd.launch_env() == (3, 8, 3)  # torchrun's variables first
    clean_env.setenv("RANK", "9")
    with pytest.raises(ValueError, match="not below"):
        cd.launch_env()


def test_arguments_are_refused_before_any_communication(clean_env):
    A, b = np.ones((10, 2)), np.ones(10)
    with pytest.raises(ValueError, match="no rank"):
        cd.QR(A, b)
    with pytest.raises(ValueError, match="m x m"):
        cd.QR(A, b, q="full", rank=0, world=1)
    with pytest.raises(ValueError, match="together"):
        cd.QR(A, b, rank=0)
    with pytest.raises(ValueError, match="rank 2 of a world of 2"):
        cd.QR(A, b, rank=2, world=2)


def test_a_rank_without_rank_zero_times_out(clean_env):
    with pytest.raises(RuntimeError, match="did not answer"):
        _cuqr.rendezvous_id(1, 2, f"127.0.0.1:{free_port()}", 0.3)
    with pytest.raises(ValueError, match="CUQR_RENDEZVOUS"):
        _cuqr.rendezvous_id(1, 2)
    with pytest.raises(ValueError, match="positive"):
        _cuqr.rendezvous_id(1, 2, "127.0.0.1:1", -1.0)


def gpus():
    n = 0
    while n < 8 and cuqr.cuda_available(n):
        n += 1
    return n


def test_torchrun_two_ranks_agree_with_one_gpu(tmp_path):
    """Two processes under torchrun: the TCP rendezvous, then torch.distributed's store,
    then an NCCL process group's own communicator (where PyTorch shares it);
    NumPy and torch CUDA rows; updates; every rank's x equal to the last bit and to one
    GPU's; a block refused by one rank raises on both (worker: dist_worker.py)."""
    if gpus() < 2:
        if os.environ.get("CUQR_REQUIRE_GPU") == "1" and gpus() == 0:
            pytest.fail("CUQR_REQUIRE_GPU=1 but no GPU")
        pytest.skip("fewer than two GPUs")
    torch = pytest.importorskip("torch")
    shares = hasattr(getattr(torch._C, "_distributed_c10d", None), "ProcessGroupNCCL") and hasattr(
        torch._C._distributed_c10d.ProcessGroupNCCL, "_comm_ptr")
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([os.path.dirname(os.path.dirname(cuqr.__file__)),
                                        env.get("PYTHONPATH", "")])
    env["NCCL_NVLS_ENABLE"] = "0"
    port = free_port()
    cmd = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
           "--master-addr", "127.0.0.1", "--master-port", str(port),
           os.path.join(HERE, "dist_worker.py"), str(tmp_path)]
    out = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stdout[-4000:] + out.stderr[-4000:]
    res = [np.load(tmp_path / f"rank{r}.npz") for r in range(2)]
    keys = sorted(res[0].files)
    assert keys == sorted(res[1].files) and len(keys) >= 8
    assert ("group_factorize" in keys) == shares, keys
    for k in keys:
        np.testing.assert_array_equal(res[0][k], res[1][k], err_msg=k)
    one = np.load(tmp_path / "one_gpu.npz")
    for k in one.files:
        x, y = res[0][k], one[k]
        assert np.max(np.abs(x - y)) <= 1e-8 * max(1.0, np.max(np.abs(y))), k
    for r in range(2):
        for what in ("nan", "one_d"):
            msg = (tmp_path / f"refusal_{what}{r}.txt").read_text()
            assert msg.startswith("ValueError"), (what, r, msg)
        # the refusing rank says why, the other names it
        nan = (tmp_path / f"refusal_nan{r}.txt").read_text()
        assert ("rank 1 refused" in nan) == (r == 0), nan
