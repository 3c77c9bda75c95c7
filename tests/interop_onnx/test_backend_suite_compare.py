"""Our runner of onnx's backend tests compares float8 / float4 / int4 outputs at any numpy version
(backend_suite._widened): equal values pass, a changed value or a changed dtype fails."""

from __future__ import annotations

import numpy as np
import pytest

ml_dtypes = pytest.importorskip("ml_dtypes")
pytest.importorskip("onnx")

from tests.interop_onnx.backend_suite import _backend_test  # noqa: E402

SMALL = ["float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float4_e2m1fn", "int4", "uint4"]


def _compare(ref, out):
    _backend_test().assert_similar_outputs([ref], [out], rtol=1e-3, atol=1e-7)


@pytest.mark.parametrize("name", SMALL)
def test_equal_outputs_pass_and_a_changed_value_fails(name):
    dtype = np.dtype(getattr(ml_dtypes, name))
    ref = np.array([0, 1, 2, 3, -1 if "uint" not in name else 4, 6], np.float32).astype(dtype)
    _compare(ref, ref.copy())
    _compare([ref, ref], [ref.copy(), ref.copy()])  # a sequence output
    changed = ref.copy()
    changed[2] = np.array(4, np.float32).astype(dtype)
    with pytest.raises(AssertionError):
        _compare(ref, changed)


def test_a_changed_dtype_fails():
    ref = np.array([1, 2], np.float32).astype(ml_dtypes.float8_e4m3fn)
    with pytest.raises(AssertionError, match="dtype"):
        _compare(ref, ref.astype(ml_dtypes.float8_e5m2))
    with pytest.raises(AssertionError):
        _compare(ref, ref.astype(np.float32))


def test_other_outputs_compare_as_onnx_compares_them():
    x = np.array([1.0, 2.0], np.float32)
    _compare(x, x + 1e-9)
    with pytest.raises(AssertionError):
        _compare(x, x + 1.0)
