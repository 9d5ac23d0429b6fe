"""One cuqr.QR used from several Python threads at once: calls on one object are serialised.

The threads overlap (a barrier starts each phase together, and every update runs with the
interpreter lock released). Each thread only makes changes whose net effect is nil whatever
the interleaving, so the state at the end must be the factorisation of the starting matrix:

* phase 1: rank-one updates undone by their negation (applied only while the shape is the
  starting one), a row inserted at the top and then the top row deleted, a column inserted
  first and then the first column deleted (the extra rows, or columns, of all threads stay
  on top of the original ones, and each thread deletes only after its own insertion
  succeeded), solves and reads;
* phase 2: window steps that drop the 8 oldest rows and append one period of a matrix whose
  rows repeat with period 8 (the matrix does not change), column insertions and deletions
  as before (a window step is refused while a column is extra), solves and reads.

Both phases also make calls that must be refused (ValueError), among them window steps
with a new forgetting factor and rows of the wrong width: a refused step must keep the
factor.
"""

import threading
import time

import numpy as np
import pytest

import cuqr
from conftest import orth_err, rel

M0, N0, PERIOD = 40, 6, 8
THREADS = 6
EXPECTED = (ValueError, np.linalg.LinAlgError)


def _retry(call, deadline):
    """Runs `call` until it is accepted (it is refused while another thread's change is
    pending)."""
    while True:
        try:
            return call()
        except EXPECTED:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.0002)


def _refused(call):
    try:
        call()
    except ValueError:
        return
    raise AssertionError("an invalid call was accepted")


def _check_read(qr):
    R = qr.R
    n = R.shape[1]
    assert R.shape == (n, n)
    assert np.all(np.tril(R, -1) == 0)
    assert orth_err(qr.Q) <= 1e-12
    m, n = qr.shape
    assert m >= n
    x = qr.solve()
    assert np.all(np.isfinite(x))


def _invalid(qr, rng):
    """A call that every state this test goes through refuses."""
    wide = rng.standard_normal((2, 50))
    choice = rng.integers(7)
    if choice == 0:
        _refused(lambda: qr.slide(wide, drop=2, forget=0.5))
    elif choice == 1:
        _refused(lambda: qr.slide(wide, forget=-1.0))
    elif choice == 2:
        _refused(lambda: qr.insert_rows(0, wide))
    elif choice == 3:
        _refused(lambda: qr.delete_rows(10**6))
    elif choice == 4:
        _refused(lambda: qr.rank_one(np.ones(3), np.ones(N0)))
    elif choice == 5:
        _refused(lambda: qr.delete_cols(0, 100))
    else:
        _refused(lambda: qr.shift_col(0, 100))


def _col_pair(qr, rng, deadline):
    try:
        qr.insert_cols(0, rng.standard_normal(M0))
    except EXPECTED:
        return  # refused: a row of another thread is extra
    _retry(lambda: qr.delete_cols(0), deadline)


def _phase1(qr, rng, steps, deadline):
    for _ in range(steps):
        op = rng.integers(6)
        if op == 0:
            u, v = rng.standard_normal(M0), rng.standard_normal(N0)
            try:
                qr.rank_one(u, v)
            except EXPECTED:
                continue  # refused: a row or column of another thread is extra
            _retry(lambda: qr.rank_one(-u, v), deadline)
        elif op == 1:
            try:
                qr.insert_rows(0, rng.standard_normal(N0), rng.standard_normal(1))
            except EXPECTED:
                continue  # refused: a column of another thread is extra
            _retry(lambda: qr.delete_rows(0), deadline)
        elif op == 2:
            _col_pair(qr, rng, deadline)
        elif op == 3:
            _check_read(qr)
        else:
            _invalid(qr, rng)


