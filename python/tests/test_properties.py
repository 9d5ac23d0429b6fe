"""Property tests (Hypothesis) of cuqr's Python API: random dtypes, memory layouts (C and
Fortran order, strided slices, negative strides), shapes (empty ones too) and values (NaN,
±inf, 1e300, subnormal, zero), valid and invalid arguments.

Every call either returns a correct result (SciPy's, where SciPy defines one; else the
definition checked against a refactorisation) or raises a clean exception (``ValueError``,
``TypeError`` or ``numpy.linalg.LinAlgError``); it never crashes. After an exception from a
``cuqr.QR`` method the state's R, Q and d are unchanged, bit for bit. One ``cuqr.QR`` used
from several threads at once is either serialised or refused with a clear error, and ends
agreeing with a refactorisation.

Here the dtypes are real and the shapes tall or square (``cuqr.QR``'s scope); complex
dtypes and wide factorisations of the SciPy-style functions are drawn in test_layouts.py,
with memory layouts beyond the ones here (structured-array fields, byte-swapped, unaligned,
broadcast).

``CUQR_HYPOTHESIS_EXAMPLES`` scales the number of examples (default sized for CI).
"""

import os
import threading

import numpy as np
import pytest
import scipy.linalg as sl
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import cuqr

CLEAN = (ValueError, TypeError, np.linalg.LinAlgError)
EXAMPLES = int(os.environ.get("CUQR_HYPOTHESIS_EXAMPLES", "150"))
SETTINGS = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=True,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

FLOATS = [np.float32, np.float64]
# dtypes of one input among real ones: a ValueError (mixed dtypes, or one cuqr refuses)
OTHER_DTYPES = [np.float16, np.int64, np.complex128, np.bool_]
LAYOUTS = ["C", "F", "strided", "reversed", "reversed_rows"]
SPECIALS = [np.nan, np.inf, -np.inf, 1e300, -1e300, 1e-310, 0.0]


# ---------------------------------------------------------------------------------------
# Inputs
# ---------------------------------------------------------------------------------------


def lay(x, layout):
    """The same values in another memory layout."""
    x = np.asarray(x)
    if x.ndim == 0 or x.size == 0:
        return x
    if layout == "C":
        return np.ascontiguousarray(x)
    if layout == "F":
        return np.asfortranarray(x)
    if layout == "strided":
        big = np.zeros(tuple(2 * s + 1 for s in x.shape), dtype=x.dtype)
        idx = tuple(slice(1, None, 2) for _ in x.shape)
        big[idx] = x
        return big[idx]
    rev = (slice(None, None, -1),) * x.ndim
    if layout == "reversed":  # negative strides on every axis
        return np.ascontiguousarray(x[rev])[rev]
    # negative row stride, Fortran order
    return np.asfortranarray(x[::-1])[::-1]


@st.composite
def spice(draw, special_in_10=2):
    """How one call's inputs are spoilt: a special value (or none, most often), a layout, a
    dtype change for one input, and check_finite."""
    # (Hypothesis favours small integers: the rare branches sit at the top of each range)
    special = draw(st.sampled_from(SPECIALS)) if draw(st.integers(0, 9)) >= 10 - special_in_10 else None
    other = draw(st.sampled_from(OTHER_DTYPES + FLOATS)) if draw(st.integers(0, 9)) == 9 else None
    return {
        "special": special,
        "layout": draw(st.sampled_from(LAYOUTS)),
        "other_dtype": other,
        "check_finite": draw(st.integers(0, 3)) < 3,
        "seed": draw(st.integers(0, 2**32 - 1)),
    }


def poke(x, value, rng):
    """`x` with `value` at a random entry (a copy; unchanged when empty)."""
    x = np.array(x, copy=True)
    if value is not None and x.size:
        with np.errstate(all="ignore"):
            x.flat[rng.integers(x.size)] = value
    return x


def moderate(*xs):
    """Finite entries between 1e-30 and 1e10 in magnitude (or zero)."""
    for x in xs:
        a = np.abs(np.asarray(x, dtype=np.float64))
        if not np.all(np.isfinite(a)) or np.any(a > 1e10) or np.any((a > 0) & (a < 1e-30)):
            return False
    return True


