"""Every memory layout NumPy can hand over is read correctly (or refused with a clean error).

For each function and each ``cuqr.QR`` method that takes arrays, Hypothesis draws the
arguments' dtypes and, for every argument on its own, a layout built from a chain of
transformations: C or Fortran order, a strided view into a larger buffer, negative strides,
zero strides (broadcast), a field of a structured array (strides that are not a multiple of
the item size), non-native byte order, an unaligned buffer, a read-only array, and empty
shapes. The call must give the same result as the same call on plain C-contiguous copies
(native byte order), or raise the same clean exception (``ValueError``, ``TypeError``,
``numpy.linalg.LinAlgError``); an ``overwrite_*=False`` call must leave its inputs as they
were. The SciPy-style functions take float32, float64, complex64 and complex128 and any
shape (wide ones too); ``cuqr.QR`` float32 and float64. Other dtypes (integers, bool,
float16) are refused with a ``ValueError`` wherever SciPy refuses them.

``CUQR_LAYOUT_EXAMPLES`` sets the number of examples per test (default sized for CI).
"""

from __future__ import annotations

import os

import numpy as np
import pytest
import scipy.linalg as sl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cuqr

CLEAN = (ValueError, TypeError, np.linalg.LinAlgError)
EXAMPLES = int(os.environ.get("CUQR_LAYOUT_EXAMPLES", "60"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=list(HealthCheck),
)

FLOATS = ["float32", "float64"]
COMPLEX = ["complex64", "complex128"]
OTHERS = ["int64", "int32", "uint8", "bool", "float16"]
STEPS = ["F", "strided", "negative", "broadcast", "field", "field_F", "swapped", "unaligned"]


# ---------------------------------------------------------------------------------------
# Layouts
# ---------------------------------------------------------------------------------------


def relayout(x, step, r):
    """``x``'s values (and dtype) in another layout; ``r`` is a list of small integers that
    picks the details. "broadcast" changes the values (one row or column repeated)."""
    if step == "F":
        return np.asfortranarray(x)
    if step == "strided":
        steps = [1 + r[i % len(r)] % 3 for i in range(x.ndim)]
        offs = [r[(i + 1) % len(r)] % 2 for i in range(x.ndim)]
        base = np.zeros([s * n + o for s, n, o in zip(steps, x.shape, offs)], dtype=x.dtype)
        view = base[tuple(slice(o, o + s * n, s) for s, n, o in zip(steps, x.shape, offs))]
        view[...] = x
        return view
    if step == "negative":
        flips = tuple(
            slice(None, None, -1) if (r[i % len(r)] + i) % 2 == 0 else slice(None)
            for i in range(x.ndim)
        )
        b = np.empty_like(x)[flips]
        b[...] = x
        return b
    if step == "broadcast":
        axis = r[0] % x.ndim
        if x.shape[axis] == 0:
            return x
        one = np.take(x, [0], axis=axis)
        return np.broadcast_to(one, x.shape)
    if step in ("field", "field_F"):
        junk = 1 + r[0] % 5
        rec = np.dtype([("a", x.dtype), ("junk", f"S{junk}")])
        b = np.zeros(x.shape, rec, order="F" if step == "field_F" else "C")
        c = b["a"]
        c[...] = x
        return c
    if step == "swapped":
        return x.astype(x.dtype.newbyteorder())
    if step == "unaligned":
        buf = np.zeros(x.nbytes + 1, np.uint8)
        y = buf[1:].view(x.dtype).reshape(x.shape)
        y[...] = x
        return y
    raise AssertionError(step)


@st.composite
def layouts(draw):
    """A chain of up to three layout steps, their details, and whether read-only."""
    steps = draw(st.lists(st.sampled_from(STEPS), max_size=3))
    r = draw(st.lists(st.integers(0, 6), min_size=2, max_size=2))
    return steps, r, draw(st.booleans())


def lay(x, spec):
    steps, r, readonly = spec
    for step in steps:
        x = relayout(x, step, r)
    if readonly and x.flags.writeable:
        x = x.view()
        x.flags.writeable = False
    return x


def plain(x):
    """A C-contiguous copy in native byte order."""
    x = np.asarray(x)
    return np.array(x, dtype=x.dtype.newbyteorder("="), order="C", copy=True)


@st.composite
def dtypes(draw, n, bases=FLOATS):
    """Dtypes for ``n`` arguments: mostly one dtype of ``bases``; sometimes mixed floats,
    sometimes one argument of a dtype that cuqr (like SciPy) refuses."""
    base = draw(st.sampled_from(bases))
    out = [base] * n
    kind = draw(st.integers(0, 9))
    if kind >= 8:
        out[draw(st.integers(0, n - 1))] = draw(st.sampled_from(OTHERS + FLOATS))
    return out


# ---------------------------------------------------------------------------------------
# Running a call on laid-out arguments and on plain copies
# ---------------------------------------------------------------------------------------


def outcome(call, args):
    try:
        return "ok", call(*args)
    except CLEAN as e:
        return type(e), e


def same(a, b, dtype):
    a, b = np.asarray(a), np.asarray(b)
    assert a.shape == b.shape and a.dtype == b.dtype, (a.shape, b.shape, a.dtype, b.dtype)
    if a.size == 0:
        return
    fa, fb = a.astype(np.complex128), b.astype(np.complex128)
    scale = max(float(np.max(np.abs(fb[np.isfinite(fb)]), initial=0.0)), 1.0)
    tol = 16 * float(np.finfo(dtype).eps) * scale * max(a.shape)
    assert np.array_equal(np.isfinite(fa), np.isfinite(fb))
    fin = np.isfinite(fa)
    assert np.all(np.abs(fa[fin] - fb[fin]) <= tol), np.max(np.abs(fa[fin] - fb[fin]))


def check(call, laid, overwrite=False):
    """``call`` on the laid-out arguments against ``call`` on plain copies."""
    plains = [plain(x) if isinstance(x, np.ndarray) else x for x in laid]
    before = [np.array(x, copy=True) if isinstance(x, np.ndarray) else x for x in laid]
    ref = outcome(call, plains)
    got = outcome(lambda *a: call(*a, overwrite), laid) if overwrite else outcome(call, laid)
    if ref[0] != "ok":
        assert got[0] is ref[0], (got, ref)
        return ref
    assert got[0] == "ok", got
    for g, w in zip(got[1], ref[1]):
        same(g, w, w.dtype)
    if not overwrite:
        for x, b in zip(laid, before):
            if isinstance(x, np.ndarray):
                assert np.array_equal(x, b, equal_nan=True), "an input was written"
    return got


def scipy_refuses_dtype(dts):
    """SciPy's rule: Q and R of one dtype, float32, float64, complex64 or complex128, and the
    update vectors of that same dtype."""
    return any(d != dts[0] for d in dts) or dts[0] not in FLOATS + COMPLEX


def rand(rng, shape, dtype):
    """Random values of ``shape``, complex when ``dtype`` is, cast to ``dtype``."""
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    with np.errstate(all="ignore"):
        return x.astype(dtype) if np.dtype(dtype).kind in "fc" else x.real.astype(dtype)


def factors(rng, m, n, mode, dq, dr):
    A = rand(rng, (m, n), "complex128" if "complex" in dq else "float64")
    Q, R = sl.qr(A, mode=mode)

    def cast(x, d):
        return x.astype(d) if "complex" in d else x.real.astype(d)

    with np.errstate(all="ignore"):
        return cast(Q, dq), cast(R, dr)


# the functions take any shape (tall, square, wide); cuqr.QR tall and square ones
any_shapes = st.tuples(st.integers(0, 7), st.integers(0, 7))
shapes = any_shapes.map(lambda s: (max(s), min(s)))
SCIPY = FLOATS + COMPLEX


# ---------------------------------------------------------------------------------------
# The functions
# ---------------------------------------------------------------------------------------


@SETTINGS
@given(
    shape=any_shapes,
    p=st.integers(0, 3),
    which=st.sampled_from(["row", "col"]),
    mode=st.sampled_from(["full", "economic"]),
    dts=dtypes(3, SCIPY),
    specs=st.tuples(layouts(), layouts(), layouts()),
    k=st.integers(0, 10),
    one=st.booleans(),
    overwrite=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_qr_insert(shape, p, which, mode, dts, specs, k, one, overwrite, seed):
    rng = np.random.default_rng(seed)
    m, n = shape
    Q, R = factors(rng, m, n, mode, dts[0], dts[1])
    if which == "row":
        u = rand(rng, n if one else (p, n), dts[2])
        k = k % (m + 1)
    else:
        u = rand(rng, m if one else (m, p), dts[2])
        k = k % (n + 1)
    laid = [lay(x, s) for x, s in zip((Q, R, u), specs)]

    def call(Q, R, u, overwrite_qru=False):
        return cuqr.qr_insert(Q, R, u, k, which, rcond=1e-10, overwrite_qru=overwrite_qru)

    got = check(call, laid, overwrite)
    if scipy_refuses_dtype(dts):
        assert got[0] is ValueError


@SETTINGS
@given(
    shape=any_shapes,
    p=st.integers(1, 4),
    which=st.sampled_from(["row", "col"]),
    mode=st.sampled_from(["full", "economic"]),
    dts=dtypes(2, SCIPY),
    specs=st.tuples(layouts(), layouts()),
    k=st.integers(0, 10),
    overwrite=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_qr_delete(shape, p, which, mode, dts, specs, k, overwrite, seed):
    rng = np.random.default_rng(seed)
    m, n = shape
    Q, R = factors(rng, m, n, mode, dts[0], dts[1])
    lim = m if which == "row" else n
    if lim == 0:
        return
    k = k % lim
    p = min(p, lim - k)
    laid = [lay(x, s) for x, s in zip((Q, R), specs)]

    def call(Q, R, overwrite_qr=False):
        return cuqr.qr_delete(Q, R, k, p, which, overwrite_qr=overwrite_qr)

    got = check(call, laid, overwrite)
    if scipy_refuses_dtype(dts):
        assert got[0] is ValueError


@SETTINGS
@given(
    shape=any_shapes,
    p=st.integers(0, 3),
    mode=st.sampled_from(["full", "economic"]),
    dts=dtypes(4, SCIPY),
    specs=st.tuples(layouts(), layouts(), layouts(), layouts()),
    one=st.booleans(),
    overwrite=st.booleans(),
    seed=st.integers(0, 2**32 - 1),
)
def test_qr_update(shape, p, mode, dts, specs, one, overwrite, seed):
    rng = np.random.default_rng(seed)
    m, n = shape
    Q, R = factors(rng, m, n, mode, dts[0], dts[1])
    if one:
        u, v = rand(rng, m, dts[2]), rand(rng, n, dts[3])
    else:
        u, v = rand(rng, (m, p), dts[2]), rand(rng, (n, p), dts[3])
    laid = [lay(x, s) for x, s in zip((Q, R, u, v), specs)]

    def call(Q, R, u, v, overwrite_qruv=False):
        return cuqr.qr_update(Q, R, u, v, overwrite_qruv=overwrite_qruv)

    got = check(call, laid, overwrite)
    if scipy_refuses_dtype(dts):
        assert got[0] is ValueError


@SETTINGS
@given(
    n=st.integers(0, 6),
    k=st.integers(1, 3),
    sign=st.sampled_from(["+", "-"]),
    dts=dtypes(2),
    specs=st.tuples(layouts(), layouts()),
    seed=st.integers(0, 2**32 - 1),
)
def test_cholupdate(n, k, sign, dts, specs, seed):
    rng = np.random.default_rng(seed)
    B = rng.standard_normal((n + 3, n))
    R = np.linalg.qr(B, mode="r").astype(dts[0])
    x = (0.1 * rng.standard_normal((n, k))).astype(dts[1])
    laid = [lay(a, s) for a, s in zip((R, x), specs)]
    got = check(lambda R, x: (cuqr.cholupdate(R, x, sign),), laid)
    if dts[0] not in FLOATS or dts[0] != dts[1]:
        assert got[0] is ValueError


# ---------------------------------------------------------------------------------------
# cuqr.QR
# ---------------------------------------------------------------------------------------

METHODS = ["insert_cols", "insert_rows", "rank_one", "rank_k", "replace_cols", "slide"]


def results(qr):
    out = [qr.R, qr.d]
    if qr.q is not None:
        out.append(qr.Q)
    return tuple(out)


@SETTINGS
@given(
    shape=shapes,
    q=st.sampled_from(["thin", "full", None]),
    method=st.sampled_from(METHODS),
    p=st.integers(1, 3),
    dts=dtypes(4),
    specs=st.tuples(layouts(), layouts(), layouts(), layouts()),
    seed=st.integers(0, 2**32 - 1),
)
def test_qr_class(shape, q, method, p, dts, specs, seed):
    rng = np.random.default_rng(seed)
    m, n = shape
    m = max(m, n + p)
    A = rng.standard_normal((m, n)).astype(dts[0])
    b = rng.standard_normal(m).astype(dts[1])
    if method == "insert_cols":
        args = [rng.standard_normal((m, p))]
    elif method == "insert_rows":
        args = [rng.standard_normal((p, n)), rng.standard_normal(p)]
    elif method == "rank_one":
        args = [rng.standard_normal(m), rng.standard_normal(n)]
    elif method == "rank_k":
        args = [rng.standard_normal((m, p)), rng.standard_normal((n, p))]
    elif method == "replace_cols":
        args = [rng.standard_normal((m, min(p, n)))]
    else:
        args = [rng.standard_normal((p, n)), rng.standard_normal(p)]
    args = [a.astype(d) for a, d in zip(args, dts[2:])]
    laid = [lay(x, s) for x, s in zip([A, b, *args], specs)]

    def call(A, b, *args):
        qr = cuqr.QR(A, b, q=q, keep_data=q is None, device="cpu")
        if method in ("insert_cols", "insert_rows", "replace_cols"):
            getattr(qr, method)(0, *args)
        else:
            getattr(qr, method)(*args)
        return results(qr)

    got = check(call, laid)
    if dts[0] not in FLOATS:
        assert got[0] is ValueError


@SETTINGS
@given(
    shape=shapes,
    dts=dtypes(2),
    specs=st.tuples(layouts(), layouts()),
    seed=st.integers(0, 2**32 - 1),
)
def test_qr_class_constructor(shape, dts, specs, seed):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal(shape).astype(dts[0])
    b = rng.standard_normal((shape[0], 2)).astype(dts[1])
    laid = [lay(x, s) for x, s in zip((A, b), specs)]
    got = check(lambda A, b: results(cuqr.QR(A, b, q="full", device="cpu")), laid)
    if dts[0] not in FLOATS:
        assert got[0] is ValueError


def test_structured_field_regression():
    """A field of a structured array (stride 12 for float64) was once read as if its stride
    were a whole number of items."""
    rng = np.random.default_rng(0)
    A = rng.standard_normal((6, 3))
    Q, R = sl.qr(A)
    rec = np.zeros(6, dtype=[("a", "f8"), ("b", "f4")])
    rec["a"] = rng.standard_normal(6)
    u = rec["a"]
    assert u.strides == (12,)
    Q1, R1 = cuqr.qr_insert(Q, R, u, 1, which="col")
    Q2, R2 = cuqr.qr_insert(Q, R, np.ascontiguousarray(u), 1, which="col")
    np.testing.assert_array_equal(Q1, Q2)
    np.testing.assert_array_equal(R1, R2)
    np.testing.assert_allclose(Q1 @ R1, np.insert(A, 1, u, axis=1), atol=1e-12)


def test_extension_refuses_unreadable_layouts():
    """The extension itself (below the Python wrappers) refuses what it cannot read in
    place rather than misreading it."""
    from cuqr import _cuqr

    rec = np.zeros((4, 3), dtype=[("a", "f8"), ("b", "f4")])
    with pytest.raises(ValueError, match="multiple of the item size"):
        _cuqr._State.factorize(rec["a"], None, "thin", False, None, "float64")
    buf = np.zeros(4 * 3 * 8 + 1, np.uint8)
    unaligned = buf[1:].view(np.float64).reshape(4, 3)
    if not unaligned.flags.aligned:
        with pytest.raises(ValueError, match="unaligned"):
            _cuqr._State.factorize(unaligned, None, "thin", False, None, "float64")
