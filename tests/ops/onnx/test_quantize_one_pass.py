"""QuantizeLinear / DequantizeLinear with one scale and zero point on 8-bit codes (the one-pass compiled kernels
of ``qlinear_kernels``) against onnx's ReferenceEvaluator, bit for bit: ties (round half to even), values past
the type's range, zero points at the type's ends. Where the reference is undefined (NaN, +-inf and quotients
beyond int32: its cast to int32), against the numpy passes' documented arithmetic, written here."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from framework.onnx import backend  # noqa: E402
from framework.ops.onnx import qlinear_kernels  # noqa: E402

_T = {np.dtype(np.uint8): TensorProto.UINT8, np.dtype(np.int8): TensorProto.INT8}


def _run_both(op: str, x: np.ndarray, scale: np.float32, zp: np.ndarray, in_type: int, out_type: int):
    inits = [numpy_helper.from_array(np.asarray(scale), "s"), numpy_helper.from_array(np.asarray(zp), "z")]
    graph = helper.make_graph(
        [helper.make_node(op, ["x", "s", "z"], ["y"])], "g", [helper.make_tensor_value_info("x", in_type, x.shape)],
        [helper.make_tensor_value_info("y", out_type, None)], inits,
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 19)])
    with np.errstate(all="ignore"):
        (want,) = ReferenceEvaluator(model).run(None, {"x": x})
    (got,) = backend.prepare(model).run({"x": x})
    assert got.dtype == want.dtype and got.shape == want.shape
    return got, want


_TIES = [0.5, 1.5, 2.5, -0.5, -1.5, 126.5, 127.5, 255.5, -128.5, 1e6, -1e6]


def _zero_point(dt, at):
    info = np.iinfo(dt)
    return np.asarray({"min": info.min, "max": info.max, "zero": 0, "mid": (info.min + info.max) // 2}[at], dt)


@settings(max_examples=25, deadline=None)
@given(
    dtype=st.sampled_from([np.uint8, np.int8]), zp_at=st.sampled_from(["min", "max", "zero", "mid"]),
    scale=st.sampled_from([1.0, 0.5, 0.0173, 3.0, 1e30]), n=st.integers(1, 300), seed=st.integers(0, 2**16),
)  # fmt: skip
def test_quantize_and_dequantize_match_the_reference(dtype, zp_at, scale, n, seed):
    rng = np.random.default_rng(seed)
    dt, info = np.dtype(dtype), np.iinfo(dtype)
    zp = _zero_point(dt, zp_at)
    x = (rng.standard_normal((n, 3)) * 200).astype(np.float32)
    x.reshape(-1)[: len(_TIES)] = np.array(_TIES, np.float32)[: x.size]
    s = np.float32(scale)
    got, want = _run_both("QuantizeLinear", x, s, zp, TensorProto.FLOAT, _T[dt])
    np.testing.assert_array_equal(got, want)
    codes = rng.integers(info.min, info.max + 1, (n, 5)).astype(dt)
    got, want = _run_both("DequantizeLinear", codes, s, zp, _T[dt], TensorProto.FLOAT)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
@pytest.mark.parametrize("zp_at", ["min", "max", "zero", "mid"])
def test_quantize_outside_the_reference_keeps_the_documented_arithmetic(dtype, zp_at):
    """NaN -> 0 and +-inf -> the type's ends before the zero point is added; quotients clipped to the type's
    range +- 2**17 before it (so a huge value and inf differ when the zero point is not 0)."""
    dt, info = np.dtype(dtype), np.iinfo(dtype)
    zp = _zero_point(dt, zp_at)
    x = np.array([np.nan, np.inf, -np.inf, 3e38, -3e38, 1e-30, 2.5], np.float32)
    for s in (np.float32(1.0), np.float32(1e-30)):
        with np.errstate(all="ignore"):
            v = np.rint(x / s)
        q = [0 if np.isnan(t) else info.max if t == np.inf else info.min if t == -np.inf else
             int(min(max(t, info.min - 2**17), info.max + 2**17)) for t in v]  # fmt: skip
        want = np.clip(np.array(q) + int(zp), info.min, info.max).astype(dt)
        got, _ = _run_both("QuantizeLinear", x.reshape(1, -1), s, zp, TensorProto.FLOAT, _T[dt])
        np.testing.assert_array_equal(got.reshape(-1), want)


def test_the_one_pass_kernels_ran():
    if qlinear_kernels._flat_kernel("quantize", qlinear_kernels._quantize) is None:
        pytest.skip("numba missing: the numpy passes run")
    out = np.empty(4, np.uint8)
    assert qlinear_kernels.quantize_into(np.array([0.5, 1.5, np.nan, np.inf], np.float32), 1.0, 3, 0, 255, out)
    assert out.tolist() == [3, 5, 3, 255]
    f = np.empty(2, np.float32)
    assert qlinear_kernels.dequantize_into(np.array([0, 255], np.uint8), 128.0, 0.5, f)
    assert f.tolist() == [-64.0, 63.5]
