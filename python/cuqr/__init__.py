"""cuqr: QR factorisation and QR updating on NVIDIA GPUs and the CPU.

Drop-in replacements for SciPy's ``qr_insert``, ``qr_delete`` and ``qr_update`` (same
signatures, shapes, dtypes and exceptions), a Cholesky up- and downdate ``cholupdate``, a
stateful :class:`QR` for repeated updates without round trips, and rolling and recursive
least squares for many series (``rolling_lstsq``, ``recursive_lstsq``). NumPy arrays run on the CPU
backend; CuPy arrays and PyTorch CUDA tensors run on their GPU and come back as arrays of
the same kind, exchanged through DLPack without a host copy.

Example
-------
>>> import numpy as np, cuqr
>>> A = np.random.default_rng(0).standard_normal((1000, 20)); b = A @ np.arange(20.0)
>>> qr = cuqr.QR(A, b, q="thin", device="cpu")
>>> qr.slide(A[:50], b[:50])               # 50 rows in at the bottom, the 50 oldest out
>>> np.allclose(qr.solve(), np.arange(20.0))
True
"""

from __future__ import annotations

import numpy as _np

from . import _cuqr
from ._cuqr import AUTO_GPU_MIN_MN, __version__

__all__ = [
    "AUTO_GPU_MIN_MN",
    "BatchError",
    "ExplicitQR",
    "GpuBatchQR",
    "GpuBatchR",
    "QR",
    "SmallState",
    "cholupdate",
    "cuda_available",
    "qr_delete",
    "qr_insert",
    "qr_update",
    "recursive_lstsq",
    "rolling_lstsq",
    "set_threads",
    "threads",
]

_DTYPES = ("float32", "float64")
# the SciPy-style functions take complex factors too (explicit updates, cuqr::explicit)
_COMPLEX = ("complex64", "complex128")


def cuda_available(device: int = 0) -> bool:
    """Whether CUDA device ``device`` can be used (loads the CUDA libraries once)."""
    return _cuqr.cuda_available(device)


def set_threads(n: int) -> None:
    """Sets the number of threads of the CPU backend (0: all cores, the default)."""
    if int(n) < 0:
        raise ValueError("the thread count must be non-negative")
    _cuqr.set_threads(int(n))


def threads() -> int:
    """The number of threads the CPU backend uses."""
    return _cuqr.threads()


# ---------------------------------------------------------------------------------------
# Arrays: which library they belong to, where they live, and back again
# ---------------------------------------------------------------------------------------


class _Arrays:
    """The array family of the caller's inputs (``numpy``, ``torch-cpu``, ``cupy``,
    ``torch-cuda`` or another DLPack CUDA producer) and the CUDA device, if any."""

    def __init__(self, family: str, device: int | None):
        self.family = family
        self.device = device

    @staticmethod
    def of(x) -> "_Arrays":
        mod = type(x).__module__.split(".")[0]
        if isinstance(x, _np.ndarray):
            return _Arrays("numpy", None)
        if mod == "torch":
            dev = _cuqr.array_device(x) if x.is_cuda else None
            return _Arrays("torch-cuda" if x.is_cuda else "torch-cpu", dev)
        if mod == "cupy":
            return _Arrays("cupy", _cuqr.array_device(x))
        if hasattr(x, "__dlpack_device__"):
            dev = _cuqr.array_device(x)
            if dev is not None:
                return _Arrays("dlpack", dev)
        return _Arrays("numpy", None)

    @property
    def on_gpu(self) -> bool:
        return self.device is not None

    def host(self, x, name: str):
        """A host input as a NumPy array (lists and CPU tensors converted)."""
        if self.family == "torch-cpu" and type(x).__module__.split(".")[0] == "torch":
            return x.detach().numpy()
        return _np.asarray(x)

    def out(self, x):
        """A result (NumPy array or cuqr device array) as the caller's kind."""
        if x is None:
            return None
        if self.family == "numpy":
            return x
        if self.family == "torch-cpu":
            import torch

            return torch.from_numpy(x)
        if self.family == "cupy":
            import cupy

            return cupy.from_dlpack(x)
        if self.family == "torch-cuda":
            import torch

            return torch.from_dlpack(x)
        return x


def _same_family(arrays: _Arrays, *xs_names):
    for x, name in xs_names:
        a = _Arrays.of(x)
        if a.device != arrays.device:
            where = lambda d: "the CPU" if d is None else f"CUDA device {d}"  # noqa: E731
            raise ValueError(
                f"'{name}' is on {where(a.device)} but 'Q' is on {where(arrays.device)}"
            )


def _dtype_name(x) -> str:
    """'float64' etc. (the byte order left out: NumPy's '>f8' is 'float64' too)."""
    dt = x.dtype
    if isinstance(dt, _np.dtype):
        return dt.name
    return str(dt).replace("torch.", "")


def _readable(x) -> bool:
    """Whether the extension can read NumPy array ``x`` in place: native byte order,
    aligned, and every stride (of an axis longer than one) a whole number of items."""
    dt = x.dtype
    return (
        dt.isnative
        and x.flags.aligned
        and all(n <= 1 or s % dt.itemsize == 0 for n, s in zip(x.shape, x.strides))
    )


def _host_ready(x):
    """A host array of a float dtype as the extension reads it: ``x`` itself when it can be
    read in place (any strides, negative and zero ones included), else a Fortran-ordered
    copy in native byte order (values unchanged). Other dtypes are left for the dtype
    checks to refuse."""
    if not isinstance(x, _np.ndarray) or x.dtype.kind not in "fc" or _readable(x):
        return x
    # (asfortranarray would hand back an unaligned Fortran-ordered array as it is)
    return _np.array(x, dtype=x.dtype.newbyteorder("="), order="F", copy=True)


def _writable_into(dst, src) -> bool:
    """Whether result ``src`` may be written into the caller's array ``dst`` (SciPy's
    ``overwrite_*``): a writeable NumPy array of the same shape and dtype, native and
    aligned, whose elements do not overlap one another."""
    if not isinstance(dst, _np.ndarray) or not isinstance(src, _np.ndarray):
        return False
    if dst.shape != src.shape or dst.dtype != src.dtype or not dst.flags.writeable:
        return False
    if not _readable(dst):
        return False
    # no two index pairs at one address: the axes, by stride, each step past the last
    axes = sorted((abs(s), n) for n, s in zip(dst.shape, dst.strides) if n > 1)
    reach = dst.dtype.itemsize
    for step, n in axes:
        if step < reach:
            return False
        reach = step * n
    return True


def _into(dst, src):
    """``src`` written into ``dst`` and ``dst`` returned when allowed, else ``src``."""
    if _writable_into(dst, src):
        dst[...] = src
        return dst
    return src


def _conj_into(x, condition: bool):
    """SciPy's in-place side effect on a complex vector it may overwrite: ``x`` (a
    writeable NumPy array) conjugated when ``condition`` holds. Its complex rank-one
    update conjugates ``v``, and its complex column insertion with a C-ordered Q ``u``,
    in place (its own tests check this)."""
    if condition and isinstance(x, _np.ndarray) and x.dtype.kind == "c" and _writable_into(x, x):
        _np.conjugate(x, out=x)


def _shape(x):
    return tuple(int(s) for s in x.shape)


def _check_finite(x, name: str):
    if not _np.isfinite(x).all():
        raise ValueError("array must not contain infs or NaNs")


def _prepare(arrays: _Arrays, named, check_finite: bool):
    """Host inputs as NumPy arrays (checked for NaN/inf when asked); device inputs as
    they are (cuqr scans them on the device)."""
    out = []
    for x, name in named:
        if not arrays.on_gpu:
            x = _host_ready(arrays.host(x, name))
            if check_finite and x.dtype.kind in "fc":
                _check_finite(x, name)
        out.append(x)
    return out


def _check_qr(Q, R):
    """SciPy's shape and dtype rules for (Q, R): returns (M, N, economic, dtype)."""
    if len(_shape(Q)) != 2 or len(_shape(R)) != 2:
        raise ValueError("Q and R must be 2-D")
    (qm, qn), (rm, rn) = _shape(Q), _shape(R)
    if qm == qn and qn == rm:
        economic = False
    elif qn == rm and rm == rn and qm > qn:
        economic = True
    else:
        raise ValueError(
            "Q and R do not have compatible shapes. Expected (M,M) (M,N) or (M,N) (N,N) but "
            f"found {_shape(Q)} {_shape(R)} for Q and R respectively"
        )
    dq, dr = _dtype_name(Q), _dtype_name(R)
    if dq != dr:
        raise ValueError("Q and R must have the same dtype")
    if dq not in _DTYPES + _COMPLEX:
        raise ValueError(
            f"cuqr supports float32, float64, complex64 and complex128 arrays, found {dq}"
        )
    return qm, rn, economic, dq


def _explicit_route(dtype: str, M: int, N: int, M1: int, N1: int) -> bool:
    """Whether an update runs on explicit factors (:func:`_explicit`): complex factors, and
    wide ones (M < N before or after), which cuqr's states do not hold."""
    return dtype in _COMPLEX or M < N or M1 < N1


def _explicit(arrays: _Arrays, op, Q, R, a=None, b=None, k=0, p=0, rcond=None):
    """An update of the explicit factors (Q, R) (cuqr.explicit in Rust). CuPy arrays and
    CUDA tensors: Q is updated on their GPU (``GpuExplicitQr``), R and the update's vectors
    (small beside Q) go through the host. Other device arrays are copied to the host and
    the results back. NumPy arrays: on the CPU."""
    host = lambda x: None if x is None else _host_ready(_to_numpy(x))  # noqa: E731
    if arrays.on_gpu and arrays.family in ("cupy", "torch-cuda") and min(_shape(Q)) > 0:
        Q1, R1 = _cuqr.explicit_update_device(
            op, _fortran(arrays, Q), host(R), arrays.device, host(a), host(b), int(k), int(p),
            rcond
        )
        return arrays.out(Q1), _from_host(arrays, R1)
    if arrays.on_gpu:
        Q, R, a, b = (host(x) for x in (Q, R, a, b))
    Q1, R1 = _cuqr.explicit_update(op, Q, R, a, b, int(k), int(p), rcond)
    return _from_host(arrays, Q1), _from_host(arrays, R1)


def _fortran(arrays: _Arrays, x):
    """A CuPy array or CUDA tensor in Fortran order (copied on its device when it is not),
    with PyTorch's lazy conjugate and negative bits resolved."""
    if arrays.family == "cupy":
        import cupy

        with cupy.cuda.Device(arrays.device):
            return cupy.asfortranarray(x)
    x = x.detach().resolve_conj().resolve_neg()
    return x.t().contiguous().t()


def _from_host(arrays: _Arrays, x):
    """A NumPy result as the caller's kind of array, on the caller's device."""
    if arrays.family == "cupy":
        import cupy

        with cupy.cuda.Device(arrays.device):
            return cupy.asarray(x)
    if arrays.family.startswith("torch"):
        import torch

        t = torch.from_numpy(x)
        return t.to(f"cuda:{arrays.device}") if arrays.on_gpu else t
    return arrays.out(x) if not arrays.on_gpu else x


def _index(k, lo: int, hi: int) -> int:
    """SciPy's reading of 'k': an integer in [lo, hi], negative counted from the end."""
    try:
        k = int(k)
    except (TypeError, ValueError):
        raise ValueError("'k' must be an integer") from None
    if not lo <= k <= hi:
        raise ValueError("'k' is out of bounds")
    return k


def _from_factors(arrays, Q, R, M, economic, dtype, check_finite, policy=None):
    policy = policy or ("thin" if economic else "full")
    return _cuqr._State.from_factors(
        policy, M, Q, R, arrays.device, dtype, check_finite=check_finite, rank_tol=0.0
    )


def _finish(arrays: _Arrays, st):
    q, r = st.take_factors(device=arrays.on_gpu)
    return arrays.out(q), arrays.out(r)


# ---------------------------------------------------------------------------------------
# Batch dimensions (SciPy's rules)
# ---------------------------------------------------------------------------------------
#
# Every array argument has a core of a fixed number of dimensions (Q and R: 2, an index k:
# 0, u and v: 2 when the array has two or more dimensions, else 1); dimensions before the
# core are batch dimensions. Batch shapes broadcast against each other (NumPy's rules); a
# batch of size zero is refused, as SciPy refuses it. Each problem of the batch is checked
# and updated as an unbatched call would be; the results carry the broadcast batch shape.


def _shape_of(x):
    """The shape of an array, tensor, sequence or scalar."""
    if hasattr(x, "shape"):
        return tuple(int(s) for s in x.shape)
    return _np.shape(x)


def _core_ndim(shape, nd) -> int:
    """An argument's number of core dimensions: ``nd``, or for ``"1|2"`` two when the
    argument has at least two dimensions and one otherwise."""
    if nd == "1|2":
        return 2 if len(shape) >= 2 else 1
    return nd


def _batch_shape(fname: str, *args):
    """The broadcast batch shape of ``args`` (pairs of an argument and its number of core
    dimensions), or None when no argument has a batch dimension (an unbatched call).
    ``ValueError`` for batch shapes that do not broadcast and for a batch of size zero."""
    shapes = []
    for x, nd in args:
        shape = _shape_of(x)
        nd = _core_ndim(shape, nd)
        shapes.append(shape[: max(len(shape) - nd, 0)])
    if not any(shapes):
        return None
    batch = _np.broadcast_shapes(*shapes)
    if _np.prod(batch) == 0:
        raise ValueError(f"`{fname}` does not support zero-size batches.")
    return batch


def _flat(x, batch, nd):
    """``x`` broadcast to the batch (no copy) with the batch flattened into axis 0."""
    nd = _core_ndim(_shape_of(x), nd)
    core = _shape_of(x)[len(_shape_of(x)) - nd :] if nd else ()
    size = int(_np.prod(batch))
    return _np.broadcast_to(x, tuple(batch) + core).reshape((size,) + core)


