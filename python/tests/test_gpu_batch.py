"""cuqr.GpuBatchQR on the GPU: after every update each problem's least-squares solution
against NumPy's of the same data, Q R against A, host (NumPy) and device (CuPy, torch)
arguments alike, and refusals that leave problems as they were. Skipped without a GPU
(CUQR_REQUIRE_GPU=1 makes a missing GPU a failure)."""

import numpy as np
import pytest

import cuqr
from conftest import require_gpu

if not cuqr.cuda_available():
    if require_gpu():
        raise RuntimeError("CUQR_REQUIRE_GPU=1 but no usable CUDA device")
    pytest.skip("no usable CUDA device", allow_module_level=True)


def check(bank, A, b, calls, dtype):
    """Q R = A and x, resid = lstsq within c (m + n) u per call (backward stable updates of
    well-conditioned random problems)."""
    u = np.finfo(dtype).eps / 2
    B, m, n = A.shape
    tol = 20 * (m + n) * u * calls
    Q, R, bb = bank.factors()
    x, resid = bank.solve()
    assert Q.shape[2] in (n, m)
    for k in range(B):
        # thin: Q is m x n; full: m x m, R's rows below n zero
        assert np.linalg.norm(Q[k][:, :n] @ R[k] - A[k]) <= tol * np.linalg.norm(A[k])
        assert np.linalg.norm(Q[k].T @ Q[k] - np.eye(Q.shape[2])) <= tol
        want, *_ = np.linalg.lstsq(A[k].astype(np.float64), b[k].astype(np.float64), rcond=None)
        assert np.linalg.norm(x[k] - want) <= 1e3 * (m + n) * u * np.linalg.norm(want)
        r = np.linalg.norm(b[k] - A[k] @ want)
        assert abs(resid[k] - r) <= 1e3 * (m + n) * u * np.linalg.norm(b[k])
    np.testing.assert_allclose(bb, b, rtol=tol, atol=tol)


@pytest.mark.parametrize("q", ["thin", "full"])
@pytest.mark.parametrize("B,m,n,dtype", [(33, 45, 7, np.float64), (9, 70, 20, np.float64),
                                         (17, 50, 6, np.float32)])
