"""Least squares with the rows of A spread over several GPUs, one process a GPU.

Start one process a GPU with ``torchrun``, ``mpirun`` or ``srun``; in each, pass that rank's
rows of A and b to :class:`QR`. R, d and the residual norms are replicated on every rank;
every update is then called on every rank with the same arguments (they are the whole
problem's: the rows entering, the columns of all m rows), and every rank gets the same
solution. How the ranks find each other:

* the rank and world size: ``torch.distributed`` where it is initialised, else ``mpi4py``'s
  ``COMM_WORLD`` where ``mpi4py.MPI`` is imported, else the launcher's environment
  (``RANK``/``WORLD_SIZE`` of ``torchrun``, ``OMPI_COMM_WORLD_*``, ``PMI_*``, ``SLURM_*``),
  or ``rank=`` and ``world=`` given;
* the GPU: that of a CUDA ``A_local``, else ``device=``, else the local rank;
* NCCL's unique id, made on rank 0: through ``torch.distributed``'s store or
  ``mpi4py``'s broadcast where those are in use, else over TCP at ``CUQR_RENDEZVOUS``
  (``host:port``; under ``torchrun`` the port after ``MASTER_PORT`` on ``MASTER_ADDR``).

Example (``torchrun --nproc-per-node 2 fit.py``)::

    import numpy as np, cuqr.distributed as cd
    rank = int(os.environ["RANK"])
    rng = np.random.default_rng(rank)
    A, b = rng.standard_normal((100_000, 64)), rng.standard_normal(100_000)
    qr = cd.QR(A, b, keep_data=True)          # this rank's 100,000 rows
    new = np.random.default_rng(7).standard_normal((500, 65))   # the same on every rank
    qr.slide(new[:, :64], new[:, 64])          # 500 rows in, the 500 oldest out
    x = qr.solve()                             # the same x on every rank
"""

from __future__ import annotations

import itertools as _itertools
import sys as _sys

import numpy as _np

from . import _cuqr

__all__ = ["QR", "launch_env"]

_ids = _itertools.count()


def launch_env():
    """The launcher's ``(rank, world, local_rank)`` read from the environment, or None."""
    return _cuqr.launch_env()


def _torch_dist():
    """``torch.distributed`` when it is imported and initialised, else None."""
    t = _sys.modules.get("torch.distributed")
    try:
        if t is not None and t.is_available() and t.is_initialized():
            return t
    except Exception:  # a torch build without distributed support
        return None
    return None


def _mpi_world():
    """``mpi4py``'s ``COMM_WORLD`` when ``mpi4py.MPI`` has been imported, else None."""
    mpi = _sys.modules.get("mpi4py.MPI")
    return None if mpi is None else mpi.COMM_WORLD


def _place(rank, world):
    """(rank, world, local rank, how the id travels)."""
    env = _cuqr.launch_env()
    local = None if env is None else env[2]
    if rank is not None or world is not None:
        if rank is None or world is None:
            raise ValueError("give rank and world together")
        return int(rank), int(world), local if local is not None else int(rank), "tcp"
    t = _torch_dist()
    if t is not None:
        r, w = t.get_rank(), t.get_world_size()
        return r, w, local if local is not None else r, "torch"
    comm = _mpi_world()
    if comm is not None and comm.Get_size() > 1:
        r, w = comm.Get_rank(), comm.Get_size()
        return r, w, local if local is not None else r, "mpi"
    if env is None:
        raise ValueError(
            "no rank: start the processes with torchrun, mpirun or srun, "
            "or pass rank= and world="
        )
    return env[0], env[1], env[2], "tcp"


def _share_id(rank, world, how):
    """NCCL's unique id, made on rank 0 and the same on every rank."""
    if world == 1:
        return _cuqr.nccl_id()
    if how == "torch":
        t = _torch_dist()
        key = f"cuqr/nccl-id/{next(_ids)}"
        try:
            store = t.distributed_c10d._get_default_store()
        except Exception:
            store = None
        if store is not None:
            if rank == 0:
                store.set(key, _cuqr.nccl_id())
            return store.get(key).decode()
        box = [_cuqr.nccl_id() if rank == 0 else None]
        t.broadcast_object_list(box, src=0)
        return box[0]
    if how == "mpi":
        return _mpi_world().bcast(_cuqr.nccl_id() if rank == 0 else None, root=0)
    return _cuqr.rendezvous_id(rank, world)


_comms = {}


