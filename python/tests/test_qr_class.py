"""cuqr.QR: every update against a fresh least-squares solution of the changed problem."""

import numpy as np
import pytest

import cuqr
from conftest import orth_err, rel, tol

KINDS = ["thin", "full", None]


def lstsq(A, b):
    return np.linalg.lstsq(A.astype(np.float64), b.astype(np.float64), rcond=None)[0]


def problem(rng, m, n, dtype, k=1):
    A = rng.standard_normal((m, n)).astype(dtype)
    b = rng.standard_normal(m if k == 1 else (m, k)).astype(dtype)
    return A, b


def check(qr, A, b, dtype):
    """x within the least-squares bound (κ·u, κ² u for the residual part), and Q's
    orthogonality and Q R = A where Q is kept."""
    x = qr.solve()
    kappa = np.linalg.cond(A.astype(np.float64))
    assert rel(x, lstsq(A, b)) <= 10 * kappa**2 * tol(dtype, *A.shape)
    R = qr.R
    if qr.q is not None:
        Q = qr.Q
        assert orth_err(Q) <= tol(dtype, *A.shape) * np.sqrt(Q.shape[1])
        assert rel(Q @ R, A) <= tol(dtype, *A.shape)
    else:
        assert rel(R.T.astype(np.float64) @ R, A.T.astype(np.float64) @ A) <= kappa * tol(dtype, *A.shape)


@pytest.mark.parametrize("q", KINDS)
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sequence_of_updates(rng, q, dtype):
    m, n = 203, 17
    A, b = problem(rng, m, n, dtype)
    qr = cuqr.QR(A, b, q=q, keep_data=True, device="cpu")
    assert qr.shape == (m, n) and qr.device == "cpu" and qr.dtype == np.dtype(dtype).name
    check(qr, A, b, dtype)

    U = rng.standard_normal((m, 2)).astype(dtype)
    qr.insert_cols(5, U)
    A = np.insert(A, [5, 5], U, axis=1)
    check(qr, A, b, dtype)

    qr.delete_cols(2, 3)
    A = np.delete(A, [2, 3, 4], axis=1)
    check(qr, A, b, dtype)

    rows = rng.standard_normal((4, A.shape[1])).astype(dtype)
    e = rng.standard_normal(4).astype(dtype)
    qr.insert_rows(10, rows, e)
    A, b = np.insert(A, 10, rows, axis=0), np.insert(b, 10, e)
    check(qr, A, b, dtype)

    qr.delete_rows(0, 7)
    A, b = A[7:], b[7:]
    check(qr, A, b, dtype)

    u, v = rng.standard_normal(A.shape[0]).astype(dtype), rng.standard_normal(A.shape[1]).astype(dtype)
    qr.rank_one(u, v)
    A = A + np.outer(u, v)
    check(qr, A, b, dtype)

    U, V = rng.standard_normal((A.shape[0], 2)).astype(dtype), rng.standard_normal((A.shape[1], 2)).astype(dtype)
    qr.rank_k(U, V)
    A = A + U @ V.T
    check(qr, A, b, dtype)

    C = rng.standard_normal(A.shape[0]).astype(dtype)
    qr.replace_cols(3, C)
    A[:, 3] = C
    check(qr, A, b, dtype)

    qr.shift_col(1, 6)
    A = np.insert(np.delete(A, 1, axis=1), 6, A[:, 1], axis=1)
    check(qr, A, b, dtype)

    rows = rng.standard_normal((9, A.shape[1])).astype(dtype)
    e = rng.standard_normal(9).astype(dtype)
    qr.slide(rows, e)
    A, b = np.vstack([A[9:], rows]), np.concatenate([b[9:], e])
    check(qr, A, b, dtype)
    dg = qr.diagnostics(A, b)
    assert dg["e_x"] <= 1e-3 if dtype == np.float32 else dg["e_x"] <= 1e-10


def test_r_only_state_without_data_deletes_given_rows(rng):
    A, b = problem(rng, 120, 9, np.float64)
    qr = cuqr.QR(A, b, q=None, device="cpu")
    assert qr.Q is None
    R0 = qr.R.copy()
    with pytest.raises(ValueError, match="delete_rows"):
        qr.delete_rows(3, 2)
    assert np.array_equal(qr.R, R0)  # unchanged after the error
    qr.delete_rows(3, 2, rows=A[3:5], rhs=b[3:5])
    A, b = np.delete(A, [3, 4], axis=0), np.delete(b, [3, 4])
    check(qr, A, b, np.float64)
    x, res = qr.solve(residuals=True)
    assert abs(res[0] - np.linalg.norm(A @ lstsq(A, b) - b)) <= 1e-10 * np.linalg.norm(b)