def test_updates_match_lstsq(B, m, n, dtype, q):
    rng = np.random.default_rng(B * m * n)
    A = rng.uniform(-1, 1, (B, m, n)).astype(dtype)
    b = rng.uniform(-1, 1, (B, m)).astype(dtype)
    bank = cuqr.GpuBatchQR(A, b, q=q)
    assert bank.shape == (B, m, n) and bank.dtype == np.dtype(dtype).name
    assert bank.factors()[0].shape == (B, m, m if q == "full" else n)
    check(bank, A, b, 1, dtype)
    u = rng.uniform(-1, 1, (B, m)).astype(dtype)
    v = rng.uniform(-1, 1, (B, n)).astype(dtype)
    bank.rank_one(u, v)
    A = (A.astype(np.float64) + u[:, :, None] * v[:, None, :]).astype(dtype)
    check(bank, A, b, 2, dtype)
    rows = rng.uniform(-1, 1, (B, 2, n)).astype(dtype)
    rhs = rng.uniform(-1, 1, (B, 2)).astype(dtype)
    bank.insert_rows(5, rows, rhs)
    A = np.concatenate([A[:, :5], rows, A[:, 5:]], axis=1)
    b = np.concatenate([b[:, :5], rhs, b[:, 5:]], axis=1)
    check(bank, A, b, 3, dtype)
    bank.delete_rows(10, 3)
    A = np.concatenate([A[:, :10], A[:, 13:]], axis=1)
    b = np.concatenate([b[:, :10], b[:, 13:]], axis=1)
    check(bank, A, b, 4, dtype)
    lam = 0.9
    rows = rng.uniform(-1, 1, (B, n)).astype(dtype)
    rhs = rng.uniform(-1, 1, B).astype(dtype)
    bank.slide(rows, rhs, forget=lam)
    w = np.sqrt(lam)
    A = np.concatenate([(A * w)[:, 1:], rows[:, None, :]], axis=1).astype(dtype)
    b = np.concatenate([(b * w)[:, 1:], rhs[:, None]], axis=1).astype(dtype)
    check(bank, A, b, 6, dtype)
    U = rng.uniform(-1, 1, (B, A.shape[1], 2)).astype(dtype)
    V = rng.uniform(-1, 1, (B, n, 2)).astype(dtype)
    bank.rank_k(U, V)
    A = (A.astype(np.float64) + U.astype(np.float64) @ V.astype(np.float64).transpose(0, 2, 1)).astype(dtype)
    check(bank, A, b, 8, dtype)
    bank.delete_cols(1, 2)
    A = np.concatenate([A[:, :, :1], A[:, :, 3:]], axis=2)
    assert bank.shape == (B, A.shape[1], n - 2)
    check(bank, A, b, 10, dtype)
    C = rng.uniform(-1, 1, (B, A.shape[1], 3)).astype(dtype)
    bank.insert_cols(2, C)
    A = np.concatenate([A[:, :, :2], C, A[:, :, 2:]], axis=2)
    assert bank.shape == (B, A.shape[1], n + 1)
    check(bank, A, b, 13, dtype)
    c = rng.uniform(-1, 1, (B, A.shape[1])).astype(dtype)
    bank.replace_cols(0, c)
    A = np.concatenate([c[:, :, None], A[:, :, 1:]], axis=2)
    check(bank, A, b, 15, dtype)
    n1 = A.shape[2]
    bank.shift_col(0, n1 - 1)
    A = np.concatenate([A[:, :, 1:], A[:, :, :1]], axis=2)
    check(bank, A, b, 17, dtype)
    e, refreshed, failed = bank.check_drift(0.0)
    assert e.shape == (B,) and refreshed == list(range(B)) and failed == []
    check(bank, A, b, 18, dtype)
    e, refreshed, _ = bank.check_drift()
    assert refreshed == [] and np.all(e <= 10 * max(A.shape[1:]) * np.finfo(dtype).eps / 2)


def test_refusals():
    rng = np.random.default_rng(7)
    B, m, n = 6, 40, 4
    A = rng.uniform(-1, 1, (B, m, n))
    A[2, :, n - 1] = 0.0
    A[2, 9, n - 1] = 1.0  # problem 2's last column lives in row 9 only
    b = rng.uniform(-1, 1, (B, m))
    bank = cuqr.GpuBatchQR(A, b)
    Q0, R0, b0 = bank.factors()
    with pytest.raises(cuqr.BatchError) as e:
        bank.delete_rows(9)
    assert [i for i, _ in e.value.refused] == [2] and not e.value.applied
    Q1, R1, b1 = bank.factors()
    assert np.array_equal(Q0, Q1) and np.array_equal(R0, R1) and np.array_equal(b0, b1)
    u = rng.uniform(-1, 1, (B, m))
    u[4, 3] = np.nan
    with pytest.raises(cuqr.BatchError) as e:
        bank.rank_one(u, rng.uniform(-1, 1, (B, n)))
    assert [i for i, _ in e.value.refused] == [4] and e.value.applied
    Q2, R2, _ = bank.factors()
    assert np.array_equal(Q2[4], Q0[4]) and np.array_equal(R2[4], R0[4])
    assert not np.array_equal(Q2[0], Q0[0])
    with pytest.raises(ValueError):
        bank.insert_rows(m + 1, rng.uniform(-1, 1, (B, n)), rng.uniform(-1, 1, B))
    with pytest.raises(ValueError):
        bank.rank_one(u[:, :-1], rng.uniform(-1, 1, (B, n)))
    with pytest.raises(ValueError):
        cuqr.GpuBatchQR(A[:, :, :3].copy(), b[:, :2].copy())
    with pytest.raises(ValueError, match="q must be"):
        cuqr.GpuBatchQR(A, b, q="r")


