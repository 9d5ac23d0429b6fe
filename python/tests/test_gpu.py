"""The same checks with CuPy arrays and PyTorch CUDA tensors: the GPU backend, results of the
caller's kind on the caller's device, and no host copy of the matrices. Skipped without a
GPU (CUQR_REQUIRE_GPU=1 makes a missing GPU a failure)."""

import resource

import numpy as np
import pytest
import scipy.linalg as sl

import cuqr
from conftest import check_factors, rel, require_gpu, tol

if not cuqr.cuda_available():
    if require_gpu():
        raise RuntimeError("CUQR_REQUIRE_GPU=1 but no usable CUDA device")
    pytest.skip("no usable CUDA device", allow_module_level=True)


def libs():
    out = []
    try:
        import cupy

        out.append(("cupy", cupy.asarray, cupy.asnumpy, cupy.ndarray))
    except ImportError:
        pass
    try:
        import torch

        if torch.cuda.is_available():
            out.append(
                ("torch", lambda x: torch.from_numpy(np.asarray(x)).cuda(), lambda x: x.cpu().numpy(), torch.Tensor)
            )
    except ImportError:
        pass
    if not out and require_gpu():
        raise RuntimeError("CUQR_REQUIRE_GPU=1 but neither CuPy nor PyTorch CUDA is installed")
    return out


LIBS = libs()


@pytest.fixture(params=LIBS, ids=[l[0] for l in LIBS])
def lib(request):
    return request.param


def is_cuda(x, lib):
    name, _, _, cls = lib
    if not isinstance(x, cls):
        return False
    return x.is_cuda if name == "torch" else True


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mode", ["full", "economic"])
def test_functions_on_device_arrays(rng, lib, dtype, mode):
    _, to_dev, to_host, _ = lib
    m, n = 97, 23
    A = rng.standard_normal((m, n)).astype(dtype)
    Q, R = sl.qr(A, mode=mode)
    u = rng.standard_normal(n).astype(dtype)
    for order in ("F", "C"):
        Qd = to_dev(np.asarray(Q, order=order))
        Rd = to_dev(np.asarray(R, order=order))
        Q1, R1 = cuqr.qr_insert(Qd, Rd, to_dev(u), 40, which="row")
        assert is_cuda(Q1, lib) and is_cuda(R1, lib)
        check_factors(to_host(Q1), to_host(R1), np.insert(A, 40, u, axis=0), dtype)
    c = rng.standard_normal((m, 2)).astype(dtype)
    Q1, R1 = cuqr.qr_insert(to_dev(Q), to_dev(R), to_dev(c), 7, which="col")
    check_factors(to_host(Q1), to_host(R1), np.insert(A, [7, 7], c, axis=1), dtype)
    Q1, R1 = cuqr.qr_delete(to_dev(Q), to_dev(R), 10, 5, which="row")
    check_factors(to_host(Q1), to_host(R1), np.delete(A, range(10, 15), axis=0), dtype)
    Q1, R1 = cuqr.qr_delete(to_dev(Q), to_dev(R), 3, 2, which="col")
    check_factors(to_host(Q1), to_host(R1), np.delete(A, [3, 4], axis=1), dtype)
    uu, vv = rng.standard_normal(m).astype(dtype), rng.standard_normal(n).astype(dtype)
    Q1, R1 = cuqr.qr_update(to_dev(Q), to_dev(R), to_dev(uu), to_dev(vv))
    check_factors(to_host(Q1), to_host(R1), A + np.outer(uu, vv), dtype)


def crandn(rng, shape, dtype):
    x = rng.standard_normal(shape)
    if np.dtype(dtype).kind == "c":
        x = x + 1j * rng.standard_normal(shape)
    return x.astype(dtype)


