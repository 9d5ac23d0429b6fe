"""Leading batch dimensions of qr_insert, qr_delete, qr_update and cholupdate (SciPy's
rules): every problem of a batch against SciPy's single-problem function on the same
slice, broadcasting of batch shapes and of batched indices, the errors (mismatched batch
shapes, zero-size batches, a failing problem named by its batch index), and inputs left
unwritten."""

import numpy as np
import pytest
import scipy.linalg as sl

import cuqr
from conftest import rel, tol

DTYPES = [np.float32, np.float64]
BATCHES = [(), (3,), (2, 3)]
M, N = 37, 11  # not multiples of 32


def factors(rng, batch, m, n, mode, dtype):
    """A batch of random A and SciPy's factors of each (the batch flattened and back)."""
    A = rng.standard_normal(batch + (m, n))
    Q, R = sl.qr(A, mode=mode)
    return A.astype(dtype), Q.astype(dtype), R.astype(dtype)


def bcast(x, batch, core):
    """``x`` broadcast to the batch, core dimensions ``core`` kept."""
    x = np.asarray(x)
    return np.broadcast_to(x, batch + x.shape[x.ndim - core :] if core else batch)


def check_batch(out, ref, batch, dtype):
    """Each problem's cuqr factors against SciPy's: shapes, dtype, the same product QR
    (Q's signs may differ), Q orthonormal and R upper triangular."""
    (Q1, R1), (Qs, Rs) = out, ref
    assert Q1.shape == Qs.shape and R1.shape == Rs.shape
    assert Q1.shape[: len(batch)] == batch
    assert Q1.dtype == dtype and R1.dtype == dtype
    for i in np.ndindex(batch):
        q, r = Q1[i], R1[i]
        m, n = q.shape[0], r.shape[1]
        bound = tol(dtype, m, n)
        assert rel(q @ r, Qs[i] @ Rs[i]) <= bound, i
        q64 = np.asarray(q, dtype=np.float64)
        assert np.linalg.norm(q64.T @ q64 - np.eye(q.shape[1])) <= bound * np.sqrt(q.shape[1])
        assert np.all(np.tril(r, -1) == 0)


def loop(f, batch, arrays, **kwargs):
    """SciPy's single-problem ``f`` over the batch: ``arrays`` pairs each array argument
    with its number of core dimensions."""
    flat = [bcast(x, batch, c) for x, c in arrays]
    outs = [f(*(x[i] for x in flat), **kwargs) for i in np.ndindex(batch)]
    Q = np.stack([o[0] for o in outs]).reshape(batch + outs[0][0].shape)
    R = np.stack([o[1] for o in outs]).reshape(batch + outs[0][1].shape)
    return Q, R


def copies(*xs):
    return [np.array(x, copy=True) for x in xs]


def unchanged(before, after, batch=(1,)):
    """The inputs as they were. A batched call never writes its inputs, overwrite_* or
    not (SciPy's batches do not either); an unbatched one may, as before (``batch`` ())."""
    if not batch:
        return
    for b, a in zip(before, after):
        np.testing.assert_array_equal(b, a)


# ---------------------------------------------------------------------------------------
# qr_update


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", ["full", "economic"])
@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("rank", [None, 1, 3])
def test_qr_update(rng, dtype, mode, batch, rank):
    A, Q, R = factors(rng, batch, M, N, mode, dtype)
    if rank is None:  # 1-D u and v: one update shared by the batch
        u, v = rng.standard_normal(M).astype(dtype), rng.standard_normal(N).astype(dtype)
        core = 1
    else:
        u = rng.standard_normal(batch + (M, rank)).astype(dtype)
        v = rng.standard_normal(batch + (N, rank)).astype(dtype)
        core = 2
    ref = loop(sl.qr_update, batch, [(Q, 2), (R, 2), (u, core), (v, core)])
    before = copies(Q, R, u, v)
    out = cuqr.qr_update(Q, R, u, v, overwrite_qruv=True)
    unchanged(before, (Q, R, u, v), batch)
    check_batch(out, ref, batch, dtype)


@pytest.mark.parametrize("dtype", DTYPES)
def test_qr_update_broadcasts_batch_shapes(rng, dtype):
    # factors batched (3,), updates batched (2, 1): a (2, 3) batch
    _, Q, R = factors(rng, (3,), M, N, "economic", dtype)
    u = rng.standard_normal((2, 1, M, 2)).astype(dtype)
    v = rng.standard_normal((2, 1, N, 2)).astype(dtype)
    out = cuqr.qr_update(Q, R, u, v)
    assert out[0].shape == (2, 3, M, N)
    check_batch(out, loop(sl.qr_update, (2, 3), [(Q, 2), (R, 2), (u, 2), (v, 2)]), (2, 3), dtype)


