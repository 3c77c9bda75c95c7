"""Int8Conv / Int8ConvRelu / Int8FC over every kernel path (compiled depthwise; float32 GEMM in one K-slice or
in several, each exact; grouped GEMMs; the numpy passes used without numba) against an int64 numpy reference:
padded windows times centered filters, plus bias, then QNNPACK's Q31 requantization in Python integers per element.
Shapes, strides, pads per side, dilation, groups, zero points and scales come from hypothesis."""

from __future__ import annotations

from contextlib import contextmanager

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.memory.int8_tensor import Int8TensorCPU
from framework.memory.workspace import Workspace
from framework.ops.quantized import int8_kernels
from framework.ops.quantized.int8_conv import chunk_k, q31_params
from framework.ops.quantized.int8_kernels import requantize_into
from tests.ops.quantized.int8_helpers import check_int8, q8
from tests.ops.quantized.test_int8_conv import requant
from tests.ops.quantized.test_int8_elementwise import ref_add


@contextmanager
def kernels(compiled: bool):
    """Run the block on the compiled loops, or on the numpy passes used without numba."""
    if compiled:
        yield
        return
    saved = dict(int8_kernels._COMPILED)
    int8_kernels._COMPILED.clear()
    int8_kernels._COMPILED[None] = None
    try:
        yield
    finally:
        int8_kernels._COMPILED.clear()
        int8_kernels._COMPILED.update(saved)


def conv_reference(x, xz, w, wz, b, stride, pads, dil, group):
    """int64 accumulators (N, OH, OW, M) of an NHWC grouped conv; ``pads`` = (top, left, bottom, right)."""
    n, h, wd, c = x.shape
    m, kh, kw, cg = w.shape
    t, l, bo, r = pads
    xp = np.pad(x.astype(np.int64) - xz, ((0, 0), (t, bo), (l, r), (0, 0)))
    oh = (h + t + bo - dil * (kh - 1) - 1) // stride + 1
    ow = (wd + l + r - dil * (kw - 1) - 1) // stride + 1
    wc = w.astype(np.int64) - wz
    acc = np.zeros((n, oh, ow, m), np.int64) + b.astype(np.int64)
    mg = m // group
    for ky in range(kh):
        for kx in range(kw):
            y0, x0 = ky * dil, kx * dil
            patch = xp[:, y0 : y0 + (oh - 1) * stride + 1 : stride, x0 : x0 + (ow - 1) * stride + 1 : stride, :]
            for gi in range(group):
                acc[..., gi * mg : (gi + 1) * mg] += (
                    patch[..., gi * cg : (gi + 1) * cg] @ wc[gi * mg : (gi + 1) * mg, ky, kx, :].T
                )
    return acc


def requantize_all(acc, xs, ws, ys, y_zp, lo):
    fn = np.frompyfunc(lambda a: requant(int(a), xs, ws, ys, y_zp, lo), 1, 1)
    return fn(acc).astype(np.uint8) if acc.size else np.zeros(acc.shape, np.uint8)


def run_conv(x, xq, w, wq, b, *, stride, pads, dil, group, ys, y_zp, relu):
    xs, xz = xq
    ws, wz = wq
    kh, kw = w.shape[1:3]
    op = CreateOperator(
        "Int8ConvRelu" if relu else "Int8Conv", ["X", "W", "b"], ["Y"], kernels=[kh, kw], strides=[stride, stride],
        pads=list(pads), dilations=[dil, dil], group=group, order="NHWC", Y_scale=ys, Y_zero_point=y_zp,
    )  # fmt: skip
    acc = conv_reference(x, xz, w, wz, b, stride, pads, dil, group)
    expected = requantize_all(acc, xs, ws, ys, y_zp, y_zp if relu else 0)
    check_int8(op, [q8(x, xs, xz), q8(w, ws, wz), q8(b, xs * ws, 0)], [(expected, ys, y_zp)])