@pytest.mark.parametrize("lib", ["cupy", "torch"])
def test_device_arrays_match_host_arrays(lib):
    mod = pytest.importorskip(lib)
    if lib == "torch" and not mod.cuda.is_available():
        pytest.skip("torch without CUDA")
    dev = (lambda a: mod.asarray(a)) if lib == "cupy" else (lambda a: mod.tensor(a, device="cuda"))
    rng = np.random.default_rng(11)
    B, m, n = 21, 37, 5
    A = rng.uniform(-1, 1, (B, m, n))
    b = rng.uniform(-1, 1, (B, m))
    u, v = rng.uniform(-1, 1, (B, m)), rng.uniform(-1, 1, (B, n))
    rows, rhs = rng.uniform(-1, 1, (B, 1, n)), rng.uniform(-1, 1, (B, 1))
    host, device = cuqr.GpuBatchQR(A, b), cuqr.GpuBatchQR(dev(A), dev(b))
    for bank, conv in ((host, lambda a: a), (device, dev)):
        bank.rank_one(conv(u), conv(v))
        bank.insert_rows(3, conv(rows), conv(rhs))
        bank.slide(conv(rows), conv(rhs), forget=0.95)
    for x, y in zip(host.factors(), device.factors()):
        assert np.array_equal(x, y)
    # A transposed view is read correctly (made contiguous first).
    At = dev(np.ascontiguousarray(A.transpose(0, 2, 1))).transpose(1, 2) if lib == "torch" \
        else dev(np.ascontiguousarray(A.transpose(0, 2, 1))).transpose(0, 2, 1)
    for x, y in zip(cuqr.GpuBatchQR(A, b).factors(), cuqr.GpuBatchQR(At, dev(b)).factors()):
        assert np.array_equal(x, y)


@pytest.mark.parametrize("B,m,n,dtype", [(40, 30, 5, np.float64), (9, 50, 16, np.float64),
                                         (17, 24, 3, np.float32)])
def test_r_only_bank_matches_lstsq(B, m, n, dtype):
    """cuqr.GpuBatchR: after every call each problem's solution and residual norm against
    NumPy's least squares of its weighted rows, and RᵀR against AᵀA."""
    rng = np.random.default_rng(B + m + n)
    A = rng.uniform(-1, 1, (B, m, n)).astype(dtype)
    b = rng.uniform(-1, 1, (B, m)).astype(dtype)
    u = np.finfo(dtype).eps / 2

    def check(bank, A, b):
        x, resid = bank.solve()
        R, d, rho = bank.factors()
        assert R.shape == (B, A.shape[2], A.shape[2]) and rho.shape == (B,)
        tol = 1e3 * sum(A.shape[1:]) * u
        for k in range(B):
            Ak, bk = A[k].astype(np.float64), b[k].astype(np.float64)
            gram = Ak.T @ Ak
            assert np.linalg.norm(R[k].T.astype(np.float64) @ R[k] - gram) <= tol * np.linalg.norm(gram)
            want, *_ = np.linalg.lstsq(Ak, bk, rcond=None)
            assert np.linalg.norm(x[k] - want) <= 1e3 * tol * np.linalg.norm(want)
            r = np.linalg.norm(bk - Ak @ want)
            assert abs(resid[k] - r) <= 1e3 * tol * np.linalg.norm(bk)

    bank = cuqr.GpuBatchR(A, b)
    assert bank.shape == (B, m, n) and bank.dtype == np.dtype(dtype).name
    check(bank, A, b)
    rows = rng.uniform(-1, 1, (B, 2, n)).astype(dtype)
    rhs = rng.uniform(-1, 1, (B, 2)).astype(dtype)
    bank.insert_rows(rows, rhs)
    A, b = np.concatenate([A, rows], axis=1), np.concatenate([b, rhs], axis=1)
    check(bank, A, b)
    bank.delete_rows(A[:, :3], b[:, :3])
    A, b = A[:, 3:], b[:, 3:]
    check(bank, A, b)
    lam = 0.9
    new, e = rng.uniform(-1, 1, (B, n)).astype(dtype), rng.uniform(-1, 1, B).astype(dtype)
    w = np.sqrt(lam)
    bank.slide(new, e, A[:, 0] * w, b[:, 0] * w, forget=lam)
    A = np.concatenate([(A * w)[:, 1:], new[:, None, :]], axis=1).astype(dtype)
    b = np.concatenate([(b * w)[:, 1:], e[:, None]], axis=1).astype(dtype)
    check(bank, A, b)
    if n >= 2:
        bank.delete_cols(0, 1)
        A = A[:, :, 1:]
        assert bank.shape == (B, A.shape[1], n - 1)
        check(bank, A, b)