def _unflat(arrays: _Arrays, batch, x):
    """A result with the batch flattened into axis 0 back in the batch shape, as the
    caller's kind of array."""
    if x is None:
        return None
    return arrays.out(x.reshape(tuple(batch) + x.shape[1:]))


def _at(index, batch) -> str:
    """The batch index of problem ``index`` (C order), as Python writes a tuple."""
    return str(tuple(int(i) for i in _np.unravel_index(index, batch)))


def _reraise_at(e: Exception, index: str):
    """``e`` again, of its own type, with the batch index appended to its message."""
    err = type(e)(f"{e} (at batch index {index})")
    raise err from None


def _batch_k(k, batch, lo: int, hi: int):
    """A batched index argument: one integer in [lo, hi] per problem (negative ones
    counted from the end), as int64 with the batch flattened."""
    ka = _np.asarray(_to_numpy(k) if _Arrays.of(k).on_gpu else k)
    if ka.dtype.kind not in "iufb":
        raise ValueError("'k' must be an integer")
    ka = _flat(ka, batch, 0)
    if ka.dtype.kind == "f":
        if not _np.isfinite(ka).all():
            raise ValueError("'k' must be an integer")
        ka = _np.trunc(ka)
    bad = ~((ka >= lo) & (ka <= hi))
    if bad.any():
        raise ValueError(f"'k' is out of bounds (at batch index {_at(int(_np.argmax(bad)), batch)})")
    ka = ka.astype(_np.int64)
    # negative indices count back from the end, which is -lo
    return _np.ascontiguousarray(_np.where(ka < 0, ka - lo, ka))


def _loop(f, batch, args, kwargs):
    """A batch of device arrays, one unbatched call of ``f`` per problem (the GPU runs
    each), the results stacked in the caller's library. ``args`` pairs each positional
    array argument with its number of core dimensions; inputs are never written."""
    flat = []
    for x, nd in args:
        if _Arrays.of(x).on_gpu:
            xp = _xp(x)
            nd = _core_ndim(_shape_of(x), nd)
            core = _shape_of(x)[len(_shape_of(x)) - nd :] if nd else ()
            size = int(_np.prod(batch))
            flat.append(xp.broadcast_to(x, tuple(batch) + core).reshape((size,) + core))
        else:
            flat.append(_flat(_np.asarray(x), batch, nd))
    outs = []
    for i in range(int(_np.prod(batch))):
        try:
            outs.append(f(*(x[i] for x in flat), **kwargs))
        except (ValueError, _np.linalg.LinAlgError) as e:
            _reraise_at(e, _at(i, batch))
    xp = _xp(args[0][0])
    single = not isinstance(outs[0], tuple)
    cols = [outs] if single else list(zip(*outs))
    res = []
    for col in cols:
        st = xp.stack(list(col))
        res.append(st.reshape(tuple(batch) + tuple(st.shape[1:])))
    return res[0] if single else tuple(res)


def _xp(x):
    """The library of array ``x`` (for broadcasting and stacking a batch): CuPy or PyTorch
    for device arrays, NumPy otherwise."""
    mod = type(x).__module__.split(".")[0]
    if isinstance(x, _np.ndarray):
        return _np
    if mod == "torch":
        import torch

        return torch
    if mod == "cupy":
        import cupy

        return cupy
    raise ValueError("batches of DLPack device arrays need CuPy arrays or PyTorch tensors")


# ---------------------------------------------------------------------------------------
# SciPy-compatible functions
# ---------------------------------------------------------------------------------------


def qr_insert(Q, R, u, k, which="row", rcond=None, overwrite_qru=False, check_finite=True):
    """QR update on row or column insertions, as ``scipy.linalg.qr_insert``.

    If ``A = Q @ R``, returns ``(Q1, R1)`` with ``Q1 @ R1`` equal to A with the rows ``u``
    inserted before row ``k`` (``which='row'``; ``u`` of shape (N,) or (p, N)) or the
    columns ``u`` inserted before column ``k`` (``which='col'``; ``u`` of shape (M,) or
    (M, p)). Full (Q (M, M), R (M, N)) and economic (Q (M, N), R (N, N)) decompositions,
    tall, square or wide (an economic one turns full where it must, as SciPy's), float32,
    float64, complex64 and complex128. Complex and wide factorisations are updated on the
    CPU (device arrays are copied to the host and back).

    For economic column insertion ``rcond`` bounds the reciprocal condition number of Q
    augmented with ``u/||u||`` (default: the dtype's machine epsilon); below it a
    ``LinAlgError`` says that ``u`` lies in the span of Q, as SciPy does.

    With ``overwrite_qru=True`` a full Q that keeps its shape (column insertion) receives
    the new Q, and that array is returned, when it is a writeable NumPy array of the dtype
    (as SciPy does where it can); ``u`` is left as it was, except that a complex ``u`` of a
    full insertion into a C-ordered ``Q`` comes back conjugated, as SciPy's does. NumPy inputs run on the CPU; CuPy
    arrays and PyTorch CUDA tensors on their GPU, with results of the same kind.

    Raises ``ValueError`` for bad shapes, dtypes, indices and non-finite input and
    ``numpy.linalg.LinAlgError`` for a column in the span of Q.

    Batches: leading batch dimensions as in SciPy (≥ 1.16). ``Q`` and ``R`` have two core
    dimensions, ``u`` two when it has two or more dimensions (a batch of blocks) and one
    otherwise (one vector for every problem), ``k`` none (an array of indices, one per
    problem); the batch shapes broadcast, and the results carry the broadcast batch shape.
    A batch of size zero raises ``ValueError``, as in SciPy. NumPy batches run in one call,
    the problems in parallel on the CPU backend's threads (``set_threads``); batches of
    device arrays run problem by problem on their GPU. When any problem fails (a column in
    the span of Q, an index out of bounds) the whole call raises, its message naming the
    first failing batch index; nothing is returned, and no input is written
    (``overwrite_qru`` does not apply to batches, as in SciPy).

    Example
    -------
    >>> import numpy as np, scipy.linalg as sl, cuqr
    >>> A = np.random.default_rng(1).standard_normal((6, 3))
    >>> Q, R = sl.qr(A)
    >>> Q1, R1 = cuqr.qr_insert(Q, R, np.ones(3), 2, which="row")
    >>> np.allclose(Q1 @ R1, np.insert(A, 2, 1.0, axis=0))
    True
    """
    batch = _batch_shape("qr_insert", (Q, 2), (R, 2), (u, "1|2"), (k, 0))
    if batch is not None:
        return _qr_insert_batch(batch, Q, R, u, k, which, rcond, check_finite)
    if which not in ("row", "col"):
        raise ValueError("'which' must be either 'row' or 'col'")
    arrays = _Arrays.of(Q)
    _same_family(arrays, (R, "R"), (u, "u"))
    Q0, u0 = Q, u
    Q, R, u = _prepare(arrays, [(Q, "Q"), (R, "R"), (u, "u")], check_finite)
    M, N, economic, dtype = _check_qr(Q, R)
    if _dtype_name(u) != dtype:
        raise ValueError("'u' must have the same type as 'Q' and 'R'")
    us = _shape(u)
    p = _insert_count(us, which, M, N)
    if which == "row":
        u = u.reshape(p, N)
        k = _index(k, -M, M)
        k = k + M if k < 0 else k
        if _explicit_route(dtype, M, N, M + p, N):
            return _explicit(arrays, "insert_rows", Q, R, u, k=k)
        st = _from_factors(arrays, Q, R, M, economic, dtype, check_finite)
        st.insert_rows(k, u)
    else:
        u = u.reshape(M, p)
        k = _index(k, -N, N)
        k = k + N if k < 0 else k
        if economic and p == 0:
            # SciPy fails here too (its economic path cannot take an empty block)
            raise ValueError("'u' has no columns to insert")
        if _explicit_route(dtype, M, N, M, N + p):
            Q1, R1 = _explicit(arrays, "insert_cols", Q, R, u, k=k, rcond=_rcond(rcond, dtype))
            if not (overwrite_qru and not economic):
                return Q1, R1
            c_order = isinstance(Q0, _np.ndarray) and not Q0.flags.f_contiguous
            _conj_into(u0, c_order and len(us) == 1)
            return _into(Q0, Q1), R1
        if economic:
            _span_check(Q, u, rcond, dtype)
        if N == 0 and p > 0:
            # nothing to update: the factorisation of the new columns alone
            policy = "thin" if economic else "full"
            st = _cuqr._State.factorize(u, None, policy, False, arrays.device, dtype)
        else:
            st = _from_factors(arrays, Q, R, M, economic, dtype, check_finite)
            if p > 0:
                st.insert_cols(k, u)
    Q1, R1 = _finish(arrays, st)
    if overwrite_qru and which == "col" and not economic:
        Q1 = _into(Q0, Q1)
    return Q1, R1


def _rcond(rcond, dtype: str) -> float:
    """SciPy's ``rcond`` of economic column insertion (default: the dtype's epsilon)."""
    return float(_np.finfo(dtype).eps) if rcond is None else float(rcond)


def _insert_count(us, which: str, M: int, N: int) -> int:
    """The number of rows or columns ``u`` of (core) shape ``us`` inserts, by SciPy's
    rules for its shape."""
    if which == "row":
        if len(us) == 1 and us[0] == N:
            return 1
        if len(us) == 2 and us[1] == N:
            return us[0]
        raise ValueError(f"'u' should be either (N,) or (p,N) when inserting rows. Found {us}.")
    if len(us) == 1 and us[0] == M:
        return 1
    if len(us) == 2 and us[0] == M:
        return us[1]
    raise ValueError(f"'u' should be either (M,) or (M,p) when inserting columns. Found {us}.")


def _norm(x):
    return float(((x * x).sum()) ** 0.5)


def _span_check(Q, U, rcond, dtype):
    """SciPy's test for economic column insertion: each new column, against Q and the new
    columns before it, must leave [Q, u/||u||] a reciprocal condition number of at least
    ``rcond``. Gram-Schmidt twice, in the arrays' own library."""
    if rcond is None:
        rcond = float(_np.finfo(dtype).eps)
    basis = [Q]
    p = _shape(U)[1]
    for j in range(p):
        u = U[:, j : j + 1]
        un = _norm(u)
        if un == 0.0:
            c_norm, w_norm = 0.0, 0.0
        else:
            w = u / un
            c2 = 0.0
            for _ in range(2):
                for B in basis:
                    c = B.T @ w
                    w = w - B @ c
                    c2 += _norm(c) ** 2
            w_norm = _norm(w)
            c_norm = min(c2**0.5, 1.0)
        # [Q, û] has singular values 1 and sqrt(1 ± ||Qᵀû||); 1 − ||Qᵀû|| ≈ ||w||²/(1 + ||Qᵀû||)
        rc = w_norm / (1.0 + c_norm)
        if not rc >= rcond:
            raise _np.linalg.LinAlgError(
                "One of the columns of u lies in the span of Q. Found reciprocal condition "
                f"number of {rc} for Q augmented with u/||u||."
            )
        basis.append(w / w_norm)


def qr_delete(Q, R, k, p=1, which="row", overwrite_qr=False, check_finite=True):
    """QR downdate on row or column deletions, as ``scipy.linalg.qr_delete``.

    If ``A = Q @ R``, returns ``(Q1, R1)`` with ``Q1 @ R1`` equal to A without rows (or
    columns) ``k .. k+p-1``. Full and economic decompositions, tall, square or wide,
    float32, float64, complex64 and complex128.

    Deleting every row leaves Q (0, 0) and R (0, N); deleting every column leaves Q (M, M)
    and R (M, 0), or Q (M, 0) and R (0, 0) for an economic decomposition, as in SciPy.

    With ``overwrite_qr=True`` the results are written into the blocks of ``Q`` and ``R``
    that SciPy overwrites (``Q[p:, p:]`` and ``R[p:, :]`` for a full row deletion,
    ``Q`` and ``R[:, :-p]`` for a column deletion), which are returned, when the inputs are
    writeable NumPy arrays of the dtype; otherwise new arrays are returned.

    Batches: leading batch dimensions as in SciPy (≥ 1.16): ``Q`` and ``R`` with two core
    dimensions, ``k`` a scalar or an array of indices (one per problem), ``p`` one count
    for every problem; the batch shapes broadcast, and a batch of size zero raises
    ``ValueError``. One call for NumPy batches, problems in parallel; a failing problem
    fails the whole call, naming its batch index, and no input is written
    (``overwrite_qr`` does not apply to batches). See :func:`qr_insert`.

    Example
    -------
    >>> import numpy as np, scipy.linalg as sl, cuqr
    >>> A = np.random.default_rng(2).standard_normal((7, 3))
    >>> Q, R = sl.qr(A, mode="economic")
    >>> Q1, R1 = cuqr.qr_delete(Q, R, 1, 2, which="row")
    >>> np.allclose(Q1 @ R1, np.delete(A, [1, 2], axis=0))
    True
    """
    batch = _batch_shape("qr_delete", (Q, 2), (R, 2), (k, 0))
    if batch is not None:
        return _qr_delete_batch(batch, Q, R, k, p, which, check_finite)
    if which not in ("row", "col"):
        raise ValueError("'which' must be either 'row' or 'col'")
    arrays = _Arrays.of(Q)
    _same_family(arrays, (R, "R"))
    Q0, R0 = Q, R
    Q, R = _prepare(arrays, [(Q, "Q"), (R, "R")], check_finite)
    M, N, economic, dtype = _check_qr(Q, R)
    try:
        p = int(p)
    except (TypeError, ValueError):
        raise ValueError("'p' must be an integer") from None
    lim = M if which == "row" else N
    k = _index(k, -lim, lim - 1)
    k = k + lim if k < 0 else k
    if p < 1 or k + p > lim:
        raise ValueError("'p' is out of range")
    if p == lim:
        return _delete_all(arrays, Q, R, which, economic, dtype)
    op = "delete_rows" if which == "row" else "delete_cols"
    if _explicit_route(dtype, M, N, M - p if which == "row" else M, N):
        Q1, R1 = _explicit(arrays, op, Q, R, k=k, p=p)
    else:
        st = _from_factors(arrays, Q, R, M, economic, dtype, check_finite)
        if which == "row":
            st.delete_rows(k, p)
        else:
            st.delete_cols(k, p)
        Q1, R1 = _finish(arrays, st)
    if overwrite_qr and isinstance(Q1, _np.ndarray):
        # the trailing blocks (rows) or leading ones (columns) of the inputs, as in SciPy
        (qm, qn), (rm, rn) = _shape(Q0), _shape(R0)
        (q1m, q1n), (r1m, r1n) = Q1.shape, R1.shape
        if which == "row":
            qv, rv = _view(Q0, qm - q1m, qn - q1n), _view(R0, rm - r1m, 0)
        else:
            qv, rv = _view(Q0, 0, 0, q1m, q1n), _view(R0, 0, 0, r1m, r1n)
        Q1, R1 = _into(qv, Q1), _into(rv, R1)
    return Q1, R1


