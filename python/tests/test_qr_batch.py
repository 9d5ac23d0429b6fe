"""cuqr.QR given a 3-D A: a batch of problems against B single cuqr.QR objects on the same
data, against NumPy's least squares of the changed problems, per-problem refusals
(cuqr.BatchError) and the errors the batch shares (ValueError)."""

import numpy as np
import pytest

import cuqr
from conftest import rel, tol

KINDS = ["thin", "full", None]


def singles(A, b, q):
    return [cuqr.QR(A[i], b[i], q=q, keep_data=q is None, device="cpu") for i in range(len(A))]


def same(qb, qs, dtype=np.float64):
    """The batch's results equal the single states' (same code per problem)."""
    t = 100 * np.finfo(dtype).eps
    R = qb.R
    assert R.shape[0] == len(qs)
    x = qb.solve()
    for i, s in enumerate(qs):
        np.testing.assert_allclose(R[i], s.R, rtol=t, atol=t)
        np.testing.assert_allclose(qb.d[i], s.d, rtol=t, atol=t)
        np.testing.assert_allclose(x[i], s.solve(), rtol=1e3 * t, atol=1e3 * t)
        if s.q is not None:
            np.testing.assert_allclose(qb.Q[i], s.Q, rtol=t, atol=t)
    assert qb.shape == qs[0].shape


def against_numpy(qb, A, b):
    """Each problem's solution against a fresh least-squares solve, and |R| against
    NumPy's R (unique up to row signs)."""
    x = qb.solve()
    R = qb.R
    n = A.shape[2]
    for i in range(len(A)):
        xr = np.linalg.lstsq(A[i], b[i], rcond=None)[0]
        kappa = np.linalg.cond(A[i])
        assert rel(x[i], xr) <= 10 * kappa**2 * tol(np.float64, *A[i].shape)
        Rr = np.linalg.qr(A[i], mode="r")
        assert rel(np.abs(R[i][:n]), np.abs(Rr)) <= kappa * tol(np.float64, *A[i].shape)


@pytest.mark.parametrize("q", KINDS)
@pytest.mark.parametrize("B", [1, 3, 20])
def test_sequence_matches_singles_and_numpy(rng, q, B):
    m, n = 45, 7
    A = rng.standard_normal((B, m, n))
    b = rng.standard_normal((B, m))
    qb = cuqr.QR(A, b, q=q, keep_data=q is None)
    qs = singles(A, b, q)
    assert qb.batch == B and qs[0].batch is None
    assert isinstance(qb, cuqr.QR)
    same(qb, qs)
    against_numpy(qb, A, b)

    def both(name, *batched, per=None):
        getattr(qb, name)(*batched)
        for i, s in enumerate(qs):
            getattr(s, name)(*per(i))

    # two rows in before row 3
    U, e = rng.standard_normal((B, 2, n)), rng.standard_normal((B, 2))
    both("insert_rows", 3, U, e, per=lambda i: (3, U[i], e[i]))
    A = np.concatenate([A[:, :3], U, A[:, 3:]], axis=1)
    b = np.concatenate([b[:, :3], e, b[:, 3:]], axis=1)
    same(qb, qs)
    # rows 1, 2 out (negative index: counted back from m)
    k = -(A.shape[1] - 1)
    both("delete_rows", k, 2, per=lambda i: (k, 2))
    A, b = np.delete(A, [1, 2], axis=1), np.delete(b, [1, 2], axis=1)
    same(qb, qs)
    # a column in before column 2, column 0 out
    U = rng.standard_normal((B, A.shape[1]))
    both("insert_cols", 2, U, per=lambda i: (2, U[i]))
    A = np.concatenate([A[:, :, :2], U[:, :, None], A[:, :, 2:]], axis=2)
    both("delete_cols", 0, per=lambda i: (0,))
    A = A[:, :, 1:]
    same(qb, qs)
    m, n = A.shape[1:]
    # rank one, rank two, a column replaced, a column moved
    u, v = rng.standard_normal((B, m)), rng.standard_normal((B, n))
    both("rank_one", u, v, per=lambda i: (u[i], v[i]))
    A = A + u[:, :, None] * v[:, None, :]
    Uk, Vk = rng.standard_normal((B, m, 2)), rng.standard_normal((B, n, 2))
    both("rank_k", Uk, Vk, per=lambda i: (Uk[i], Vk[i]))
    A = A + Uk @ Vk.transpose(0, 2, 1)
    U = rng.standard_normal((B, m, 2))
    both("replace_cols", 1, U, per=lambda i: (1, U[i]))
    A[:, :, 1:3] = U
    both("shift_col", 0, n - 1, per=lambda i: (0, n - 1))
    A = A[:, :, list(range(1, n)) + [0]]
    same(qb, qs)
    # a window step: three rows in at the bottom, the three oldest out
    rows, rhs = rng.standard_normal((B, 3, n)), rng.standard_normal((B, 3))
    both("slide", rows, rhs, per=lambda i: (rows[i], rhs[i]))
    A = np.concatenate([A[:, 3:], rows], axis=1)
    b = np.concatenate([b[:, 3:], rhs], axis=1)
    same(qb, qs)
    against_numpy(qb, A, b)