def u(dtype):
    return float(np.finfo(dtype).eps) / 2


def rel(a, b):
    """‖a − b‖_F/‖b‖_F in f64, scaled so that huge entries do not overflow."""
    a, b = np.asarray(a, dtype=np.float64), np.asarray(b, dtype=np.float64)
    s = max(np.max(np.abs(b), initial=0.0), np.max(np.abs(a), initial=0.0), 1e-300)
    return np.linalg.norm((a - b) / s) / max(np.linalg.norm(b / s), 1e-300)


def fro(x):
    """‖x‖_F without overflow."""
    s = max(np.max(np.abs(x), initial=0.0), 1e-300)
    return s * np.linalg.norm(np.asarray(x, dtype=np.float64) / s)


def bound(dtype, m, n, updates=1):
    """The backward error bound of `updates` sequences of orthogonal transformations on
    an m×n problem: 10·(m + n)·u each (Higham, Thm 19.10/19.13)."""
    return 10.0 * (m + n + 1) * u(dtype) * updates


def call(fn):
    """(result, None) or (None, the clean exception); anything else propagates."""
    try:
        return fn(), None
    except CLEAN as e:
        return None, e


def check_factors(Q1, R1, A1, dtype, A0=None):
    """Q1 R1 = A1 and Q1ᵀQ1 = I within the bound, R1 upper triangular, dtype kept. The
    backward error of an update is relative to the larger of the matrices before (A0) and
    after: a downdate may leave a much smaller A1."""
    m, n = A1.shape if A0 is None else np.maximum(A1.shape, A0.shape)
    assert Q1.dtype == dtype and R1.dtype == dtype
    assert np.all(np.tril(R1, -1) == 0), "R has entries below the diagonal"
    Qf = Q1.astype(np.float64)
    e_q = np.linalg.norm(Qf.T @ Qf - np.eye(Qf.shape[1]))
    assert e_q <= bound(dtype, m, n), f"‖QᵀQ − I‖ = {e_q:e}"
    scale = A1 if A0 is None or fro(A0) < fro(A1) else A0
    s = max(np.max(np.abs(scale), initial=0.0), 1e-300)
    e_a = np.linalg.norm((Qf @ R1.astype(np.float64) - A1) / s) / max(np.linalg.norm(scale / s), 1e-300)
    assert e_a <= bound(dtype, m, n), f"‖QR − A‖/‖A‖ = {e_a:e}"


def factors(rng, m, n, dtype, mode):
    A = rng.standard_normal((m, n)).astype(dtype)
    if m == 0 or n == 0:
        k = m if mode == "full" else min(m, n)
        return np.eye(m, k, dtype=dtype), np.zeros((k, n), dtype=dtype)
    Q, R = sl.qr(A, mode=mode)
    return Q.astype(dtype), R.astype(dtype)


# ---------------------------------------------------------------------------------------
# The SciPy-compatible functions
# ---------------------------------------------------------------------------------------


def compare(name, mine, scipys, expected, dtype, inputs, check_finite, A0=None):
    """The outcome rules: a clean exception, or a correct result."""
    (res, err), (sres, serr) = mine, scipys
    if err is not None:
        return
    Q1, R1 = res
    if sres is not None:
        assert Q1.shape == sres[0].shape and R1.shape == sres[1].shape, (
            f"{name}: shapes {Q1.shape} {R1.shape}, SciPy {sres[0].shape} {sres[1].shape}"
        )
    if not check_finite and not all(np.all(np.isfinite(x)) for x in inputs):
        return  # unchecked non-finite input: any result is acceptable, a crash is not
    if expected is None:
        return
    if moderate(*inputs):
        check_factors(Q1, R1, expected, dtype, A0)
    elif sres is not None and np.all(np.isfinite(sres[0])) and np.all(np.isfinite(sres[1])):
        assert np.all(np.isfinite(Q1)) and np.all(np.isfinite(R1)), (
            f"{name}: non-finite result where SciPy's is finite"
        )