scales = st.floats(0.001, 0.05)


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("kind", ["dense", "grouped", "depthwise"])
@settings(max_examples=40, deadline=None)
@given(
    data=st.data(), relu=st.booleans(),
    xz=st.integers(0, 255), wz=st.integers(0, 255), y_zp=st.integers(0, 255), xs=scales, ws=scales,
    ys=st.floats(0.01, 1.0), seed=st.integers(0, 2**16),
)  # fmt: skip
def test_conv_paths_match_reference(compiled, data, kind, relu, xz, wz, y_zp, xs, ws, ys, seed):
    rng = np.random.default_rng(seed)
    kh, kw = data.draw(st.sampled_from([1, 2, 3, 5])), data.draw(st.sampled_from([1, 2, 3]))
    stride = data.draw(st.integers(1, 2))
    dil = data.draw(st.integers(1, 2))
    pads = tuple(data.draw(st.integers(0, 2)) for _ in range(4))
    h = data.draw(st.integers(max(1, dil * (kh - 1) + 1 - pads[0] - pads[2]), 10))
    wd = data.draw(st.integers(max(1, dil * (kw - 1) + 1 - pads[1] - pads[3]), 7))
    n = data.draw(st.integers(0, 2))
    if kind == "depthwise":
        group = data.draw(st.integers(1, 40))
        cg, mg = 1, 1
    else:
        group = 1 if kind == "dense" else data.draw(st.integers(2, 3))
        cg, mg = data.draw(st.integers(1, 6)), data.draw(st.integers(1, 6))
    x = rng.integers(0, 256, (n, h, wd, cg * group)).astype(np.uint8)
    w = rng.integers(0, 256, (mg * group, kh, kw, cg)).astype(np.uint8)
    b = rng.integers(-5000, 5000, mg * group).astype(np.int32)
    with kernels(compiled):
        run_conv(
            x, (xs, xz), w, (ws, wz), b, stride=stride, pads=pads, dil=dil, group=group, ys=ys, y_zp=y_zp, relu=relu
        )


@settings(max_examples=40, deadline=None)
@given(
    acc=st.lists(st.integers(-(2**31), 2**31 - 1), min_size=1, max_size=12),
    b=st.integers(-(2**20), 2**20), s=st.floats(2.0**-20, 0.999), y_zp=st.integers(0, 255), relu=st.booleans(),
)  # fmt: skip
def test_requantize_epilogue_matches_q31_per_element(acc, b, s, y_zp, relu):
    for compiled in (True, False):
        with kernels(compiled):
            _check_requantize(acc, b, s, y_zp, relu)


def _check_requantize(acc, b, s, y_zp, relu):
    # Scales near 1 leave the Q31 product's rounding bit visible in the output (shift 0 or 1).
    lo = y_zp if relu else 0
    params = q31_params(1.0, float(np.float32(s)), 1.0, "test")
    out = np.empty((1, len(acc)), np.uint8)
    requantize_into(np.array([acc], np.float64), np.full(len(acc), b, np.int64), params, y_zp, lo, out)
    wrapped = [((a + 2**31) % 2**32) - 2**31 + b for a in acc]
    assert out[0].tolist() == [requant(a, 1.0, float(np.float32(s)), 1.0, y_zp, lo) for a in wrapped]


def test_k_slices_keep_float32_partial_sums_below_2_to_24():
    assert chunk_k(514, 0, 128) == 514  # 514 * 255 * 128 < 2**24
    assert chunk_k(515, 0, 128) == 514
    assert chunk_k(2000, 128, 128) == 1023  # |x - 128| <= 128: 1023 * 128 * 128 < 2**24
    assert chunk_k(10**6, 0, 0) == 10**6
    assert chunk_k(3, 255, 255) == 3


@settings(max_examples=6, deadline=None)
@given(k=st.sampled_from([514, 700, 2000]), xz=st.sampled_from([0, 255]), seed=st.integers(0, 2**16))
def test_long_dot_products_exact_in_one_or_several_k_slices(k, xz, seed):
    # Extreme codes (0/255 against zero points 0/255 and 128) make the partial sums as large as they get.
    rng = np.random.default_rng(seed)
    x = rng.choice(np.array([0, 255], np.uint8), (1, 3, 2, k))
    w = rng.choice(np.array([0, 255], np.uint8), (5, 1, 1, k))
    b = rng.integers(-(10**6), 10**6, 5).astype(np.int32)
    run_conv(
        x, (0.01, xz), w, (0.002, 128), b, stride=1, pads=(0, 0, 0, 0), dil=1, group=1, ys=5.0, y_zp=100, relu=False
    )
    op = CreateOperator("Int8FC", ["X", "W", "b"], ["Y"], Y_scale=5.0, Y_zero_point=100)
    x2 = x.reshape(6, k)
    acc = x2.astype(np.int64) - xz
    acc = acc @ (w.reshape(5, k).astype(np.int64) - 128).T + b
    expected = requantize_all(acc, 0.01, 0.002, 5.0, 100, 0)
    check_int8(op, [q8(x2, 0.01, xz), q8(w.reshape(5, k), 0.002, 128), q8(b, 0.01 * 0.002, 0)], [(expected, 5.0, 100)])


