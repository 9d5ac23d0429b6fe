"""cuqr.qr_insert / qr_delete / qr_update against SciPy on random problems."""

import numpy as np
import pytest
import scipy.linalg as sl

import cuqr
from conftest import check_factors, rel, tol

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]
MODES = ["full", "economic"]


def rand(rng, shape, dtype):
    """Random values, complex ones for a complex dtype."""
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


def factors(rng, m, n, dtype, mode, order="F"):
    A = rand(rng, (m, n), dtype)
    Q, R = sl.qr(A, mode=mode)
    if order == "C":
        Q, R = np.ascontiguousarray(Q), np.ascontiguousarray(R)
    return A, Q, R


def same_r(R1, R2, dtype, m, n, kappa=1e3):
    """R is unique up to the signs of its rows: compare |R|, scaled by the conditioning."""
    assert rel(np.abs(R1), np.abs(R2)) <= kappa * tol(dtype, m, n)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("k", [0, 17, 37, -5])
@pytest.mark.parametrize("p", [1, 4])
def test_insert_rows(rng, dtype, mode, k, p):
    m, n = 37, 11
    A, Q, R = factors(rng, m, n, dtype, mode)
    u = rand(rng, (p, n), dtype)
    if p == 1:
        u = u[0]
    Q1, R1 = cuqr.qr_insert(Q, R, u, k, which="row")
    Qs, Rs = sl.qr_insert(Q, R, u, k, which="row")
    assert Q1.shape == Qs.shape and R1.shape == Rs.shape
    kk = k + m if k < 0 else k
    A1 = np.insert(A, kk, np.atleast_2d(u), axis=0)
    check_factors(Q1, R1, A1, dtype)
    same_r(R1, Rs, dtype, m + p, n)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("k", [0, 5, 11, -3])
@pytest.mark.parametrize("p", [1, 3])
def test_insert_cols(rng, dtype, mode, k, p):
    m, n = 41, 11
    A, Q, R = factors(rng, m, n, dtype, mode)
    u = rand(rng, (m, p), dtype)
    if p == 1:
        u = u[:, 0]
    Q1, R1 = cuqr.qr_insert(Q, R, u, k, which="col")
    Qs, Rs = sl.qr_insert(Q, R, u, k, which="col")
    assert Q1.shape == Qs.shape and R1.shape == Rs.shape
    kk = k + n if k < 0 else k
    A1 = np.insert(A, [kk] * p, u.reshape(m, p), axis=1)
    check_factors(Q1, R1, A1, dtype)
    same_r(R1, Rs, dtype, m, n + p)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("k,p", [(0, 1), (12, 1), (39, 1), (0, 5), (20, 7), (-4, 4)])
def test_delete_rows(rng, dtype, mode, k, p):
    m, n = 40, 9
    A, Q, R = factors(rng, m, n, dtype, mode)
    Q1, R1 = cuqr.qr_delete(Q, R, k, p, which="row")
    Qs, Rs = sl.qr_delete(Q, R, k, p, which="row")
    assert Q1.shape == Qs.shape and R1.shape == Rs.shape
    kk = k + m if k < 0 else k
    A1 = np.delete(A, range(kk, kk + p), axis=0)
    check_factors(Q1, R1, A1, dtype)
    same_r(R1, Rs, dtype, m, n)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("k,p", [(0, 1), (4, 1), (12, 1), (0, 3), (5, 4), (-2, 2)])
def test_delete_cols(rng, dtype, mode, k, p):
    m, n = 33, 13
    A, Q, R = factors(rng, m, n, dtype, mode)
    Q1, R1 = cuqr.qr_delete(Q, R, k, p, which="col")
    Qs, Rs = sl.qr_delete(Q, R, k, p, which="col")
    assert Q1.shape == Qs.shape and R1.shape == Rs.shape
    kk = k + n if k < 0 else k
    A1 = np.delete(A, range(kk, kk + p), axis=1)
    check_factors(Q1, R1, A1, dtype)
    same_r(R1, Rs, dtype, m, n - p)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("k", [1, 3])