@st.composite
def qr_case(draw, max_m=9, max_n=5):
    dtype = draw(st.sampled_from(FLOATS))
    # mostly tall (M > N); sometimes empty or square. Wide ones (M < N): a known difference
    n = draw(st.integers(1, max_n)) if draw(st.integers(0, 5)) < 5 else 0
    m = n + draw(st.sampled_from([2, 3, 1, 4, 0]))
    m = min(m, max_m) if m >= n else m
    mode = draw(st.sampled_from(["full", "economic"]))
    return dtype, m, n, mode, draw(spice())


@SETTINGS
@given(qr_case(), st.sampled_from(["row", "col"]), st.integers(0, 3), st.data())
def test_qr_insert(case, which, p, data):
    dtype, m, n, mode, sp = case
    lim = m if which == "row" else n
    outside = st.sampled_from([-lim - 1, lim + 1, lim + 2])
    k = data.draw(st.integers(-lim, lim) if data.draw(st.integers(0, 4)) < 4 else outside)
    rng = np.random.default_rng(sp["seed"])
    Q, R = factors(rng, m, n, dtype, mode)
    shape = (m, p) if which == "col" else (p, n)
    if data.draw(st.booleans()) and p == 1:
        shape = (shape[0],) if which == "col" else (shape[1],)
    if data.draw(st.integers(0, 5)) == 0:
        shape = tuple(s + data.draw(st.sampled_from([-1, 1])) for s in shape)
        shape = tuple(max(s, 0) for s in shape)
    uu = poke(rng.standard_normal(shape).astype(dtype), sp["special"], rng)
    if sp["other_dtype"] is not None:
        with np.errstate(all="ignore"):
            uu = uu.astype(sp["other_dtype"])
    Ql, Rl, ul = lay(Q, sp["layout"]), lay(R, sp["layout"]), lay(uu, sp["layout"])
    cf = sp["check_finite"]
    mine = call(lambda: cuqr.qr_insert(Ql, Rl, ul, k, which=which, check_finite=cf))
    with np.errstate(all="ignore"):
        scipys = call(lambda: sl.qr_insert(Q, R, uu, k, which=which, check_finite=cf))
    # what the result must represent
    expected = None
    with np.errstate(all="ignore"):
        A = Q.astype(np.float64) @ R.astype(np.float64)
    if uu.dtype == dtype:
        if uu.ndim == 1:
            U = uu.reshape(1, -1) if which == "row" else uu.reshape(-1, 1)
        else:
            U = uu
        lim = m if which == "row" else n
        kk = k + lim if k < 0 else k
        if 0 <= kk <= lim:
            if which == "row" and U.shape[1] == n:
                expected = np.vstack([A[:kk], U, A[kk:]])
            elif which == "col" and U.shape[0] == m:
                expected = np.hstack([A[:, :kk], U, A[:, kk:]])
    compare("qr_insert", mine, scipys, expected, dtype, [Q, R, uu], cf, A)


@SETTINGS
@given(qr_case(), st.sampled_from(["row", "col"]), st.sampled_from([1, 2, 3, 0, -1, 4]), st.data())
def test_qr_delete(case, which, p, data):
    dtype, m, n, mode, sp = case
    lim = m if which == "row" else n
    valid = st.integers(-lim, lim - 1) if lim else st.just(0)
    k = data.draw(valid if data.draw(st.integers(0, 4)) < 4 else st.sampled_from([-lim - 1, lim]))
    rng = np.random.default_rng(sp["seed"])
    Q, R = factors(rng, m, n, dtype, mode)
    special = sp["special"]
    if special is not None and np.isfinite(special):
        # a finite value goes into R's upper triangle (Q must stay orthogonal for the
        # result to be defined); NaN and ±inf into Q, which must be refused
        upper = [(i, j) for i in range(R.shape[0]) for j in range(i, R.shape[1])]
        if upper:
            R = R.copy()
            with np.errstate(all="ignore"):
                R[upper[rng.integers(len(upper))]] = special
    else:
        Q = poke(Q, special, rng)
    if sp["other_dtype"] is not None:
        with np.errstate(all="ignore"):
            R = R.astype(sp["other_dtype"])
    Ql, Rl = lay(Q, sp["layout"]), lay(R, sp["layout"])
    cf = sp["check_finite"]
    mine = call(lambda: cuqr.qr_delete(Ql, Rl, k, p, which=which, check_finite=cf))
    with np.errstate(all="ignore"):
        scipys = call(lambda: sl.qr_delete(Q, R, k, p, which=which, check_finite=cf))
    expected = None
    if R.dtype == dtype:
        with np.errstate(all="ignore"):
            A = Q.astype(np.float64) @ R.astype(np.float64)
        lim = m if which == "row" else n
        kk = k + lim if k < 0 else k
        if p >= 1 and 0 <= kk and kk + p <= lim:
            keep = [i for i in range(lim) if not kk <= i < kk + p]
            expected = A[keep] if which == "row" else A[:, keep]
    compare("qr_delete", mine, scipys, expected, dtype, [Q, R], cf, A if expected is not None else None)