@pytest.mark.parametrize("dtype", [np.complex64, np.complex128, np.float64])
@pytest.mark.parametrize("shape,mode", [((97, 23), "full"), ((97, 23), "economic"), ((9, 31), "full")])
def test_complex_and_wide_factors_on_device(rng, lib, dtype, shape, mode):
    """Complex and wide factors are updated on the caller's GPU (Q never leaves it): the
    results are device arrays of the input's dtype, equal to the CPU's (the same rotations
    in the same order) within the bound, for Fortran-ordered, C-ordered and strided Q."""
    name, to_dev, to_host, _ = lib
    if dtype == np.float64 and shape[0] > shape[1]:
        pytest.skip("tall real factors take cuqr's states (test_functions_on_device_arrays)")
    m, n = shape
    A = crandn(rng, (m, n), dtype)
    Q, R = sl.qr(A, mode=mode)
    Q, R = Q.astype(dtype), R.astype(dtype)
    bound = tol(dtype, m + 3, n + 2)

    def agree(dev, host):
        for d, h in zip(dev, host):
            assert is_cuda(d, lib)
            d = to_host(d)
            assert d.dtype == dtype and d.shape == h.shape
            assert rel(d, h) <= bound, rel(d, h)

    u = crandn(rng, n, dtype)
    big = crandn(rng, (m + 5, 2 * Q.shape[1] + 3), dtype)
    big[2 : 2 + m, 1 : 1 + 2 * Q.shape[1] : 2] = Q
    strided = to_dev(big)[2 : 2 + m, 1 : 1 + 2 * Q.shape[1] : 2]
    for Qd in (to_dev(np.asfortranarray(Q)), to_dev(np.ascontiguousarray(Q)), strided):
        got = cuqr.qr_insert(Qd, to_dev(R), to_dev(u), 4, which="row")
        agree(got, cuqr.qr_insert(Q, R, u, 4, which="row"))
    got = cuqr.qr_insert(Qd, to_dev(R), to_dev(u), 4, which="row")
    check_factors(to_host(got[0]), to_host(got[1]), np.insert(A, 4, u, axis=0), dtype)
    c = crandn(rng, (m, 2), dtype)
    agree(
        cuqr.qr_insert(to_dev(Q), to_dev(R), to_dev(c), 7, which="col"),
        cuqr.qr_insert(Q, R, c, 7, which="col"),
    )
    if mode == "full":
        agree(
            cuqr.qr_delete(to_dev(Q), to_dev(R), 2, 3, which="row"),
            cuqr.qr_delete(Q, R, 2, 3, which="row"),
        )
    agree(
        cuqr.qr_delete(to_dev(Q), to_dev(R), 3, 2, which="col"),
        cuqr.qr_delete(Q, R, 3, 2, which="col"),
    )
    uu, vv = crandn(rng, m, dtype), crandn(rng, n, dtype)
    got = cuqr.qr_update(to_dev(Q), to_dev(R), to_dev(uu), to_dev(vv))
    agree(got, cuqr.qr_update(Q, R, uu, vv))
    check_factors(to_host(got[0]), to_host(got[1]), A + np.outer(uu, vv.conj()), dtype)
    if name == "torch" and np.dtype(dtype).kind == "c":
        # a lazily conjugated tensor: PyTorch's conjugate bit, resolved before the copy
        Qc = to_dev(np.ascontiguousarray(Q.conj())).conj()
        assert Qc.is_conj()
        agree(
            cuqr.qr_insert(Qc, to_dev(R), to_dev(u), 4, which="row"),
            cuqr.qr_insert(Q, R, u, 4, which="row"),
        )


@pytest.mark.parametrize("dtype", [np.complex128, np.complex64, np.float64])
@pytest.mark.parametrize("mode", ["full", "economic"])
def test_explicit_state_on_device(rng, lib, dtype, mode):
    """cuqr.ExplicitQR of a device array holds Q on its GPU through a sequence of updates
    and agrees with the CPU state (the same rotations) within the bound."""
    _, to_dev, to_host, _ = lib
    m, n = 61, 13
    A = crandn(rng, (m, n), dtype)
    G = cuqr.ExplicitQR.factorize(to_dev(A), mode=mode)
    C = cuqr.ExplicitQR(to_host(G.Q), to_host(G.R))
    assert G.device is not None and C.device is None
    steps = [
        ("insert_rows", (5, crandn(rng, (3, n), dtype))),
        ("insert_cols", (-1, crandn(rng, (m + 3, 2), dtype))),
        ("delete_cols", (0, 2)),
        ("update", (crandn(rng, m + 3, dtype), crandn(rng, n, dtype))),
        ("delete_rows", (-4, 2)),
    ]
    for name, args in steps:
        getattr(C, name)(*args)
        getattr(G, name)(*[to_dev(a) if isinstance(a, np.ndarray) else a for a in args])
        Q, R = G.Q, G.R
        assert is_cuda(Q, lib) and is_cuda(R, lib)
        bound = tol(dtype, m + 3, n + 2)
        assert rel(to_host(Q), C.Q) <= bound and rel(to_host(R), C.R) <= bound, name
    assert G.shape == C.shape == (m + 1, n)
    Q0 = to_host(G.Q)
    with pytest.raises(ValueError):
        G.delete_rows(m + 1, 1)
    assert np.array_equal(to_host(G.Q), Q0)