@pytest.mark.parametrize("seed", range(6))
def test_random_sizes(seed):
    rng = np.random.default_rng(1000 + seed)
    B = int(rng.integers(1, 21))
    n = int(rng.integers(1, 40))
    m = n + int(rng.integers(0, 60))
    if m % 32 == 0:
        m += 1
    k = int(rng.integers(1, 4))
    q = KINDS[seed % 3]
    A, b = rng.standard_normal((B, m, n)), rng.standard_normal((B, m, k))
    qb = cuqr.QR(A, b, q=q, keep_data=q is None)
    qs = singles(A, b, q)
    U, e = rng.standard_normal((B, n)), rng.standard_normal((B, k))
    qb.insert_rows(m, U, e)
    for i, s in enumerate(qs):
        s.insert_rows(m, U[i], e[i])
    x, res = qb.solve(residuals=True)
    assert x.shape == (B, n, k) and res.shape == (B, k)
    same(qb, qs)
    A = np.concatenate([A, U[:, None, :]], axis=1)
    b = np.concatenate([b, e[:, None, :]], axis=1)
    against_numpy(qb, A, b)


def test_float32_and_list_inputs(rng):
    A = rng.standard_normal((4, 33, 5)).astype(np.float32)
    b = rng.standard_normal((4, 33)).astype(np.float32)
    qb = cuqr.QR(A, b)
    assert qb.dtype == "float32" and qb.R.dtype == np.float32
    qs = singles(A, b, "thin")
    same(qb, qs, np.float32)
    with pytest.raises(ValueError, match="dtype"):
        qb.rank_one(rng.standard_normal((4, 33)), rng.standard_normal((4, 5)))
    # a list of lists of lists is an array like any other
    qb2 = cuqr.QR(A.astype(np.float64).tolist(), b.astype(np.float64).tolist())
    assert qb2.batch == 4 and qb2.dtype == "float64"


def test_r_only_without_kept_data_needs_rows(rng):
    B, m, n = 3, 40, 6
    A, b = rng.standard_normal((B, m, n)), rng.standard_normal((B, m))
    qb = cuqr.QR(A, b, q=None)
    with pytest.raises(ValueError, match="keep_data=True"):
        qb.delete_rows(0, 2)
    qb.delete_rows(0, 2, rows=A[:, :2], rhs=b[:, :2])
    against_numpy(qb, A[:, 2:], b[:, 2:])


def test_per_problem_refusal_updates_the_others(rng):
    B, m, n = 5, 41, 6
    A, b = rng.standard_normal((B, m, n)), rng.standard_normal((B, m))
    qb = cuqr.QR(A, b, q="thin")
    qs = singles(A, b, "thin")
    R0 = qb.R.copy()
    u, v = rng.standard_normal((B, m)), rng.standard_normal((B, n))
    u[3, 7] = np.nan
    with pytest.raises(cuqr.BatchError) as ei:
        qb.rank_one(u, v)
    err = ei.value
    assert isinstance(err, np.linalg.LinAlgError) and isinstance(err, ValueError)
    assert err.applied is True
    assert [i for i, _ in err.refused] == [3]
    assert "problem 3" in str(err)
    R1 = qb.R
    np.testing.assert_array_equal(R1[3], R0[3])
    for i, s in enumerate(qs):
        if i != 3:
            s.rank_one(u[i], v[i])
    same(qb, qs)


def test_dependent_column_refuses_one_problem(rng):
    B, m, n = 4, 30, 5
    A, b = rng.standard_normal((B, m, n)), rng.standard_normal((B, m))
    qb = cuqr.QR(A, b, q="full")
    R0, Q0 = qb.R.copy(), qb.Q.copy()
    # problem 1's new column 0 equals its column 1: a dependent column
    U = rng.standard_normal((B, m))
    U[1] = A[1, :, 1]
    with pytest.raises(cuqr.BatchError) as ei:
        qb.replace_cols(0, U)
    assert ei.value.applied and [i for i, _ in ei.value.refused] == [1]
    np.testing.assert_array_equal(qb.R[1], R0[1])
    np.testing.assert_array_equal(qb.Q[1], Q0[1])
    A2 = A.copy()
    A2[:, :, 0] = U
    keep = [0, 2, 3]
    against_numpy_subset = qb.solve()[keep]
    for j, i in enumerate(keep):
        xr = np.linalg.lstsq(A2[i], b[i], rcond=None)[0]
        assert rel(against_numpy_subset[j], xr) < 1e-10


