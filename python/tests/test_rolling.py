"""cuqr.rolling_lstsq against statsmodels' RollingOLS, and recursive_lstsq against weighted
least squares (np.linalg.lstsq). Well-conditioned random designs: 1e-10 relative."""

import numpy as np
import pytest

import cuqr

from conftest import rel


def _design(rng, T, k, S=None):
    shape = (T, k - 1) if S is None else (T, S, k - 1)
    ones = np.ones(shape[:-1] + (1,))
    return np.concatenate([ones, rng.standard_normal(shape)], axis=-1)


def _rolling_ols(y, X, window, reset=None, **kw):
    sm = pytest.importorskip("statsmodels.regression.rolling")
    res = sm.RollingOLS(y, X, window=window, **kw).fit(reset=reset)
    return np.asarray(res.params), np.asarray(res.ssr)


def _close(a, b, tol=1e-10):
    """NaN in the same places, and relative error below tol elsewhere."""
    a, b = np.asarray(a), np.asarray(b)
    assert np.array_equal(np.isnan(a), np.isnan(b))
    ok = ~np.isnan(b)
    assert rel(a[ok], b[ok]) < tol


# statsmodels divides by nobs - k = 0 for its s2 in the first expanding window
@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")
@pytest.mark.parametrize("kw", [{}, {"min_nobs": 12, "expanding": True}, {"expanding": True}])
def test_matches_rolling_ols(rng, kw):
    T, k, w = 301, 4, 45
    X = _design(rng, T, k)
    y = X @ rng.standard_normal(k) + 0.3 * rng.standard_normal(T)
    params, rss = cuqr.rolling_lstsq(y, X, w, return_rss=True, **kw)
    p_sm, ssr_sm = _rolling_ols(y, X, w, **kw)
    assert params.shape == (T, k) and rss.shape == (T,)
    _close(params, p_sm)
    _close(rss, ssr_sm)


def test_many_series_shared_and_per_series_designs(rng):
    T, S, k, w = 157, 5, 3, 30
    X = _design(rng, T, k)
    Y = X @ rng.standard_normal((k, S)) + 0.2 * rng.standard_normal((T, S))
    params = cuqr.rolling_lstsq(Y, X, w)
    assert params.shape == (T, S, k)
    X3 = _design(rng, T, k, S)
    Y3 = np.einsum("tsk,sk->ts", X3, rng.standard_normal((S, k))) + 0.2 * rng.standard_normal((T, S))
    params3, rss3 = cuqr.rolling_lstsq(Y3, X3, w, return_rss=True)
    for s in range(S):
        _close(params[:, s], _rolling_ols(Y[:, s], X, w)[0])
        p_sm, ssr_sm = _rolling_ols(Y3[:, s], X3[:, s], w)
        _close(params3[:, s], p_sm)
        _close(rss3[:, s], ssr_sm)


def test_missing_drop_and_skip(rng):
    T, k, w = 200, 3, 25
    X = _design(rng, T, k)
    y = X @ rng.standard_normal(k) + 0.1 * rng.standard_normal(T)
    y[40] = np.nan
    X[120, 1] = np.nan
    _close(cuqr.rolling_lstsq(y, X, w), _rolling_ols(y, X, w)[0])  # missing="drop"
    p = cuqr.rolling_lstsq(y, X, w, missing="skip")
    # RollingOLS's running XᵀX misses the rows that enter and leave during skipped windows
    # (its estimates after them are off until a reset): reset=1 recomputes it every window.
    p_sm, _ = _rolling_ols(y, X, w, reset=1, missing="skip")
    # RollingOLS does not count a NaN in a window's oldest row under "skip" (it estimates
    # from the other rows there); cuqr gives NaN for every window holding one.
    for t in (40 + w - 1, 120 + w - 1):
        assert np.isnan(p[t]).all()
        p_sm[t] = np.nan
    _close(p, p_sm)
    with pytest.raises(ValueError):
        cuqr.rolling_lstsq(y, X, w, missing="raise")


def test_forgetting_in_windows_and_recursive(rng):
    T, k, w, lam = 120, 3, 40, 0.96
    X = _design(rng, T, k)
    y = X @ rng.standard_normal(k) + 0.5 * rng.standard_normal(T)

    def wls(lo, t):
        sw = np.sqrt(lam ** (t - np.arange(lo, t + 1)))
        return np.linalg.lstsq(X[lo : t + 1] * sw[:, None], y[lo : t + 1] * sw, rcond=None)[0]

    p = cuqr.rolling_lstsq(y, X, w, forget=lam)
    for t in range(w - 1, T, 7):
        assert rel(p[t], wls(t - w + 1, t)) < 1e-10
    r, rss = cuqr.recursive_lstsq(y, X, lam, return_rss=True)
    assert np.isnan(r[: k - 1]).all() and np.isnan(rss[: k - 1]).all()
    for t in range(k - 1, T, 5):
        assert rel(r[t], wls(0, t)) < 1e-10


def test_rank_deficient_window_is_nan(rng):
    T, k, w = 80, 3, 10
    X = _design(rng, T, k)
    X[20:40, 2] = 0.0
    y = X @ np.array([1.0, 2.0, 3.0]) + 0.1 * rng.standard_normal(T)
    p = cuqr.rolling_lstsq(y, X, w)
    assert np.isnan(p[20 + w - 1 : 40]).all()
    assert np.isfinite(p[w - 1 : 20 + w - 1]).all() and np.isfinite(p[40:]).all()


def test_dtypes_devices_and_errors(rng):
    T, k, w = 60, 2, 15
    X = _design(rng, T, k)
    y = X @ np.array([1.0, -1.0]) + 0.1 * rng.standard_normal(T)
    p32 = cuqr.rolling_lstsq(y.astype(np.float32), X.astype(np.float32), w)
    assert p32.dtype == np.float32
    assert rel(p32[w - 1 :], cuqr.rolling_lstsq(y, X, w)[w - 1 :]) < 1e-4
    if cuqr.cuda_available():
        assert rel(cuqr.rolling_lstsq(y, X, w, device="cuda")[w - 1 :],
                   cuqr.rolling_lstsq(y, X, w, device="cpu")[w - 1 :]) < 1e-10
    else:
        with pytest.raises(RuntimeError, match="CUDA|GPU|driver"):
            cuqr.rolling_lstsq(y, X, w, device="cuda")
    for bad in [dict(window=0), dict(window=w, min_nobs=1), dict(window=w, forget=1.5),
                dict(window=w, missing="zero"), dict(window=w, device="tpu")]:
        with pytest.raises(ValueError):
            cuqr.rolling_lstsq(y, X, **bad)
    with pytest.raises(ValueError):
        cuqr.rolling_lstsq(y, X[:-1], w)
    with pytest.raises(ValueError):
        cuqr.recursive_lstsq(y, X, 0.0)
