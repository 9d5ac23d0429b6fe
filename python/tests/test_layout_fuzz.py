"""10⁵ random calls of the SciPy-style functions on random memory layouts: none may give a
wrong answer.

Each case draws a function (``qr_insert`` by row or column, ``qr_delete`` by row or
column, ``qr_update``), a shape (tall, square, wide, empty), full or economic factors, a
dtype (float32, float64, complex64, complex128, sometimes one argument of another dtype),
and for every array argument a chain of layout steps (test_layouts.py's: Fortran order,
strided views, negative and zero strides, structured-array fields, byte-swapped, unaligned,
read-only). The call on the laid-out arguments must return what the same call returns on
plain C-contiguous copies, or raise the same clean exception, and must leave its inputs as
they were. Plain NumPy drawing, not Hypothesis, so that 10⁵ cases fit in CI's time.

``CUQR_LAYOUT_FUZZ_CASES`` sets the number of cases (default 100,000).
"""

from __future__ import annotations

import os

import numpy as np
import scipy.linalg as sl

import cuqr
from test_layouts import CLEAN, COMPLEX, FLOATS, OTHERS, STEPS, plain, relayout, same

CASES = int(os.environ.get("CUQR_LAYOUT_FUZZ_CASES", "100000"))
OPS = ["insert_row", "insert_col", "delete_row", "delete_col", "update"]


def rand(rng, shape, dtype):
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    with np.errstate(all="ignore"):
        return x.astype(dtype) if np.dtype(dtype).kind in "fc" else x.real.astype(dtype)


def lay(rng, x):
    """``x`` through up to three random layout steps, sometimes read-only."""
    for _ in range(rng.integers(0, 4)):
        x = relayout(x, STEPS[rng.integers(len(STEPS))], list(rng.integers(0, 7, 2)))
    if rng.integers(2) and x.flags.writeable:
        x = x.view()
        x.flags.writeable = False
    return x


def draw(rng, bases):
    """One case: the call and its array arguments."""
    op = OPS[rng.integers(len(OPS))]
    m, n = int(rng.integers(0, 7)), int(rng.integers(0, 7))
    mode = "economic" if rng.integers(2) else "full"
    base = bases[rng.integers(len(bases))]
    A = rand(rng, (m, n), base)
    Q, R = sl.qr(A, mode=mode)
    args = [Q, R]
    p = int(rng.integers(1, 4))
    one = bool(rng.integers(2))
    if op == "insert_row":
        args.append(rand(rng, n if one else (p, n), base))
        k = int(rng.integers(0, m + 1))
        call = lambda Q, R, u: cuqr.qr_insert(Q, R, u, k, "row")  # noqa: E731
    elif op == "insert_col":
        args.append(rand(rng, m if one else (m, p), base))
        k = int(rng.integers(0, n + 1))
        call = lambda Q, R, u: cuqr.qr_insert(Q, R, u, k, "col", rcond=1e-10)  # noqa: E731
    elif op == "update":
        args += [rand(rng, m, base), rand(rng, n, base)] if one else [
            rand(rng, (m, p), base),
            rand(rng, (n, p), base),
        ]
        call = cuqr.qr_update
    else:
        which = "row" if op == "delete_row" else "col"
        lim = m if which == "row" else n
        k = int(rng.integers(0, max(lim, 1)))
        p = max(1, min(p, lim - k))
        call = lambda Q, R: cuqr.qr_delete(Q, R, k, p, which)  # noqa: E731
    if rng.integers(10) == 0:
        i = int(rng.integers(len(args)))
        other = (OTHERS + FLOATS + COMPLEX)[rng.integers(len(OTHERS) + 4)]
        with np.errstate(all="ignore"):
            x = args[i]
            args[i] = (x if np.dtype(other).kind == "c" else x.real).astype(other)
    return call, args


def outcome(call, args):
    try:
        return "ok", call(*args)
    except CLEAN as e:
        return type(e), e


def test_random_layouts_never_give_a_wrong_answer():
    rng = np.random.default_rng(20261129)
    bases = FLOATS + COMPLEX
    for case in range(CASES):
        call, args = draw(rng, bases)
        laid = [lay(rng, x) for x in args]
        before = [np.array(x, copy=True) for x in laid]
        ref = outcome(call, [plain(x) for x in laid])
        got = outcome(call, laid)
        assert got[0] == ref[0], (case, got, ref)
        if ref[0] == "ok":
            for g, w in zip(got[1], ref[1]):
                same(g, w, w.dtype)
        for x, b in zip(laid, before):
            assert np.array_equal(x, b, equal_nan=True), f"case {case}: an input was written"