def _view(x, i, j, m=None, n=None):
    """``x[i:i+m, j:j+n]`` of a NumPy array (to the end when ``m``/``n`` are None); None
    for anything else."""
    if not isinstance(x, _np.ndarray):
        return None
    return x[i : None if m is None else i + m, j : None if n is None else j + n]


def _delete_all(arrays, Q, R, which, economic, dtype):
    """SciPy's results of deleting every row or every column."""
    (qm, qn), (rm, rn) = _shape(Q), _shape(R)
    xp = _array_module(Q) if arrays.on_gpu else _np
    if which == "row":
        Q1, R1 = xp.zeros((0, 0), dtype=dtype), xp.zeros((0, rn), dtype=dtype)
    elif economic:
        Q1, R1 = xp.zeros((qm, 0), dtype=dtype), xp.zeros((0, 0), dtype=dtype)
    else:
        # Q stays a valid orthogonal factor of the (M, 0) matrix
        torch = type(Q).__module__.split(".")[0] == "torch"
        Q1, R1 = Q.clone() if torch else Q.copy(), xp.zeros((rm, 0), dtype=dtype)
    if arrays.on_gpu:
        return Q1, R1
    return arrays.out(Q1), arrays.out(R1)


def _array_module(x):
    """The array library of a device array (CuPy or PyTorch), for making empty results."""
    mod = type(x).__module__.split(".")[0]
    if mod == "torch":
        import torch

        class _Torch:
            @staticmethod
            def zeros(shape, dtype):
                return torch.zeros(shape, dtype=getattr(torch, dtype), device=x.device)

        return _Torch
    if mod == "cupy":
        import cupy

        return cupy
    raise ValueError("deleting every row or column of a DLPack array needs CuPy or PyTorch")


def qr_update(Q, R, u, v, overwrite_qruv=False, check_finite=True):
    """Rank-k QR update, as ``scipy.linalg.qr_update``.

    If ``A = Q @ R``, returns ``(Q1, R1)`` with ``Q1 @ R1 = A + u @ v.conj().T`` (``u`` of
    shape (M,) or (M, k), ``v`` of shape (N,) or (N, k); ``v.T`` for real data). Full and
    economic decompositions, tall, square or wide, float32, float64, complex64 and
    complex128. ``k`` may not exceed M or N.

    With ``overwrite_qruv=True`` the new Q and R are written into ``Q`` and ``R``, which
    are returned, when they are writeable NumPy arrays of the dtype; ``u`` is never written,
    and a complex ``v`` of a rank-one update comes back conjugated, as SciPy's does.

    Batches: leading batch dimensions as in SciPy (≥ 1.16): ``Q`` (..., M, M) or
    (..., M, N) and ``R``; ``u`` and ``v`` read as 2-D blocks (..., M, k) and (..., N, k)
    when they have two or more dimensions, and as one vector pair shared by every problem
    when 1-D (a batch of rank-one updates is therefore ``u[..., None]``, ``v[..., None]``).
    The batch shapes broadcast; the results carry the broadcast shape; a batch of size zero
    raises ``ValueError``. NumPy batches run in one call with the problems in parallel; a
    failing problem fails the whole call, naming its batch index, and no input is written
    (``overwrite_qruv`` does not apply to batches). See :func:`qr_insert`.

    Example
    -------
    >>> import numpy as np, scipy.linalg as sl, cuqr
    >>> rng = np.random.default_rng(3)
    >>> A, u, v = rng.standard_normal((6, 4)), rng.standard_normal(6), rng.standard_normal(4)
    >>> Q1, R1 = cuqr.qr_update(*sl.qr(A), u, v)
    >>> np.allclose(Q1 @ R1, A + np.outer(u, v))
    True
    """
    batch = _batch_shape("qr_update", (Q, 2), (R, 2), (u, "1|2"), (v, "1|2"))
    if batch is not None:
        return _qr_update_batch(batch, Q, R, u, v, check_finite)
    arrays = _Arrays.of(Q)
    _same_family(arrays, (R, "R"), (u, "u"), (v, "v"))
    Q0, R0, v0 = Q, R, v
    Q, R, u, v = _prepare(arrays, [(Q, "Q"), (R, "R"), (u, "u"), (v, "v")], check_finite)
    M, N, economic, dtype = _check_qr(Q, R)
    us, vs = _shape(u), _shape(v)
    _check_uv(u, v, us, vs, M, N, dtype)
    if _explicit_route(dtype, M, N, M, N):
        kk = 1 if len(us) == 1 else us[1]
        Q1, R1 = _explicit(arrays, "update", Q, R, u.reshape(M, kk), v.reshape(N, kk))
        if overwrite_qruv:
            Q1, R1 = _into(Q0, Q1), _into(R0, R1)
            _conj_into(v0, kk == 1)
        return Q1, R1
    st = _from_factors(arrays, Q, R, M, economic, dtype, check_finite)
    if len(us) == 1 or us[1] == 1:
        st.rank_one(u.reshape(M, 1), v.reshape(N, 1))
    elif us[1] > 0:
        st.rank_k(u, v)
    Q1, R1 = _finish(arrays, st)
    if overwrite_qruv:
        Q1, R1 = _into(Q0, Q1), _into(R0, R1)
    return Q1, R1


def _check_uv(u, v, us, vs, M: int, N: int, dtype: str):
    """SciPy's checks of qr_update's ``u`` and ``v`` (of core shapes ``us`` and ``vs``)."""
    if _dtype_name(u) != dtype or _dtype_name(v) != dtype:
        raise ValueError("'u' and 'v' must have the same type as 'Q' and 'R'")
    if len(us) != len(vs) or len(us) not in (1, 2):
        raise ValueError("u and v must both be 1-D or both be 2-D")
    if us[0] != M:
        raise ValueError("u.shape[0] must equal Q.shape[0]")
    if vs[0] != N:
        raise ValueError("v.shape[0] must equal R.shape[1]")
    if len(us) == 2 and us[1] != vs[1]:
        raise ValueError("Second dimension of u and v must be the same")
    if len(us) == 2 and (us[1] > M or us[1] > N):
        raise ValueError("Update rank larger than np.dot(Q, R).")


def cholupdate(R, x, sign="+", check_finite=True):
    """Rank-one (or rank-k) update or downdate of a Cholesky factor, as MATLAB's
    ``cholupdate``.

    ``R`` is upper triangular (n, n) with ``A = R.T @ R``; returns the upper triangular
    ``R1`` with a non-negative diagonal and ``R1.T @ R1 = A + x @ x.T`` (``sign='+'``) or
    ``A - x @ x.T`` (``sign='-'``), for ``x`` of shape (n,) or (n, k). A downdate that would
    leave the matrix not positive definite raises ``numpy.linalg.LinAlgError`` and changes
    nothing. Runs as an R-only row insertion or deletion (docs/algorithms.md).

    Batches (SciPy has no cholupdate; its rules for the other functions): ``R`` of shape
    (..., n, n) and ``x`` read as (..., n, k) blocks when it has two or more dimensions,
    else one (n,) vector for every problem; the batch shapes broadcast and a zero-size
    batch raises ``ValueError``. A downdate that fails for any problem raises
    ``LinAlgError`` naming the first failing batch index, and returns nothing.

    Example
    -------
    >>> import numpy as np, cuqr
    >>> rng = np.random.default_rng(4)
    >>> B = rng.standard_normal((10, 4)); x = rng.standard_normal(4)
    >>> R = np.linalg.cholesky(B.T @ B).T
    >>> R1 = cuqr.cholupdate(R, x)
    >>> np.allclose(R1.T @ R1, B.T @ B + np.outer(x, x))
    True
    """
    batch = _batch_shape("cholupdate", (R, 2), (x, "1|2"))
    if batch is not None:
        return _cholupdate_batch(batch, R, x, sign, check_finite)
    if sign not in ("+", "-"):
        raise ValueError("sign must be '+' or '-'")
    arrays = _Arrays.of(R)
    _same_family(arrays, (x, "x"))
    R, x = _prepare(arrays, [(R, "R"), (x, "x")], check_finite)
    n, k, dtype = _check_chol(R, x, _shape(R), _shape(x))
    rows = x.reshape(1, n) if len(_shape(x)) == 1 else x.T
    st = _cuqr._State.from_factors(
        "none", n + k, None, R, arrays.device, dtype, check_finite=check_finite, rank_tol=0.0
    )
    if sign == "+":
        st.insert_rows(0, rows)
    else:
        st.delete_rows_with(0, rows)
    _, R1 = st.take_factors(device=arrays.on_gpu)
    R1 = arrays.out(R1)
    neg = R1.diagonal() < 0
    R1[neg] *= -1
    return R1


def _policy(economic: bool) -> str:
    return "thin" if economic else "full"


def _qr_insert_batch(batch, Q, R, u, k, which, rcond, check_finite):
    """qr_insert over a batch (see :func:`qr_insert`)."""
    if which not in ("row", "col"):
        raise ValueError("'which' must be either 'row' or 'col'")
    arrays = _Arrays.of(Q)
    _same_family(arrays, (R, "R"), (u, "u"))
    if arrays.on_gpu:
        kw = dict(which=which, rcond=rcond, check_finite=check_finite)
        return _loop(qr_insert, batch, [(Q, 2), (R, 2), (u, "1|2"), (k, 0)], kw)
    Q, R, u = _prepare(arrays, [(Q, "Q"), (R, "R"), (u, "u")], check_finite)
    Qb, Rb, ub = _flat(Q, batch, 2), _flat(R, batch, 2), _flat(u, batch, "1|2")
    M, N, economic, dtype = _check_qr(Qb[0], Rb[0])
    if _dtype_name(u) != dtype:
        raise ValueError("'u' must have the same type as 'Q' and 'R'")
    p = _insert_count(_shape(ub[0]), which, M, N)
    size = Qb.shape[0]
    M1, N1 = (M + p, N) if which == "row" else (M, N + p)
    if _explicit_route(dtype, M, N, M1, N1):
        kw = dict(which=which, rcond=rcond, check_finite=False)
        return _loop(qr_insert, batch, [(Q, 2), (R, 2), (u, "1|2"), (k, 0)], kw)
    if which == "row":
        ub = ub.reshape(size, p, N)
        kb = _batch_k(k, batch, -M, M)
        op = "insert_rows"
    else:
        ub = ub.reshape(size, M, p)
        kb = _batch_k(k, batch, -N, N)
        if economic:
            _span_check_batch(Qb, ub, rcond, dtype, batch)
            if p == 0:
                # SciPy fails here too (its economic path cannot take an empty block)
                raise ValueError("'u' has no columns to insert")
        op = "insert_cols"
    Q1, R1 = _cuqr.batch(op, _policy(economic), M, Qb, Rb, ub, None, kb, 0, list(batch))
    return _unflat(arrays, batch, Q1), _unflat(arrays, batch, R1)


def _span_check_batch(Q, U, rcond, dtype, batch):
    """:func:`_span_check` for every problem of a batch at once (Q (B, M, N), U (B, M, p)):
    the first problem (in C order) with a column in the span raises."""
    if rcond is None:
        rcond = float(_np.finfo(dtype).eps)
    size, _, p = U.shape
    basis = [Q]
    failed = _np.full(size, -1)
    rcs = _np.zeros((size, p))

    def norms(x):
        return _np.sqrt((x * x).sum(axis=(1, 2)))

    with _np.errstate(divide="ignore", invalid="ignore"):
        for j in range(p):
            u = U[:, :, j : j + 1]
            un = norms(u)
            w = u / un[:, None, None]
            c2 = _np.zeros(size, dtype=U.dtype)
            for _ in range(2):
                for B in basis:
                    c = B.transpose(0, 2, 1) @ w
                    w = w - B @ c
                    c2 = c2 + (c * c).sum(axis=(1, 2))
            w_norm = _np.where(un == 0, 0, norms(w))
            c_norm = _np.where(un == 0, 0, _np.minimum(_np.sqrt(c2), 1))
            rc = w_norm / (1 + c_norm)
            rcs[:, j] = rc
            bad = ~(rc >= rcond) & (failed < 0)
            failed[bad] = j
            basis.append(w / w_norm[:, None, None])
    if (failed >= 0).any():
        i = int(_np.argmax(failed >= 0))
        raise _np.linalg.LinAlgError(
            "One of the columns of u lies in the span of Q. Found reciprocal condition "
            f"number of {rcs[i, failed[i]]} for Q augmented with u/||u|| "
            f"(at batch index {_at(i, batch)})."
        )


