"""cuqr.SmallState on the GPU: every recorded step against NumPy's least-squares solution of
the same rows, host rows and CuPy/torch rows alike, refusals leaving the state as it was.
Skipped without a GPU (CUQR_REQUIRE_GPU=1 makes a missing GPU a failure)."""

import numpy as np
import pytest

import cuqr
from conftest import require_gpu

if not cuqr.cuda_available():
    if require_gpu():
        raise RuntimeError("CUQR_REQUIRE_GPU=1 but no usable CUDA device")
    pytest.skip("no usable CUDA device", allow_module_level=True)


def rows(seed, count, n, dtype=np.float64):
    rng = np.random.default_rng(seed)
    X = rng.uniform(-1, 1, (count, n)).astype(dtype)
    y = rng.uniform(-1, 1, count).astype(dtype)
    return X, y


def bound(A, b, k, u):
    """First-order bounds on x and on the residual norm after k backward-stable steps
    (tau = 10 (m + n) u (1 + k); docs/algorithms.md#accuracy-measures)."""
    m, n = A.shape
    x, *_ = np.linalg.lstsq(A, b, rcond=None)
    r = b - A @ x
    s = np.linalg.svd(A, compute_uv=False)[-1]
    tau = 10 * (m + n) * u * (1 + k)
    dA, db = tau * np.linalg.norm(A), tau * np.linalg.norm(b)
    nx, nr = np.linalg.norm(x), np.linalg.norm(r)
    return x, nr, 2 * ((dA * nx + db) / s + dA * nr / s**2), 2 * (dA * nx + db)


@pytest.mark.parametrize("m,n,dtype", [(252, 5, np.float64), (60, 33, np.float64), (80, 7, np.float32)])
def test_window_steps_match_lstsq(m, n, dtype):
    steps = 120
    X, y = rows(m * n, m + steps, n, dtype)
    st = cuqr.SmallState(X[:m], y[:m], record=steps, refresh_every=0)
    for t in range(m, m + steps):
        st.slide(X[t], float(y[t]))
    rep = st.sync()
    assert rep["steps"] == steps and rep["refused"] == 0
    xs, rss = st.recorded()
    assert xs.shape == (steps, n) and rss.shape == (steps,)
    u = np.finfo(dtype).eps / 2
    Xd, yd = X.astype(np.float64), y.astype(np.float64)
    for t in range(0, steps, 7):
        lo = t + 1
        x, nr, xtol, rtol = bound(Xd[lo:lo + m], yd[lo:lo + m], t + 1, u)
        assert np.linalg.norm(xs[t] - x) <= xtol
        assert abs(np.sqrt(max(rss[t], 0)) - nr) <= rtol


def test_recursive_matches_weighted_lstsq():
    m0, n, steps, lam = 20, 6, 150, 0.97
    X, y = rows(5, m0 + steps, n)
    st = cuqr.SmallState(X[:m0], y[:m0], forget=lam, record=steps)
    for t in range(m0, m0 + steps):
        st.push(X[t], float(y[t]))
    xs, _ = st.recorded()
    t = steps - 1
    total = m0 + t + 1
    w = np.array([lam ** (t + 1 if i < m0 else m0 + t - i) for i in range(total)])
    sw = np.sqrt(w)
    x, _, xtol, _ = bound(X[:total] * sw[:, None], y[:total] * sw, t + 1, np.finfo(float).eps / 2)
    assert np.linalg.norm(xs[t] - x) <= xtol


def test_refusal_leaves_state_and_records_nan():
    m, n = 6, 3
    X, y = rows(7, m + 3, n)
    X[1 : m + 2, 2] = 0.0  # column 2 lives only in row 0 and in the last new row
    st = cuqr.SmallState(X[:m], y[:m], record=4)
    x0, r0 = st.solve()
    st.slide(X[m], float(y[m]))
    rep = st.sync()
    assert rep["refused"] == 1 and rep["first_refused"] == 0 and "downdate" in rep["last_reason"]
    x1, r1 = st.solve()
    assert np.array_equal(x0, x1) and r0 == r1
    assert np.isnan(st.recorded()[0][0]).all()
    with pytest.raises(ValueError):
        st.slide(np.array([1.0, np.inf, 0.0]), 1.0)
    with pytest.raises(ValueError):
        st.slide(np.ones(2), 1.0)
    with pytest.raises(ValueError):
        st.push(np.ones(3), 1.0)


def _device_libs():
    out = []
    try:
        import cupy

        out.append(cupy.asarray)
    except ImportError:
        pass
    try:
        import torch

        if torch.cuda.is_available():
            out.append(lambda a: torch.from_numpy(np.ascontiguousarray(a)).cuda())
    except ImportError:
        pass
    if not out and require_gpu():
        raise RuntimeError("CUQR_REQUIRE_GPU=1 but neither CuPy nor PyTorch CUDA is installed")
    return out


@pytest.mark.parametrize("to_dev", _device_libs())
def test_device_rows_agree_with_host_rows(to_dev):
    m, n, steps = 100, 9, 60
    X, y = rows(11, m + steps, n)
    host = cuqr.SmallState(X[:m], y[:m], record=steps)
    dev = cuqr.SmallState(to_dev(X[:m]), to_dev(y[:m]), record=steps + 1)
    Xd, yd = to_dev(X), to_dev(y)
    for t in range(m, m + steps):
        host.slide(X[t], float(y[t]))
        dev.slide(Xd[t], yd[t : t + 1])
    assert dev.sync()["refused"] == 0
    xh, rh = host.recorded()
    xd, rd = dev.recorded()
    xd, rd = xd[:steps], rd[:steps]
    # The same arithmetic on the same values: bit for bit.
    assert np.array_equal(xh, xd) and np.array_equal(rh, rd)
    # A non-finite device row is refused on the device.
    bad = X[m].copy()
    bad[3] = np.nan
    before = dev.solve()
    dev.slide(to_dev(bad), yd[0:1])
    rep = dev.sync()
    assert rep["refused"] == 1 and "not finite" in rep["last_reason"]
    after = dev.solve()
    assert np.array_equal(before[0], after[0])