def _comm(rank, world, device, how):
    """This process's communicator for (rank, world, device), made once: NCCL's set-up
    costs tens of milliseconds and more, and every state of the process shares it."""
    key = (rank, world, device)
    c = _comms.get(key)
    if c is None:
        c = _cuqr._RankComm(_share_id(rank, world, how), rank, world, device)
        _comms[key] = c
    return c


def _group_comm(group, device):
    """cuqr's membership of a ``torch.distributed`` process group through the group's own
    NCCL communicator on ``device`` (made once a group and device; the group stays
    referenced for as long as cuqr may use its communicator)."""
    key = ("group", id(group), device)
    hit = _comms.get(key)
    if hit is not None:
        return hit[0]
    import torch

    dev = torch.device("cuda", device)
    try:
        backend = group._get_backend(dev)
    except Exception as e:
        raise ValueError(f"group has no backend on {dev}: {e}") from None
    comm_ptr = getattr(backend, "_comm_ptr", None)
    if comm_ptr is None:
        raise ValueError(
            "group= needs a process group with the NCCL backend in a PyTorch that shares its "
            "communicator (ProcessGroupNCCL._comm_ptr); leave group= out to make cuqr's own"
        )
    # the group makes its communicator at its first collective on the device; cuqr's
    # collectives then run on cuqr's stream, so torch's must be idle
    torch.distributed.all_reduce(torch.zeros(1, device=dev), group=group)
    torch.cuda.synchronize(dev)
    c = _cuqr._RankComm.from_nccl(int(comm_ptr()), device)
    _comms[key] = (c, group)
    return c


def _is_cuda(x) -> bool:
    return _cuqr.array_device(x) is not None


def _dtype_name(x) -> str:
    return "float32" if "float32" in str(getattr(x, "dtype", "")) else "float64"


def _arg(x, dtype):
    """A CUDA array as it is; anything else as a NumPy array of the state's dtype."""
    if _is_cuda(x):
        return x
    return _np.asarray(x, dtype=dtype)


def _as_matrix(x):
    return x.reshape(-1, 1) if len(x.shape) == 1 else x