def _qr_delete_batch(batch, Q, R, k, p, which, check_finite):
    """qr_delete over a batch (see :func:`qr_delete`)."""
    if which not in ("row", "col"):
        raise ValueError("'which' must be either 'row' or 'col'")
    arrays = _Arrays.of(Q)
    _same_family(arrays, (R, "R"))
    if arrays.on_gpu:
        kw = dict(p=p, which=which, check_finite=check_finite)
        return _loop(qr_delete, batch, [(Q, 2), (R, 2), (k, 0)], kw)
    Q, R = _prepare(arrays, [(Q, "Q"), (R, "R")], check_finite)
    Qb, Rb = _flat(Q, batch, 2), _flat(R, batch, 2)
    M, N, economic, dtype = _check_qr(Qb[0], Rb[0])
    try:
        p = int(p)
    except (TypeError, ValueError):
        raise ValueError("'p' must be an integer") from None
    lim = M if which == "row" else N
    kb = _batch_k(k, batch, -lim, lim - 1)
    over = kb + p > lim
    if p < 1 or over.any():
        where = "" if p < 1 else f" (at batch index {_at(int(_np.argmax(over)), batch)})"
        raise ValueError(f"'p' is out of range{where}")
    if p == lim:
        # SciPy's results of deleting every row or every column, for each problem
        (qm, qn), (rm, rn) = _shape(Qb[0]), _shape(Rb[0])
        if which == "row":
            Q1, R1 = (0, 0), (0, rn)
        elif economic:
            Q1, R1 = (qm, 0), (0, 0)
        else:
            Q1, R1 = None, (rm, 0)
        zeros = lambda core: _np.zeros(tuple(batch) + core, dtype=dtype)  # noqa: E731
        Q1 = Qb.reshape(tuple(batch) + (qm, qn)).copy() if Q1 is None else zeros(Q1)
        return arrays.out(Q1), arrays.out(zeros(R1))
    if _explicit_route(dtype, M, N, M - p if which == "row" else M, N):
        kw = dict(p=p, which=which, check_finite=False)
        return _loop(qr_delete, batch, [(Q, 2), (R, 2), (k, 0)], kw)
    op = "delete_rows" if which == "row" else "delete_cols"
    Q1, R1 = _cuqr.batch(op, _policy(economic), M, Qb, Rb, None, None, kb, p, list(batch))
    return _unflat(arrays, batch, Q1), _unflat(arrays, batch, R1)


def _qr_update_batch(batch, Q, R, u, v, check_finite):
    """qr_update over a batch (see :func:`qr_update`)."""
    arrays = _Arrays.of(Q)
    _same_family(arrays, (R, "R"), (u, "u"), (v, "v"))
    if arrays.on_gpu:
        args = [(Q, 2), (R, 2), (u, "1|2"), (v, "1|2")]
        return _loop(qr_update, batch, args, dict(check_finite=check_finite))
    Q, R, u, v = _prepare(arrays, [(Q, "Q"), (R, "R"), (u, "u"), (v, "v")], check_finite)
    Qb, Rb = _flat(Q, batch, 2), _flat(R, batch, 2)
    ub, vb = _flat(u, batch, "1|2"), _flat(v, batch, "1|2")
    M, N, economic, dtype = _check_qr(Qb[0], Rb[0])
    us, vs = _shape(ub[0]), _shape(vb[0])
    _check_uv(ub[0], vb[0], us, vs, M, N, dtype)
    if _explicit_route(dtype, M, N, M, N):
        args = [(Q, 2), (R, 2), (u, "1|2"), (v, "1|2")]
        return _loop(qr_update, batch, args, dict(check_finite=False))
    if len(us) == 1:
        ub, vb = ub.reshape(ub.shape[0], M, 1), vb.reshape(vb.shape[0], N, 1)
    Q1, R1 = _cuqr.batch("rank", _policy(economic), M, Qb, Rb, ub, vb, None, 0, list(batch))
    return _unflat(arrays, batch, Q1), _unflat(arrays, batch, R1)


def _cholupdate_batch(batch, R, x, sign, check_finite):
    """cholupdate over a batch (see :func:`cholupdate`)."""
    if sign not in ("+", "-"):
        raise ValueError("sign must be '+' or '-'")
    arrays = _Arrays.of(R)
    _same_family(arrays, (x, "x"))
    if arrays.on_gpu:
        kw = dict(sign=sign, check_finite=check_finite)
        return _loop(cholupdate, batch, [(R, 2), (x, "1|2")], kw)
    R, x = _prepare(arrays, [(R, "R"), (x, "x")], check_finite)
    Rb, xb = _flat(R, batch, 2), _flat(x, batch, "1|2")
    n, k, _ = _check_chol(Rb[0], xb[0], _shape(Rb[0]), _shape(xb[0]))
    rows = xb.reshape(xb.shape[0], 1, n) if xb.ndim == 2 else xb.transpose(0, 2, 1)
    op = "insert_rows" if sign == "+" else "delete_rows_with"
    _, R1 = _cuqr.batch(op, "none", n + k, None, Rb, rows, None, None, 0, list(batch))
    # a non-negative diagonal, as for one problem
    neg = _np.diagonal(R1, axis1=1, axis2=2) < 0
    R1 *= _np.where(neg, -1, 1).astype(R1.dtype)[:, :, None]
    return _unflat(arrays, batch, R1)


def _check_chol(R, x, rs, xs):
    """cholupdate's checks of ``R`` and ``x`` (of core shapes ``rs`` and ``xs``): returns
    (n, k, dtype)."""
    if len(rs) != 2 or rs[0] != rs[1]:
        raise ValueError(f"R must be square (n, n); found {rs}")
    dtype = _dtype_name(R)
    if dtype not in _DTYPES:
        raise ValueError(f"cuqr supports float32 and float64 arrays, found {dtype}")
    if _dtype_name(x) != dtype:
        raise ValueError("'x' must have the same type as 'R'")
    n = rs[0]
    if len(xs) == 1 and xs[0] == n:
        return n, 1, dtype
    if len(xs) == 2 and xs[0] == n:
        return n, xs[1], dtype
    raise ValueError(f"x should be (n,) or (n,k) with n = {n}; found {xs}")


# ---------------------------------------------------------------------------------------
# Explicit factors held between updates
# ---------------------------------------------------------------------------------------


class ExplicitQR:
    """Explicit factors ``Q`` and ``R`` of a matrix A of any shape (tall, square or wide), of
    float32, float64, complex64 or complex128, held between updates: the stateful form of
    :func:`qr_insert`, :func:`qr_delete` and :func:`qr_update`, with their arithmetic.

    ``ExplicitQR(Q, R)`` takes factors as ``scipy.linalg.qr`` returns them: full (Q (M, M),
    R (M, N)) or economic (Q (M, N), R (N, N), M > N), of one dtype.
    ``ExplicitQR.factorize(A, mode='full'|'economic')`` makes them. NumPy (and PyTorch CPU)
    inputs are held and updated on the CPU. A CuPy array or PyTorch CUDA tensor Q is held in
    its GPU's memory, where the updates rotate it (R, small beside it, is held on the host),
    so a sequence of updates never moves Q; ``Q`` and ``R`` come back as arrays of the
    caller's kind on its device. Positions are 0-based, negative ones counted from the end.

    A refused update (an index out of range, a shape or dtype that does not fit, NaN or inf,
    a column in the span of an economic Q) raises ``ValueError`` or
    ``numpy.linalg.LinAlgError`` and leaves the factors as they were. Calls on one object
    from several threads are served in turn.

    Example
    -------
    >>> import numpy as np, cuqr
    >>> A = np.random.default_rng(0).standard_normal((6, 3)) * (1 + 1j)
    >>> F = cuqr.ExplicitQR.factorize(A, mode="economic")
    >>> F.insert_rows(2, np.ones(3, dtype=complex))
    >>> F.delete_cols(0)
    >>> np.allclose(F.Q @ F.R, np.insert(A, 2, 1.0, axis=0)[:, 1:])
    True
    """

    def __init__(self, Q, R):
        arrays = _Arrays.of(Q)
        _same_family(arrays, (R, "R"))
        M, N, _, dtype = _check_qr(Q, R)
        self._arrays = arrays
        if arrays.family in ("cupy", "torch-cuda") and min(_shape(Q)) > 0:
            self._st = _cuqr._ExplicitState(
                _fortran(arrays, Q), _host_ready(_to_numpy(R)), arrays.device
            )
        else:
            host = lambda x: _host_ready(_to_numpy(x))  # noqa: E731
            self._st = _cuqr._ExplicitState(host(Q), host(R))

    @classmethod
    def factorize(cls, A, mode: str = "full") -> "ExplicitQR":
        """The factors of ``A`` (M, N): ``mode='full'`` (Q (M, M)) or ``'economic'`` (Q
        (M, N) when M > N, else full), by faer's QR on the CPU for NumPy input and by
        cuSOLVER on the GPU for CuPy arrays and PyTorch CUDA tensors."""
        if mode not in ("full", "economic"):
            raise ValueError("mode must be 'full' or 'economic'")
        arrays = _Arrays.of(A)
        if len(_shape(A)) != 2:
            raise ValueError("A must be 2-D")
        if _dtype_name(A) not in _DTYPES + _COMPLEX:
            raise ValueError(
                f"cuqr supports float32, float64, complex64 and complex128 arrays, "
                f"found {_dtype_name(A)}"
            )
        self = cls.__new__(cls)
        self._arrays = arrays
        device = arrays.device if arrays.family in ("cupy", "torch-cuda") else None
        self._st = _cuqr._ExplicitState.factorize(
            _host_ready(_to_numpy(A)), mode == "economic", device
        )
        return self

    def _block(self, x, name: str, rows: int | None = None, cols: int | None = None):
        """``x`` as a 2-D NumPy array of the state's dtype: a 1-D one is one row
        (``rows=1``) or one column (``cols=1``)."""
        _same_family(self._arrays, (x, name))
        if _dtype_name(x) != self._st.dtype:
            raise ValueError(f"'{name}' must have the dtype of Q and R ({self._st.dtype})")
        x = _host_ready(_to_numpy(x))
        if x.ndim == 1:
            x = x.reshape(1, -1) if rows == 1 else x.reshape(-1, 1)
        if x.ndim != 2:
            raise ValueError(f"'{name}' must be 1-D or 2-D")
        return x

    @staticmethod
    def _pos(k, limit: int) -> int:
        k = _index(k, -limit, limit)
        return k + limit if k < 0 else k

    def insert_rows(self, k, u) -> None:
        """Inserts the rows ``u`` ((N,) or (p, N)) before row ``k``."""
        M, _ = self.shape
        self._st.insert_rows(self._pos(k, M), self._block(u, "u", rows=1))

    def insert_cols(self, k, u, rcond=None) -> None:
        """Inserts the columns ``u`` ((M,) or (M, p)) before column ``k``; an economic Q
        refuses a column whose reciprocal condition number against Q is below ``rcond``
        (default: the dtype's epsilon) with ``LinAlgError``, as SciPy does."""
        _, N = self.shape
        u = self._block(u, "u", cols=1)
        self._st.insert_cols(self._pos(k, N), u, _rcond(rcond, self._st.dtype))

    def delete_rows(self, k, p: int = 1) -> None:
        """Deletes rows ``k .. k+p-1``."""
        M, _ = self.shape
        self._st.delete_rows(self._pos(k, M), int(p))

    def delete_cols(self, k, p: int = 1) -> None:
        """Deletes columns ``k .. k+p-1``."""
        _, N = self.shape
        self._st.delete_cols(self._pos(k, N), int(p))

    def update(self, u, v) -> None:
        """A ← A + u vᴴ: ``u`` (M,) or (M, k), ``v`` (N,) or (N, k) (``v.T`` for real data)."""
        self._st.rank_k(self._block(u, "u", cols=1), self._block(v, "v", cols=1))

    @property
    def Q(self):
        """Q, a copy of the held factor as an array of the caller's kind and device."""
        q = self._st.q()
        if isinstance(q, _np.ndarray):
            return _from_host(self._arrays, q)
        return self._arrays.out(q)

    @property
    def R(self):
        """R, a copy as an array of the caller's kind and device."""
        return _from_host(self._arrays, self._st.r())

    @property
    def shape(self) -> tuple[int, int]:
        """The shape (M, N) of A."""
        (m, _), (_, n) = self._st.shapes()
        return m, n

    @property
    def dtype(self) -> str:
        """'float32', 'float64', 'complex64' or 'complex128'."""
        return self._st.dtype

    @property
    def device(self) -> int | None:
        """The CUDA device that holds Q, or ``None`` (held on the CPU)."""
        return self._st.device

    def __repr__(self) -> str:
        where = "cpu" if self.device is None else f"cuda:{self.device}"
        return f"ExplicitQR(shape={self.shape}, dtype={self.dtype}, device={where})"


# ---------------------------------------------------------------------------------------
# The stateful factorisation
# ---------------------------------------------------------------------------------------


