"""SciPy's own tests of qr_insert, qr_delete and qr_update, run against cuqr.

The module loads ``scipy/linalg/tests/test_decomp_update.py`` from the installed SciPy,
replaces the functions it imports from ``scipy.linalg._decomp_update`` by cuqr's, and binds
its test classes here for pytest to collect. SciPy's own QR (``linalg.qr``) still makes the
factorisations the tests start from.

Every test runs, in all four dtypes (float32, float64, complex64, complex128), tall, square
and wide; skipped only ``test_form_qTu``, a test of a SciPy internal
(``_decomp_update._form_qTu``).

SciPy's tests of batch dimensions for these functions live in another file,
``scipy/linalg/tests/test_batch.py`` (``TestBatch.test_qr_update``, ``test_qr_insert`` and
``test_qr_delete``); they run here too, with ``linalg.qr_*`` in that module cuqr's.
"""

from __future__ import annotations

import functools
import pathlib
import types

import numpy as np
import pytest

import cuqr

scipy = pytest.importorskip("scipy")

_PATH = pathlib.Path(scipy.__file__).parent / "linalg" / "tests" / "test_decomp_update.py"
if not _PATH.is_file():
    pytest.skip(f"SciPy's test file is not installed ({_PATH})", allow_module_level=True)

_IMPORT = "from scipy.linalg._decomp_update import qr_delete, qr_update, qr_insert"
_SOURCE = _PATH.read_text()
if _IMPORT not in _SOURCE:
    pytest.skip(
        f"SciPy's test file no longer imports the functions as '{_IMPORT}'",
        allow_module_level=True,
    )

_scipy_suite = types.ModuleType("scipy_test_decomp_update")
_scipy_suite.__file__ = str(_PATH)
exec(compile(_SOURCE, str(_PATH), "exec"), _scipy_suite.__dict__)
# the functions the tests call, looked up in the module's globals at call time
_scipy_suite.qr_insert = cuqr.qr_insert
_scipy_suite.qr_delete = cuqr.qr_delete
_scipy_suite.qr_update = cuqr.qr_update


def _bind(name: str, skip: str | None = None):
    cls = getattr(_scipy_suite, name)
    cls = type(name, (cls,), {"__module__": __name__})
    if skip is not None:
        cls = pytest.mark.skip(reason=skip)(cls)
    globals()[name] = cls


for _op in ("delete", "insert", "update"):
    for _dt in "fdFD":
        _bind(f"TestQR{_op}_{_dt}")


@pytest.mark.skip(reason="tests SciPy's internal _decomp_update._form_qTu")
def test_form_qTu():
    pass


def test_functions_swapped():
    """The tests call cuqr, not SciPy."""
    assert _scipy_suite.qr_insert is cuqr.qr_insert
    assert _scipy_suite.qr_delete is cuqr.qr_delete
    assert _scipy_suite.qr_update is cuqr.qr_update
    assert np.__name__ == _scipy_suite.np.__name__


# ---------------------------------------------------------------------------------------
# SciPy's batch tests of the same functions (test_batch.py)

_BATCH_PATH = _PATH.parent / "test_batch.py"
_BATCH_TESTS = ("test_qr_update", "test_qr_insert", "test_qr_delete")


def _batch_suite():
    """SciPy's TestBatch with only its tests of qr_update, qr_insert and qr_delete, run
    against cuqr (None when the installed SciPy has no such tests)."""
    if not _BATCH_PATH.is_file():
        return None
    source = _BATCH_PATH.read_text()
    if "from scipy import linalg" not in source:
        return None
    mod = types.ModuleType("scipy_test_batch")
    mod.__file__ = str(_BATCH_PATH)
    exec(compile(source, str(_BATCH_PATH), "exec"), mod.__dict__)
    base = getattr(mod, "TestBatch", None)
    if base is None or not all(hasattr(base, t) for t in _BATCH_TESTS):
        return None
    # the module's `linalg`: SciPy's, with the three functions cuqr's
    linalg = types.SimpleNamespace(**{n: getattr(mod.linalg, n) for n in dir(mod.linalg)})
    for name in ("qr_update", "qr_insert", "qr_delete"):
        setattr(linalg, name, getattr(cuqr, name))
    mod.linalg = linalg
    body = {t: getattr(base, t) for t in _BATCH_TESTS}
    body["__module__"] = __name__
    return type("TestBatch", (), body)


_TestBatch = _batch_suite()
if _TestBatch is not None:
    TestBatch = _TestBatch