@SETTINGS
@given(qr_case(), st.sampled_from([1, 2, 3, 0]), st.booleans(), st.integers(0, 6))
def test_qr_update(case, kk, one_d, misshape):
    dtype, m, n, mode, sp = case
    rng = np.random.default_rng(sp["seed"])
    Q, R = factors(rng, m, n, dtype, mode)
    us, vs = ((m,), (n,)) if one_d else ((m, kk), (n, kk))
    if misshape == 6:
        us = (max(us[0] - 1, 0),) + us[1:]
    elif misshape == 5:
        vs = (vs[0] + 1,) + vs[1:]
    uu = poke(rng.standard_normal(us).astype(dtype), sp["special"], rng)
    vv = rng.standard_normal(vs).astype(dtype)
    if sp["other_dtype"] is not None:
        with np.errstate(all="ignore"):
            vv = vv.astype(sp["other_dtype"])
    L = sp["layout"]
    cf = sp["check_finite"]
    mine = call(lambda: cuqr.qr_update(lay(Q, L), lay(R, L), lay(uu, L), lay(vv, L), check_finite=cf))
    with np.errstate(all="ignore"):
        scipys = call(lambda: sl.qr_update(Q, R, uu, vv, check_finite=cf))
    expected = A0 = None
    if vv.dtype == dtype and uu.shape[0] == m and vv.shape[0] == n and uu.ndim == vv.ndim:
        U = (uu[:, None] if uu.ndim == 1 else uu).astype(np.float64)
        V = (vv[:, None] if vv.ndim == 1 else vv).astype(np.float64)
        if U.shape[1] == V.shape[1]:
            with np.errstate(all="ignore"):
                A0 = Q.astype(np.float64) @ R.astype(np.float64)
                expected = A0 + U @ V.T
    compare("qr_update", mine, scipys, expected, dtype, [Q, R, uu, vv], cf, A0)


@SETTINGS
@given(
    st.sampled_from(FLOATS),
    st.integers(0, 6),
    st.integers(0, 3),
    st.sampled_from(["+", "-"]),
    spice(),
    st.booleans(),
)
def test_cholupdate(dtype, n, k, sign, sp, one_d):
    rng = np.random.default_rng(sp["seed"])
    B = rng.standard_normal((3 * n + 1, n))
    R = (np.linalg.cholesky(B.T @ B).T if n else np.zeros((0, 0))).astype(dtype)
    x = rng.standard_normal((n,) if one_d else (n, k)) * (0.3 if sign == "-" else 1.0)
    x = poke(x.astype(dtype), sp["special"], rng)
    if sp["other_dtype"] is not None:
        with np.errstate(all="ignore"):
            x = x.astype(sp["other_dtype"])
    L, cf = sp["layout"], sp["check_finite"]
    res, err = call(lambda: cuqr.cholupdate(lay(R, L), lay(x, L), sign, check_finite=cf))
    if err is not None or not moderate(x) or x.dtype != dtype:
        return
    X = x.reshape(n, -1).astype(np.float64)
    Rf = R.astype(np.float64)
    target = Rf.T @ Rf + (1 if sign == "+" else -1) * X @ X.T
    assert res.dtype == dtype and res.shape == (n, n)
    assert np.all(np.tril(res, -1) == 0) and np.all(np.diag(res) >= 0)
    R1 = res.astype(np.float64)
    # backward error on the scale of the inputs: c·n·u·(‖R‖² + ‖x‖²)
    err = np.linalg.norm(R1.T @ R1 - target)
    tolerance = bound(dtype, 2 * n, n) * (np.linalg.norm(Rf) ** 2 + np.linalg.norm(X) ** 2)
    assert err <= tolerance + 1e-300, f"‖R1ᵀR1 − (RᵀR ± xxᵀ)‖ = {err:e} > {tolerance:e}"