def test_complex_refusals_on_device(rng, lib):
    """Refused complex updates on device arrays raise SciPy's exceptions."""
    _, to_dev, _, _ = lib
    A = crandn(rng, (40, 6), np.complex128)
    Qe, Re = sl.qr(A, mode="economic")
    with pytest.raises(np.linalg.LinAlgError):
        cuqr.qr_insert(to_dev(Qe), to_dev(Re), to_dev(A[:, 0] + 1j * A[:, 1]), 1, which="col")
    Qn = Qe.copy()
    Qn[5, 2] = np.nan
    with pytest.raises(ValueError):
        cuqr.qr_delete(to_dev(Qn), to_dev(Re), 1, which="col")
    with pytest.raises(ValueError):
        cuqr.qr_update(to_dev(Qe), to_dev(Re.astype(np.complex64)), to_dev(A[:, 0]), to_dev(A[0]))


def test_cholupdate_on_device(rng, lib):
    _, to_dev, to_host, _ = lib
    B = rng.standard_normal((60, 12))
    R = np.linalg.cholesky(B.T @ B).T
    x = rng.standard_normal(12)
    R1 = cuqr.cholupdate(to_dev(R), to_dev(x))
    assert is_cuda(R1, lib)
    R1 = to_host(R1)
    assert rel(R1.T @ R1, B.T @ B + np.outer(x, x)) <= tol(np.float64, 60, 12)
    assert np.all(np.diag(R1) > 0)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("mode", ["full", "economic"])
def test_batches_of_device_arrays(rng, lib, dtype, mode):
    # leading batch dimensions: results of the caller's kind, with the batch shape
    _, to_dev, to_host, _ = lib
    batch, m, n = (2, 3), 45, 13
    A = rng.standard_normal(batch + (m, n)).astype(dtype)
    Q, R = (x.astype(dtype) for x in sl.qr(A, mode=mode))
    Qd, Rd = to_dev(Q), to_dev(R)
    u = rng.standard_normal(batch + (m, 2)).astype(dtype)
    v = rng.standard_normal(batch + (n, 2)).astype(dtype)
    Q1, R1 = cuqr.qr_update(Qd, Rd, to_dev(u), to_dev(v))
    assert is_cuda(Q1, lib) and is_cuda(R1, lib) and tuple(Q1.shape[:2]) == batch
    Q1, R1 = to_host(Q1), to_host(R1)
    for i in np.ndindex(batch):
        check_factors(Q1[i], R1[i], A[i] + u[i] @ v[i].T, dtype)
    k = rng.integers(0, m + 1, size=batch)
    row = rng.standard_normal(n).astype(dtype)
    Q1, R1 = cuqr.qr_insert(Qd, Rd, to_dev(row), k, which="row")
    Q1, R1 = to_host(Q1), to_host(R1)
    for i in np.ndindex(batch):
        check_factors(Q1[i], R1[i], np.insert(A[i], k[i], row, axis=0), dtype)
    Q1, R1 = cuqr.qr_delete(Qd, Rd, 3, 2, which="col")
    Q1, R1 = to_host(Q1), to_host(R1)
    for i in np.ndindex(batch):
        check_factors(Q1[i], R1[i], np.delete(A[i], [3, 4], axis=1), dtype)
    B = rng.standard_normal(batch + (30, 8))
    Rc = np.swapaxes(np.linalg.cholesky(np.swapaxes(B, -1, -2) @ B), -1, -2)
    x = rng.standard_normal(batch + (8, 1))
    R1 = cuqr.cholupdate(to_dev(Rc), to_dev(x))
    assert is_cuda(R1, lib)
    R1 = to_host(R1)
    for i in np.ndindex(batch):
        G = B[i].T @ B[i] + x[i] @ x[i].T
        assert rel(R1[i].T @ R1[i], G) <= tol(np.float64, 30, 8)


def test_failing_problem_of_a_device_batch(rng, lib):
    _, to_dev, _, _ = lib
    A = rng.standard_normal((3, 40, 6))
    Q, R = sl.qr(A, mode="economic")
    u = rng.standard_normal((3, 40, 1))
    u[2] = Q[2] @ rng.standard_normal((6, 1))
    with pytest.raises(np.linalg.LinAlgError, match=r"batch index \(2,\)"):
        cuqr.qr_insert(to_dev(Q), to_dev(R), to_dev(u), 1, which="col", rcond=1e-10)