def test_qr_update_matches_unbatched_calls(rng):
    # the batch runs each problem through the single-problem code
    _, Q, R = factors(rng, (2, 3), M, N, "full", np.float64)
    u, v = rng.standard_normal((2, 3, M, 2)), rng.standard_normal((2, 3, N, 2))
    Q1, R1 = cuqr.qr_update(Q, R, u, v)
    for i in np.ndindex(2, 3):
        q, r = cuqr.qr_update(Q[i], R[i], u[i], v[i])
        np.testing.assert_allclose(Q1[i], q, rtol=0, atol=1e-13)
        np.testing.assert_allclose(R1[i], r, rtol=0, atol=1e-13)


def test_strided_and_byteswapped_inputs(rng):
    # a batch axis last in memory, and a non-native byte order
    _, Q, R = factors(rng, (4,), M, N, "full", np.float64)
    Qt = np.ascontiguousarray(np.moveaxis(Q, 0, -1))
    Qv = np.moveaxis(Qt, -1, 0)  # (4, M, M), batch stride smallest
    Rb = R.astype(R.dtype.newbyteorder())
    u, v = rng.standard_normal((4, M, 1)), rng.standard_normal((4, N, 1))
    out = cuqr.qr_update(Qv, Rb, u, v)
    check_batch(out, loop(sl.qr_update, (4,), [(Q, 2), (R, 2), (u, 2), (v, 2)]), (4,), np.float64)


# ---------------------------------------------------------------------------------------
# qr_insert


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", ["full", "economic"])
@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("which", ["row", "col"])
@pytest.mark.parametrize("kind", ["vector, shared k", "block, batched k"])
def test_qr_insert(rng, dtype, mode, batch, which, kind):
    A, Q, R = factors(rng, batch, M, N, mode, dtype)
    lim = M if which == "row" else N
    if kind.startswith("vector"):
        u = rng.standard_normal(N if which == "row" else M).astype(dtype)
        k, core = -2, 1
    else:
        shape = (4, N) if which == "row" else (M, 3)
        u = rng.standard_normal(batch + shape).astype(dtype)
        k, core = rng.integers(-lim, lim + 1, size=batch), 2
    ref = loop(sl.qr_insert, batch, [(Q, 2), (R, 2), (u, core), (k, 0)], which=which)
    before = copies(Q, R, u)
    out = cuqr.qr_insert(Q, R, u, k, which=which, overwrite_qru=True)
    unchanged(before, (Q, R, u), batch)
    check_batch(out, ref, batch, dtype)


@pytest.mark.parametrize("batch", [(3,), (2, 3)])
def test_qr_insert_col_in_span_names_the_problem(rng, batch):
    _, Q, R = factors(rng, batch, M, N, "economic", np.float64)
    u = rng.standard_normal(batch + (M, 2))
    bad = tuple(s - 1 for s in batch)
    u[bad + (slice(None), 1)] = Q[bad] @ rng.standard_normal(N)
    before = copies(Q, R, u)
    with pytest.raises(np.linalg.LinAlgError, match=rf"span of Q.*batch index \({bad[0]},"):
        cuqr.qr_insert(Q, R, u, 3, which="col", rcond=1e-10)
    unchanged(before, (Q, R, u))
    # SciPy fails on that batch too
    with pytest.raises(np.linalg.LinAlgError):
        sl.qr_insert(Q, R, u, 3, which="col", rcond=1e-10)


def test_qr_insert_k_out_of_bounds_names_the_problem(rng):
    _, Q, R = factors(rng, (3,), M, N, "full", np.float64)
    with pytest.raises(ValueError, match=r"'k' is out of bounds.*\(1,\)"):
        cuqr.qr_insert(Q, R, np.ones(N), [0, M + 1, 2])


def test_qr_insert_into_no_columns(rng):
    # N = 0: the factorisation of the new columns alone, for every problem
    Q = np.broadcast_to(np.eye(M), (3, M, M))
    R = np.zeros((3, M, 0))
    u = rng.standard_normal((3, M, 2))
    Q1, R1 = cuqr.qr_insert(Q, R, u, 0, which="col")
    assert Q1.shape == (3, M, M) and R1.shape == (3, M, 2)
    for i in range(3):
        assert rel(Q1[i] @ R1[i], u[i]) <= tol(np.float64, M, 2)