def test_r_only_bank_refusals():
    rng = np.random.default_rng(11)
    B, m, n = 7, 20, 4
    A, b = rng.uniform(-1, 1, (B, m, n)), rng.uniform(-1, 1, (B, m))
    bank = cuqr.GpuBatchR(A, b)
    R0, d0, rho0 = bank.factors()
    rows = rng.uniform(-1, 1, (B, n))
    rows[3, 1] = np.nan
    with pytest.raises(cuqr.BatchError) as e:
        bank.insert_rows(rows, rng.uniform(-1, 1, B))
    assert [i for i, _ in e.value.refused] == [3] and not e.value.applied
    R1, _, _ = bank.factors()
    assert np.array_equal(R0, R1) and bank.shape == (B, m, n)
    with pytest.raises(cuqr.BatchError) as e:
        bank.slide(rows, rng.uniform(-1, 1, B), A[:, 0], b[:, 0])
    assert [i for i, _ in e.value.refused] == [3] and e.value.applied
    R2, _, _ = bank.factors()
    assert np.array_equal(R2[3], R0[3]) and not np.array_equal(R2[0], R0[0])
    with pytest.raises(ValueError):
        bank.delete_cols(0, n)
    with pytest.raises(ValueError):
        bank.insert_rows(rows[:, :2], b[:, 0])


@pytest.mark.parametrize("B,m,n,dtype", [(40, 30, 5, np.float64), (9, 50, 15, np.float64),
                                         (17, 24, 3, np.float32)])