def test_update(rng, dtype, mode, k):
    m, n = 35, 10
    A, Q, R = factors(rng, m, n, dtype, mode)
    u = rand(rng, (m, k), dtype)
    v = rand(rng, (n, k), dtype)
    if k == 1:
        u, v = u[:, 0], v[:, 0]
    Q1, R1 = cuqr.qr_update(Q, R, u, v)
    Qs, Rs = sl.qr_update(Q, R, u, v)
    assert Q1.shape == Qs.shape and R1.shape == Rs.shape
    A1 = A + u.reshape(m, k) @ v.reshape(n, k).conj().T
    check_factors(Q1, R1, A1, dtype)
    same_r(R1, Rs, dtype, m, n)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("op", ["insert_row", "insert_col", "delete_row", "delete_col", "update"])
@pytest.mark.parametrize("shape", [(5, 9), (6, 6), (9, 5)])
@pytest.mark.parametrize("mode", MODES)
def test_wide_and_to_wide(rng, dtype, op, shape, mode):
    """Updates of wide factorisations (M < N), and of tall ones that become wide (rows
    deleted past the square, columns inserted past it), against SciPy's shapes and the
    updated matrix."""
    m, n = shape
    A, Q, R = factors(rng, m, n, dtype, mode)
    if op == "insert_row":
        u = rand(rng, (2, n), dtype)
        args, A1 = (u, 1, "row"), np.insert(A, 1, u, axis=0)
        f, g = cuqr.qr_insert, sl.qr_insert
    elif op == "insert_col":
        u = rand(rng, (m, 5), dtype)
        args, A1 = (u, 2, "col"), np.insert(A, [2] * 5, u, axis=1)
        f, g = cuqr.qr_insert, sl.qr_insert
    elif op == "delete_row":
        p = m - 2
        args, A1 = (1, p, "row"), np.delete(A, range(1, 1 + p), axis=0)
        f, g = cuqr.qr_delete, sl.qr_delete
    elif op == "delete_col":
        args, A1 = (0, 2, "col"), np.delete(A, range(2), axis=1)
        f, g = cuqr.qr_delete, sl.qr_delete
    else:
        u, v = rand(rng, (m, 2), dtype), rand(rng, (n, 2), dtype)
        args, A1 = (u, v), A + u @ v.conj().T
        f, g = cuqr.qr_update, sl.qr_update
    Q1, R1 = f(Q, R, *args)
    Qs, Rs = g(Q, R, *args)
    assert Q1.shape == Qs.shape and R1.shape == Rs.shape
    check_factors(Q1, R1, A1, dtype)
    same_r(R1, Rs, dtype, *A1.shape)


@pytest.mark.parametrize("order", ["C", "F"])
def test_layouts_and_untouched_inputs(rng, order):
    A, Q, R = factors(rng, 30, 7, np.float64, "full", order=order)
    u = rng.standard_normal(7)
    Q0, R0, u0 = Q.copy(), R.copy(), u.copy()
    Q1, R1 = cuqr.qr_insert(Q, R, u, 4, overwrite_qru=True)
    assert np.array_equal(Q, Q0) and np.array_equal(R, R0) and np.array_equal(u, u0)
    assert Q1.flags["F_CONTIGUOUS"] and R1.flags["F_CONTIGUOUS"]
    check_factors(Q1, R1, np.insert(A, 4, u, axis=0), np.float64)


def test_lists_and_strided_views(rng):
    A, Q, R = factors(rng, 20, 5, np.float64, "full")
    Q1, R1 = cuqr.qr_delete(Q.tolist(), R.tolist(), 3)
    check_factors(Q1, R1, np.delete(A, 3, axis=0), np.float64)
    # a non-contiguous view of u
    big = rng.standard_normal((20, 6))
    Q2, R2 = cuqr.qr_insert(Q, R, big[:, ::2][:, 1], 2, which="col")
    check_factors(Q2, R2, np.insert(A, 2, big[:, 2], axis=1), np.float64)