# ---------------------------------------------------------------------------------------
# cuqr.QR: sequences of method calls
# ---------------------------------------------------------------------------------------


def snapshot(qr):
    """Everything observable about a state, bit for bit."""
    out = [qr.shape, np.ascontiguousarray(qr.R).tobytes()]
    Q = qr.Q
    out.append(None if Q is None else np.ascontiguousarray(Q).tobytes())
    try:
        out.append(np.ascontiguousarray(qr.d).tobytes())
    except CLEAN:
        out.append(None)
    return out


class Model:
    """The A and b a state stands for, updated as the accepted calls say (the Python
    wrapper's index rules: negative positions count from the end)."""

    def __init__(self, A, b):
        self.A = A.astype(np.float64)
        self.b = None if b is None else b.reshape(A.shape[0], -1).astype(np.float64)
        self.forget = 1.0
        # the largest m + n, ‖A‖_F and ‖b‖_F met so far: the errors of earlier steps are
        # relative to the matrices of their time, which row deletions may leave larger
        self.peak = (0, 0.0, 0.0)
        self._track(self.A, self.b)

    def _track(self, A, b):
        nb = 0.0 if b is None else np.linalg.norm(b)
        mn, na, pb = self.peak
        self.peak = (max(mn, sum(A.shape)), max(na, np.linalg.norm(A)), max(pb, nb))

    def _rows(self, x, p):
        x = None if x is None else np.asarray(x, dtype=np.float64)
        return np.zeros((p, self.b.shape[1])) if x is None or x.size == 0 else x.reshape(p, -1)

    def apply(self, name, args):
        A, b = self.A, self.b
        m, n = A.shape
        if name == "insert_cols":
            k, U = args
            k = k + n + 1 if k < 0 else k
            U = np.asarray(U, dtype=np.float64).reshape(m, -1)
            self.A = np.hstack([A[:, :k], U, A[:, k:]])
        elif name == "delete_cols":
            k, p = args
            k = k + n if k < 0 else k
            self.A = np.hstack([A[:, :k], A[:, k + p :]])
        elif name == "insert_rows":
            k, U, e = args
            k = k + m + 1 if k < 0 else k
            U = np.asarray(U, dtype=np.float64).reshape(-1, n)
            self.A = np.vstack([A[:k], U, A[k:]])
            if b is not None:
                E = self._rows(e, U.shape[0])
                self.b = np.vstack([b[:k], E, b[k:]])
        elif name == "delete_rows":
            k, p, rows = args[0], args[1], args[2]
            if rows is not None:
                p = np.asarray(rows).reshape(-1, n).shape[0]
            k = k + m if k < 0 else k
            assert 0 <= k and k + p <= m
            self.A = np.vstack([A[:k], A[k + p :]])
            if b is not None:
                self.b = np.vstack([b[:k], b[k + p :]])
        elif name == "rank_one":
            uu, vv = args
            self.A = A + np.outer(np.ravel(uu), np.ravel(vv))
        elif name == "rank_k":
            U, V = args
            self.A = A + np.asarray(U, dtype=np.float64) @ np.asarray(V, dtype=np.float64).T
        elif name == "replace_cols":
            k, U = args
            k = k + n if k < 0 else k
            U = np.asarray(U, dtype=np.float64).reshape(m, -1)
            A = A.copy()
            A[:, k : k + U.shape[1]] = U
            self.A = A
        elif name == "shift_col":
            s, t = (x + n if x < 0 else x for x in args)
            col = A[:, s : s + 1]
            rest = np.delete(A, s, axis=1)
            self.A = np.hstack([rest[:, :t], col, rest[:, t:]])
        elif name == "slide":
            rows, rhs, drop, forget = args
            rows = np.asarray(rows, dtype=np.float64).reshape(-1, n)
            p = rows.shape[0]
            drop = p if drop is None else drop
            if forget is not None:
                self.forget = forget
            s = np.sqrt(self.forget)
            self._track(np.vstack([A, rows]), None if b is None else np.vstack([b, self._rows(rhs, p)]))
            self.A = np.vstack([s * A[drop:], rows])
            if b is not None:
                self.b = np.vstack([s * b[drop:], self._rows(rhs, p)])
        assert self.A.shape[0] >= self.A.shape[1] >= 0
        self._track(self.A, self.b)