class QR:
    """A QR factorisation ``A = Q R`` with right-hand sides ``d = Q.T b``, kept on the CPU
    or a GPU and updated in place.

    Parameters
    ----------
    A : (m, n) array, m >= n
        NumPy array (or anything ``numpy.asarray`` takes), CuPy array or PyTorch tensor,
        float32 or float64.
    b : (m,) or (m, k) array, optional
        Right-hand sides; without them ``solve`` is not available.
    q : 'thin', 'full' or None
        Keep the thin Q₁ (m×n), the full Q (m×m), or R alone. An R-only state updates R
        and d from the data it is given; with ``keep_data=True`` it also keeps A and b so
        that rows can be deleted and columns inserted.
    keep_data : bool
        See ``q=None``.
    device : 'auto', 'cpu', 'cuda' or 'cuda:N'
        'auto' takes the device of a CUDA input; host data go to GPU 0 when it opens and
        m·n is at least ``cuqr.AUTO_GPU_MIN_MN`` (250,000: below it the CPU updates faster
        than a GPU, whose calls cost about 0.5 ms whatever their size), else stay on the
        CPU, and ``fallback`` says why.

    Results (``R``, ``Q``, ``d``, ``solve()``) are arrays of A's kind: NumPy (or PyTorch
    CPU tensors) for host inputs, CuPy arrays or PyTorch CUDA tensors for device inputs
    (handed over through DLPack, no host copy). Every update validates first; on an error
    (``ValueError``, ``numpy.linalg.LinAlgError``) the factorisation is unchanged.

    Batches
    -------
    A 3-D ``A`` of shape (B, m, n) (with ``b`` of shape (B, m) or (B, m, k)) builds B
    independent problems of one shape, factorised and updated together on the CPU
    (NumPy or PyTorch CPU inputs; CUDA arrays raise ``ValueError``). Every update takes the
    single-problem method's data with a leading batch axis of length B, positions shared:
    ``qr.insert_rows(k, U)`` with U of shape (B, n) or (B, p, n), ``qr.rank_one(u, v)``
    with u (B, m) and v (B, n). ``R``, ``Q``, ``d`` and ``solve()`` stack the problems
    ((B, n, n), ..., (B, n)), and ``batch`` is B (None for a single problem).

    An error that the batch shares (a shape, a position) raises ``ValueError`` and changes
    nothing. A problem may also refuse by itself (non-finite data, a dependent column, a
    failed downdate); then :class:`BatchError` (a ``LinAlgError``) is raised with
    ``.refused``, a list of (index, message), and ``.applied``. An update that keeps m and n
    (``rank_one``, ``rank_k``, ``replace_cols``, ``shift_col``, a ``slide`` with as many rows
    in as out) leaves each refusing problem exactly as it was and updates the others before
    raising (``.applied`` is True); the factorisation and an update that changes m or n
    apply to all problems or none (``.applied`` is False), so that the problems keep one
    shape.

    One object may be used from several threads: its calls (updates, ``solve`` and the
    properties alike) are serialised, each running whole before the next starts, in the
    order they are made. A thread waiting for its turn does not hold the interpreter lock.

    Example
    -------
    >>> import numpy as np, cuqr
    >>> rng = np.random.default_rng(5)
    >>> A, b = rng.standard_normal((500, 8)), rng.standard_normal(500)
    >>> qr = cuqr.QR(A, b, q="thin", device="cpu")
    >>> qr.insert_cols(8, rng.standard_normal(500))
    >>> qr.delete_rows(0, 10)
    >>> qr.shape
    (490, 9)
    >>> # a batch of four problems of 50×3
    >>> As = rng.standard_normal((4, 50, 3)); bs = rng.standard_normal((4, 50))
    >>> qb = cuqr.QR(As, bs, q="thin")
    >>> qb.insert_rows(50, rng.standard_normal((4, 3)), rng.standard_normal((4, 1)))
    >>> qb.batch, qb.shape, qb.solve().shape
    (4, (51, 3), (4, 3))
    >>> u, v = rng.standard_normal((4, 51)), rng.standard_normal((4, 3))
    >>> u[2, 0] = np.nan
    >>> try:
    ...     qb.rank_one(u, v)
    ... except cuqr.BatchError as e:
    ...     print([i for i, _ in e.refused], e.applied)
    [2] True
    """

    def __new__(cls, A, *args, **kwargs):
        # a 3-D A is a batch of problems: the batched class (a subclass) takes it
        if cls is QR and len(_shape(A) if hasattr(A, "shape") else _np.shape(A)) == 3:
            return super().__new__(_BatchQR)
        return super().__new__(cls)

    def __init__(self, A, b=None, q="thin", keep_data=False, device="auto"):
        arrays = _Arrays.of(A)
        policy = {"thin": "thin", "economic": "thin", "full": "full", None: "none", "r": "none"}
        if q not in policy:
            raise ValueError(f"q must be 'thin', 'full' or None, not {q!r}")
        ordinal, self._fallback = self._resolve_device(device, arrays, _shape(A))
        if arrays.on_gpu and ordinal != arrays.device:
            raise ValueError(
                f"A is on CUDA device {arrays.device}; pass device='auto' or 'cuda:{arrays.device}'"
            )
        if not arrays.on_gpu:
            A = _host_ready(arrays.host(A, "A"))
            if b is not None:
                b = _host_ready(arrays.host(b, "b"))
        dtype = _dtype_name(A)
        if dtype not in _DTYPES:
            raise ValueError(f"cuqr supports float32 and float64 arrays, found {dtype}")
        if len(_shape(A)) != 2:
            raise ValueError("A must be 2-D")
        self._vector_rhs = b is not None and len(_shape(b)) == 1
        if b is not None:
            if _dtype_name(b) != dtype:
                raise ValueError("'b' must have the same dtype as 'A'")
            if self._vector_rhs:
                b = b.reshape(-1, 1)
        # results come back as A's kind: device arrays for CUDA inputs, host arrays otherwise
        self._arrays = arrays
        self._gpu_out = arrays.on_gpu
        self._st = _cuqr._State.factorize(A, b, policy[q], bool(keep_data), ordinal, dtype)

    @staticmethod
    def _resolve_device(device, arrays: _Arrays, shape=()):
        """The GPU ordinal (None: the CPU) and, for 'auto' on the CPU, why."""
        if device == "auto":
            if arrays.on_gpu:
                return arrays.device, None
            if len(shape) == 2 and shape[0] * shape[1] < _cuqr.AUTO_GPU_MIN_MN:
                return None, (
                    f"m·n = {shape[0] * shape[1]} is below {_cuqr.AUTO_GPU_MIN_MN}, where the "
                    "CPU updates faster than a GPU (whose calls cost about 0.5 ms whatever "
                    "their size); pass device='cuda' for the GPU"
                )
            if _cuqr.cuda_available(0):
                return 0, None
            return None, f"no usable GPU: {_cuqr.cuda_unavailable_reason(0)}"
        if device == "cpu":
            if arrays.on_gpu:
                raise ValueError("A is a CUDA array; pass device='auto' or 'cuda'")
            return None, None
        if isinstance(device, str) and device.startswith("cuda"):
            ordinal = arrays.device if arrays.on_gpu and device == "cuda" else 0
            if ":" in device:
                ordinal = int(device.split(":", 1)[1])
            if not _cuqr.cuda_available(ordinal):
                raise RuntimeError(
                    f"no usable CUDA device {ordinal}: {_cuqr.cuda_unavailable_reason(ordinal)}"
                )
            return ordinal, None
        raise ValueError(f"device must be 'auto', 'cpu', 'cuda' or 'cuda:N', not {device!r}")

    # -- helpers --------------------------------------------------------------------------

    def _in(self, x, name):
        """An update argument: host arrays as NumPy; CUDA arrays as they are."""
        a = _Arrays.of(x)
        if a.on_gpu:
            return x
        return _host_ready(a.host(x, name))

    def _out(self, x):
        return self._arrays.out(x) if x is not None else None

    @staticmethod
    def _p(p):
        p = int(p)
        if p < 1:
            raise ValueError("'p' must be a positive number of rows or columns")
        return p

    @staticmethod
    def _i(k):
        """An index for the state, which counts negative ones back from the end of its shape
        within the same call (another thread's call cannot come in between). A huge negative
        index stays out of bounds rather than overflowing."""
        return max(int(k), -(2**62))

    # -- updates --------------------------------------------------------------------------

    def insert_cols(self, k, U):
        """Insert the columns ``U`` ((m,) or (m, p)) before column ``k``."""
        self._st.insert_cols(self._i(k), self._in(U, "U"))

    def delete_cols(self, k, p=1):
        """Delete columns ``k .. k+p-1``."""
        self._st.delete_cols(self._i(k), self._p(p))

    def insert_rows(self, k, U, e=None):
        """Insert the rows ``U`` ((n,) or (p, n)) with right-hand sides ``e`` ((k,) per row
        or (p, k); zeros when omitted) before row ``k``."""
        U = self._in(U, "U")
        if len(_shape(U)) == 1:
            U = U.reshape(1, -1)
        if e is not None:
            e = self._in(e, "e")
            if len(_shape(e)) == 1:
                e = e.reshape(_shape(U)[0], -1)
        self._st.insert_rows(self._i(k), U, e)

    def delete_rows(self, k, p=1, rows=None, rhs=None):
        """Delete rows ``k .. k+p-1``. A state without Q or kept data needs their contents:
        ``rows`` ((n,) or (p, n)) and ``rhs``."""
        k = self._i(k)
        if rows is None:
            self._st.delete_rows(k, self._p(p))
        else:
            rows = self._in(rows, "rows")
            if len(_shape(rows)) == 1:
                rows = rows.reshape(1, -1)
            if rhs is not None:
                rhs = self._in(rhs, "rhs")
                if len(_shape(rhs)) == 1:
                    rhs = rhs.reshape(_shape(rows)[0], -1)
            self._st.delete_rows_with(k, rows, rhs)

    def rank_one(self, u, v):
        """``A ← A + u vᵀ``."""
        u, v = self._in(u, "u"), self._in(v, "v")
        self._st.rank_one(u.reshape(-1, 1), v.reshape(-1, 1))

    def rank_k(self, U, V):
        """``A ← A + U Vᵀ`` (U (m, k), V (n, k))."""
        self._st.rank_k(self._in(U, "U"), self._in(V, "V"))

    def replace_cols(self, k, U):
        """Replace columns ``k .. k+p-1`` by ``U`` ((m,) or (m, p))."""
        U = self._in(U, "U")
        if len(_shape(U)) == 1:
            U = U.reshape(-1, 1)
        self._st.replace_cols(self._i(k), U)

    def shift_col(self, source, target):
        """Move column ``source`` to position ``target``."""
        self._st.shift_col(self._i(source), self._i(target))

    def slide(self, rows, rhs=None, drop=None, forget=None):
        """One step of a sliding window: ``rows`` ((n,) or (p, n)) with right-hand sides
        ``rhs`` enter at the bottom and the ``drop`` oldest rows (default: as many as
        enter) leave. ``forget`` sets the forgetting factor λ ∈ (0, 1] from this step on
        (rows k steps old then weigh λᵏ)."""
        rows = self._in(rows, "rows")
        if len(_shape(rows)) == 1:
            rows = rows.reshape(1, -1)
        if rhs is not None:
            rhs = self._in(rhs, "rhs")
            if len(_shape(rhs)) == 1:
                rhs = rhs.reshape(_shape(rows)[0], -1)
        p = _shape(rows)[0]
        drop = p if drop is None else int(drop)
        if drop < 0:
            raise ValueError("'drop' must be non-negative")
        self._st.slide(rows, rhs, drop, forget)

    # -- results --------------------------------------------------------------------------

    def solve(self, residuals=False):
        """The least-squares solution x (n,) or (n, k); with ``residuals=True`` also the
        residual norms ``||b - A x||`` per right-hand side."""
        x, res = self._st.solve(device=self._gpu_out)
        x = self._out(x)
        if self._vector_rhs:
            x = x.reshape(-1)
        return (x, res) if residuals else x

    @property
    def R(self):
        """R: (m, n) for ``q='full'``, (n, n) otherwise."""
        return self._out(self._st.r(device=self._gpu_out))

    @property
    def Q(self):
        """Q (m, m), Q₁ (m, n), or None for an R-only state."""
        return self._out(self._st.q(device=self._gpu_out))

    @property
    def d(self):
        """d = Qᵀb: (m, k) for ``q='full'``, (n, k) otherwise."""
        return self._out(self._st.d(device=self._gpu_out))

    @property
    def shape(self):
        """(m, n): rows and columns of the factorised matrix."""
        m, n, _ = self._st.shape
        return (m, n)

    @property
    def device(self) -> str:
        """'cpu' or 'cuda:N'."""
        return self._st.device

    @property
    def fallback(self):
        """Why ``device='auto'`` kept host data on the CPU (the size rule or no usable
        GPU), or None."""
        return self._fallback

    @property
    def dtype(self) -> str:
        """'float32' or 'float64'."""
        return self._st.dtype

    @property
    def q(self):
        """The kind of Q kept: 'thin', 'full' or None."""
        p = self._st.policy
        return None if p == "none" else p

    @property
    def batch(self):
        """The number B of problems of a batched state; None for a single problem."""
        return None

    def diagnostics(self, A, b=None):
        """Accuracy against the matrix the state stands for: ``A`` (m, n) and ``b`` (host
        arrays; ``b`` defaults to zeros). Returns e_q = ||QᵀQ − I||, e_a = ||QR − A||/||A||,
        the norm of R's lower part, e_x (against a fresh factorisation), e_gram and the drift
        record."""
        A = _Arrays.of(A).host(A, "A") if not _Arrays.of(A).on_gpu else _to_numpy(A)
        A = _host_ready(A)
        if b is None:
            b = _np.zeros((A.shape[0], self._st.shape[2]), dtype=A.dtype)
        else:
            b = _Arrays.of(b).host(b, "b") if not _Arrays.of(b).on_gpu else _to_numpy(b)
            b = _host_ready(b)
            if b.ndim == 1:
                b = b.reshape(-1, 1)
        return self._st.diagnostics(A, b)

    def drift(self):
        """The drift record: the last estimate of the loss of orthogonality (or of the
        Gram residual for R-only states) and the counts of checks and refreshes."""
        return self._st.drift()

    def check_drift(self):
        """Measure the drift now; past the threshold the state refreshes itself."""
        return self._st.check_drift()

    def __repr__(self):
        m, n = self.shape
        return f"cuqr.QR(shape=({m}, {n}), q={self.q!r}, device={self.device!r}, dtype={self.dtype!r})"


class BatchError(_np.linalg.LinAlgError):
    """Some problems of a batched :class:`QR` refused an update (or its factorisation).

    A subclass of ``numpy.linalg.LinAlgError`` (and so of ``ValueError``).

    Attributes
    ----------
    refused : list of (int, str)
        Each refusing problem's index and the reason it gave, in problem order. A refusing
        problem is left exactly as it was.
    applied : bool
        True when the other problems were updated (an update that keeps the shape: ``rank_one``,
        ``rank_k``, ``replace_cols``, ``shift_col``, a ``slide`` with as many rows in as out);
        False when no problem changed (the factorisation, and an update that changes m or n,
        which the problems make all together or not at all so that they keep one shape).
    """

    def __init__(self, message: str, refused=(), applied: bool = False):
        super().__init__(message)
        self.refused = list(refused)
        self.applied = bool(applied)


def _batch_error(op: str, batch: int, refused, applied: bool) -> BatchError:
    shown = "; ".join(f"problem {i}: {msg}" for i, msg in refused[:3])
    more = f"; and {len(refused) - 3} more" if len(refused) > 3 else ""
    outcome = "the others were updated" if applied else "no problem was changed"
    return BatchError(
        f"{op}: {len(refused)} of {batch} problems refused ({outcome}): {shown}{more}",
        refused,
        applied,
    )