def _phase2(qr, rng, steps, deadline, period, rhs):
    for _ in range(steps):
        op = rng.integers(5)
        if op == 0:
            _retry(lambda: qr.slide(period, rhs, drop=PERIOD, forget=1.0), deadline)
        elif op == 1:
            _col_pair(qr, rng, deadline)
        elif op == 2:
            _check_read(qr)
        else:
            _invalid(qr, rng)


def test_one_object_from_several_threads(rng):
    P = rng.standard_normal((PERIOD, N0))
    pb = rng.standard_normal(PERIOD)
    A = np.tile(P, (M0 // PERIOD, 1))
    b = np.tile(pb, M0 // PERIOD)
    qr = cuqr.QR(A, b, q="thin", device="cpu")

    errors = []
    barrier = threading.Barrier(THREADS, timeout=60)
    deadline = time.monotonic() + 60
    seeds = rng.integers(2**32, size=THREADS)

    def worker(seed):
        r = np.random.default_rng(seed)
        try:
            barrier.wait()
            _phase1(qr, r, 300, deadline)
            barrier.wait()
            _phase2(qr, r, 150, deadline, P, pb)
        except BaseException as e:  # noqa: BLE001 (reported by the main thread)
            errors.append(e)
            barrier.abort()

    threads = [threading.Thread(target=worker, args=(s,), daemon=True) for s in seeds]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=max(deadline + 5 - time.monotonic(), 1))
    assert not any(t.is_alive() for t in threads), "a thread hung"
    if errors:
        raise errors[0]

    assert qr.shape == (M0, N0)
    assert qr._st.forget == 1.0
    Q, R = qr.Q, qr.R
    assert np.all(np.tril(R, -1) == 0)
    assert orth_err(Q) <= 1e-11
    assert rel(Q @ R, A) <= 1e-11
    assert rel(qr.solve(), np.linalg.lstsq(A, b, rcond=None)[0]) <= 1e-10
    assert rel(qr.d.reshape(-1), Q.T @ b) <= 1e-11


def test_reads_while_updating(rng):
    """Properties read while other threads update see one state or the next, never a mix
    (a read is one call on the object)."""
    A = rng.standard_normal((60, 5))
    qr = cuqr.QR(A, q="full", device="cpu")
    stop = threading.Event()
    errors = []

    def reader():
        try:
            while not stop.is_set():
                m, n = qr.shape
                assert m in (60, 61)
                R = qr.R
                assert R.shape[0] in (60, 61) and R.shape[1] == 5
                Q = qr.Q
                assert Q.shape[0] == Q.shape[1]
        except BaseException as e:  # noqa: BLE001
            errors.append(e)

    readers = [threading.Thread(target=reader, daemon=True) for _ in range(3)]
    for t in readers:
        t.start()
    try:
        for _ in range(60):
            qr.insert_rows(60, rng.standard_normal(5))
            qr.delete_rows(-1)
    finally:
        stop.set()
        for t in readers:
            t.join(timeout=30)
    assert not any(t.is_alive() for t in readers), "a reader hung"
    if errors:
        raise errors[0]
    assert rel(qr.Q @ qr.R, A) <= 1e-12


@pytest.mark.parametrize("call", ["shape", "R", "insert_rows"])
def test_reentrant_call_is_refused(rng, call):
    """A call on the object made from inside one of its own calls (here by an argument
    that Python code inspects) is refused, not a deadlock."""
    qr = cuqr.QR(rng.standard_normal((10, 3)), q="thin", device="cpu")
    seen = []

    class Sneaky:
        def __getattr__(self, name):
            if name == "__dlpack_device__":
                try:
                    if call == "insert_rows":
                        qr._st.insert_rows(0, np.ones((1, 3)))
                    else:
                        getattr(qr, call)
                except RuntimeError as e:
                    seen.append(e)
            raise AttributeError(name)

    with pytest.raises(ValueError):
        qr._st.insert_rows(0, Sneaky())
    assert len(seen) == 1 and "already" in str(seen[0]).lower()
    assert qr.shape == (10, 3)
