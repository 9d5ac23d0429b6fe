"""cuqr.cholupdate against the definition R1ᵀR1 = RᵀR ± x xᵀ."""

import numpy as np
import pytest

import cuqr
from conftest import rel, tol


def chol_factor(rng, n, dtype, m=None):
    B = rng.standard_normal((m or 3 * n, n))
    R = np.linalg.cholesky(B.T @ B).T.astype(dtype)
    return B, R


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("n", [1, 7, 45])
@pytest.mark.parametrize("k", [None, 3])
def test_update_then_downdate(rng, dtype, n, k):
    B, R = chol_factor(rng, n, dtype)
    x = rng.standard_normal(n if k is None else (n, k)).astype(dtype)
    X = x.reshape(n, -1).astype(np.float64)
    R1 = cuqr.cholupdate(R, x, "+")
    assert R1.dtype == dtype and R1.shape == (n, n)
    assert np.all(np.tril(R1, -1) == 0) and np.all(np.diag(R1) > 0)
    G = R.astype(np.float64).T @ R.astype(np.float64)
    assert rel(R1.astype(np.float64).T @ R1, G + X @ X.T) <= tol(dtype, 4 * n, n)
    # the downdate takes it back: R has a positive diagonal, so the factor is unique
    R2 = cuqr.cholupdate(R1, x, "-")
    kappa = np.linalg.cond(R.astype(np.float64)) ** 2
    assert rel(R2, R * np.sign(np.diag(R))[:, None]) <= kappa * tol(dtype, 4 * n, n)


def test_downdate_that_loses_definiteness_raises(rng):
    B, R = chol_factor(rng, 6, np.float64)
    R0 = R.copy()
    x = 10 * np.linalg.norm(B) * rng.standard_normal(6)
    with pytest.raises(np.linalg.LinAlgError):
        cuqr.cholupdate(R, x, "-")
    assert np.array_equal(R, R0)


def test_bad_arguments(rng):
    B, R = chol_factor(rng, 5, np.float64)
    with pytest.raises(ValueError, match="sign"):
        cuqr.cholupdate(R, np.ones(5), "*")
    with pytest.raises(ValueError, match="square"):
        cuqr.cholupdate(R[:, :4], np.ones(5))
    with pytest.raises(ValueError, match=r"\(n,\)"):
        cuqr.cholupdate(R, np.ones(4))
    with pytest.raises(ValueError, match="same type"):
        cuqr.cholupdate(R, np.ones(5, dtype=np.float32))
    with pytest.raises(ValueError, match="infs or NaNs"):
        cuqr.cholupdate(R, np.full(5, np.inf))