def test_shape_changing_refusal_changes_nothing(rng):
    B, m, n = 6, 35, 4
    A, b = rng.standard_normal((B, m, n)), rng.standard_normal((B, m))
    qb = cuqr.QR(A, b, q="thin")
    R0, d0 = qb.R.copy(), qb.d.copy()
    U = rng.standard_normal((B, n))
    U[2, 1] = np.inf
    U[5, 0] = np.nan
    with pytest.raises(cuqr.BatchError) as ei:
        qb.insert_rows(0, U)
    assert ei.value.applied is False
    assert [i for i, _ in ei.value.refused] == [2, 5]
    assert qb.shape == (m, n)
    np.testing.assert_array_equal(qb.R, R0)
    np.testing.assert_array_equal(qb.d, d0)
    # a dependent column in one problem: no problem gains the column
    C = rng.standard_normal((B, m))
    C[4] = A[4, :, 0] + A[4, :, 1]
    with pytest.raises(cuqr.BatchError) as ei:
        qb.insert_cols(n, C)
    assert ei.value.applied is False and [i for i, _ in ei.value.refused] == [4]
    assert qb.shape == (m, n)
    np.testing.assert_array_equal(qb.R, R0)


def test_factorisation_refusal(rng):
    A, b = rng.standard_normal((3, 20, 4)), rng.standard_normal((3, 20))
    A[1, 0, 0] = np.nan
    with pytest.raises(cuqr.BatchError) as ei:
        cuqr.QR(A, b)
    assert ei.value.applied is False and [i for i, _ in ei.value.refused] == [1]


def test_refused_window_step_keeps_the_forgetting_factor(rng):
    B, m, n = 3, 25, 3
    A, b = rng.standard_normal((B, m, n)), rng.standard_normal((B, m))
    qb = cuqr.QR(A, b, q="thin")
    rows = rng.standard_normal((B, 2, n))
    rows[0, 0, 0] = np.nan
    # two in, one out: m changes, so the step is all-or-nothing
    with pytest.raises(cuqr.BatchError) as ei:
        qb.slide(rows, drop=1, forget=0.5)
    assert not ei.value.applied
    assert qb._st.forget == 1.0 and qb.shape == (m, n)
    rows[0, 0, 0] = 1.0
    qb.slide(rows, drop=2, forget=0.9)
    assert qb._st.forget == 0.9


@pytest.mark.parametrize(
    "call",
    [
        lambda qb, rng: qb.rank_one(rng.standard_normal((2, 30)), rng.standard_normal((3, 4))),
        lambda qb, rng: qb.rank_one(rng.standard_normal((3, 29)), rng.standard_normal((3, 4))),
        lambda qb, rng: qb.rank_one(rng.standard_normal((3, 30, 2)), rng.standard_normal((3, 4, 2))),
        lambda qb, rng: qb.rank_one(rng.standard_normal(30), rng.standard_normal(4)),
        lambda qb, rng: qb.rank_k(rng.standard_normal((3, 30)), rng.standard_normal((3, 4))),
        lambda qb, rng: qb.insert_rows(31, rng.standard_normal((3, 4))),
        lambda qb, rng: qb.insert_rows(0, rng.standard_normal((3, 5))),
        lambda qb, rng: qb.insert_rows(0, rng.standard_normal(4)),
        lambda qb, rng: qb.delete_rows(28, 3),
        lambda qb, rng: qb.delete_rows(0, 0),
        lambda qb, rng: qb.delete_cols(4),
        lambda qb, rng: qb.shift_col(0, 4),
        lambda qb, rng: qb.replace_cols(3, rng.standard_normal((3, 30, 2))),
        lambda qb, rng: qb.insert_cols(0, rng.standard_normal((3, 31))),
        lambda qb, rng: qb.slide(rng.standard_normal((3, 2, 4)), rng.standard_normal((3, 2, 2))),
        lambda qb, rng: qb.slide(rng.standard_normal((3, 4)), drop=-1),
    ],
)
def test_shape_errors_raise_value_error(rng, call):
    A, b = rng.standard_normal((3, 30, 4)), rng.standard_normal((3, 30))
    qb = cuqr.QR(A, b, q="full")
    R0 = qb.R.copy()
    with pytest.raises(ValueError) as ei:
        call(qb, rng)
    assert not isinstance(ei.value, cuqr.BatchError)
    np.testing.assert_array_equal(qb.R, R0)
    assert qb.shape == (30, 4)


