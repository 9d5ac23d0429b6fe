"""SciPy's own tests of qr_insert, qr_delete and qr_update (test_decomp_update.py, all four
dtypes) with cuqr called on CuPy arrays and on PyTorch CUDA tensors.

SciPy's helpers make NumPy arrays; the functions the tests call convert every array
argument to the device library at the boundary (a copy in native byte order), call cuqr,
and bring the results back to NumPy. Every factorisation is then updated on the GPU: real
tall and square ones through cuqr's states, complex and wide ones with Q in device memory
(``GpuExplicitQr``; docs/python.md).

Left out, besides ``test_form_qTu`` (a SciPy internal): the tests of ``overwrite_*`` side
effects (``test_overwrite_*`` and the overwrite halves of the ``*_strides`` and byte-order
tests, which assert that the caller's NumPy arrays were written): the boundary copies, not
the caller's arrays, reach cuqr, so there is nothing of the caller's for it to write.
Those tests run on NumPy in test_scipy_suite.py. Skipped without a GPU
(``CUQR_REQUIRE_GPU=1`` makes a missing GPU a failure).
"""

from __future__ import annotations

import pathlib
import types

import numpy as np
import pytest

import cuqr
from conftest import require_gpu

scipy = pytest.importorskip("scipy")

if not cuqr.cuda_available():
    if require_gpu():
        raise RuntimeError("CUQR_REQUIRE_GPU=1 but no usable CUDA device")
    pytest.skip("no usable CUDA device", allow_module_level=True)

_PATH = pathlib.Path(scipy.__file__).parent / "linalg" / "tests" / "test_decomp_update.py"
if not _PATH.is_file():
    pytest.skip(f"SciPy's test file is not installed ({_PATH})", allow_module_level=True)
_SOURCE = _PATH.read_text()


def _libraries():
    out = {}
    try:
        import cupy

        out["cupy"] = (cupy.asarray, cupy.asnumpy)
    except ImportError:
        pass
    try:
        import torch

        if torch.cuda.is_available():
            out["torch"] = (lambda x: torch.from_numpy(x).cuda(), lambda x: x.cpu().numpy())
    except ImportError:
        pass
    if not out and require_gpu():
        raise RuntimeError("CUQR_REQUIRE_GPU=1 but neither CuPy nor PyTorch CUDA is installed")
    return out


def _on_device(f, to_dev, to_host):
    """``f`` with its NumPy array arguments copied to the device and its results back."""

    def dev(x):
        if not isinstance(x, np.ndarray):
            return x
        try:
            return to_dev(np.array(x, dtype=x.dtype.newbyteorder("="), order="C"))
        except TypeError:
            # a dtype the device library lacks (PyTorch: longdouble, uint16, ...): the
            # NumPy array itself, which cuqr refuses beside device arrays
            return x

    def call(*args, **kwargs):
        kwargs.pop("overwrite_qru", None)
        kwargs.pop("overwrite_qr", None)
        kwargs.pop("overwrite_qruv", None)
        args = [dev(a) for a in args]
        # SciPy's tests pass overwrite flags positionally too: drop them
        args = [a for a in args if not isinstance(a, bool)]
        out = f(*args, **{k: dev(v) for k, v in kwargs.items()})
        return tuple(to_host(x) for x in out)

    return call


def _skipped(name: str, why: str):
    """A skipped test method named ``name``."""

    def test(self):
        pass

    test.__name__ = name
    return pytest.mark.skip(reason=why)(test)


def _overwrite_check(name: str) -> bool:
    """Whether SciPy's test asserts writes into the caller's arrays."""
    return "overwrite" in name or "strides" in name or "byte_order" in name


for _lib, (_to_dev, _to_host) in _libraries().items():
    _mod = types.ModuleType(f"scipy_test_decomp_update_{_lib}")
    _mod.__file__ = str(_PATH)
    exec(compile(_SOURCE, str(_PATH), "exec"), _mod.__dict__)
    for _name in ("qr_insert", "qr_delete", "qr_update"):
        setattr(_mod, _name, _on_device(getattr(cuqr, _name), _to_dev, _to_host))
    for _op in ("delete", "insert", "update"):
        for _dt in "fdFD":
            _base = getattr(_mod, f"TestQR{_op}_{_dt}")
            _body = {"__module__": __name__}
            for _attr in dir(_base):
                if _attr == "test_form_qTu":
                    _why = "tests SciPy's internal _decomp_update._form_qTu"
                elif _attr.startswith("test_") and _overwrite_check(_attr):
                    _why = "writes into the caller's NumPy arrays: test_scipy_suite.py"
                else:
                    continue
                _body[_attr] = _skipped(_attr, _why)
            _cls = type(f"TestQR{_op}_{_dt}_{_lib}", (_base,), _body)
            globals()[_cls.__name__] = _cls