OPS = ["insert_cols", "delete_cols", "insert_rows", "delete_rows", "rank_one", "rank_k",
       "replace_cols", "shift_col", "slide", "slide", "solve", "check_drift"]


def draw_args(data, name, model, dtype, rng, sp):
    """Arguments for one method call: mostly valid, sometimes off by one, mis-shaped, of
    another dtype or layout, or holding a special value."""
    m, n = model.A.shape
    q = 0 if model.b is None else model.b.shape[1]
    off = data.draw(st.sampled_from([0, 0, 0, 0, -1, 1, 2]))

    def arr(shape):
        with np.errstate(all="ignore"):
            x = poke(rng.standard_normal(shape), sp["special"], rng).astype(dtype)
            if sp["other_dtype"] is not None:
                x = x.astype(sp["other_dtype"])
        return lay(x, sp["layout"])

    def pos(lim):
        return data.draw(st.integers(-lim - 1, lim)) + (off if off > 1 else 0)

    p = data.draw(st.integers(1, 3)) + (off if off < 0 else 0)
    if name == "insert_cols":
        return (pos(n + 1), arr((m + (off == 1),) if p == 1 and off == 1 else (m, p)))
    if name == "delete_cols":
        return (pos(n), p)
    if name == "insert_rows":
        e = None if q == 0 or data.draw(st.booleans()) else arr((p, q + (off == 1)))
        return (pos(m + 1), arr((p, n + (off == 1))), e)
    if name == "delete_rows":
        k, pp = pos(m), max(p, 0)
        if data.draw(st.booleans()):
            return (k, p, None, None)
        kk = k + m if k < 0 else k
        rows = lay(model.A[kk : kk + pp].astype(dtype), sp["layout"])
        rhs = None if model.b is None else lay(model.b[kk : kk + pp].astype(dtype), sp["layout"])
        return (k, p, rows, rhs)
    if name == "rank_one":
        return (arr((m + (off == 1),)), arr((n,)))
    if name == "rank_k":
        return (arr((m, p)), arr((n + (off == 1), p)))
    if name == "replace_cols":
        return (pos(n), arr((m + (off == 1), p)))
    if name == "shift_col":
        return (pos(n), pos(n))
    if name == "slide":
        drop = data.draw(st.one_of(st.none(), st.integers(-1, 4)))
        forget = data.draw(st.sampled_from([None, None, 1.0, 0.9, 0.0, 1.5, float("nan")]))
        rhs = None if q == 0 or data.draw(st.booleans()) else arr((p, q))
        return (arr((p, n + (off == 1))), rhs, drop, forget)
    return ()


def invoke(qr, name, args):
    if name == "delete_rows":
        k, p, rows, rhs = args
        return qr.delete_rows(k, p) if rows is None else qr.delete_rows(k, p, rows=rows, rhs=rhs)
    return getattr(qr, name)(*args)