# ---------------------------------------------------------------------------------------
# qr_delete


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("mode", ["full", "economic"])
@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("which", ["row", "col"])
@pytest.mark.parametrize("batched_k", [False, True])
def test_qr_delete(rng, dtype, mode, batch, which, batched_k):
    A, Q, R = factors(rng, batch, M, N, mode, dtype)
    p = 2
    lim = M if which == "row" else N
    if batched_k:  # valid indices, about half of them counted back from the end
        k = rng.integers(0, lim - p + 1, size=batch)
        k = np.where(rng.random(batch) < 0.5, k - lim, k)
    else:
        k = 1
    ref = loop(sl.qr_delete, batch, [(Q, 2), (R, 2), (k, 0)], p=p, which=which)
    before = copies(Q, R)
    out = cuqr.qr_delete(Q, R, k, p, which=which, overwrite_qr=True)
    unchanged(before, (Q, R), batch)
    check_batch(out, ref, batch, dtype)


@pytest.mark.parametrize("mode", ["full", "economic"])
@pytest.mark.parametrize("which", ["row", "col"])
def test_qr_delete_everything(rng, mode, which):
    # SciPy's shapes for deleting every row or every column, per problem
    m, n = (N, N) if which == "row" else (M, N)
    _, Q, R = factors(rng, (2, 3), m, n, mode, np.float64)
    p = m if which == "row" else n
    Q1, R1 = cuqr.qr_delete(Q, R, 0, p, which=which)
    Qs, Rs = sl.qr_delete(Q, R, 0, p, which=which)
    assert Q1.shape == Qs.shape and R1.shape == Rs.shape


def test_qr_delete_p_out_of_range_names_the_problem(rng):
    _, Q, R = factors(rng, (3,), M, N, "full", np.float64)
    with pytest.raises(ValueError, match=r"'p' is out of range.*\(2,\)"):
        cuqr.qr_delete(Q, R, [0, 1, M - 1], 2)


# ---------------------------------------------------------------------------------------
# cholupdate (SciPy has none: the same rules, R (..., n, n) and x (..., n) or (..., n, k))


def chol(rng, batch, n, dtype):
    B = rng.standard_normal(batch + (n + 5, n))
    G = np.swapaxes(B, -1, -2) @ B
    return np.swapaxes(np.linalg.cholesky(G), -1, -2).astype(dtype), G


@pytest.mark.parametrize("dtype", DTYPES)
@pytest.mark.parametrize("batch", BATCHES)
@pytest.mark.parametrize("k", [None, 2])
@pytest.mark.parametrize("sign", ["+", "-"])
def test_cholupdate(rng, dtype, batch, k, sign):
    R, G = chol(rng, batch, N, dtype)
    x = rng.standard_normal((N,) if k is None else batch + (N, k)).astype(dtype)
    x = x * 0.1 if sign == "-" else x
    before = copies(R, x)
    R1 = cuqr.cholupdate(R, x, sign=sign)
    unchanged(before, (R, x))
    assert R1.shape == np.broadcast_shapes(R.shape[:-2], x.shape[:-2] if k else ()) + (N, N)
    assert R1.dtype == dtype
    X = x.reshape(N, 1) if k is None else x
    G1 = G + (1 if sign == "+" else -1) * (X @ np.swapaxes(X, -1, -2))
    for i in np.ndindex(batch):
        r = R1[i]
        assert np.all(np.tril(r, -1) == 0) and np.all(np.diagonal(r) >= 0)
        assert rel(r.T @ r, G1[i]) <= 10 * tol(dtype, N)
        np.testing.assert_allclose(r, cuqr.cholupdate(R[i], x if k is None else x[i], sign=sign))


def test_cholupdate_downdate_failure_names_the_problem(rng):
    R, _ = chol(rng, (2, 3), N, np.float64)
    x = 0.01 * rng.standard_normal((2, 3, N, 1))
    x[1, 0] = 100.0
    with pytest.raises(np.linalg.LinAlgError, match=r"batch index \(1, 0\)"):
        cuqr.cholupdate(R, x, sign="-")


# ---------------------------------------------------------------------------------------
# errors common to the batched functions


def test_mismatched_batch_shapes(rng):
    _, Q, R = factors(rng, (3,), M, N, "full", np.float64)
    u, v = rng.standard_normal((2, M, 1)), rng.standard_normal((2, N, 1))
    with pytest.raises(ValueError, match="shape mismatch"):
        cuqr.qr_update(Q, R, u, v)
    with pytest.raises(ValueError, match="shape mismatch"):
        cuqr.qr_insert(Q, R, np.ones(N), [0, 1])
    with pytest.raises(ValueError, match="shape mismatch"):
        cuqr.qr_delete(Q, R[:2], 0)
    Rc, _ = chol(rng, (3,), N, np.float64)
    with pytest.raises(ValueError, match="shape mismatch"):
        cuqr.cholupdate(Rc, rng.standard_normal((2, N, 1)))