@pytest.mark.parametrize("q", ["thin", "full", None])
def test_qr_class_on_device(rng, lib, q):
    _, to_dev, to_host, _ = lib
    m, n = 301, 19
    A, b = rng.standard_normal((m, n)), rng.standard_normal(m)
    qr = cuqr.QR(to_dev(A), to_dev(b), q=q, keep_data=True)
    assert qr.device == "cuda:0"
    U = rng.standard_normal((m, 2))
    qr.insert_cols(4, to_dev(U))
    A = np.insert(A, [4, 4], U, axis=1)
    rows, e = rng.standard_normal((6, n + 2)), rng.standard_normal(6)
    qr.slide(to_dev(rows), to_dev(e))
    A, b = np.vstack([A[6:], rows]), np.concatenate([b[6:], e])
    qr.delete_rows(0, 3)
    A, b = A[3:], b[3:]
    # rank-one changes with u on the device (read there), v on the device or the host
    for v_dev in (True, False):
        u, v = rng.standard_normal(A.shape[0]), 0.1 * rng.standard_normal(n + 2)
        qr.rank_one(to_dev(u), to_dev(v) if v_dev else v)
        A = A + np.outer(u, v)
    with pytest.raises(ValueError):
        qr.rank_one(to_dev(np.full(A.shape[0], np.nan)), to_dev(np.ones(n + 2)))
    with pytest.raises(ValueError):
        qr.rank_one(to_dev(np.ones(A.shape[0] + 1)), to_dev(np.ones(n + 2)))
    x = qr.solve()
    assert is_cuda(x, lib) and tuple(x.shape) == (n + 2,)
    ref = np.linalg.lstsq(A, b, rcond=None)[0]
    assert rel(to_host(x), ref) <= 10 * np.linalg.cond(A) ** 2 * tol(np.float64, *A.shape)
    R = qr.R
    assert is_cuda(R, lib)
    if q is not None:
        Q = to_host(qr.Q)
        assert rel(Q @ to_host(R), A) <= tol(np.float64, *A.shape)


def test_asking_about_devices_leaves_the_current_device(lib):
    """Opening a device to ask whether it opens (any ordinal, present or not) leaves the
    thread's current CUDA device, which CuPy and PyTorch allocate on, where it was."""
    _, to_dev, _, _ = lib
    before = cuqr._cuqr.array_device(to_dev(np.ones(3)))
    for n in range(4):
        cuqr.cuda_available(n)
        cuqr._cuqr.cuda_unavailable_reason(n)
    assert cuqr._cuqr.array_device(to_dev(np.ones(3))) == before


def test_host_inputs_on_a_gpu_state(rng):
    A, b = rng.standard_normal((200, 10)), rng.standard_normal(200)
    qr = cuqr.QR(A, b, q="thin", device="cuda")
    assert qr.device == "cuda:0"
    qr.delete_rows(5, 5)
    A, b = np.delete(A, range(5, 10), axis=0), np.delete(b, range(5, 10))
    assert isinstance(qr.solve(), np.ndarray)
    assert rel(qr.solve(), np.linalg.lstsq(A, b, rcond=None)[0]) <= 1e-10


def test_errors_on_device(rng, lib):
    _, to_dev, _, _ = lib
    A = rng.standard_normal((40, 6))
    Q, R = sl.qr(A)
    Qn = Q.copy()
    Qn[2, 2] = np.nan
    with pytest.raises(ValueError):
        cuqr.qr_delete(to_dev(Qn), to_dev(R), 1)
    with pytest.raises(ValueError):
        cuqr.qr_delete(to_dev(Q), R, 1)  # mixed devices
    with pytest.raises(np.linalg.LinAlgError):
        Qe, Re = sl.qr(A, mode="economic")
        cuqr.qr_insert(to_dev(Qe), to_dev(Re), to_dev(A[:, 0] + A[:, 1]), 1, which="col")