def test_kept_r_bank_follows_its_rows(B, m, n, dtype):
    """cuqr.GpuBatchR(keep_data=True): rows out by position, window steps, rank-one and
    rank-k, columns in, replaced, moved and out; after each call the kept rows equal the
    model's and the solutions NumPy's least squares of them."""
    rng = np.random.default_rng(3 * B + m + n)
    A = rng.uniform(-1, 1, (B, m, n)).astype(dtype)
    b = rng.uniform(-1, 1, (B, m)).astype(dtype)
    eps = np.finfo(dtype).eps

    def check(bank, A, b):
        Ak, bk = bank.kept_data()
        np.testing.assert_allclose(Ak, A, rtol=8 * eps, atol=8 * eps)
        np.testing.assert_allclose(bk, b, rtol=8 * eps, atol=8 * eps)
        x, resid = bank.solve()
        tol = 1e3 * sum(A.shape[1:]) * eps
        for k in range(B):
            a64, b64 = A[k].astype(np.float64), b[k].astype(np.float64)
            want, *_ = np.linalg.lstsq(a64, b64, rcond=None)
            assert np.linalg.norm(x[k] - want) <= 1e3 * tol * np.linalg.norm(want)
            assert abs(resid[k] - np.linalg.norm(b64 - a64 @ want)) <= 1e3 * tol * np.linalg.norm(b64)

    bank = cuqr.GpuBatchR(A, b, keep_data=True)
    assert bank.keeps_data and not cuqr.GpuBatchR(A, b).keeps_data
    check(bank, A, b)
    rows = rng.uniform(-1, 1, (B, 2, n)).astype(dtype)
    rhs = rng.uniform(-1, 1, (B, 2)).astype(dtype)
    bank.insert_rows(3, rows, rhs)
    A = np.concatenate([A[:, :3], rows, A[:, 3:]], axis=1)
    b = np.concatenate([b[:, :3], rhs, b[:, 3:]], axis=1)
    check(bank, A, b)
    bank.delete_rows(1, 2)
    A, b = np.delete(A, [1, 2], axis=1), np.delete(b, [1, 2], axis=1)
    check(bank, A, b)
    lam = 0.9
    new, e = rng.uniform(-1, 1, (B, n)).astype(dtype), rng.uniform(-1, 1, B).astype(dtype)
    w = dtype(np.sqrt(lam))
    bank.slide(new, e, forget=lam)
    A = np.concatenate([(A * w)[:, 1:], new[:, None, :]], axis=1).astype(dtype)
    b = np.concatenate([(b * w)[:, 1:], e[:, None]], axis=1).astype(dtype)
    check(bank, A, b)
    u, v = rng.uniform(-1, 1, (B, A.shape[1])).astype(dtype), rng.uniform(-1, 1, (B, n)).astype(dtype)
    bank.rank_one(u, v)
    A = (A + u[:, :, None] * v[:, None, :]).astype(dtype)
    check(bank, A, b)
    U = rng.uniform(-1, 1, (B, A.shape[1], 2)).astype(dtype)
    V = rng.uniform(-1, 1, (B, n, 2)).astype(dtype)
    bank.rank_k(U, V)
    A = (A + np.einsum("bik,bjk->bij", U.astype(np.float64), V.astype(np.float64))).astype(dtype)
    check(bank, A, b)
    c = rng.uniform(-1, 1, (B, A.shape[1])).astype(dtype)
    bank.insert_cols(1, c)
    A = np.insert(A, 1, c, axis=2)
    check(bank, A, b)
    c2 = rng.uniform(-1, 1, (B, A.shape[1])).astype(dtype)
    bank.replace_cols(0, c2)
    A[:, :, 0] = c2
    check(bank, A, b)
    bank.shift_col(0, -1 + A.shape[2])
    A = np.concatenate([A[:, :, 1:], A[:, :, :1]], axis=2)
    check(bank, A, b)
    bank.delete_cols(1)
    A = np.delete(A, 1, axis=2)
    check(bank, A, b)
    bank.refactorize()
    check(bank, A, b)


def test_kept_r_bank_refusals():
    rng = np.random.default_rng(12)
    B, m, n = 8, 21, 4
    A, b = rng.uniform(-1, 1, (B, m, n)), rng.uniform(-1, 1, (B, m))
    bank = cuqr.GpuBatchR(A, b, keep_data=True)
    R0, _, _ = bank.factors()
    u, v = rng.uniform(-1, 1, (B, m)), rng.uniform(-1, 1, (B, n))
    u[5, 2] = np.inf
    with pytest.raises(cuqr.BatchError) as e:
        bank.rank_one(u, v)
    assert [i for i, _ in e.value.refused] == [5] and e.value.applied
    R1, _, _ = bank.factors()
    Ak, _ = bank.kept_data()
    assert np.array_equal(R1[5], R0[5]) and np.array_equal(Ak[5], A[5])
    assert not np.array_equal(R1[0], R0[0])
    c = rng.uniform(-1, 1, (B, m))
    c[2] = Ak[2, :, 0]
    with pytest.raises(cuqr.BatchError) as e:
        bank.insert_cols(0, c)
    assert [i for i, _ in e.value.refused] == [2] and not e.value.applied
    assert bank.shape == (B, m, n)
    with pytest.raises(ValueError):
        bank.slide(A[:, 0], b[:, 0], A[:, 0], b[:, 0])
    plain = cuqr.GpuBatchR(A, b)
    with pytest.raises(ValueError):
        plain.delete_rows(0, 1)
    with pytest.raises(ValueError, match="keep"):
        plain.rank_one(u, v)