def check_state(qr, model, dtype, updates):
    """The state against a refactorisation of the model. With τ = 10·(m + n)·u per step
    (m + n the largest met) and ‖ΔA‖ = τ·‖A‖_peak, ‖Δb‖ = τ·‖b‖_peak the backward errors of
    the whole sequence: ‖QᵀQ − I‖ ≤ τ, ‖QR − A‖ ≤ ‖ΔA‖, ‖RᵀR − AᵀA‖ ≤ 2‖ΔA‖‖A‖_peak, and
    to first order ‖x − x_ref‖ ≤ 2((‖ΔA‖‖x‖ + ‖Δb‖)/σ_n + ‖ΔA‖‖r‖/σ_n²)."""
    A, b = model.A, model.b
    m, n = A.shape
    assert qr.shape == (m, n)
    if n == 0 or m == 0:
        return
    s = np.linalg.svd(A, compute_uv=False)
    mn, peak_a, peak_b = model.peak
    tau = 10.0 * mn * u(dtype) * (1 + updates)
    d_a, d_b = tau * peak_a, tau * peak_b
    if not d_a < 1e-2 * s[-1]:
        return  # ill-conditioned to this precision: accuracy is not defined
    R = qr.R.astype(np.float64)
    assert np.all(np.tril(qr.R, -1) == 0), "R has entries below the diagonal"
    if qr.q is not None:
        Qf = qr.Q.astype(np.float64)
        e_q = np.linalg.norm(Qf.T @ Qf - np.eye(Qf.shape[1]))
        assert e_q <= tau, f"‖QᵀQ − I‖ = {e_q:e} > {tau:e}"
        e_a = np.linalg.norm(Qf @ R - A)
        assert e_a <= d_a, f"‖QR − A‖ = {e_a:e} > {d_a:e}"
    else:
        gram = np.linalg.norm(R.T @ R - A.T @ A)
        assert gram <= 2 * d_a * peak_a, f"‖RᵀR − AᵀA‖ = {gram:e} > {2 * d_a * peak_a:e}"
    if b is not None:
        x = np.asarray(qr.solve(), dtype=np.float64).reshape(n, -1)
        x_ref = np.linalg.lstsq(A, b, rcond=None)[0]
        r = np.linalg.norm(b - A @ x_ref, axis=0)
        for j in range(x.shape[1]):
            xn = np.linalg.norm(x_ref[:, j])
            tol_x = 2 * ((d_a * xn + d_b) / s[-1] + d_a * r[j] / s[-1] ** 2)
            e_x = np.linalg.norm(x[:, j] - x_ref[:, j])
            assert e_x <= tol_x, f"‖x − x_ref‖ = {e_x:e} > {tol_x:e} (σ_n = {s[-1]:.2e})"


DEVICES = ["cpu"] + (["cuda"] if cuqr.cuda_available() else [])


@SETTINGS
@given(
    st.sampled_from(FLOATS),
    st.sampled_from(["thin", "full", None]),
    st.booleans(),
    st.sampled_from([0, 1, 2]),
    st.sampled_from(DEVICES),
    st.integers(1, 5),
    st.integers(0, 5),
    st.data(),
)
def test_qr_class_sequences(dtype, q, keep_data, nrhs, device, n, extra, data):
    seed = data.draw(st.integers(0, 2**32 - 1))
    rng = np.random.default_rng(seed)
    m = n + 2 + extra
    A = rng.standard_normal((m, n)).astype(dtype)
    b = None if nrhs == 0 else rng.standard_normal(m if nrhs == 1 else (m, 2)).astype(dtype)
    qr = cuqr.QR(lay(A, data.draw(st.sampled_from(LAYOUTS))), b, q=q, keep_data=keep_data, device=device)
    model = Model(A, b)
    updates, extreme = 0, False
    for _ in range(data.draw(st.integers(1, 10))):
        name = data.draw(st.sampled_from(OPS))
        sp = data.draw(spice(special_in_10=4))
        args = draw_args(data, name, model, dtype, rng, sp)
        before = snapshot(qr)
        _, err = call(lambda: invoke(qr, name, args))
        if err is not None:
            assert snapshot(qr) == before, f"{name} raised {err!r} and changed the state"
            continue
        if name in ("solve", "check_drift"):
            continue
        arrays = [a for a in args if isinstance(a, np.ndarray)]
        assert all(a.dtype == dtype for a in arrays), (
            f"{name} accepted a {[str(a.dtype) for a in arrays]} argument for a {np.dtype(dtype)} state"
        )
        assert all(np.all(np.isfinite(a)) for a in arrays), f"{name} accepted a non-finite argument"
        extreme |= not moderate(*arrays)
        model.apply(name, args)
        updates += 1
        if model.A.shape[0] < model.A.shape[1] or model.A.shape[1] == 0:
            return
    if not extreme:
        check_state(qr, model, dtype, updates)