def test_nearly_dependent_column_in_full_mode_is_accepted(rng):
    # SciPy's full mode accepts a column in the span of A (R gets a tiny pivot)
    A, Q, R = factors(rng, 25, 6, np.float64, "full")
    u = A[:, 0] + 2 * A[:, 3]
    Q1, R1 = cuqr.qr_insert(Q, R, u, 6, which="col")
    check_factors(Q1, R1, np.column_stack([A, u]), np.float64)
    assert abs(R1[6, 6]) < 1e-12 * np.linalg.norm(R)


def test_economic_column_in_span_raises_linalgerror(rng):
    A, Q, R = factors(rng, 25, 6, np.float64, "economic")
    # A column in the span of Q leaves a residual at the rounding level, which lands on
    # either side of the default rcond (machine epsilon) in SciPy too; rcond = 1e-10 puts
    # the test well clear of it, and a zero column is refused at the default.
    u = A[:, 0] + 2 * A[:, 3]
    with pytest.raises(np.linalg.LinAlgError, match="span of Q"):
        cuqr.qr_insert(Q, R, u, 2, which="col", rcond=1e-10)
    with pytest.raises(np.linalg.LinAlgError):
        sl.qr_insert(Q, R, u, 2, which="col", rcond=1e-10)
    with pytest.raises(np.linalg.LinAlgError, match="span of Q"):
        cuqr.qr_insert(Q, R, np.zeros(25), 2, which="col")
    # a second new column dependent on the first new one
    w = rng.standard_normal(25)
    with pytest.raises(np.linalg.LinAlgError):
        cuqr.qr_insert(Q, R, np.column_stack([w, 3 * w]), 2, which="col", rcond=1e-10)
    # a nearly dependent column: refused above its reciprocal condition number, taken below
    near = u + 1e-9 * rng.standard_normal(25)
    with pytest.raises(np.linalg.LinAlgError):
        cuqr.qr_insert(Q, R, near, 2, which="col", rcond=1e-6)
    Q1, R1 = cuqr.qr_insert(Q, R, near, 2, which="col", rcond=1e-14)
    assert Q1.shape == (25, 7)


BAD = [
    (lambda Q, R, u: cuqr.qr_insert(Q, R, u, 2, which="diag"), "'which'"),
    (lambda Q, R, u: cuqr.qr_insert(Q, R, u, 31, which="row"), "out of bounds"),
    (lambda Q, R, u: cuqr.qr_insert(Q, R, u, -31, which="row"), "out of bounds"),
    (lambda Q, R, u: cuqr.qr_insert(Q, R, u, 8, which="col"), "(M,)"),
    (lambda Q, R, u: cuqr.qr_insert(Q, R, u[:5], 1, which="row"), r"\(N,\)"),
    (lambda Q, R, u: cuqr.qr_insert(Q, R, u.astype(np.float32), 1), "same type"),
    (lambda Q, R, u: cuqr.qr_insert(Q, R.astype(np.float32), u, 1), "same dtype"),
    (lambda Q, R, u: cuqr.qr_insert(Q.astype(np.float16), R.astype(np.float16), u, 1), "float32, float64"),
    (lambda Q, R, u: cuqr.qr_insert(Q[:, :5], R, u, 1), "compatible shapes"),
    (lambda Q, R, u: cuqr.qr_insert(Q[0], R, u, 1), "2-D"),
    (lambda Q, R, u: cuqr.qr_delete(Q, R, 30), "out of bounds"),
    (lambda Q, R, u: cuqr.qr_delete(Q, R, 28, 3), "'p' is out of range"),
    (lambda Q, R, u: cuqr.qr_delete(Q, R, 2, 0), "'p' is out of range"),
    (lambda Q, R, u: cuqr.qr_delete(Q, R, 5, 3, which="col"), "'p' is out of range"),
    (lambda Q, R, u: cuqr.qr_update(Q, R, u, u), r"u.shape\[0\]"),
    (lambda Q, R, u: cuqr.qr_update(Q, R, np.ones((30, 2)), np.ones((7, 3))), "Second dimension"),
    (lambda Q, R, u: cuqr.qr_update(Q, R, np.ones((30, 8)), np.ones((7, 8))), "Update rank"),
]


