import os
import zlib

import numpy as np
import pytest


@pytest.fixture
def rng(request):
    # a seed of its own for every test, stable across runs (the test id's CRC)
    seed = zlib.crc32(request.node.nodeid.encode())
    return np.random.default_rng(seed)


def eps(dtype):
    return float(np.finfo(dtype).eps)


def tol(dtype, m, n=1):
    """The error bound of a sequence of orthogonal transformations on an m×n matrix:
    ||Q R − A|| ≤ c·max(m, n)·u·||A|| (Higham, Thm 19.10/19.13); c = 10."""
    return 10.0 * max(m, n) * eps(dtype)


def rel(a, b):
    a = np.asarray(a, dtype=np.complex128)
    b = np.asarray(b, dtype=np.complex128)
    return np.linalg.norm(a - b) / max(np.linalg.norm(b), 1e-300)


def orth_err(Q):
    Q = np.asarray(Q, dtype=np.complex128)
    return np.linalg.norm(Q.conj().T @ Q - np.eye(Q.shape[1]))


def check_factors(Q, R, A, dtype):
    """Q R = A and QᴴQ = I within the bound, R upper triangular, dtype kept."""
    m, n = A.shape
    assert Q.dtype == dtype and R.dtype == dtype
    assert rel(Q @ R, A) <= tol(dtype, m, n), rel(Q @ R, A)
    assert orth_err(Q) <= tol(dtype, m, n) * np.sqrt(Q.shape[1]), orth_err(Q)
    assert np.all(np.tril(np.asarray(R), -1) == 0)


def require_gpu():
    return os.environ.get("CUQR_REQUIRE_GPU") == "1"
