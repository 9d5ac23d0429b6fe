"""SciPy's own tests of qr_insert, qr_delete and qr_update, run against cuqr.

The module loads ``scipy/linalg/tests/test_decomp_update.py`` from the installed SciPy,
replaces the functions it imports from ``scipy.linalg._decomp_update`` by cuqr's, and binds
its test classes here for pytest to collect. SciPy's own QR (``linalg.qr``) still makes the
factorisations the tests start from.

Skipped, each with its reason:

* the complex classes (``TestQR*_F``, ``TestQR*_D``): cuqr works in float32 and float64;
* a call that cuqr refuses because the factorisation is wide (M < N) before or after the
  update: cuqr keeps M >= N (the refusal is a ``ValueError`` naming M >= N; it comes only
  after every other check of the arguments, so a test expecting a ``ValueError`` for a bad
  argument still gets it);
* ``test_form_qTu``: a test of a SciPy internal (``_decomp_update._form_qTu``).
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

WIDE = "wide factorisation (M < N): out of cuqr's scope"
COMPLEX = "complex dtypes: out of cuqr's scope"


def _skip_wide(f):
    @functools.wraps(f)
    def call(*args, **kwargs):
        try:
            return f(*args, **kwargs)
        except ValueError as e:
            if "M >= N" in str(e):
                pytest.skip(WIDE)
            raise

    return call


_scipy_suite = types.ModuleType("scipy_test_decomp_update")
_scipy_suite.__file__ = str(_PATH)
exec(compile(_SOURCE, str(_PATH), "exec"), _scipy_suite.__dict__)
# the functions the tests call, looked up in the module's globals at call time
_scipy_suite.qr_insert = _skip_wide(cuqr.qr_insert)
_scipy_suite.qr_delete = _skip_wide(cuqr.qr_delete)
_scipy_suite.qr_update = _skip_wide(cuqr.qr_update)


def _bind(name: str, skip: str | None = None):
    cls = getattr(_scipy_suite, name)
    cls = type(name, (cls,), {"__module__": __name__})
    if skip is not None:
        cls = pytest.mark.skip(reason=skip)(cls)
    globals()[name] = cls


for _op in ("delete", "insert", "update"):
    for _dt in "fd":
        _bind(f"TestQR{_op}_{_dt}")
    for _dt in "FD":
        _bind(f"TestQR{_op}_{_dt}", COMPLEX)


@pytest.mark.skip(reason="tests SciPy's internal _decomp_update._form_qTu")
def test_form_qTu():
    pass


def test_functions_swapped():
    """The tests call cuqr, not SciPy."""
    assert _scipy_suite.qr_insert.__wrapped__ is cuqr.qr_insert
    assert _scipy_suite.qr_delete.__wrapped__ is cuqr.qr_delete
    assert _scipy_suite.qr_update.__wrapped__ is cuqr.qr_update
    assert np.__name__ == _scipy_suite.np.__name__