def test_forgetting_window_is_weighted_least_squares(rng):
    n, w, lam = 6, 60, 0.95
    A, b = problem(rng, w, n, np.float64)
    qr = cuqr.QR(A, b, q="thin", device="cpu")
    rows, e = rng.standard_normal((5, n)), rng.standard_normal(5)
    qr.slide(rows, e, drop=0, forget=lam)
    # every old row now weighs λ (scaled by √λ), the new ones 1
    Aw = np.vstack([np.sqrt(lam) * A, rows])
    bw = np.concatenate([np.sqrt(lam) * b, e])
    assert rel(qr.solve(), lstsq(Aw, bw)) <= 1e-12


def test_errors_leave_the_state_unchanged(rng):
    A, b = problem(rng, 50, 8, np.float64)
    qr = cuqr.QR(A, b, q="full", device="cpu")
    Q0, R0 = qr.Q.copy(), qr.R.copy()
    bad = [
        lambda: qr.insert_cols(9, rng.standard_normal(50)),
        lambda: qr.insert_cols(0, rng.standard_normal(49)),
        lambda: qr.delete_cols(7, 2),
        lambda: qr.delete_rows(0, 45),
        lambda: qr.insert_rows(0, np.full(8, np.nan)),
        lambda: qr.rank_one(np.ones(50), np.ones(7)),
        lambda: qr.slide(np.ones((3, 8)), drop=100),
        lambda: qr.slide(np.ones((3, 8)), forget=1.5),
        lambda: qr.slide(np.ones((3, 8)), drop=-1),
        lambda: qr.delete_cols(0, -1),
        lambda: qr.delete_rows(0, 0),
        lambda: qr.insert_rows(0, np.ones(8, dtype=np.float32)),
    ]
    for call in bad:
        with pytest.raises(ValueError):
            call()
        assert np.array_equal(qr.Q, Q0) and np.array_equal(qr.R, R0)
    with pytest.raises(np.linalg.LinAlgError):
        qr.insert_cols(3, A[:, 0] * 2.0 + 0.0 * A[:, 1])  # dependent column
    assert np.array_equal(qr.Q, Q0) and np.array_equal(qr.R, R0)


def test_constructor_validation(rng):
    A, b = problem(rng, 30, 5, np.float64)
    with pytest.raises(ValueError, match="q must be"):
        cuqr.QR(A, b, q="half")
    with pytest.raises(ValueError, match="float32 and float64"):
        cuqr.QR(A.astype(np.int64), device="cpu")
    with pytest.raises(ValueError, match="rows"):
        cuqr.QR(A.T, device="cpu")
    with pytest.raises(ValueError, match="device"):
        cuqr.QR(A, device="tpu")
    qr = cuqr.QR(A, device="cpu")
    with pytest.raises(ValueError, match="right-hand side"):
        qr.solve()


def test_several_right_hand_sides_and_float32(rng):
    A, B = problem(rng, 80, 7, np.float32, k=3)
    qr = cuqr.QR(A, B, q="thin", device="cpu")
    X = qr.solve()
    assert X.shape == (7, 3) and X.dtype == np.float32
    assert rel(X, lstsq(A, B)) <= 100 * tol(np.float32, 80, 7)
    assert qr.d.shape == (7, 3)


def test_repr_and_drift(rng):
    A, b = problem(rng, 40, 4, np.float64)
    qr = cuqr.QR(A, b, device="cpu")
    assert "cuqr.QR(shape=(40, 4)" in repr(qr)
    d = qr.check_drift()
    assert d["checks"] == 1 and d["estimate"] < 1e-13


def test_thread_count():
    before = cuqr.threads()
    cuqr.set_threads(1)
    assert cuqr.threads() == 1
    cuqr.set_threads(0)
    assert cuqr.threads() == before or before >= 1
    with pytest.raises(ValueError):
        cuqr.set_threads(-1)


def test_auto_device_follows_the_size_rule(rng):
    """device='auto' keeps small host problems on the CPU (m·n below AUTO_GPU_MIN_MN) and
    says why; larger ones go to GPU 0 when it opens, else stay with the reason; an explicit
    device or a batch says nothing."""
    assert cuqr.AUTO_GPU_MIN_MN == 250_000
    A, b = problem(rng, 252, 5, np.float64)
    qr = cuqr.QR(A, b, q=None, keep_data=True)
    assert qr.device == "cpu"
    assert "1260" in qr.fallback and "250000" in qr.fallback
    assert cuqr.QR(A, b, device="cpu").fallback is None
    A, b = problem(rng, 600, 420, np.float64)
    qr = cuqr.QR(A, b)
    if cuqr.cuda_available():
        assert qr.device == "cuda:0" and qr.fallback is None
    else:
        assert qr.device == "cpu" and qr.fallback.startswith("no usable GPU")
    check(qr, A, b, np.float64)
    qb = cuqr.QR(rng.standard_normal((3, 20, 4)), rng.standard_normal((3, 20)))
    assert qb.device == "cpu" and "GpuBatchQR" in qb.fallback
