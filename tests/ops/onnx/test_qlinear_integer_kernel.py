"""ONNX QLinearConv / ConvInteger / QLinearMatMul / MatMulInteger on the integer GEMM kernel (weights whose
centred codes fit int8) against onnx's ReferenceEvaluator, bit for bit: uint8 and int8 activations with zero
points at their ends, per-channel weight zero points and scales, strides, pads, dilations, batches, bias; the
kernel must have run."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

onnx = pytest.importorskip("onnx")

from framework.kernels import int8_gemm_path  # noqa: E402
from framework.memory.allocator import memory_reporter  # noqa: E402
from framework.onnx import backend  # noqa: E402
from tests.ops.onnx.test_qlinear_conv_gemm import _T, _agree, _codes, _model  # noqa: E402
from tests.ops.quantized.test_int8_integer_gemm import implicit_windows, spy_calls, wrapping_epilogue  # noqa: E402

pytestmark = pytest.mark.skipif(not int8_gemm_path.available(), reason="the CPU lacks AVX-512 VNNI (or no numba)")


def _zero_point(draw, dtype):
    info = np.iinfo(dtype)
    return dtype.type(draw(st.sampled_from([info.min, info.max, 0, 3])))


def _fitting_weights(rng, dtype, shape, wz):
    """Codes of ``dtype`` whose centred values w - wz (wz scalar or per output channel) lie in [-128, 127]."""
    info = np.iinfo(dtype)
    wz = np.asarray(wz, np.int64).reshape((-1,) + (1,) * (len(shape) - 1))
    lo, hi = np.maximum(info.min, wz - 128), np.minimum(info.max, wz + 127)
    return (lo + np.floor(rng.random(shape) * (hi - lo + 1))).astype(dtype)


@st.composite
def _case(draw):
    kernel = [draw(st.integers(1, 3)) for _ in range(2)]
    dil = [draw(st.integers(1, 2)) for _ in range(2)]
    attrs = dict(
        strides=[draw(st.integers(1, 2)) for _ in range(2)], dilations=dil, kernel_shape=kernel,
        pads=[draw(st.integers(0, 2)) for _ in range(4)],
    )  # fmt: skip
    spatial = [draw(st.integers((k - 1) * d + 1, 8)) for k, d in zip(kernel, dil)]
    xt, wt, yt = (np.dtype(draw(st.sampled_from([np.uint8, np.int8]))) for _ in range(3))
    implicit = draw(st.booleans())
    n, m = draw(st.integers(1, 2)), draw(st.integers(1, 40))
    c = 4 * draw(st.integers(1, 4)) if implicit else draw(st.integers(1, 13))
    per_channel = draw(st.booleans())
    wz = [_zero_point(draw, wt) for _ in range(m if per_channel else 1)]
    return dict(
        n=n, c=c, m=m, spatial=spatial, attrs=attrs, xt=xt, wt=wt, yt=yt, xz=_zero_point(draw, xt),
        wz=np.array(wz, wt) if per_channel else np.asarray(wz[0]), yz=_zero_point(draw, yt), implicit=implicit,
        bias=draw(st.booleans()), wrap=draw(st.booleans()), seed=draw(st.integers(0, 2**31 - 1)),
    )  # fmt: skip


def _qlinear_feeds(rng, case, x, w, wz, m: int) -> dict:
    """QLinearConv's inputs: the codes, random scales, the case's zero points and (if it has one) an int32 bias of m."""
    feeds = {
        "x": x, "x_scale": np.float32(rng.uniform(0.01, 0.1)), "x_zero_point": case["xz"],
        "w": w, "w_scale": rng.uniform(0.001, 0.05, wz.shape).astype(np.float32), "w_zero_point": wz,
        "y_scale": np.float32(rng.uniform(0.05, 2.0)), "y_zero_point": case["yz"],
    }  # fmt: skip
    feeds = {k: np.asarray(v) for k, v in feeds.items()}
    if case["bias"]:
        feeds["B"] = rng.integers(-5000, 5000, m).astype(np.int32)
    return feeds


@settings(max_examples=40, deadline=None)
@given(_case())
def test_qlinear_conv_and_conv_integer_on_the_kernel(case):
    rng = np.random.default_rng(case["seed"])
    m, wz = case["m"], case["wz"]
    x = _codes(rng, case["xt"], (case["n"], case["c"], *case["spatial"]))
    w = _fitting_weights(rng, case["wt"], (m, case["c"], *case["attrs"]["kernel_shape"]), wz)
    feeds = _qlinear_feeds(rng, case, x, w, wz, m)
    with spy_calls() as calls, implicit_windows(case["implicit"]), wrapping_epilogue(case["wrap"]):
        _agree("QLinearConv", feeds, case["attrs"], _T[case["yt"]])
        ints = {"x": x, "w": w, "x_zero_point": feeds["x_zero_point"], "w_zero_point": wz}
        _agree("ConvInteger", ints, case["attrs"], onnx.TensorProto.INT32)
    assert calls and all(calls)


@settings(max_examples=40, deadline=None)
@given(
    batch=st.lists(st.integers(1, 3), max_size=2), rows=st.integers(1, 20), k=st.integers(1, 90),
    cols=st.integers(1, 70), per_column=st.booleans(), data=st.data(), seed=st.integers(0, 2**31 - 1),
)  # fmt: skip
def test_qlinear_matmul_and_matmul_integer_on_the_kernel(batch, rows, k, cols, per_column, data, seed):
    rng = np.random.default_rng(seed)
    at, bt, yt = (np.dtype(data.draw(st.sampled_from([np.uint8, np.int8]))) for _ in range(3))
    a = _codes(rng, at, (*batch, rows, k))
    az = np.asarray(_zero_point(data.draw, at))
    bz = np.asarray(_zero_point(data.draw, bt))
    bzs = np.array([_zero_point(data.draw, bt) for _ in range(cols)], bt) if per_column and not batch else bz
    b = _fitting_weights(rng, bt, (cols, k), bzs).T.copy()
    with spy_calls() as calls:
        _agree("MatMulInteger", {"x": a, "b": b, "az": az, "bz": bzs}, {}, onnx.TensorProto.INT32)
        b = _fitting_weights(rng, bt, (cols, k), bz).T.copy()
        feeds = {
            "x": a, "a_scale": np.float32(rng.uniform(0.01, 0.1)), "a_zero_point": az,
            "b": b, "b_scale": rng.uniform(0.001, 0.05, (cols,) if per_column else ()).astype(np.float32),
            "b_zero_point": bz, "y_scale": np.float32(rng.uniform(0.05, 50.0)),
            "y_zero_point": _zero_point(data.draw, yt),
        }  # fmt: skip
        _agree("QLinearMatMul", {k: np.asarray(v) for k, v in feeds.items()}, {}, _T[yt])
    assert calls == [True, True]


def test_a_second_run_allocates_nothing():
    """QLinearConv and ConvInteger on the kernel (windows read in place, and copied): the second run of the
    prepared model allocates nothing (MemoryReporter)."""
    rng = np.random.default_rng(2)
    x = _codes(rng, np.dtype(np.uint8), (1, 8, 16, 16))
    for attrs in (dict(kernel_shape=[3, 3], pads=[1, 1, 1, 1]), dict(kernel_shape=[3, 3], strides=[2, 2])):
        w = _fitting_weights(rng, np.dtype(np.int8), (12, 8, 3, 3), np.zeros((), np.int8))
        feeds = {
            "x": x, "x_scale": np.float32(0.05), "x_zero_point": np.uint8(3), "w": w, "w_scale": np.float32(0.01),
            "w_zero_point": np.int8(0), "y_scale": np.float32(0.7), "y_zero_point": np.uint8(9),
        }  # fmt: skip
        for op, f, out in (
            ("QLinearConv", feeds, _T[np.dtype(np.uint8)]),
            ("ConvInteger", {"x": x, "w": w, "x_zero_point": np.uint8(3)}, onnx.TensorProto.INT32),
        ):
            f = {k: np.asarray(v) for k, v in f.items()}
            _agree(op, f, attrs, out)
            rep = backend.prepare(_model(op, f, attrs, out))
            with spy_calls() as calls:
                rep.run({"x": x})
                before = memory_reporter().allocations
                rep.run({"x": x})
            assert memory_reporter().allocations == before, op
            assert calls and all(calls)


@settings(max_examples=30, deadline=None)
@given(_case())
def test_depthwise_qlinear_conv_and_conv_integer_on_the_int32_loop(case):
    """group = C = M: the compiled int32 depthwise loop with ONNX's epilogues (any weight codes: no int8 fit
    needed), against the reference."""
    from framework.ops.onnx import qlinear_conv

    rng = np.random.default_rng(case["seed"])
    c = max(case["c"], 2)
    wz = case["wz"] if case["wz"].ndim == 0 else np.resize(case["wz"], c)
    x = _codes(rng, case["xt"], (case["n"], c, *case["spatial"]))
    w = _codes(rng, case["wt"], (c, 1, *case["attrs"]["kernel_shape"]))
    attrs = dict(case["attrs"], group=c)
    feeds = _qlinear_feeds(rng, case, x, w, wz, c)
    ran = []
    real = qlinear_conv.depthwise_into

    def spy(*args):
        ran.append(real(*args))
        return ran[-1]

    qlinear_conv.depthwise_into = spy
    try:
        _agree("QLinearConv", feeds, attrs, _T[case["yt"]])
        ints = {"x": x, "w": w, "x_zero_point": feeds["x_zero_point"], "w_zero_point": wz}
        _agree("ConvInteger", ints, attrs, onnx.TensorProto.INT32)
    finally:
        qlinear_conv.depthwise_into = real
    assert ran == [True, True]