def test_zero_size_batches_are_refused_as_scipy_does(rng):
    Q, R = np.zeros((0, M, M)), np.zeros((0, M, N))
    calls = {
        "qr_update": lambda f: f(Q, R, np.ones(M), np.ones(N)),
        "qr_insert": lambda f: f(Q, R, np.ones(N), 0),
        "qr_delete": lambda f: f(Q, R, 0),
    }
    for name, call in calls.items():
        with pytest.raises(ValueError, match=f"`{name}` does not support zero-size batches"):
            call(getattr(cuqr, name))
        with pytest.raises(ValueError, match="does not support zero-size batches"):
            call(getattr(sl, name))
    with pytest.raises(ValueError, match="`cholupdate` does not support zero-size batches"):
        cuqr.cholupdate(np.zeros((0, N, N)), np.ones(N))


def test_batched_1d_vectors_read_as_scipy_reads_them(rng):
    # SciPy takes a 2-D u as one (M, k) block: a (batch, M) u is not a batch of vectors
    _, Q, R = factors(rng, (3,), M, N, "full", np.float64)
    with pytest.raises(ValueError, match="u.shape\\[0\\] must equal Q.shape\\[0\\]"):
        cuqr.qr_update(Q, R, rng.standard_normal((3, M)), rng.standard_normal((3, N)))
    with pytest.raises(ValueError):
        sl.qr_update(Q, R, rng.standard_normal((3, M)), rng.standard_normal((3, N)))


def test_nonfinite_in_a_batch(rng):
    _, Q, R = factors(rng, (3,), M, N, "full", np.float64)
    R[2, 0, 0] = np.nan
    with pytest.raises(ValueError, match="infs or NaNs"):
        cuqr.qr_update(Q, R, np.ones(M), np.ones(N))


def test_a_large_batch_runs_in_one_call(rng):
    # many small problems: cuqr's batch against the products (a smoke test of the
    # parallel driver across threads)
    A, Q, R = factors(rng, (500,), 20, 5, "economic", np.float64)
    u, v = rng.standard_normal((500, 20, 1)), rng.standard_normal((500, 5, 1))
    Q1, R1 = cuqr.qr_update(Q, R, u, v)
    assert rel(Q1 @ R1, A + u @ np.swapaxes(v, -1, -2)) <= tol(np.float64, 20, 5)


def test_the_problem_by_problem_loop_of_device_batches(rng):
    # the loop that runs batches of device arrays, run here on NumPy arrays: the same
    # results as the one-call batch, and a failing problem named the same way
    _, Q, R = factors(rng, (2, 3), M, N, "economic", np.float64)
    u, v = rng.standard_normal((3, M, 2)), rng.standard_normal((2, 1, N, 2))
    args = [(Q, 2), (R, 2), (u, "1|2"), (v, "1|2")]
    Q1, R1 = cuqr._loop(cuqr.qr_update, (2, 3), args, {})
    Q2, R2 = cuqr.qr_update(Q, R, u, v)
    np.testing.assert_allclose(Q1, Q2, rtol=0, atol=1e-13)
    np.testing.assert_allclose(R1, R2, rtol=0, atol=1e-13)
    k = np.array([[0, 5, -3], [2, 3, 4]])
    Q1, R1 = cuqr._loop(cuqr.qr_delete, (2, 3), [(Q, 2), (R, 2), (k, 0)], dict(p=2))
    Q2, R2 = cuqr.qr_delete(Q, R, k, 2)
    assert Q1.shape == Q2.shape == (2, 3, M - 2, N)
    np.testing.assert_allclose(Q1 @ R1, Q2 @ R2, rtol=0, atol=1e-12)
    Rc, _ = chol(rng, (2,), N, np.float64)
    x = 0.01 * rng.standard_normal((2, N, 1))
    x[1] *= 1e4
    with pytest.raises(np.linalg.LinAlgError, match=r"batch index \(1,\)"):
        cuqr._loop(cuqr.cholupdate, (2,), [(Rc, 2), (x, "1|2")], dict(sign="-"))
    # a function of one result (cholupdate) stacks every problem's
    x[1] /= 1e4
    R1 = cuqr._loop(cuqr.cholupdate, (2,), [(Rc, 2), (x, "1|2")], {})
    assert R1.shape == (2, N, N)
    np.testing.assert_allclose(R1, cuqr.cholupdate(Rc, x), rtol=0, atol=1e-13)
