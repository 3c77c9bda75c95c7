"""framework.ops.erf: the one erf (Erf, Gelu and their gradients), against math.erf to float64/float32 ulps,
the same whether or not scipy is installed."""

from __future__ import annotations

import math
import sys

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.caffe2.python.core import CreateOperator
from framework.memory.workspace import Workspace
from framework.ops.erf import erf

_F64_ULPS = 4
_EXTREMES = [0.0, -0.0, 5e-324, -5e-324, 1e-308, 1e-20, 0.46875, -0.46875, 0.5, 4.0, -4.0, 5.9, 6.0, 26.5, 1e300]


def _ulps(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    return np.abs(got.astype(np.float64) - want.astype(np.float64)) / np.spacing(np.abs(want)).astype(np.float64)


def _reference(x: np.ndarray) -> np.ndarray:
    return np.array([math.erf(float(v)) for v in x.ravel()], np.float64).reshape(x.shape)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(-8, 8, allow_nan=False) | st.sampled_from(_EXTREMES), min_size=1, max_size=64))
def test_float64_within_a_few_ulps_of_math_erf(values):
    x = np.array(values, np.float64)
    assert _ulps(erf(x), _reference(x)).max() <= _F64_ULPS


@settings(max_examples=300, deadline=None)
@given(st.lists(st.floats(-8, 8, allow_nan=False, width=32), min_size=1, max_size=64))
def test_float32_within_one_ulp_of_math_erf(values):
    x = np.array(values, np.float32)
    got = erf(x)
    assert got.dtype == np.float32
    assert _ulps(got, _reference(x).astype(np.float32)).max() <= 1


def test_dense_grid_and_special_values():
    x = np.concatenate([np.linspace(-7, 7, 100001), _EXTREMES, -np.array(_EXTREMES)])
    assert _ulps(erf(x), _reference(x)).max() <= _F64_ULPS
    got = erf(np.array([np.inf, -np.inf, np.nan, -0.0]))
    assert got[0] == 1.0 and got[1] == -1.0 and np.isnan(got[2])
    assert got[3] == 0.0 and math.copysign(1.0, got[3]) == -1.0


def test_in_place_and_other_dtypes():
    x = np.linspace(-3, 3, 11)
    want = _reference(x)
    y = x.copy()
    assert erf(y, out=y) is y
    np.testing.assert_array_equal(y, erf(x))
    assert _ulps(y, want).max() <= _F64_ULPS
    h = erf(x.astype(np.float16))
    assert h.dtype == np.float16 and np.abs(h.astype(np.float64) - want).max() <= 1e-3
    assert erf(np.array([1, 2])).dtype == np.float64  # integers are taken as float64


def test_ops_use_it_with_or_without_scipy(monkeypatch):
    x = np.linspace(-4, 4, 33).astype(np.float32)

    def run(op_type: str) -> np.ndarray:
        ws = Workspace()
        ws.feed_blob("x", x)
        ws.run_operator_once(CreateOperator(op_type, ["x"], ["y"]))
        return ws.fetch_blob("y")

    erf_y, gelu_y = run("Erf"), run("Gelu")
    monkeypatch.setitem(sys.modules, "scipy", None)  # scipy absent: importing it fails
    monkeypatch.setitem(sys.modules, "scipy.special", None)
    np.testing.assert_array_equal(run("Erf"), erf_y)
    np.testing.assert_array_equal(run("Gelu"), gelu_y)
    np.testing.assert_array_equal(erf_y, erf(x))
    want = x.astype(np.float64) * 0.5 * (1 + _reference(x.astype(np.float64) / math.sqrt(2)))
    np.testing.assert_allclose(gelu_y, want, rtol=2e-6, atol=1e-7)
