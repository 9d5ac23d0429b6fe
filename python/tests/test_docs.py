"""The examples in the package's docstrings run and print what they say."""

import doctest

import pytest

import cuqr


def test_docstring_examples():
    pytest.importorskip("scipy")
    failed, attempted = doctest.testmod(cuqr, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert attempted >= 6
    assert failed == 0