class _BatchQR(QR):
    """B least-squares problems of one shape, factorised and updated together on the CPU:
    what ``cuqr.QR(A, b)`` builds for a 3-D ``A`` of shape (B, m, n) (see :class:`QR`).

    Every argument of an update carries the per-problem data of the single-problem method
    with a leading batch axis of length B (``insert_rows(k, U)``: U of shape (B, n) or
    (B, p, n)); positions (``k``, ``p``, ``drop``) are shared. Results stack the problems:
    ``R`` (B, n, n), ``Q``, ``d``, ``solve()`` (B, n) or (B, n, k).

    An error that the whole batch shares (a shape, a position, a dtype) raises
    ``ValueError`` and changes nothing. A problem can also refuse by itself (non-finite
    data, a dependent column, a failed downdate): then :class:`BatchError` is raised,
    naming the refusing problems in ``.refused``. An update that keeps m and n is applied
    to every other problem first (``.applied`` is True); one that changes m or n (rows or
    columns in or out) and the factorisation are applied to all problems or none
    (``.applied`` is False).
    """

    def __init__(self, A, b=None, q="thin", keep_data=False, device="auto"):
        policy = {"thin": "thin", "economic": "thin", "full": "full", None: "none", "r": "none"}
        if q not in policy:
            raise ValueError(f"q must be 'thin', 'full' or None, not {q!r}")
        if device not in ("auto", "cpu"):
            raise ValueError(
                f"batched states run on the CPU: pass device='auto' or 'cpu', not {device!r} "
                "(cuqr.GpuBatchQR and cuqr.GpuBatchR keep batches on a GPU)"
            )
        self._arrays = _Arrays.of(A)
        if self._arrays.on_gpu and device == "cpu":
            raise ValueError("A is a CUDA array; pass device='auto' (the batch then runs on "
                             "the CPU on a copy) or use cuqr.GpuBatchQR / cuqr.GpuBatchR")
        self._fallback = (
            None if device == "cpu" else
            "a batched QR runs on the CPU: the CUDA arrays are copied to the host and the "
            "results return to their device (cuqr.GpuBatchQR and cuqr.GpuBatchR keep batches "
            "on a GPU)" if self._arrays.on_gpu else
            "a batched QR runs on the CPU (cuqr.GpuBatchQR and cuqr.GpuBatchR keep batches "
            "on a GPU)"
        )
        A = self._host(A, "A")
        dtype = _dtype_name(A)
        if dtype not in _DTYPES:
            raise ValueError(f"cuqr supports float32 and float64 arrays, found {dtype}")
        self._dtype = dtype
        B = A.shape[0]
        if B < 1:
            raise ValueError("A must hold at least one problem (a batch size of 0)")
        self._vector_rhs = b is not None and _np.ndim(b) == 2
        if b is not None:
            b = self._host(b, "b")
            if b.ndim not in (2, 3) or b.shape[0] != B:
                raise ValueError(
                    f"'b' must have shape (B, m) or (B, m, k) with B = {B}, found {b.shape}"
                )
            if b.ndim == 2:
                b = b.reshape(B, -1, 1)
        self._gpu_out = False
        st, refused = _cuqr._BatchState.factorize(A, b, policy[q], bool(keep_data), dtype)
        if st is None:
            raise _batch_error("factorize", B, refused, False)
        self._st = st

    # -- helpers --------------------------------------------------------------------------

    def _host(self, x, name):
        """An argument as a NumPy array the extension reads (3-D ones in place; CUDA arrays
        copied to the host, from the batch's device only)."""
        a = _Arrays.of(x)
        if a.device != self._arrays.device:
            where = lambda d: "the host" if d is None else f"CUDA device {d}"  # noqa: E731
            raise ValueError(
                f"'{name}' is on {where(a.device)} but the batch's arrays are on "
                f"{where(self._arrays.device)}"
            )
        x = _host_ready(_to_numpy(x) if a.on_gpu else a.host(x, name))
        dtype = getattr(self, "_dtype", None)
        if dtype is not None and _dtype_name(x) != dtype:
            if x.dtype.kind in "iub" or (x.dtype.kind == "f" and x.size == 0):
                x = x.astype(dtype)
            else:
                raise ValueError(f"'{name}' must have the dtype of the factorisation, {dtype}")
        return x

    def _out(self, x):
        """A result as the caller's kind: on their CUDA device when A was a CUDA array."""
        if x is None or not self._arrays.on_gpu:
            return super()._out(x)
        family, dev = self._arrays.family, self._arrays.device
        if family == "cupy":
            import cupy

            with cupy.cuda.Device(dev):
                return cupy.asarray(x)
        if family == "torch-cuda":
            import torch

            return torch.as_tensor(x, device=f"cuda:{dev}")
        return x

    def _in(self, x, name, ndims, vector=None):
        """A per-problem argument with its leading batch axis: one of ``ndims``; a 2-D one
        reshaped by ``vector`` ('col': (B, r) as (B, r, 1); 'row': as (B, 1, r))."""
        x = self._host(x, name)
        B = self.batch
        if x.ndim not in ndims or x.shape[0] != B:
            want = " or ".join(f"{d}-D" for d in ndims)
            raise ValueError(
                f"'{name}' must be a {want} array with a leading batch axis of {B}, "
                f"found shape {x.shape}"
            )
        if x.ndim == 2:
            x = x.reshape(B, -1, 1) if vector == "col" else x.reshape(B, 1, -1)
        return x

    def _rhs(self, e, name, p):
        if e is None:
            return None
        e = self._in(e, name, (2, 3), "row")
        return e.reshape(self.batch, p, -1) if e.shape[1] != p else e

    def _done(self, op, out):
        applied, refused = out
        if refused:
            raise _batch_error(op, self.batch, refused, applied)

    # -- updates --------------------------------------------------------------------------

    def insert_cols(self, k, U):
        """Insert each problem's columns ``U`` ((B, m) or (B, m, p)) before column ``k``."""
        U = self._in(U, "U", (2, 3), "col")
        self._done("insert_cols", self._st.insert_cols(self._i(k), U))

    def delete_cols(self, k, p=1):
        """Delete columns ``k .. k+p-1`` of every problem."""
        self._done("delete_cols", self._st.delete_cols(self._i(k), self._p(p)))

    def insert_rows(self, k, U, e=None):
        """Insert each problem's rows ``U`` ((B, n) or (B, p, n)) with right-hand sides
        ``e`` ((B, k) per row, (B, p) for one right-hand side, or (B, p, k); zeros when
        omitted) before row ``k``."""
        U = self._in(U, "U", (2, 3), "row")
        e = self._rhs(e, "e", U.shape[1])
        self._done("insert_rows", self._st.insert_rows(self._i(k), U, e))

    def delete_rows(self, k, p=1, rows=None, rhs=None):
        """Delete rows ``k .. k+p-1`` of every problem. A batch without Q or kept data
        needs their contents: ``rows`` ((B, n) or (B, p, n)) and ``rhs``."""
        k = self._i(k)
        if rows is None:
            self._done("delete_rows", self._st.delete_rows(k, self._p(p)))
        else:
            rows = self._in(rows, "rows", (2, 3), "row")
            rhs = self._rhs(rhs, "rhs", rows.shape[1])
            self._done("delete_rows", self._st.delete_rows_with(k, rows, rhs))

    def rank_one(self, u, v):
        """``A ← A + u vᵀ`` per problem (u (B, m), v (B, n); or (B, m, 1), (B, n, 1))."""
        u, v = self._in(u, "u", (2, 3), "col"), self._in(v, "v", (2, 3), "col")
        self._done("rank_one", self._st.rank_one(u, v))

    def rank_k(self, U, V):
        """``A ← A + U Vᵀ`` per problem (U (B, m, k), V (B, n, k))."""
        U, V = self._in(U, "U", (3,)), self._in(V, "V", (3,))
        self._done("rank_k", self._st.rank_k(U, V))

    def replace_cols(self, k, U):
        """Replace columns ``k .. k+p-1`` of each problem by its ``U`` ((B, m) or
        (B, m, p))."""
        U = self._in(U, "U", (2, 3), "col")
        self._done("replace_cols", self._st.replace_cols(self._i(k), U))

    def shift_col(self, source, target):
        """Move column ``source`` of every problem to position ``target``."""
        self._done("shift_col", self._st.shift_col(self._i(source), self._i(target)))

    def slide(self, rows, rhs=None, drop=None, forget=None):
        """One window step per problem: ``rows`` ((B, n) or (B, p, n)) with right-hand
        sides ``rhs`` enter at the bottom and the ``drop`` oldest rows (default: as many as
        enter) leave. ``forget`` sets every problem's forgetting factor λ from this step
        on (left as it was when no problem was updated)."""
        rows = self._in(rows, "rows", (2, 3), "row")
        rhs = self._rhs(rhs, "rhs", rows.shape[1])
        drop = rows.shape[1] if drop is None else int(drop)
        if drop < 0:
            raise ValueError("'drop' must be non-negative")
        self._done("slide", self._st.slide(rows, rhs, drop, forget))

    # -- results --------------------------------------------------------------------------

    def solve(self, residuals=False):
        """Each problem's least-squares solution: x (B, n), or (B, n, k) for 3-D b; with
        ``residuals=True`` also the residual norms ``||b - A x||`` (B, k). Raises
        :class:`BatchError` if a problem's solve failed."""
        x, res, failed = self._st.solve()
        if failed:
            raise _batch_error("solve", self.batch, failed, False)
        if self._vector_rhs:
            x = x.reshape(x.shape[0], -1)
        x = self._out(x)
        return (x, self._out(res)) if residuals else x

    @property
    def R(self):
        """R of every problem: (B, m, n) for ``q='full'``, (B, n, n) otherwise."""
        return self._out(self._st.r())

    @property
    def Q(self):
        """Q (B, m, m), Q₁ (B, m, n), or None for an R-only batch."""
        return self._out(self._st.q())

    @property
    def d(self):
        """d = Qᵀb of every problem: (B, m, k) for ``q='full'``, (B, n, k) otherwise."""
        return self._out(self._st.d())

    @property
    def shape(self):
        """(m, n): rows and columns of every problem's matrix."""
        _, m, n, _ = self._st.shape
        return (m, n)

    @property
    def batch(self):
        """The number B of problems."""
        return self._st.shape[0]

    @property
    def device(self) -> str:
        """'cpu' (batched states run on the CPU)."""
        return "cpu"

    def diagnostics(self, A, b=None):
        """Not available for a batch: run it on a single problem's ``cuqr.QR``."""
        raise NotImplementedError("diagnostics is not available for a batched QR")

    def drift(self):
        """Each problem's drift record (a list of B dicts)."""
        return self._st.drift()

    def check_drift(self):
        """Measure every problem's drift now (refreshing those past the threshold): a list
        of B drift records, or the error message of a problem whose refresh failed."""
        return self._st.check_drift()

    def __repr__(self):
        m, n = self.shape
        return (
            f"cuqr.QR(batch={self.batch}, shape=({m}, {n}), q={self.q!r}, "
            f"device='cpu', dtype={self.dtype!r})"
        )


def _to_numpy(x):
    mod = type(x).__module__.split(".")[0]
    if mod == "torch":
        return x.detach().cpu().numpy()
    if mod == "cupy":
        return x.get()
    return _np.asarray(x)


# ---------------------------------------------------------------------------------------
# Small states on the GPU: one launch a row
# ---------------------------------------------------------------------------------------


class SmallState:
    """A least-squares problem of n <= 64 columns on one GPU, updated one row at a time in
    one kernel launch each, without waiting for the device.

    ``SmallState(A, b)`` keeps a window of the m rows of A (m x n, m >= n) and b: each
    :meth:`slide` adds a row and removes the oldest. ``SmallState(A, b, forget=lam)`` is a
    recursive state: each :meth:`push` weighs the rows so far by ``lam`` (0 < lam <= 1) and
    adds one. A and b are float32 or float64 (NumPy, CuPy or torch; copied once).

    A step's row is a 1-D NumPy array ``x`` with a float ``y`` (passed with the launch), or,
    for :meth:`slide`, a 1-D CUDA array ``x`` (CuPy, torch) with a one-entry CUDA array
    ``y`` such as ``y[t:t+1]`` (read on the device). With ``record=T`` step t's solution
    goes to the device as well; :meth:`recorded` returns them all.

    A step the device refuses (removing a row that leaves the rest unable to determine the
    solution, a non-finite row read on the device) leaves the state as it was and records
    NaN; :meth:`sync` waits and reports. Arguments checked on the host (sizes, a
    non-finite host row) raise at once.

    Example::

        st = cuqr.SmallState(X[:252], y[:252], record=len(X) - 252)
        for t in range(252, len(X)):
            st.slide(X[t], y[t])
        report = st.sync()          # {'steps': ..., 'refused': 0, ...}
        params, rss = st.recorded()  # (T - 252, n) and (T - 252,)
    """

    def __init__(self, A, b, *, forget=None, device: int = 0, record: int = 0,
                 refresh_every=None, rank_tol=None):
        A = _np.ascontiguousarray(_to_numpy(A))
        if A.dtype not in (_np.float32, _np.float64):
            A = A.astype(_np.float64)
        b = _np.ascontiguousarray(_to_numpy(b), dtype=A.dtype).reshape(-1)
        if A.ndim != 2:
            raise ValueError(f"A must be 2-D, got {A.ndim} dimensions")
        self._s = _cuqr.SmallState(A, b, forget, int(device), int(record), refresh_every,
                                   rank_tol)
        # The hot calls go straight to the extension (no Python frame a step).
        self.slide = self._s.slide
        self.push = self._s.push

    def sync(self) -> dict:
        """Waits for the queued steps; returns steps, refused, first_refused, last_reason
        and solves_refused since the state was made."""
        return self._s.sync()

    def solve(self):
        """Waits; the least-squares solution (x, rss) of the state as it is (NaN x where
        the rank test fails)."""
        return self._s.solve()

    def recorded(self):
        """Waits; the recorded solutions: x of shape (steps, n) and rss of shape (steps,)."""
        return self._s.recorded()

    def clear_recording(self) -> None:
        """Empties the recording; the next step is recorded as step 0."""
        self._s.clear_recording()

    def refresh(self) -> None:
        """Queues the window's refactorisation from its kept rows (done every
        ``refresh_every`` steps anyway; 16·m by default)."""
        self._s.refresh()

    @property
    def shape(self):
        return self._s.shape

    @property
    def dtype(self) -> str:
        return self._s.dtype

    def __repr__(self) -> str:
        m, n = self.shape
        return f"cuqr.SmallState(shape=({m}, {n}), dtype={self.dtype!r})"