def test_construction_errors(rng):
    A = rng.standard_normal((3, 30, 4))
    with pytest.raises(ValueError, match="B = 3"):
        cuqr.QR(A, rng.standard_normal((2, 30)))
    with pytest.raises(ValueError):
        cuqr.QR(A, rng.standard_normal((3, 29)))
    with pytest.raises(ValueError):
        cuqr.QR(rng.standard_normal((3, 3, 4)))  # m < n
    with pytest.raises(ValueError, match="batch size"):
        cuqr.QR(np.zeros((0, 5, 2)))
    with pytest.raises(ValueError, match="CPU"):
        cuqr.QR(A, device="cuda")
    with pytest.raises(ValueError, match="q must be"):
        cuqr.QR(A, q="fat")
    with pytest.raises(ValueError, match="right-hand side"):
        cuqr.QR(A).solve()


class _FakeCudaArray:
    """Says it lives on CUDA device 0 (DLPack device type 2), as a CuPy array would."""

    shape = (2, 8, 3)
    dtype = np.dtype(np.float64)

    def __dlpack_device__(self):
        return (2, 0)


def test_device_arrays_follow_the_batch(rng):
    # CUDA arrays run on the CPU only through device='auto' (copied; see fallback), and an
    # argument must live where the batch's arrays do
    with pytest.raises(ValueError, match="device='auto'"):
        cuqr.QR(_FakeCudaArray(), device="cpu")
    with pytest.raises(ValueError, match="GpuBatchQR"):
        cuqr.QR(rng.standard_normal((2, 8, 3)), device="cuda")
    qb = cuqr.QR(rng.standard_normal((2, 8, 3)), rng.standard_normal((2, 8)))
    assert "runs on the CPU" in qb.fallback
    with pytest.raises(ValueError, match="is on CUDA device 0 but the batch's arrays are on the host"):
        qb.rank_one(_FakeCudaArray(), rng.standard_normal((2, 3)))


def test_strided_inputs_are_read(rng):
    # Fortran-ordered and sliced arrays give the same batch as C-ordered ones
    A, b = rng.standard_normal((4, 26, 5)), rng.standard_normal((4, 26, 2))
    qc = cuqr.QR(A, b)
    qf = cuqr.QR(np.asfortranarray(A), b[:, ::-1][:, ::-1])
    np.testing.assert_array_equal(qc.R, qf.R)
    U = rng.standard_normal((4, 8, 26))[:, ::3, :].transpose(0, 2, 1)[:, :, :2]
    qc.replace_cols(1, np.ascontiguousarray(U))
    qf.replace_cols(1, U)
    np.testing.assert_array_equal(qc.R, qf.R)


def test_drift_records(rng):
    qb = cuqr.QR(rng.standard_normal((3, 20, 4)), q="thin")
    d = qb.drift()
    assert len(d) == 3 and "estimate" in d[0]
    c = qb.check_drift()
    assert len(c) == 3 and c[0]["checks"] >= 1
    with pytest.raises(NotImplementedError):
        qb.diagnostics(np.zeros((20, 4)))


def test_torch_cpu_tensors(rng):
    torch = pytest.importorskip("torch")
    A, b = rng.standard_normal((3, 20, 4)), rng.standard_normal((3, 20))
    qb = cuqr.QR(torch.from_numpy(A), torch.from_numpy(b))
    assert isinstance(qb.R, torch.Tensor)
    np.testing.assert_allclose(qb.solve().numpy(), cuqr.QR(A, b).solve())


def test_threads_take_turns(rng):
    # rank-one updates from several threads: their sum does not depend on the order
    import threading

    B, m, n = 6, 40, 5
    A, b = rng.standard_normal((B, m, n)), rng.standard_normal((B, m))
    qb = cuqr.QR(A, b, q="thin")
    us = rng.standard_normal((4, 5, B, m))
    vs = rng.standard_normal((4, 5, B, n))

    def work(t):
        for j in range(5):
            qb.rank_one(us[t, j], vs[t, j])

    threads = [threading.Thread(target=work, args=(t,)) for t in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    A2 = A + np.einsum("tjbm,tjbn->bmn", us, vs)
    against_numpy(qb, A2, b)