class QR:
    """One rank's part of a factorisation ``A = Q R`` whose rows are spread over the ranks
    of a process group, one GPU each (module docstring).

    Parameters
    ----------
    A_local : (m_i, n) array
        This rank's rows of A (NumPy, CuPy or PyTorch; float32 or float64), in rank order:
        the global A is rank 0's rows, then rank 1's, …; every rank holds at least n rows.
    b_local : (m_i,) or (m_i, k) array, optional
        This rank's right-hand sides (zeros when omitted).
    q : None or 'thin'
        R alone on each rank (with ``keep_data=True`` each rank keeps its rows of A and b,
        which ``delete_rows``, ``slide``, ``insert_cols`` and ``rank_one`` need), or each
        rank's rows of the thin Q₁.
    keep_data : bool
        See ``q``.
    rank, world : int, optional
        This process's rank and the number of ranks, where no launcher says them.
    device : int, optional
        The GPU (default: that of a CUDA ``A_local``, else the local rank).
    group : torch.distributed.ProcessGroup, optional
        A process group with the NCCL backend whose communicator cuqr uses instead of
        making its own (rank and world are the group's). PyTorch must share it
        (``ProcessGroupNCCL._comm_ptr``) and load the same NCCL library as cuqr (the one
        on ``LD_LIBRARY_PATH``, e.g. the ``nvidia-nccl`` wheel's); cuqr synchronises
        torch's stream before its first use. Issue no collective on the group while a
        cuqr call runs.

    Every rank must make the same calls in the same order. Arguments are checked alike on
    every rank, so an update that one rank refuses is refused by all (``ValueError``,
    ``numpy.linalg.LinAlgError``) and leaves every rank's state unchanged; a factorisation
    whose rows one rank refuses raises on every rank (that rank with its own message, the
    others with ``ValueError`` naming it). Results are NumPy arrays.
    """

    def __init__(self, A_local, b_local=None, q=None, keep_data=False, *, rank=None,
                 world=None, device=None, group=None):
        if q not in (None, "thin"):
            raise ValueError("q must be None or 'thin' (a distributed Q is never m x m)")
        gpu = _cuqr.array_device(A_local)
        if group is not None:
            if rank is not None or world is not None:
                raise ValueError("rank and world are the group's: give group= alone")
            if gpu is None:
                env = _cuqr.launch_env()
                gpu = int(device) if device is not None else (0 if env is None else env[2])
            comm = _group_comm(group, gpu)
        else:
            r, w, local, how = _place(rank, world)
            if not 0 <= r < w:
                raise ValueError(f"rank {r} of a world of {w}")
            if gpu is None:
                gpu = int(device) if device is not None else local
            comm = _comm(r, w, gpu, how)
        # this rank's arrays are checked, then every rank hears of any rank that failed
        problem = None
        try:
            dtype = _dtype_name(A_local)
            A = _arg(A_local, dtype)
            if len(A.shape) != 2:
                raise ValueError("A_local must be 2-D (m_i, n)")
            vector = b_local is None or len(_np.shape(b_local) if not hasattr(b_local, "shape")
                                            else b_local.shape) == 1
            b = (_np.zeros((A.shape[0], 1), dtype=dtype) if b_local is None
                 else _as_matrix(_arg(b_local, dtype)))
        except Exception as e:  # re-raised below, once every rank knows
            problem = e
        bad = comm.first_refusal(problem is not None)
        if problem is not None:
            raise problem
        if bad is not None:
            raise ValueError(f"rank {bad} refused its rows (its own error says why)")
        self._dtype, self._vector_rhs = dtype, vector
        self._st = _cuqr._DistState.factorize(
            comm, A, b, "thin" if q == "thin" else "none", bool(keep_data), dtype)

    # -- updates --------------------------------------------------------------------------

    def _rows(self, rows, rhs):
        rows = _arg(rows, self._dtype)
        if len(rows.shape) == 1:
            rows = rows.reshape(1, -1)
        if rhs is not None:
            rhs = _arg(rhs, self._dtype)
            if len(rhs.shape) == 1:
                rhs = rhs.reshape(rows.shape[0], -1)
        return rows, rhs

    def insert_rows(self, k, U, e=None):
        """Insert rows ``U`` ((n,) or (p, n)) with right-hand sides ``e`` before global row
        ``k``; they join the rank holding row ``k``."""
        U, e = self._rows(U, e)
        self._st.insert_rows(int(k), U, e)

    def delete_rows(self, k, p=1):
        """Delete global rows ``k .. k+p-1`` (wherever they live)."""
        self._st.delete_rows(int(k), int(p))

    def slide(self, rows, rhs=None, drop=None, forget=None):
        """One window step: ``rows`` ((n,) or (p, n)) with ``rhs`` enter, the ``drop``
        oldest rows (default: as many as enter) leave; ``forget`` sets λ from this step on."""
        rows, rhs = self._rows(rows, rhs)
        drop = rows.shape[0] if drop is None else int(drop)
        if drop < 0:
            raise ValueError("'drop' must be non-negative")
        self._st.slide(rows, rhs, drop, forget)

    def insert_cols(self, k, U):
        """Insert columns ``U`` ((m,) or (m, p): all m rows, the same on every rank) before
        column ``k``."""
        self._st.insert_cols(int(k), _as_matrix(_arg(U, self._dtype)))

    def rank_one(self, u, v):
        """``A ← A + u vᵀ`` (u of all m rows, v of n)."""
        u, v = _arg(u, self._dtype), _arg(v, self._dtype)
        self._st.rank_one(u.reshape(-1, 1), v.reshape(-1, 1))

    # -- results --------------------------------------------------------------------------

    def solve(self, residuals=False):
        """The least-squares solution x ((n,) or (n, k)), the same on every rank; with
        ``residuals=True`` also the residual norms."""
        x, res = self._st.solve()
        if self._vector_rhs:
            x = x.reshape(-1)
        return (x, res) if residuals else x

    @property
    def R(self):
        """R (n, n), the same on every rank."""
        return self._st.r()

    @property
    def d(self):
        """d = Q₁ᵀ b (n, k)."""
        return self._st.d()

    @property
    def local_Q(self):
        """This rank's rows of Q₁ (``q='thin'``)."""
        return self._st.local_q()

    @property
    def shape(self):
        """(m, n): the whole problem's rows and columns."""
        m, n, _ = self._st.shape()
        return (m, n)

    @property
    def rank(self):
        return self._st.rank_world()[0]

    @property
    def world(self):
        return self._st.rank_world()[1]

    @property
    def rows_per_rank(self):
        """Rows held by each rank."""
        return list(self._st.rows_per_rank())

    @property
    def q(self):
        """None or 'thin'."""
        return None if self._st.policy() == "none" else "thin"

    @property
    def dtype(self):
        return _np.dtype(self._st.dtype())

    def synchronize(self):
        """Waits for this rank's device work."""
        self._st.synchronize()

    def __repr__(self):
        m, n = self.shape
        return (f"cuqr.distributed.QR(rank {self.rank} of {self.world}, {m}x{n}, "
                f"q={self.q!r}, {self._st.dtype()})")
