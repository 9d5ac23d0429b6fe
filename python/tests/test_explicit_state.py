"""cuqr.ExplicitQR: explicit factors held between updates, against the dense matrix the
updates make and, for complex and wide factors (which the SciPy-style functions also
update as explicit factors), against the functions' results; all four dtypes, tall and
wide, full and economic; refusals leave the factors."""

import numpy as np
import pytest
import scipy.linalg as sl

import cuqr
from conftest import check_factors, rel, tol

DTYPES = [np.float32, np.float64, np.complex64, np.complex128]


def rand(rng, shape, dtype):
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("shape,mode", [((23, 7), "full"), ((23, 7), "economic"), ((6, 11), "full")])
def test_a_sequence_of_updates(rng, dtype, shape, mode):
    m, n = shape
    A = rand(rng, shape, dtype)
    F = cuqr.ExplicitQR.factorize(A, mode=mode)
    assert F.shape == (m, n) and F.dtype == np.dtype(dtype).name and F.device is None
    check_factors(F.Q, F.R, A, dtype)
    Q, R = F.Q, F.R  # the function route, step for step
    u = rand(rng, (2, n), dtype)
    F.insert_rows(-1, u)
    Q, R = cuqr.qr_insert(Q, R, u, m - 1, which="row")
    A = np.insert(A, [m - 1, m - 1], u, axis=0)
    c = rand(rng, m + 2, dtype)
    F.insert_cols(3, c)
    Q, R = cuqr.qr_insert(Q, R, c, 3, which="col")
    A = np.insert(A, 3, c, axis=1)
    F.delete_cols(0, 2)
    Q, R = cuqr.qr_delete(Q, R, 0, 2, which="col")
    A = A[:, 2:]
    if mode == "full":
        F.delete_rows(1, 3)
        Q, R = cuqr.qr_delete(Q, R, 1, 3, which="row")
        A = np.delete(A, [1, 2, 3], axis=0)
    uu, vv = rand(rng, (A.shape[0], 2), dtype), rand(rng, (A.shape[1], 2), dtype)
    F.update(uu, vv)
    Q, R = cuqr.qr_update(Q, R, uu, vv)
    A = A + uu @ vv.conj().T
    assert F.shape == A.shape
    check_factors(F.Q, F.R, A, dtype)
    if np.dtype(dtype).kind == "c" or m < n:
        # the functions take explicit factors here too: the same rotations
        assert rel(F.Q, Q) <= tol(dtype, m + 2) and rel(F.R, R) <= tol(dtype, m + 2)


def test_from_factors_and_refusals(rng):
    A = rand(rng, (15, 4), np.complex128)
    Q, R = sl.qr(A, mode="economic")
    F = cuqr.ExplicitQR(Q, R)
    Q0, R0 = F.Q, F.R
    assert np.array_equal(Q0, Q) and np.array_equal(R0, R)
    with pytest.raises(np.linalg.LinAlgError):
        F.insert_cols(1, A[:, 0] + 2j * A[:, 1])
    with pytest.raises(ValueError):
        F.delete_rows(14, 2)
    with pytest.raises(ValueError):
        F.insert_rows(0, np.ones(4, dtype=np.complex64))  # dtype
    with pytest.raises(ValueError):
        F.insert_rows(0, np.ones(5, dtype=complex))  # length
    bad = np.ones(4, dtype=complex)
    bad[2] = np.nan
    with pytest.raises(ValueError):
        F.insert_rows(0, bad)
    with pytest.raises(ValueError):
        F.update(np.ones((15, 2), complex), np.ones((4, 1), complex))
    assert np.array_equal(F.Q, Q0) and np.array_equal(F.R, R0)
    with pytest.raises(ValueError):
        cuqr.ExplicitQR(Q, R.astype(np.complex64))
    with pytest.raises(ValueError):
        cuqr.ExplicitQR.factorize(A, mode="r")
    with pytest.raises(ValueError):
        cuqr.ExplicitQR.factorize(A.real.astype(np.int64))
    assert "complex128" in repr(F)


def test_everything_deleted_and_empty(rng):
    A = rand(rng, (5, 3), np.float64)
    F = cuqr.ExplicitQR.factorize(A)
    F.delete_rows(0, 5)
    assert F.shape == (0, 3) and F.Q.shape == (0, 0) and F.R.shape == (0, 3)
    F.insert_rows(0, A[:2])
    check_factors(F.Q, F.R, A[:2], np.float64)