@pytest.mark.parametrize("case", range(len(BAD)))
def test_bad_arguments_raise_valueerror(rng, case):
    A, Q, R = factors(rng, 30, 7, np.float64, "full")
    u = rng.standard_normal(7)
    call, msg = BAD[case]
    with pytest.raises(ValueError, match=msg):
        call(Q, R, u)


@pytest.mark.parametrize(
    "call",
    [
        lambda Q, R, u, v, **kw: cuqr.qr_insert(Q, R, u, 1, **kw),
        lambda Q, R, u, v, **kw: cuqr.qr_update(Q, R, v, u, **kw),
        lambda Q, R, u, v, **kw: cuqr.qr_delete(Q, R, 1, **kw),
    ],
)
def test_non_finite_input(rng, call):
    A, Q, R = factors(rng, 30, 7, np.float64, "full")
    u, v = rng.standard_normal(7), rng.standard_normal(30)
    Qbad = Q.copy()
    Qbad[3, 4] = np.nan
    with pytest.raises(ValueError, match="infs or NaNs"):
        call(Qbad, R, u, v)
    Rbad = R.copy()
    Rbad[0, 5] = np.inf
    with pytest.raises(ValueError, match="infs or NaNs"):
        call(Q, Rbad, u, v)
    # check_finite=False skips the scan; finite data gives the same answer
    Q1, R1 = call(Q, R, u, v, check_finite=False)
    Q2, R2 = call(Q, R, u, v)
    assert np.array_equal(Q1, Q2) and np.array_equal(R1, R2)


def test_non_finite_update_vector(rng):
    A, Q, R = factors(rng, 30, 7, np.float64, "economic")
    u = rng.standard_normal(7)
    u[2] = np.nan
    with pytest.raises(ValueError, match="infs or NaNs"):
        cuqr.qr_insert(Q, R, u, 1)


def test_torch_cpu_tensors_come_back_as_tensors(rng):
    torch = pytest.importorskip("torch")
    A, Q, R = factors(rng, 20, 6, np.float64, "full")
    u = rng.standard_normal(6)
    Q1, R1 = cuqr.qr_insert(torch.from_numpy(Q), torch.from_numpy(R), torch.from_numpy(u), 3)
    assert isinstance(Q1, torch.Tensor) and isinstance(R1, torch.Tensor)
    check_factors(Q1.numpy(), R1.numpy(), np.insert(A, 3, u, axis=0), np.float64)


@pytest.mark.parametrize("order", ["C", "F"])
def test_overwrite_writes_the_callers_arrays(rng, order):
    A, Q, R = factors(rng, 9, 5, np.float64, "full", order=order)
    u, v = rng.standard_normal(9), rng.standard_normal(5)
    Q1, R1 = cuqr.qr_update(Q, R, u, v, overwrite_qruv=True)
    assert Q1 is Q and R1 is R
    check_factors(Q, R, A + np.outer(u, v), np.float64)
    # row deletion: the trailing blocks, as in SciPy
    A2 = Q @ R
    Q2, R2 = cuqr.qr_delete(Q, R, 2, 3, overwrite_qr=True)
    assert np.shares_memory(Q2, Q) and np.shares_memory(R2, R)
    np.testing.assert_array_equal(Q2, Q[3:, 3:])
    np.testing.assert_array_equal(R2, R[3:, :])
    check_factors(Q2, R2, np.delete(A2, [2, 3, 4], axis=0), np.float64)


def test_overwrite_leaves_what_it_cannot_write(rng):
    A, Q, R = factors(rng, 9, 5, np.float64, "full")
    u, v = rng.standard_normal(9), rng.standard_normal(5)
    Qr = Q.copy()
    Qr.flags.writeable = False
    Q1, R1 = cuqr.qr_update(Qr, R.tolist(), u, v, overwrite_qruv=True)
    assert Q1 is not Qr and isinstance(R1, np.ndarray)
    np.testing.assert_array_equal(Qr, Q)
    Q2, R2 = cuqr.qr_update(Q.astype(">f8"), R, u, v, overwrite_qruv=True)
    check_factors(Q2, R2, A + np.outer(u, v), np.float64)