# ---------------------------------------------------------------------------------------
# Rolling and recursive least squares (CPU and GPU)
# ---------------------------------------------------------------------------------------


def _rolling_inputs(y, X, name: str):
    """y as a C-contiguous (T, S) array and X as (T, k) or (T, S, k), one float dtype;
    whether y was 1-D. Host arrays only (GPU arrays go to :func:`_rolling_on_device`)."""
    y = _Arrays.of(y).host(y, "y")
    X = _Arrays.of(X).host(X, "X")
    dtype = _np.result_type(y.dtype, X.dtype, _np.float32)
    if dtype not in (_np.float32, _np.float64):
        dtype = _np.float64
    if y.ndim not in (1, 2):
        raise ValueError(f"{name}: y must be 1-D (T,) or 2-D (T, S), got {y.ndim}-D")
    one = y.ndim == 1
    y2 = y.reshape(y.shape[0], 1) if one else y
    T, S = y2.shape
    if X.ndim == 2:
        if X.shape[0] != T:
            raise ValueError(f"{name}: X has {X.shape[0]} rows, y has {T}")
    elif X.ndim == 3:
        if X.shape[:2] != (T, S):
            raise ValueError(
                f"{name}: a 3-D X must have shape (T, S, k) = ({T}, {S}, k), got {X.shape}"
            )
    else:
        raise ValueError(f"{name}: X must be 2-D (T, k) or 3-D (T, S, k), got {X.ndim}-D")
    if X.shape[-1] == 0:
        raise ValueError(f"{name}: X has no columns")
    y2 = _np.ascontiguousarray(y2, dtype=dtype)
    X = _np.ascontiguousarray(X, dtype=dtype)
    return y2, X, one


def _rolling_outputs(out, one: bool, return_rss: bool, device: str):
    params, rss, _flags, fallback, _counts = out
    if fallback is not None and device.startswith("cuda"):
        import warnings

        warnings.warn(fallback, RuntimeWarning, stacklevel=3)
    if one:
        params, rss = params[:, 0, :], rss[:, 0]
    return (params, rss) if return_rss else params


def _on_gpu(*xs) -> bool:
    return any(_Arrays.of(a).on_gpu or hasattr(a, "__cuda_array_interface__") for a in xs)


def _rolling_on_device(y, X, name: str, device: str, return_rss: bool, **kw):
    """The GPU walk on CUDA arrays (CuPy or PyTorch), results as the caller's kind."""
    arrays = _Arrays.of(y)
    if _Arrays.of(X).device != arrays.device or arrays.device is None:
        raise ValueError(f"{name}: y and X must both be CUDA arrays on one device")
    if device == "cpu":
        raise ValueError(
            f"{name}: device='cpu' but the data are CUDA arrays; copy them to the host "
            "first, or leave device='auto'"
        )
    if arrays.family == "cupy":
        import cupy as xp

        f32 = y.dtype == xp.float32 and X.dtype == xp.float32
        dtype = xp.float32 if f32 else xp.float64
        conv = lambda a: xp.ascontiguousarray(a, dtype=dtype)  # noqa: E731
    elif arrays.family == "torch-cuda":
        import torch

        f32 = y.dtype == torch.float32 and X.dtype == torch.float32
        dtype = torch.float32 if f32 else torch.float64
        conv = lambda a: a.detach().to(dtype).contiguous()  # noqa: E731
    else:
        raise ValueError(f"{name}: GPU arrays must come from CuPy or PyTorch")
    if y.ndim not in (1, 2):
        raise ValueError(f"{name}: y must be 1-D (T,) or 2-D (T, S), got {y.ndim}-D")
    one = y.ndim == 1
    y2 = conv(y.reshape(y.shape[0], 1) if one else y)
    T, S = y2.shape
    if X.ndim == 2 and X.shape[0] != T:
        raise ValueError(f"{name}: X has {X.shape[0]} rows, y has {T}")
    if X.ndim == 3 and tuple(X.shape[:2]) != (T, S):
        raise ValueError(
            f"{name}: a 3-D X must have shape (T, S, k) = ({T}, {S}, k), got {tuple(X.shape)}"
        )
    if X.ndim not in (2, 3):
        raise ValueError(f"{name}: X must be 2-D (T, k) or 3-D (T, S, k), got {X.ndim}-D")
    k = X.shape[-1]
    if k == 0:
        raise ValueError(f"{name}: X has no columns")
    per_series = X.ndim == 3
    X2 = conv(X).reshape(T, S * k) if per_series else conv(X)
    params, rss, _counts = _cuqr.rolling_device(y2, X2, k, per_series, arrays.device, **kw)
    params = arrays.out(params).T.reshape(T, S, k)
    rss = arrays.out(rss).T
    if one:
        params, rss = params[:, 0, :], rss[:, 0]
    return (params, rss) if return_rss else params


def rolling_lstsq(
    y,
    X,
    window: int,
    *,
    min_nobs=None,
    expanding: bool = False,
    forget=None,
    missing: str = "drop",
    return_rss: bool = False,
    device: str = "auto",
):
    """Rolling least squares of many series: statsmodels' ``RollingOLS(y, X, window)``,
    by QR updating.

    Parameters
    ----------
    y : array, shape (T,) or (T, S)
        One series, or S series side by side.
    X : array, shape (T, k) or (T, S, k)
        Regressors shared by every series, or one design per series. Add a column of
        ones for an intercept (as with ``RollingOLS``).
    window : int
        Observations per window; the estimate at t uses rows t-window+1 .. t.
    min_nobs : int, optional
        Finite observations a window needs (k <= min_nobs <= window; default k).
    expanding : bool
        Estimate the shorter windows at the start too, once they hold ``min_nobs``
        observations.
    forget : float, optional
        Exponential forgetting in (0, 1] inside each window: an observation a steps old
        weighs ``forget**a`` (default 1).
    missing : {'drop', 'skip', 'raise'}
        Rows with NaN or inf in y or X: left out of each window ('drop', the default, as
        ``RollingOLS``), NaN estimates for every window holding one ('skip'), or
        ``ValueError`` ('raise').
    return_rss : bool
        Also return the residual sum of squares of each window (``RollingOLS``'s ``ssr``).
    device : {'auto', 'cpu', 'cuda', 'cuda:N'}
        CUDA arrays (CuPy, PyTorch) run on their GPU and return CUDA arrays of the same
        library ('cpu' refuses them). Host arrays: 'auto' (the default) takes GPU 0 when
        T·S·k² reaches ``2.5e7`` and a GPU opens, else the CPU; 'cuda' runs on the GPU
        (k <= 16 there; more regressors run on the CPU with a ``RuntimeWarning``).

    Returns
    -------
    params : ndarray, shape (T, k) or (T, S, k)
        NaN where a window has no estimate: before the first full window (or before
        ``min_nobs`` rows under ``expanding``), too few finite rows, a missing row under
        'skip', or a rank-deficient window (where ``RollingOLS`` would return the result
        of inverting a singular XᵀX).
    rss : ndarray, shape (T,) or (T, S)
        Only with ``return_rss=True``.

    The computation releases the interpreter lock and runs the series in parallel
    (``cuqr.set_threads``; on a GPU one thread per series and time segment). float32
    inputs compute in float32, others in float64.

    Example
    -------
    >>> import numpy as np, cuqr
    >>> rng = np.random.default_rng(0)
    >>> X = np.column_stack([np.ones(500), rng.standard_normal((500, 2))])
    >>> y = X @ [1.0, 2.0, -1.0] + 0.1 * rng.standard_normal(500)
    >>> params = cuqr.rolling_lstsq(y, X, window=60)
    >>> params.shape, bool(np.isnan(params[58]).all()), np.round(params[-1], 1).tolist()
    ((500, 3), True, [1.0, 2.0, -1.0])
    """
    if _on_gpu(y, X):
        return _rolling_on_device(
            y, X, "rolling_lstsq", device, return_rss, window=int(window),
            min_nobs=None if min_nobs is None else int(min_nobs), expanding=bool(expanding),
            forget=None if forget is None else float(forget), missing=missing, rank_tol=None,
            recursive=False,
        )
    y2, X, one = _rolling_inputs(y, X, "rolling_lstsq")
    out = _cuqr.rolling(
        y2, X, int(window), None if min_nobs is None else int(min_nobs), bool(expanding),
        None if forget is None else float(forget), missing, None, None, device,
    )
    return _rolling_outputs(out, one, return_rss, device)


def recursive_lstsq(
    y, X, forget: float = 1.0, *, missing: str = "drop", return_rss: bool = False,
    device: str = "auto",
):
    """Recursive least squares with exponential forgetting, by QR updating.

    ``params[t]`` minimises ``sum_{s<=t} forget**(t-s) * (y[s] - X[s] @ beta)**2``; NaN
    until the observations so far determine beta (at least k of them, full rank).
    Shapes, ``missing``, ``return_rss`` and ``device`` as for :func:`rolling_lstsq`;
    ``forget`` in (0, 1] (1: ordinary least squares of everything so far).

    Example
    -------
    >>> import numpy as np, cuqr
    >>> X = np.column_stack([np.ones(100), np.arange(100.0)])
    >>> params = cuqr.recursive_lstsq(3.0 + 0.5 * np.arange(100.0), X, forget=0.99)
    >>> bool(np.isnan(params[0]).all()), np.round(params[-1], 6).tolist()
    (True, [3.0, 0.5])
    """
    if _on_gpu(y, X):
        return _rolling_on_device(
            y, X, "recursive_lstsq", device, return_rss, window=max(int(y.shape[0]), 1),
            min_nobs=None, expanding=True, forget=float(forget), missing=missing,
            rank_tol=None, recursive=True,
        )
    y2, X, one = _rolling_inputs(y, X, "recursive_lstsq")
    out = _cuqr.recursive(y2, X, float(forget), missing, None, device)
    return _rolling_outputs(out, one, return_rss, device)


# ---------------------------------------------------------------------------------------
# Batches on the GPU: one launch a call over B thin-Q problems
# ---------------------------------------------------------------------------------------


def _flat1d(x, dtype: str, name: str):
    """``x`` flattened to 1-D in C order, as the extension reads it: a NumPy array of
    ``dtype``, or a CUDA array (CuPy, torch) of that dtype, contiguous (copied on the device
    only when it is not)."""
    mod = type(x).__module__.split(".")[0]
    if mod == "torch":
        if str(x.dtype).replace("torch.", "") != dtype:
            raise TypeError(f"{name} is {x.dtype}, the batch {dtype}")
        if x.device.type == "cuda":
            return x.contiguous().reshape(-1)
        x = x.detach().numpy()
    elif mod == "cupy":
        if str(x.dtype) != dtype:
            raise TypeError(f"{name} is {x.dtype}, the batch {dtype}")
        return x.ravel()
    a = _np.asarray(x)
    if a.dtype.kind not in "fiu":
        raise TypeError(f"{name} must hold real numbers, got {a.dtype}")
    return _np.ascontiguousarray(a, dtype=dtype).reshape(-1)


class _GpuBank:
    """What the GPU batches share: shape, dtype, the refusal check, row arguments and the
    solve (``_flat`` reads an array argument as the extension takes it)."""

    _flat = staticmethod(_flat1d)

    @property
    def shape(self):
        """(B, m, n)."""
        return self._s.shape()

    @property
    def dtype(self) -> str:
        return self._dtype

    def _check(self, op: str, res):
        applied, refused = res
        if refused:
            raise _batch_error(op, self.shape[0], refused, applied)

    def _rows(self, rows, rhs, op: str):
        B, _, n = self.shape
        rs = tuple(rows.shape)
        if len(rs) == 2:
            rs = (rs[0], 1, rs[1])
        if len(rs) != 3 or rs[0] != B or rs[2] != n:
            raise ValueError(f"{op}: rows must be (B, p, n) or (B, n) with B={B}, n={n}")
        p = rs[1]
        if tuple(rhs.shape) not in ((B, p), (B, p, 1)) and not (p == 1 and tuple(rhs.shape) == (B,)):
            raise ValueError(f"{op}: rhs must be (B, p) = {(B, p)}, got {tuple(rhs.shape)}")
        return p, self._flat(rows, self._dtype, "rows"), self._flat(rhs, self._dtype, "rhs")

    def rank_one(self, u, v) -> None:
        """A + u vᵀ for every problem: u (B, m), v (B, n)."""
        B, m, n = self.shape
        if tuple(u.shape) not in ((B, m), (B, m, 1)) or tuple(v.shape) not in ((B, n), (B, n, 1)):
            raise ValueError(f"rank_one: u must be (B, m) = {(B, m)} and v (B, n) = {(B, n)}")
        self._check("rank_one", self._s.rank_one(self._flat(u, self._dtype, "u"),
                                                 self._flat(v, self._dtype, "v")))

    def rank_k(self, U, V) -> None:
        """A + U Vᵀ for every problem: U (B, m, k), V (B, n, k); k rank-one updates in one
        launch."""
        B, m, n = self.shape
        us, vs = tuple(U.shape), tuple(V.shape)
        if len(us) != 3 or us[:2] != (B, m) or vs != (B, n, us[2]):
            raise ValueError(f"rank_k: U must be (B, m, k) with (B, m) = {(B, m)} and V (B, n, k)")
        self._check("rank_k", self._s.rank_k(self._flat(U, self._dtype, "U"),
                                             self._flat(V, self._dtype, "V"), us[2]))

    def delete_cols(self, k: int, p: int = 1) -> None:
        """Deletes columns k..k+p of every problem (at least one column stays).
        All-or-nothing."""
        n = self.shape[2]
        k = _index(k, 0, n)
        self._check("delete_cols", self._s.delete_cols(k, int(p)))

    def _cols(self, U, op: str):
        B, m, _ = self.shape
        us = tuple(U.shape)
        if len(us) == 2:
            us = (us[0], us[1], 1)
        if len(us) != 3 or us[:2] != (B, m):
            raise ValueError(f"{op}: columns must be (B, m, p) or (B, m) with (B, m) = {(B, m)}")
        return us[2], self._flat(U, self._dtype, "U")

    def insert_cols(self, k: int, U) -> None:
        """Inserts p columns before column k (0 <= k <= n) in every problem: U (B, m, p) or
        (B, m). A problem whose new column lies in the span of its columns refuses the whole
        call (:class:`BatchError`). All-or-nothing."""
        p, u = self._cols(U, "insert_cols")
        k = _index(k, 0, self.shape[2])
        self._check("insert_cols", self._s.insert_cols(k, p, u))

    def replace_cols(self, k: int, U) -> None:
        """Replaces columns k..k+p of every problem by U (B, m, p) or (B, m) (at least one
        old column stays). Whether a refusal leaves the other problems updated is the
        class's rule (its docstring); :class:`BatchError` says (``.applied``)."""
        p, u = self._cols(U, "replace_cols")
        k = _index(k, 0, self.shape[2])
        self._check("replace_cols", self._s.replace_cols(k, p, u))

    def shift_col(self, source: int, target: int) -> None:
        """Moves column ``source`` of every problem to position ``target``, the columns
        between closing up. A problem whose columns are dependent refuses
        (:class:`BatchError`; the class's rule says whether the others proceed)."""
        n = self.shape[2]
        source, target = _index(source, 0, n - 1), _index(target, 0, n - 1)
        self._check("shift_col", self._s.shift_col(source, target))

    def solve(self):
        """``(x, resid)``: NumPy arrays (B, n) and (B,), the least-squares solutions and
        residual norms; :class:`BatchError` names the problems whose R failed the rank test
        (their x is NaN)."""
        B, _, n = self.shape
        x, r, failed = self._s.solve()
        if failed:
            raise _batch_error("solve", B, failed, True)
        return x.reshape(B, n), r