NO_HOST_COPY = r"""
import resource, sys, threading, time
import cuqr
name, dtype, m = sys.argv[1], sys.argv[2], int(sys.argv[3])
if name == "cupy":
    import cupy as xp
    kw = {}
else:
    import torch as xp
    kw = {"device": "cuda"}

dt = getattr(xp, dtype)

def factors(m, n):
    Q = xp.eye(m, dtype=dt, **kw)
    R = xp.zeros((m, n), dtype=dt, **kw)
    R[:n] = xp.triu(xp.ones((n, n), dtype=dt, **kw)) + n * xp.eye(n, dtype=dt, **kw)
    return Q, R, xp.ones(n, dtype=dt, **kw)

def rss_kib():
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * resource.getpagesize() // 1024

Q, R, u = factors(300, 40)          # warm-up: CUDA libraries, kernels, memory pools
Q1, R1 = cuqr.qr_insert(Q, R, u, 17)
Q2, R2 = cuqr.qr_delete(Q1, R1, 17)
Q, R, u = factors(m, 40)
# the resident size, sampled every 0.5 ms while cuqr works (it releases the interpreter lock)
high, done = [rss_kib()], threading.Event()
def sample():
    while not done.is_set():
        high[0] = max(high[0], rss_kib())
        time.sleep(0.0005)
before = rss_kib()
t = threading.Thread(target=sample)
t.start()
Q1, R1 = cuqr.qr_insert(Q, R, u, 17)
Q2, R2 = cuqr.qr_delete(Q1, R1, 17)
done.set()
t.join()
assert tuple(Q1.shape) == (m + 1, m + 1) and tuple(Q2.shape) == (m, m)
grown = (high[0] - before) / 1024
print(f"resident size grew by at most {grown:.1f} MB")
assert grown < 100, f"resident size grew by {grown:.0f} MB"
"""


@pytest.mark.parametrize("dtype,m", [("float64", 6000), ("complex128", 4000)])
def test_no_host_copy_of_device_matrices(lib, dtype, m):
    """A 6000×6000 float64 Q is 288 MB, a 4000×4000 complex128 one 256 MB: a copy through
    the host would raise the resident size of the process by at least that much while it
    lives; sampled every 0.5 ms during the calls, the device path stays far below."""
    import subprocess
    import sys

    out = subprocess.run(
        [sys.executable, "-c", NO_HOST_COPY, lib[0], dtype, str(m)],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    print(out.stdout)


@pytest.mark.parametrize("lib", [l[0] for l in libs()])
@pytest.mark.parametrize("per_series", [False, True])
def test_rolling_on_device_arrays(lib, per_series, rng):
    """CUDA arrays in, CUDA arrays of the same library out, agreeing with the CPU walk
    (and so with RollingOLS) to 1e-10; recursive least squares and float32 likewise."""
    to_dev, to_host, kind = next((f, g, k) for n, f, g, k in libs() if n == lib)
    T, S, k, w = 700, 37, 4, 60
    shape = (T, S, k - 1) if per_series else (T, k - 1)
    X = np.concatenate([np.ones(shape[:-1] + (1,)), rng.standard_normal(shape)], axis=-1)
    beta = rng.standard_normal((S, k))
    fit = np.einsum("tsk,sk->ts", X, beta) if per_series else X @ beta.T
    y = fit + 0.1 * rng.standard_normal((T, S))
    p_dev, rss_dev = cuqr.rolling_lstsq(to_dev(y), to_dev(X), w, return_rss=True)
    assert isinstance(p_dev, kind) and tuple(p_dev.shape) == (T, S, k)
    p_cpu, rss_cpu = cuqr.rolling_lstsq(y, X, w, return_rss=True, device="cpu")
    p_dev, rss_dev = to_host(p_dev), to_host(rss_dev)
    assert np.array_equal(np.isnan(p_dev), np.isnan(p_cpu))
    ok = ~np.isnan(p_cpu)
    assert rel(p_dev[ok], p_cpu[ok]) < 1e-10
    assert rel(rss_dev[w - 1 :], rss_cpu[w - 1 :]) < 1e-9
    # One series (1-D y), recursive least squares with forgetting, float32.
    one = to_host(cuqr.rolling_lstsq(to_dev(y[:, 0]), to_dev(X if not per_series else X[:, 0]), w))
    assert rel(one[w - 1 :], p_cpu[w - 1 :, 0]) < 1e-10
    r_dev = to_host(cuqr.recursive_lstsq(to_dev(y), to_dev(X), 0.99))
    r_cpu = cuqr.recursive_lstsq(y, X, 0.99, device="cpu")
    ok = ~np.isnan(r_cpu)
    assert rel(r_dev[ok], r_cpu[ok]) < 1e-9
    p32 = to_host(cuqr.rolling_lstsq(to_dev(y.astype(np.float32)), to_dev(X.astype(np.float32)), w))
    fin = ~np.isnan(p_cpu)
    assert p32.dtype == np.float32 and rel(p32[fin], p_cpu[fin]) < 1e-3
    with pytest.raises(ValueError, match="device='cpu'"):
        cuqr.rolling_lstsq(to_dev(y), to_dev(X), w, device="cpu")
    with pytest.raises(ValueError):
        cuqr.rolling_lstsq(to_dev(y), X, w)