def test_grouped_conv_over_several_k_slices():
    rng = np.random.default_rng(5)
    x = rng.choice(np.array([0, 255], np.uint8), (1, 3, 3, 1200))
    w = rng.choice(np.array([0, 255], np.uint8), (4, 1, 1, 600))
    b = rng.integers(-(10**5), 10**5, 4).astype(np.int32)
    for compiled in (True, False):
        with kernels(compiled):
            run_conv(
                x, (0.01, 0), w, (0.002, 128), b, stride=1, pads=(0, 0, 0, 0), dil=1, group=2, ys=5.0, y_zp=90,
                relu=False,
            )  # fmt: skip


def test_depthwise_rerun_into_the_kept_output_gives_the_same_codes():
    rng = np.random.default_rng(3)
    x = rng.integers(0, 256, (2, 6, 5, 24)).astype(np.uint8)
    w = rng.integers(0, 256, (24, 3, 3, 1)).astype(np.uint8)
    b = rng.integers(-500, 500, 24).astype(np.int32)
    ws = Workspace()
    ws.feed_blob("X", q8(x, 0.02, 7))
    ws.feed_blob("W", q8(w, 0.01, 131))
    ws.feed_blob("b", q8(b, 0.0002, 0))
    ws.feed_blob("Y", Int8TensorCPU.from_numpy(np.full((2, 6, 5, 24), 77, np.uint8), 0.1, 0))
    kept = ws.get_blob("Y")._obj.t.array
    ws.run_operator_once(
        CreateOperator("Int8Conv", ["X", "W", "b"], ["Y"], kernel=3, pad=1, group=24, order="NHWC", Y_scale=0.1)
    )
    assert ws.get_blob("Y")._obj.t.array is kept
    acc = conv_reference(x, 7, w, 131, b, 1, (1, 1, 1, 1), 1, 24)
    np.testing.assert_array_equal(kept, requantize_all(acc, 0.02, 0.01, 0.1, 0, 0))


def test_new_weights_are_read_on_the_next_run():
    rng = np.random.default_rng(4)
    x = rng.integers(0, 256, (1, 4, 4, 8)).astype(np.uint8)
    b = np.zeros(6, np.int32)
    ws = Workspace()
    ws.feed_blob("X", q8(x, 0.02, 10))
    ws.feed_blob("b", q8(b, 0.0002, 0))
    op_def = CreateOperator("Int8Conv", ["X", "W", "b"], ["Y"], kernel=1, order="NHWC", Y_scale=0.05, Y_zero_point=9)
    for seed in (0, 1):
        w = np.random.default_rng(seed).integers(0, 256, (6, 1, 1, 8)).astype(np.uint8)
        ws.feed_blob("W", Int8TensorCPU.from_numpy(w, 0.01, 128))
        ws.run_operator_once(op_def)
        acc = conv_reference(x, 10, w, 128, b, 1, (0, 0, 0, 0), 1, 1)
        np.testing.assert_array_equal(ws.get_blob("Y")._obj.numpy(), requantize_all(acc, 0.02, 0.01, 0.05, 9, 0))


@pytest.mark.parametrize("compiled", [True, False])
@pytest.mark.parametrize("relu", [False, True])
@settings(max_examples=10, deadline=None)
@given(
    n=st.integers(0, 300), a_zp=st.integers(0, 255), b_zp=st.integers(0, 255), y_zp=st.integers(0, 255),
    a_scale=st.floats(0.01, 1.0), b_scale=st.floats(0.01, 1.0), y_scale=st.floats(0.05, 1.0),
    seed=st.integers(0, 2**16),
)  # fmt: skip
def test_add_compiled_and_numpy(compiled, relu, n, a_zp, b_zp, y_zp, a_scale, b_scale, y_scale, seed):
    rng = np.random.default_rng(seed)
    a, b = (rng.integers(0, 256, (n, 3)).astype(np.uint8) for _ in range(2))
    expected = ref_add(a, a_scale, a_zp, b, b_scale, b_zp, y_scale, y_zp, relu)
    op = CreateOperator("Int8AddRelu" if relu else "Int8Add", ["A", "B"], ["C"], Y_scale=y_scale, Y_zero_point=y_zp)
    with kernels(compiled):
        check_int8(op, [q8(a, a_scale, a_zp), q8(b, b_scale, b_zp)], [(expected, y_scale, y_zp)])