@pytest.mark.parametrize("lib", ["cupy", "torch"])
@pytest.mark.parametrize("keep", [False, True])
def test_r_bank_device_arrays_match_host_arrays(lib, keep):
    """cuqr.GpuBatchR reads CuPy arrays and CUDA tensors on the device: the same calls on
    the same values give the same factors as NumPy arguments, bit for bit."""
    mod = pytest.importorskip(lib)
    if lib == "torch" and not mod.cuda.is_available():
        pytest.skip("torch without CUDA")
    dev = (lambda a: mod.asarray(a)) if lib == "cupy" else (lambda a: mod.tensor(a, device="cuda"))
    rng = np.random.default_rng(13)
    B, m, n = 23, 31, 6
    A = rng.uniform(-1, 1, (B, m, n))
    b = rng.uniform(-1, 1, (B, m))
    rows, rhs = rng.uniform(-1, 1, (B, 1, n)), rng.uniform(-1, 1, (B, 1))
    u, v = rng.uniform(-1, 1, (B, m + 1)), rng.uniform(-1, 1, (B, n))
    c, c2 = rng.uniform(-1, 1, (B, m + 1)), rng.uniform(-1, 1, (B, m + 1))
    host = cuqr.GpuBatchR(A, b, keep_data=keep)
    device = cuqr.GpuBatchR(dev(A), dev(b), keep_data=keep)
    for bank, conv in ((host, lambda a: a), (device, dev)):
        bank.insert_rows(conv(rows), conv(rhs))
        if keep:
            bank.slide(conv(rows), conv(rhs), forget=0.95)
            bank.rank_one(conv(u), conv(v))
            bank.insert_cols(2, conv(c))
            bank.replace_cols(0, conv(c2))
        else:
            bank.slide(conv(rows), conv(rhs), conv(A[:, 0]), conv(b[:, 0]), forget=1.0)
    for x, y in zip(host.factors(), device.factors()):
        assert np.array_equal(x, y)
    if keep:
        for x, y in zip(host.kept_data(), device.kept_data()):
            assert np.array_equal(x, y)


@pytest.mark.parametrize("lib", ["cupy", "torch"])
def test_batched_qr_of_cuda_arrays(lib):
    """cuqr.QR with a 3-D CUDA array: the batch runs on the CPU on a copy (fallback says so)
    and its results come back as the caller's arrays on their device, equal to the NumPy
    batch's."""
    mod = pytest.importorskip(lib)
    if lib == "torch" and not mod.cuda.is_available():
        pytest.skip("torch without CUDA")
    dev = (lambda a: mod.asarray(a)) if lib == "cupy" else (lambda a: mod.tensor(a, device="cuda"))
    host_of = (lambda a: mod.asnumpy(a)) if lib == "cupy" else (lambda a: a.cpu().numpy())
    rng = np.random.default_rng(21)
    B, m, n = 6, 40, 5
    A, b = rng.standard_normal((B, m, n)), rng.standard_normal((B, m))
    u, v = rng.standard_normal((B, m)), rng.standard_normal((B, n))
    ref, got = cuqr.QR(A, b), cuqr.QR(dev(A), dev(b))
    assert "copied to the host" in got.fallback
    ref.rank_one(u, v)
    got.rank_one(dev(u), dev(v))
    ref.slide(A[:, 0], b[:, :1])
    got.slide(dev(A[:, 0]), dev(b[:, :1]))
    x = got.solve()
    assert type(x).__module__.split(".")[0] == lib
    assert np.array_equal(host_of(x), ref.solve())
    assert np.array_equal(host_of(got.R), ref.R)
    with pytest.raises(ValueError, match="is on the host but the batch's arrays are on CUDA"):
        got.rank_one(u, v)