class GpuBatchQR(_GpuBank):
    """B least-squares problems of one shape (m x n, n <= 32, one right-hand side each) on
    one GPU, each kept as a thin QR factorisation (Q: m x n, R: n x n, and b), updated by
    one kernel launch a call over the whole batch (by default one GPU lane a row).

    ``A`` is (B, m, n) and ``b`` (B, m): NumPy arrays (copied to the GPU) or CuPy arrays and
    CUDA torch tensors (read on the device). Update arguments carry a leading batch axis
    and may live on the host or the device alike. float32 or float64.

    A problem can refuse by itself: non-finite data, or a row deletion that would leave its
    remaining rows unable to determine R. :meth:`rank_one` and :meth:`slide` then update the
    other problems and raise :class:`BatchError` with ``.applied`` True; :meth:`insert_rows`,
    :meth:`delete_rows` and the factorisation change m and are all-or-nothing (``.applied``
    False). A refusing problem is left exactly as it was. Arguments that the batch shares
    (shapes, positions, dtypes) raise ``ValueError`` or ``TypeError`` and change nothing.

    ``q="full"`` keeps each problem's full Q (m x m: the thin Q and an orthonormal basis of
    its complement, carried over every update; ``factors()`` then returns Q of shape
    (B, m, m)) at the cost of m x (m - n) more elements a problem and about one more pass
    over them an update.

    Example::

        bank = cuqr.GpuBatchQR(A, b)               # A: (10000, 64, 8), b: (10000, 64)
        bank.rank_one(u, v)                        # u: (10000, 64), v: (10000, 8)
        bank.insert_rows(64, rows, rhs)            # rows: (10000, 1, 8), rhs: (10000, 1)
        x, resid = bank.solve()                    # (10000, 8), (10000,)
    """

    def __init__(self, A, b, *, q: str = "thin", device: int = 0):
        if q not in ("thin", "economic", "full"):
            raise ValueError(f"q must be 'thin' or 'full', not {q!r}")
        shape = tuple(A.shape)
        if len(shape) != 3:
            raise ValueError(f"A must be 3-D (B, m, n), got shape {shape}")
        B, m, n = shape
        dtype = str(A.dtype).replace("torch.", "")
        if dtype not in _DTYPES:
            dtype = "float64"
        bshape = tuple(b.shape)
        if bshape not in ((B, m), (B, m, 1)):
            raise ValueError(f"b must be (B, m) = {(B, m)}, got shape {bshape}")
        self._s = _cuqr.GpuBatchQR(
            _flat1d(A, dtype, "A"), _flat1d(b, dtype, "b"), B, m, n,
            64 if dtype == "float64" else 32, int(device), q == "full",
        )
        self._dtype = dtype


    def insert_rows(self, k: int, rows, rhs) -> None:
        """Inserts p rows at position k (0 <= k <= m) in every problem: rows (B, p, n) or
        (B, n), rhs (B, p) or (B,). All-or-nothing."""
        p, r, e = self._rows(rows, rhs, "insert_rows")
        m = self.shape[1]
        k = _index(k, 0, m + 1)
        self._check("insert_rows", self._s.insert_rows(k, p, r, e))

    def delete_rows(self, k: int, p: int = 1) -> None:
        """Deletes rows k..k+p of every problem. All-or-nothing."""
        m = self.shape[1]
        k = _index(k, 0, m)
        self._check("delete_rows", self._s.delete_rows(k, int(p)))

    def slide(self, rows, rhs, *, forget: float = 1.0) -> None:
        """A window step of every problem: the rows so far weighted by ``forget``, p new rows
        (B, p, n) appended, the p oldest deleted."""
        p, r, e = self._rows(rows, rhs, "slide")
        self._check("slide", self._s.slide(p, r, e, float(forget)))


    def check_drift(self, tol=None):
        """Drift control: measures every problem's ‖QᵀQ − I‖_F and refreshes, in place, the
        problems above ``tol`` (default 10·max(m, n)·u; 0 refreshes all) by a QR of their
        Q, which leaves their A as it was. Returns ``(estimates, refreshed, failed)``: a
        NumPy array (B,) of the estimates before the refresh, and the lists of problems
        refreshed and of those whose refresh was not finite (left as they were)."""
        e, refreshed, failed = self._s.check_drift(None if tol is None else float(tol))
        return e, list(refreshed), list(failed)

    def factors(self):
        """``(Q, R, b)`` as NumPy arrays (B, m, n) (or (B, m, m) with ``q="full"``),
        (B, n, n) and (B, m)."""
        B, m, n = self.shape
        q, r, b = self._s.factors()
        k = m if self._s.is_full() else n
        return q.reshape(B, k, m).transpose(0, 2, 1), r.reshape(B, n, n), b.reshape(B, m)

    def __repr__(self):
        B, m, n = self.shape
        return f"cuqr.GpuBatchQR(batch={B}, shape=({m}, {n}), dtype={self._dtype!r})"


class GpuBatchR(_GpuBank):
    """B least-squares problems of one shape (m x n, n <= 16, one right-hand side each) on
    one GPU, each kept as its triangular factor R, d = Qᵀb and the residual norm (the R-only
    kind): banks of recursive-least-squares or square-root information filters, one model
    per group. Each call is a fixed number of kernel launches over the batch, one GPU
    thread a problem.

    ``A`` is (B, m, n) and ``b`` (B, m), float32 or float64: NumPy arrays (copied to the
    GPU) or CuPy arrays and CUDA torch tensors (read on the device), as every update
    argument.

    Without kept data (the default) rows enter and leave by Givens rotations and downdates,
    and the rows that leave are given (as they entered, or as weighted now under
    forgetting): ``delete_rows(rows, rhs)``, ``slide(rows, rhs, old_rows, old_rhs)``.
    With ``keep_data=True`` every problem's rows stay on the GPU (B·m·(n + 1) more
    values): rows leave by position (``delete_rows(k, p)``, ``slide(rows, rhs)`` drops the
    oldest), and :meth:`rank_one`, :meth:`rank_k`, :meth:`insert_cols`,
    :meth:`replace_cols`, :meth:`shift_col` and :meth:`refactorize` work, each problem
    refolded from its updated rows.

    :meth:`slide` with as many rows in as out, :meth:`rank_one`, :meth:`rank_k`,
    :meth:`replace_cols` and :meth:`shift_col` proceed per problem: a problem whose data
    are not finite, whose downdate is refused or whose new R fails the rank test is left as
    it was and named in the :class:`BatchError` it raises (``.applied`` True).
    :meth:`insert_rows`, :meth:`delete_rows`, :meth:`insert_cols`, :meth:`delete_cols` and
    the factorisation change the shape and are all-or-nothing (``.applied`` False).

    Example::

        bank = cuqr.GpuBatchR(A, b)                  # A: (10000, 64, 8), b: (10000, 64)
        bank.slide(new_rows, new_rhs, A[:, 0], b[:, 0], forget=0.99)
        x, resid = bank.solve()                      # (10000, 8), (10000,)

        kept = cuqr.GpuBatchR(A, b, keep_data=True)
        kept.slide(new_rows, new_rhs, forget=0.99)   # the oldest row of each leaves
        kept.rank_one(u, v)                          # u: (10000, 64), v: (10000, 8)
    """

    def __init__(self, A, b, *, keep_data: bool = False, device: int = 0):
        shape = tuple(A.shape)
        if len(shape) != 3:
            raise ValueError(f"A must be 3-D (B, m, n), got shape {shape}")
        B, m, n = shape
        dtype = str(A.dtype).replace("torch.", "")
        if dtype not in _DTYPES:
            dtype = "float64"
        if tuple(b.shape) not in ((B, m), (B, m, 1)):
            raise ValueError(f"b must be (B, m) = {(B, m)}, got shape {tuple(b.shape)}")
        self._dtype = dtype
        self._s = _cuqr.GpuBatchR(
            _flat1d(A, dtype, "A"), _flat1d(b, dtype, "b"), B, m, n,
            64 if dtype == "float64" else 32, int(device), bool(keep_data),
        )

    @property
    def keeps_data(self) -> bool:
        """Whether every problem's rows are kept on the GPU (``keep_data=True``)."""
        return self._s.keeps_data()

    def insert_rows(self, *args) -> None:
        """``insert_rows(rows, rhs)`` appends rows (B, p, n) or (B, n) with right-hand sides
        (B, p) or (B,); ``insert_rows(k, rows, rhs)`` inserts them at position k
        (0 <= k <= m; with kept data it places them in the kept rows). All-or-nothing."""
        if len(args) == 3:
            k, rows, rhs = args
            k = _index(k, 0, self.shape[1] + 1)
        elif len(args) == 2:
            (rows, rhs), k = args, self.shape[1]
        else:
            raise TypeError("insert_rows takes (rows, rhs) or (k, rows, rhs)")
        p, r, e = self._rows(rows, rhs, "insert_rows")
        self._check("insert_rows", self._s.insert_rows(k, p, r, e))

    def delete_rows(self, rows, rhs=None) -> None:
        """``delete_rows(rows, rhs)`` takes out the rows given (B, p, n) or (B, n) with their
        right-hand sides, as they entered (without kept data); ``delete_rows(k, p=1)`` takes
        out rows k..k+p of every problem (with kept data). All-or-nothing."""
        if self.keeps_data:
            p = 1 if rhs is None else int(rhs)
            k = _index(rows, 0, self.shape[1] - 1)
            self._check("delete_rows", self._s.delete_rows_at(k, p))
            return
        if rhs is None or isinstance(rows, (int, _np.integer)):
            raise ValueError("delete_rows: this batch keeps no rows: give the rows and their "
                             "right-hand sides (or build it with keep_data=True)")
        p, r, e = self._rows(rows, rhs, "delete_rows")
        self._check("delete_rows", self._s.delete_rows(p, r, e))

    def slide(self, rows, rhs, old_rows=None, old_rhs=None, *, forget: float = 1.0,
              drop=None) -> None:
        """A window step: the rows so far weighted by ``forget``, ``rows`` in. Without kept
        data ``old_rows`` (with ``old_rhs``) go out, as they stand after the weighting; with
        kept data the oldest ``drop`` rows go out (default: as many as come in)."""
        p, r, e = self._rows(rows, rhs, "slide")
        if self.keeps_data:
            if old_rows is not None:
                raise ValueError("slide: this batch keeps its rows; the oldest leave by "
                                 "position (drop=...), not given")
            drop = p if drop is None else int(drop)
            self._check("slide", self._s.slide_kept(p, r, e, drop, float(forget)))
            return
        if old_rows is None or old_rhs is None:
            raise ValueError("slide: this batch keeps no rows: give old_rows and old_rhs "
                             "(or build it with keep_data=True)")
        q, o, f = self._rows(old_rows, old_rhs, "slide")
        self._check("slide", self._s.slide(p, r, e, q, o, f, float(forget)))

    def refactorize(self) -> None:
        """Folds every problem afresh from its kept rows (drift control). Needs
        ``keep_data=True``."""
        self._check("refactorize", self._s.refactorize())

    def kept_data(self):
        """``(A, b)``: the kept rows as NumPy arrays (B, m, n) and (B, m), weighted as they
        now stand. Needs ``keep_data=True``."""
        B, m, n = self.shape
        a, b = self._s.kept_data()
        return a.reshape(B, m, n), b.reshape(B, m)

    def factors(self):
        """``(R, d, rho)`` as NumPy arrays (B, n, n), (B, n) and (B,)."""
        B, _, n = self.shape
        r, d, rho = self._s.factors()
        return r.reshape(B, n, n), d.reshape(B, n), rho

    def __repr__(self):
        B, m, n = self.shape
        return f"cuqr.GpuBatchR(batch={B}, shape=({m}, {n}), dtype={self._dtype!r})"