# ---------------------------------------------------------------------------------------
# One state, several threads
# ---------------------------------------------------------------------------------------


def _until_taken(step, errors, refusals):
    """Runs `step` until it is not refused as busy (at most 100000 tries)."""
    for _ in range(100_000):
        try:
            step()
            return True
        except RuntimeError as ex:  # refused while another thread updates: clear
            refusals.append(repr(ex))
        except Exception as ex:  # noqa: BLE001
            errors.append(repr(ex))
            return False
    errors.append("refused 100000 times in a row")
    return False


def _busy(qr, row, e, pairs, errors, refusals):
    """`pairs` times: insert `row` at the top, then delete the top row. Every thread
    inserts the same row, so each delete removes a copy of it whatever the interleaving."""
    for _ in range(pairs):
        if not _until_taken(lambda: qr.insert_rows(0, row, e), errors, refusals):
            return
        if not _until_taken(lambda: qr.delete_rows(0, 1, rows=row, rhs=e), errors, refusals):
            return


@pytest.mark.parametrize("q,keep", [("thin", False), ("full", False), (None, True), (None, False)])
def test_one_state_from_several_threads(q, keep):
    rng = np.random.default_rng(11)
    m, n, threads, pairs = 120, 8, 4, 40
    A, b = rng.standard_normal((m, n)), rng.standard_normal(m)
    qr = cuqr.QR(A, b, q=q, keep_data=keep, device="cpu")
    row, e = rng.standard_normal(n), rng.standard_normal(1)
    errors, refusals = [], []
    ts = [
        threading.Thread(target=_busy, args=(qr, row, e, pairs, errors, refusals), daemon=True)
        for _ in range(threads)
    ]
    for t in ts:
        t.start()
    for t in ts:
        t.join(timeout=120)
    assert not any(t.is_alive() for t in ts), "a thread hangs"
    assert not errors, errors[:3]
    for r in refusals:
        assert "borrow" in r.lower() or "busy" in r.lower() or "in use" in r.lower(), r
    # every insert was undone: the state stands for A and b again
    check_state(qr, Model(A, b), np.float64, 2 * threads * pairs)


# ---------------------------------------------------------------------------------------
# Refusals found by the sequences above, pinned down
# ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("q,keep", [("thin", False), ("full", False), (None, True)])
def test_refused_slide_keeps_the_rows_it_would_drop(q, keep):
    """A window step whose insertion half is refused (a row of 1e300 makes column 0
    'numerically dependent' against the new ‖A‖) leaves the oldest rows in place."""
    rng = np.random.default_rng(3)
    A, b = rng.standard_normal((8, 4)), rng.standard_normal(8)
    qr = cuqr.QR(A, b, q=q, keep_data=keep, device="cpu")
    before = snapshot(qr)
    rows = rng.standard_normal((3, 4))
    rows[0, 1] = -1e300
    _, err = call(lambda: qr.slide(rows, rng.standard_normal(3), drop=2))
    if err is not None:
        assert snapshot(qr) == before, f"slide raised {err!r} and changed the state"


def test_refused_slide_keeps_the_forgetting_factor():
    """``forget`` of a refused window step does not stay in force for the next one."""
    rng = np.random.default_rng(4)
    A, b = rng.standard_normal((6, 2)), rng.standard_normal(6)
    rows, e = np.array([[1.0, 2.0]]), np.array([3.0])
    qr = cuqr.QR(A, b, q="thin", device="cpu")
    with pytest.raises(ValueError):
        qr.slide(np.array([[np.nan, 1.0]]), np.array([1.0]), forget=0.5)
    qr.slide(rows, e)  # λ = 1: no forgetting was ever accepted
    x_ref = np.linalg.lstsq(np.vstack([A[1:], rows]), np.concatenate([b[1:], e]), rcond=None)[0]
    assert rel(qr.solve(), x_ref) <= 1e-12, "the refused step's forgetting factor stayed in force"
