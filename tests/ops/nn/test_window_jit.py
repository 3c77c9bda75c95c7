"""The compiled (numba) kernels of framework/kernels/window_jit.py: depthwise Conv/ConvFusion, 3x3
MaxPool/AveragePool, the one-pass conv epilogue (bias, residual, Relu) and test-mode SpatialBN's
scale-and-shift, against independent numpy references; the same ops with the kernels switched off
(the numpy path) giving the same results, NaN propagation, and no allocation per re-run."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.kernels import conv_nchw, conv_strategies, pool_strategies, window_jit
from framework.kernels.dispatch_table import THRESHOLDS
from framework.kernels.geometry import Geometry
from framework.memory.allocator import memory_reporter
from framework.memory.workspace import Workspace
from framework.ops import create_operator
from tests.ops.nn.test_conv_fusion import ref_conv, threads  # noqa: F401  (fixture)
from tests.ops.nn.test_pool import pool_reference

pytest.importorskip("numba")


def _run(op_def, feeds, jit: bool, monkeypatch):
    """Output of ``op_def`` on ``feeds`` with the compiled kernels on or off; (output, op)."""
    with monkeypatch.context() as m:
        if not jit:
            m.setattr(window_jit, "_kernels", None)
        ws = Workspace()
        for k, v in feeds.items():
            ws.feed_blob(k, v)
        op = create_operator(op_def, ws)
        op.run()
        return ws.fetch_blob(op_def.output[0]).copy(), op


def _fused(ins, fusion, want, feeds, rng, **kw):
    """(op_def, want): a Conv (fusion 0) or ConvFusion of ``fusion`` type over inputs ``ins``; types 2
    and 3 sum a random S (fed into ``feeds``) in place; Relu (1, 3) as "0 if v < 0 else v" (NaN stays)."""
    if fusion == 0:
        return CreateOperator("Conv", ins, ["Y"], **kw), want
    if fusion == 1:
        return CreateOperator("ConvFusion", ins, ["Y"], fusion_type=1, **kw), np.where(want < 0, 0, want)
    feeds["S"] = rng.standard_normal(want.shape).astype(np.float32)
    want = want + feeds["S"]
    op_def = CreateOperator("ConvFusion", [*ins, "S"], ["S"], fusion_type=fusion, **kw)
    return op_def, (np.where(want < 0, 0, want) if fusion == 3 else want)


@st.composite
def dw_cases(draw):
    k = draw(st.sampled_from([3, 3, 5, 1]))
    stride = draw(st.sampled_from([1, 2, 3]))
    pad = draw(st.integers(0, k // 2 + 1))
    h = draw(st.integers(max(1, k - 2 * pad), 12))
    w = draw(st.integers(max(1, k - 2 * pad), 12))
    return dict(n=draw(st.integers(1, 3)), c=draw(st.integers(2, 5)), h=h, w=w, k=k, stride=stride, pad=pad)


@given(case=dw_cases(), fusion=st.sampled_from([0, 1, 2, 3]), bias=st.booleans(), seed=st.integers(0, 2**31 - 1))
@settings(max_examples=40, deadline=None)
def test_depthwise_jit_matches_reference_and_numpy_path(case, fusion, bias, seed):
    """The compiled depthwise kernels (depthwise3 for 3x3 and 5x5 at stride 1 and 2, the micro-kernel's one-row
    block at stride 1, phase planes per channel otherwise, each also with the ones before it off)
    against float64 and the numpy path, every fusion type, with and without bias, NaN through Relu."""
    rng = np.random.default_rng(seed)
    n, c, k, s, p = case["n"], case["c"], case["k"], case["stride"], case["pad"]
    x = rng.standard_normal((n, c, case["h"], case["w"])).astype(np.float32)
    x[0, -1, 0, 0] = np.nan
    w = rng.standard_normal((c, 1, k, k)).astype(np.float32)
    b = rng.standard_normal(c).astype(np.float32) if bias else None
    want = ref_conv(x.astype(np.float64), w, b if bias else np.zeros(c), s, p, c)
    feeds = {"X": x, "W": w} | ({"b": b} if bias else {})
    ins = ["X", "W"] + (["b"] if bias else [])
    kw = dict(kernel=k, stride=s, pad=p, group=c)
    op_def, want = _fused(ins, fusion, want, feeds, rng, **kw)
    with pytest.MonkeyPatch.context() as mp:
        got, op = _run(op_def, feeds, True, mp)
        jit = op._kernel.jit
        assert jit == (k > 1 or p > 0 or s > 1)  # a 1x1 stride-1 unpadded conv is pointwise
        assert op._kernel.dw3 == (jit and k in (3, 5) and s < 3)
        assert op._kernel.dmk == (jit and s == 1 and not op._kernel.dw3)
        plain, op2 = _run(op_def, feeds, False, mp)
        assert not op2._kernel.jit
        mp.setattr(conv_strategies.DEPTHWISE3, "enabled", False)
        one_row, op4 = _run(op_def, feeds, True, mp)
        assert not op4._kernel.dw3 and op4._kernel.dmk == (jit and s == 1)
        mp.setattr(conv_strategies.DIRECT_DEPTHWISE, "enabled", False)
        planes, op3 = _run(op_def, feeds, True, mp)
        assert not op3._kernel.dmk
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    for other in (plain, one_row, planes):
        np.testing.assert_allclose(got, other, rtol=1e-5, atol=1e-5)


@given(
    kernel=st.sampled_from([1, 3]),
    stride=st.sampled_from([1, 2]),
    n=st.integers(1, 5),
    m=st.integers(1, 40),
    size=st.integers(3, 12),
    fusion=st.sampled_from([0, 1, 2, 3]),
    dilation=st.sampled_from([1, 1, 2]),
    seed=st.integers(0, 2**31 - 1),
)
@settings(max_examples=40, deadline=None)
def test_conv_epilogue_jit_matches_reference_and_numpy_path(kernel, stride, n, m, size, fusion, dilation, seed):
    """Group-1 convs (pointwise, im2col, dilated, images batched into one GEMM with one epilogue call
    per block) end in the compiled epilogue."""
    rng = np.random.default_rng(seed)
    c = 3
    pad = kernel // 2
    x = rng.standard_normal((n, c, size, size)).astype(np.float32)
    x[0, 0, 0, 0] = np.nan  # NaN reaches the outputs whose window holds it, through Relu too
    w = rng.standard_normal((m, c, kernel, kernel)).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float32)
    want = ref_conv(x, w, b, stride, pad, 1, dilation)
    feeds = {"X": x, "W": w, "b": b}
    kw = dict(kernel=kernel, stride=stride, pad=pad, dilation=dilation)
    op_def, want = _fused(["X", "W", "b"], fusion, want, feeds, rng, **kw)
    with pytest.MonkeyPatch.context() as mp:
        got, op = _run(op_def, feeds, True, mp)
        assert op._kernel.jit_epilogue
        plain, op2 = _run(op_def, feeds, False, mp)
        assert not op2._kernel.jit_epilogue
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got, plain, rtol=1e-5, atol=1e-5)


@st.composite
def direct_cases(draw):
    """Group-1 convs the direct kernel takes: 3x3 at stride 1 or 2, 5x5 and 7x7 at strides 1-4 over few
    channels (THRESHOLDS["DIRECT_K"]), outputs at least THRESHOLDS["DIRECT_OW"]
    wide: rows of up to 16 outputs two to a register block, wider ones in runs of 32, a last run of up
    to 16 sharing a block with the next row's; M not a multiple of the micro-kernel's 8 rows exercises
    a partial block), pads up to 2 per side."""
    k = draw(st.sampled_from([3, 3, 3, 5, 7]))
    pads = draw(st.lists(st.integers(0, k // 2 + 1), min_size=4, max_size=4))
    s = draw(st.sampled_from([1, 2] if k == 3 else [1, 2, 3, 4]))
    h = draw(st.integers(max(1, k - pads[0] - pads[2]), 12))
    min_ow = THRESHOLDS["DIRECT_OW"]
    w = draw(st.integers(max(1, (min_ow - 1) * s + k - pads[1] - pads[3]), 52 * s))
    n, c, m = draw(st.integers(1, 3)), draw(st.integers(1, 6)), draw(st.integers(1, 20))
    return dict(n=n, c=c, m=m, h=h, w=w, pads=pads, stride=s, k=k)


def _ref_padded(x, w, b, pads, stride):
    """Float64 reference for per-side pads (top, left, bottom, right)."""
    t, lf, bt, r = pads
    return ref_conv(np.pad(x.astype(np.float64), ((0, 0), (0, 0), (t, bt), (lf, r))), w, b, stride, 0, 1)


@given(
    case=direct_cases(),
    fusion=st.sampled_from([0, 1, 2, 3]),
    bias=st.booleans(),
    band=st.sampled_from([None, 1]),
    seed=st.integers(0, 2**31 - 1),
)
@settings(max_examples=40, deadline=None)
def test_direct_conv_matches_reference_and_numpy_path(case, fusion, bias, band, seed):
    """The direct 3x3 kernel against the float64 reference and against im2col + GEMM (the kernels
    off), every fusion type, NaN through Relu; ``band`` 1: BAND_BYTES tiny, so each image runs in
    bands of two output rows."""
    rng = np.random.default_rng(seed)
    n, c, m, pads = case["n"], case["c"], case["m"], case["pads"]
    x = rng.standard_normal((n, c, case["h"], case["w"])).astype(np.float32)
    x[0, 0, 0, 0] = np.nan  # reaches the outputs whose window holds it, through Relu too
    w = rng.standard_normal((m, c, case["k"], case["k"])).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float32) if bias else None
    want = _ref_padded(x, w, b, pads, case["stride"])
    feeds = {"X": x, "W": w}
    ins = ["X", "W"] + (["b"] if bias else [])
    if bias:
        feeds["b"] = b
    kw = dict(kernel=case["k"], pads=pads, stride=case["stride"])
    op_def, want = _fused(ins, fusion, want, feeds, rng, **kw)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(
            conv_strategies.CHANNEL, "enabled", False
        )  # narrow outputs on the direct kernel too (channel: below)
        if band:
            mp.setattr(window_jit, "BAND_BYTES", band)
        got, op = _run(op_def, feeds, True, mp)
        assert op._kernel.kind == "direct"
        assert not band or op._kernel.plan.wide or op._kernel.plan.band == 2
        plain, op2 = _run(op_def, feeds, False, mp)
        assert op2._kernel.kind == "im2col"
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert np.isnan(got).any()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got, plain, rtol=1e-4, atol=1e-4)


@st.composite
def channel_cases(draw):
    """Group-1 convs the channel-lane kernel takes: windows 2x2 to 5x5 (also not square), stride 1, 2
    or 4 (with up to 11x11 windows, AlexNet's first conv), pads up to 2 per side, outputs 1 to 14 wide
    (blocks of 7, 8 or 14 pixels, partial ones), M not a multiple of a panel (16, 32 or 48 channels), and
    wider outputs (up to 33, several blocks a row); at stride 2 1x1 windows."""
    s = draw(st.sampled_from([1, 2, 4]))
    one = s == 2 and draw(st.booleans())
    top = 11 if s == 4 else 5
    kh, kw = (1, 1) if one else (draw(st.integers(2, top)), draw(st.integers(2, top)))
    pads = [0, 0, 0, 0] if one else draw(st.lists(st.integers(0, 2), min_size=4, max_size=4))
    ow = draw(st.integers(1, 33))
    w = (ow - 1) * s + kw - pads[1] - pads[3]
    lo = max(1, kh - pads[0] - pads[2])
    h = draw(st.integers(lo, max(lo, 10)))
    assume(w >= 1)
    n, c, m = draw(st.integers(1, 3)), draw(st.integers(1, 12)), draw(st.integers(1, 70))
    return dict(n=n, c=c, m=m, h=h, w=w, pads=pads, stride=s, kernels=[kh, kw])


@given(case=channel_cases(), fusion=st.sampled_from([0, 1, 2, 3]), bias=st.booleans(), seed=st.integers(0, 2**31 - 1))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_channel_conv_matches_reference_and_numpy_path(threads, case, fusion, bias, seed):  # noqa: F811
    """The channel-lane kernel (window_jit.channel_conv) against the float64 reference and im2col +
    GEMM, every fusion type, NaN through Relu, 1 and 2 threads (images or channel panels split)."""
    rng = np.random.default_rng(seed)
    n, c, m, pads, s = case["n"], case["c"], case["m"], case["pads"], case["stride"]
    kh, kw = case["kernels"]
    x = rng.standard_normal((n, c, case["h"], case["w"])).astype(np.float32)
    x[0, 0, 0, 0] = np.nan
    w = rng.standard_normal((m, c, kh, kw)).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float32) if bias else None
    want = _ref_padded(x, w, b, pads, s)
    feeds = {"X": x, "W": w} | ({"b": b} if bias else {})
    ins = ["X", "W"] + (["b"] if bias else [])
    kw_args = dict(kernels=[kh, kw], pads=pads, stride=s)
    op_def, want = _fused(ins, fusion, want, feeds, rng, **kw_args)
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(THRESHOLDS, "CHANNEL_S2_K", 1)  # every wide case on it, whatever its C x taps and M
        mp.setitem(THRESHOLDS, "CHANNEL_S2_M", 1)
        got, op = _run(op_def, feeds, True, mp)
        assert op._kernel.kind == "channel"
        plain, op2 = _run(op_def, feeds, False, mp)
        assert op2._kernel.kind == "im2col"
        rep = memory_reporter()
        n0 = rep.allocations
        op.run()  # a rerun allocates nothing (an in-place sum adds S again: its values are not checked)
        assert rep.allocations == n0
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got, plain, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize(
    "n, c, m, size, kind",
    [
        (16, 16, 16, 32, "direct"),  # CIFAR ResNet-20's 16-channel convs: too few for a channel panel
        (1, 32, 32, 17, "channel"),  # 15 wide
        (16, 64, 64, 10, "channel"),  # 8 wide: output channels in the lanes
        (16, 128, 32, 56, "channel"),  # DenseNet-121's 128 -> 32 on 54x54
        (16, 128, 128, 30, "channel"),  # under CHANNEL_WIDE_C input channels: before Winograd
        (16, 3, 64, 30, "direct"),  # 27 input cells a window: too few
        (1, 256, 256, 16, "channel"),  # 49 tiles: too few for Winograd
        (16, 256, 256, 16, "winograd"),  # narrow outputs over many channels, 392 tiles: WINOGRAD_NARROW_C
        (16, 96, 96, 16, "channel"),  # narrow outputs over fewer channels: the channel-lane kernel before Winograd
        (16, 256, 256, 9, "winograd"),  # 7x7: 1.31 tiled cells per output cell, 256 >= 128 x 1.31^2
        (16, 192, 192, 9, "channel"),  # 192 < 128 x 1.31^2
        (16, 256, 256, 30, "winograd"),
        (16, 128, 32, 9, "channel"),  # 7x7 outputs
        (16, 128, 32, 6, "channel"),  # 4x4 outputs
        (1, 128, 32, 6, "channel"),
    ],
)
def test_direct_conv_chosen_by_output_width(n, c, m, size, kind):
    geo = Geometry((size, size), (3, 3), (1, 1), (1, 1), (0, 0), (0, 0), (size - 2, size - 2))
    assert conv_nchw.conv_kind(geo, c, m, 1, np.float32, n) == kind
    assert conv_nchw.conv_kind(geo, c, m, 1, np.float64, n) == "im2col"
    strided = geo._replace(stride=(3, 3), out=((size - 3) // 3 + 1,) * 2)
    assert conv_nchw.conv_kind(strided, c, m, 1, np.float32, n) == "im2col"


def test_kinds_chosen_at_stride_2():
    """Stride 2 (and 5x5 windows at stride 1) on the channel-lane kernel at any width: CIFAR ResNet-20's
    16 -> 32 downsampling conv (15x15 outputs) and its 1x1 shortcut, ResNet-50's 3x3 onto 28x28 and its
    first conv, AlexNet's 5x5; not 3x3 over 3 channels or to 8 outputs (direct), 1x1 over 256 (im2col),
    stride 3 (im2col)."""
    geo = Geometry((30, 30), (3, 3), (2, 2), (1, 1), (1, 1), (1, 1), (15, 15))
    assert conv_nchw.conv_kind(geo, 16, 32, 1, np.float32, 16) == "channel"
    assert conv_nchw.conv_kind(geo._replace(stride=(3, 3), out=(10, 10)), 16, 32, 1, np.float32, 16) == "im2col"
    one = Geometry((30, 30), (1, 1), (2, 2), (1, 1), (0, 0), (0, 0), (15, 15))
    assert conv_nchw.conv_kind(one, 16, 32, 1, np.float32, 1) == "channel"
    assert conv_nchw.conv_kind(one._replace(spatial=(56, 56), out=(28, 28)), 256, 512, 1, np.float32, 1) == "im2col"
    wide = Geometry((56, 56), (3, 3), (2, 2), (1, 1), (1, 1), (1, 1), (28, 28))
    assert conv_nchw.conv_kind(wide, 128, 128, 1, np.float32, 16) == "channel"
    first = Geometry((224, 224), (7, 7), (2, 2), (1, 1), (3, 3), (3, 3), (112, 112))
    assert conv_nchw.conv_kind(first, 3, 64, 1, np.float32, 1) == "channel"
    rgb = Geometry((224, 224), (3, 3), (2, 2), (1, 1), (0, 0), (0, 0), (111, 111))
    assert conv_nchw.conv_kind(rgb, 3, 64, 1, np.float32, 1) == "direct"
    assert conv_nchw.conv_kind(rgb, 12, 8, 1, np.float32, 1) == "direct"  # 8 outputs: too few for its lanes
    five = Geometry((27, 27), (5, 5), (1, 1), (1, 1), (2, 2), (2, 2), (27, 27))  # AlexNet's 5x5: any width
    assert conv_nchw.conv_kind(five, 64, 192, 1, np.float32, 16) == "channel"
    assert conv_nchw.conv_kind(five, 64, 16, 1, np.float32, 16) != "channel"


@pytest.mark.parametrize("strided", [False, True])
def test_epilogue_kernel_on_views_and_in_place(strided):
    """The kernel itself: a strided accumulator (a batched GEMM's image slice), the residual being the
    output (in-place sum), every combination of bias/residual/Relu; non-float32 or 3-D is declined."""
    rng = np.random.default_rng(1)
    big = rng.standard_normal((5, 3, 7)).astype(np.float32)
    for bias in (None, rng.standard_normal(5).astype(np.float32)):
        for use_res in (False, True):
            for relu in (False, True):
                acc = big[:, 1] if strided else big[:, 1].copy()
                y = rng.standard_normal((5, 7)).astype(np.float32)
                res = y if use_res else None
                want = acc.astype(np.float64) + (bias[:, None] if bias is not None else 0) + (y if use_res else 0)
                if relu:
                    want = np.maximum(want, 0)
                assert window_jit.epilogue(acc, bias, res, y, relu)
                np.testing.assert_allclose(y, want, rtol=1e-6, atol=1e-6)
    assert not window_jit.epilogue(big.astype(np.float64)[:, 0], None, None, big.astype(np.float64)[:, 0], True)
    assert not window_jit.epilogue(big, None, None, big, True)


@given(
    shape=st.lists(st.integers(1, 6), min_size=2, max_size=4),
    inplace=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
)
@settings(max_examples=30, deadline=None)
def test_spatial_bn_test_mode_jit_matches_reference_and_numpy_path(shape, inplace, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    x.flat[0] = np.nan
    c = shape[1]
    scale, bias, mean = (rng.standard_normal(c).astype(np.float32) for _ in range(3))
    var = rng.uniform(0.1, 2.0, c).astype(np.float32)
    bshape = (1, c) + (1,) * (len(shape) - 2)
    want = (x.astype(np.float64) - mean.reshape(bshape)) / np.sqrt(var.reshape(bshape) + 1e-5)
    want = want * scale.reshape(bshape) + bias.reshape(bshape)
    out = "X" if inplace else "Y"
    op_def = CreateOperator("SpatialBN", ["X", "s", "b", "m", "v"], [out], is_test=1, epsilon=1e-5)
    feeds = {"X": x, "s": scale, "b": bias, "m": mean, "v": var}
    with pytest.MonkeyPatch.context() as mp:
        got, _ = _run(op_def, feeds, True, mp)
        plain, _ = _run(op_def, feeds, False, mp)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(got, plain, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("kind", ["MaxPool", "AveragePool"])
@given(
    stride=st.sampled_from([1, 2, 3]),
    pads=st.lists(st.integers(0, 2), min_size=4, max_size=4),
    size=st.tuples(st.integers(3, 11), st.integers(3, 11)),
    include=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
)
@settings(max_examples=25, deadline=None)
def test_pool_jit_matches_reference_and_numpy_path(kind, stride, pads, size, include, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, 3, *size)).astype(np.float32)
    x[0, 1, 1, 1] = np.nan  # propagates to every window holding it, as np.maximum does
    kw = dict(kernel=3, stride=stride, pads=pads)
    if kind == "AveragePool" and include:
        kw["count_include_pad"] = 1
    op_def = CreateOperator(kind, ["X"], ["Y"], **kw)
    heads, tails = pads[:2], pads[2:]
    outs = [(size[i] + heads[i] + tails[i] - 3) // stride + 1 for i in range(2)]
    want = pool_reference(
        x,
        "max" if kind == "MaxPool" else "avg",
        "NCHW",
        (3, 3),
        (stride,) * 2,
        (1, 1),
        heads,
        tails,
        outs,
        include_pad=include,
    )
    with pytest.MonkeyPatch.context() as mp:
        got, op = _run(op_def, {"X": x}, True, mp)
        if size == (3, 3) and not any(pads):  # the window is the whole image: a global reduction
            assert op._global and op._sep is None
        else:
            assert type(op._sep).__name__ == "JitPool2D" and op._sep.direct == (kind == "MaxPool")
        plain, _ = _run(op_def, {"X": x}, False, mp)
        mp.setattr(pool_strategies.MAX_POOL, "enabled", False)  # max pooling over phase planes, as average pooling
        planes, op3 = _run(op_def, {"X": x}, True, mp)
        assert op3._sep is None or not op3._sep.direct
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got, plain, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(got, planes)


@pytest.mark.parametrize("kind", ["MaxPool", "AveragePool"])
@given(
    stride=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    size=st.tuples(st.integers(2, 12), st.integers(2, 12)),
    n=st.integers(1, 5),
    strided=st.booleans(),
    seed=st.integers(0, 2**31 - 1),
)
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_pool2x2_matches_reference_and_numpy_path(threads, kind, stride, size, n, strided, seed):  # noqa: F811
    """Unpadded 2x2 windows on window_jit.pool2x2: equal to the loop reference, and bit-equal to the
    per-cell fold it replaces (same summation order), NaN included; a strided input (a channel slice)
    read in place; images split over 1 or 2 threads."""
    rng = np.random.default_rng(seed)
    full = rng.standard_normal((n, 5, *size)).astype(np.float32)
    full[0, 1, 1, 1] = np.nan  # propagates to every window holding it, in both kinds
    x = full[:, 1:4] if strided else np.ascontiguousarray(full[:, 1:4])
    op_def = CreateOperator(kind, ["X"], ["Y"], kernels=[2, 2], strides=list(stride))
    outs = [(size[i] - 2) // stride[i] + 1 for i in range(2)]
    mode = "max" if kind == "MaxPool" else "avg"
    want = pool_reference(x, mode, "NCHW", (2, 2), stride, (1, 1), (0, 0), (0, 0), outs)
    with pytest.MonkeyPatch.context() as mp:
        got, op = _run(op_def, {"X": x}, True, mp)
        if size == (2, 2):  # the window is the whole image: a global reduction
            assert op._global and op._sep is None
        else:
            assert type(op._sep).__name__ == "JitPool2D" and op._sep.two
            assert len(op._sep.parts) == min(threads, n)
        mp.setattr(pool_strategies.POOL2X2, "enabled", False)
        fold, op2 = _run(op_def, {"X": x}, True, mp)
        assert op2._sep is None
    assert got.shape == (n, 3, *outs)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(got, fold)


@pytest.mark.parametrize("kind", ["MaxPool", "AveragePool"])
def test_pool2x2_leaves_padded_and_partial_windows_to_the_fold(kind):
    """A padded 2x2 window (or one Caffe2's legacy padding extends past the input) is not pool2x2's."""
    x = np.arange(2 * 3 * 5 * 5, dtype=np.float32).reshape(2, 3, 5, 5)
    for kw in (dict(pads=[1, 1, 0, 0]), dict(legacy_pad=3)):  # 3: CAFFE_LEGACY_POOLING (ceil: 3 outputs of 5)
        op_def = CreateOperator(kind, ["X"], ["Y"], kernel=2, stride=2, **kw)
        with pytest.MonkeyPatch.context() as mp:
            got, op = _run(op_def, {"X": x}, True, mp)
        geo = op._geo
        assert geo.padded and op._sep is None and geo.out == (3, 3)
        mode = "max" if kind == "MaxPool" else "avg"
        want = pool_reference(x, mode, "NCHW", (2, 2), (2, 2), (1, 1), geo.head, geo.tail, geo.out)
        np.testing.assert_allclose(got, want)


@pytest.mark.parametrize("batch", [4, 1])
@pytest.mark.parametrize("size, kind", [(20, "direct"), (9, "channel")])
def test_jit_kernels_rerun_without_allocating(threads, batch, size, kind, monkeypatch):  # noqa: F811
    """Depthwise, direct or channel-lane (images split over the threads, or output channels at batch 1;
    an in-place residual) and pooling kernels run again without allocating."""
    if kind == "direct":  # wide outputs: on the direct kernel, not the channel-lane one
        monkeypatch.setitem(THRESHOLDS, "CHANNEL_WIDE_C", 0)
    rng = np.random.default_rng(0)
    ws = Workspace()
    c = 64  # several blocks (panels) of output channels: split at batch 1 on 2 threads
    ws.feed_blob("X", rng.standard_normal((batch, c, size, size)).astype(np.float32))
    ws.feed_blob("W", rng.standard_normal((c, 1, 3, 3)).astype(np.float32))
    ws.feed_blob("W2", rng.standard_normal((c, c, 3, 3)).astype(np.float32))
    fuse = dict(kernel=3, pad=1, fusion_type=3)
    ops = [
        create_operator(CreateOperator("Conv", ["X", "W"], ["Y"], kernel=3, pad=1, group=c), ws),
        create_operator(CreateOperator("Conv", ["Y", "W2"], ["Y2"], kernel=3, pad=1), ws),
        create_operator(CreateOperator("ConvFusion", ["Y2", "W2", "Y"], ["Y"], **fuse), ws),
        create_operator(CreateOperator("MaxPool", ["Y"], ["Z"], kernel=3, stride=2), ws),
        create_operator(CreateOperator("AveragePool", ["Y"], ["Z2"], kernel=2, stride=2), ws),
    ]
    for _ in range(2):
        for op in ops:
            op.run()
    assert ops[0]._kernel.jit
    assert ops[1]._kernel.kind == ops[2]._kernel.kind == kind
    assert len(ops[1]._kernel.parts) == threads
    rep = memory_reporter()
    before = rep.allocations
    for op in ops:
        op.run()
    assert rep.allocations == before
    assert window_jit.compile_seconds() >= 0.0


@given(
    n=st.integers(1, 3),
    c=st.integers(1, 12),
    m=st.integers(1, 20),
    hw=st.sampled_from([(1, 1), (3, 5), (4, 8), (7, 9), (6, 11), (4, 12), (13, 17), (14, 14)]),
    fusion=st.sampled_from([0, 1, 2, 3]),
    bias=st.booleans(),
    band=st.sampled_from([None, 1, "chunks"]),
    seed=st.integers(0, 2**31 - 1),
)
@settings(max_examples=40, deadline=None)
def test_pointwise_micro_kernel_matches_reference_and_gemm(n, c, m, hw, fusion, bias, band, seed):
    """1x1 convs on the micro-kernel (each image read in place: runs of 32 pixels and a partial last
    one, a last run of at most 16 pixels (15, 66, 48, 196 pixels) on the one-vector block, partial blocks of
    output channels) against float64 and OpenBLAS's GEMM path, every fusion
    type, NaN through Relu; ``band`` 1: BAND_BYTES tiny, so images run in bands of 64 pixels;
    "chunks": the input channels in chunks of 3 (sums added in the output, bias and residual with
    the first, Relu with the last) over bands of 32 pixels."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c, *hw)).astype(np.float32)
    x[-1, 0, 0, -1] = np.nan
    w = rng.standard_normal((m, c, 1, 1)).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float32) if bias else None
    want = ref_conv(x.astype(np.float64), w, b, 1, 0, 1)
    feeds = {"X": x, "W": w, **({"b": b} if bias else {})}
    ins = ["X", "W"] + (["b"] if bias else [])
    op_def, want = _fused(ins, fusion, want, feeds, rng, kernel=1)
    with pytest.MonkeyPatch.context() as mp:
        mp.setitem(THRESHOLDS, "POINTWISE_MK_MIN_P", 0)  # small images too on the micro-kernel
        if band == 1:
            mp.setattr(window_jit, "BAND_BYTES", band)
        if band == "chunks":
            mp.setattr(window_jit, "POINTWISE_KC", 3)
            mp.setattr(window_jit, "POINTWISE_KC_BAND", 32)
            mp.setitem(THRESHOLDS, "POINTWISE_MK_C", 2)  # over 2 channels: the chunked micro-kernel still
        got, op = _run(op_def, feeds, True, mp)
        want_band = {None: window_jit.pointwise_band(c), 1: (64, c), "chunks": (32, 3) if c > 3 else None}[band]
        assert op._kernel.mk and op._kernel.band == (want_band or window_jit.pointwise_band(c))
        mp.setitem(THRESHOLDS, "POINTWISE_MK_C", 0)
        mp.setitem(THRESHOLDS, "POINTWISE_MK_MAX_C", 0)
        plain, op2 = _run(op_def, feeds, True, mp)
        assert not op2._kernel.mk
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got, plain, rtol=1e-4, atol=1e-4)


def check_8_lane_kernels() -> None:
    """The 8-lane micro-kernels (CPUs without AVX-512) on direct, channel, pointwise and depthwise convs of
    several geometries and on the stride-2 max pool, against float64 references. Run by
    tests/ops/nn/test_kernel_support.py in a process whose CPU features lack AVX-512 (the lane count is fixed
    when the kernel modules are imported)."""
    from framework.kernels import channel_kernel, microkernel

    assert microkernel.L == 8 and microkernel.R == 6 and channel_kernel.L == 8
    rng = np.random.default_rng(0)
    kinds = set()
    cases = ((3, 1, 1, 20, 13), (3, 1, 2, 23, 7), (3, 0, 1, 11, 6), (1, 0, 1, 17, 14), (3, 1, 2, 13, 20))
    for k, pad, stride, size, m in cases + ((2, 0, 1, 8, 9),):
        x = rng.standard_normal((2, 5, size, size)).astype(np.float32)
        w = rng.standard_normal((m, 5, k, k)).astype(np.float32)
        b = rng.standard_normal(m).astype(np.float32)
        ws = Workspace()
        for name, v in (("X", x), ("W", w), ("b", b)):
            ws.feed_blob(name, v)
        op_def = CreateOperator("ConvFusion", ["X", "W", "b"], ["Y"], kernel=k, pad=pad, stride=stride, fusion_type=1)
        op = create_operator(op_def, ws)
        op.run()
        assert op._kernel.kind in ("direct", "channel") or op._kernel.mk, op._kernel.kind
        kinds.add(op._kernel.kind)
        want = np.maximum(ref_conv(x.astype(np.float64), w, b, stride, pad, 1), 0)
        np.testing.assert_allclose(ws.fetch_blob("Y"), want, rtol=1e-4, atol=1e-4)
    assert kinds == {"direct", "channel", "pointwise"}, kinds
    x = rng.standard_normal((2, 5, 19, 19)).astype(np.float32)
    for k, stride, kind in ((3, 1, "dw3"), (3, 2, "dw3"), (5, 2, "dw3"), (7, 1, "dmk")):
        w = rng.standard_normal((5, 1, k, k)).astype(np.float32)
        ws = Workspace()
        ws.feed_blob("X", x)
        ws.feed_blob("W", w)
        op_def = CreateOperator("Conv", ["X", "W"], ["Y"], kernel=k, pad=1, stride=stride, group=5)
        op = create_operator(op_def, ws)
        op.run()
        assert getattr(op._kernel, kind)
        want = ref_conv(x.astype(np.float64), w, np.zeros(5), stride, 1, 5)
        np.testing.assert_allclose(ws.fetch_blob("Y"), want, rtol=1e-4, atol=1e-4)
    check_stride2_max_pool(41, 1, 8)


def _max_pools(x, geo) -> tuple:
    """(max_pool's output, the phase-plane kernel's output, the pad value: float32's lowest) of x."""
    low = np.finfo(np.float32).min
    direct = np.empty((x.shape[0], x.shape[1], *geo.out), np.float32)
    window_jit.max_pool(x, direct, np.empty(window_jit.max_pool_row(geo), np.float32), geo, low, 0, x.shape[0])
    phases, hq, wq, wide = window_jit.plane_shape(geo)
    planes, scratch = np.empty_like(direct), np.empty((phases, hq * wq), np.float32)
    window_jit.pool(x, planes, None, scratch, np.empty(wide, np.float32), geo, "max", low, 0, x.shape[0])
    return direct, planes, low


def test_direct_max_pool_windows_wholly_in_the_padding():
    """Windows that lie wholly in the padding (Caffe2's legacy pooling can make them) yield the pad
    value, in both max-pooling kernels; NaN wins where a window holds one."""
    assert window_jit.available()
    geo = Geometry((4, 5), (3, 3), (3, 3), (1, 1), (1, 0), (6, 6), (3, 3))  # window 2: rows 5-7, columns 6-8
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 5)).astype(np.float32)
    x[1, 2, 0, 4] = np.nan
    direct, planes, low = _max_pools(x, geo)
    np.testing.assert_array_equal(direct, planes)
    assert (direct[:, :, 2, :] == low).all() and (direct[:, :, :, 2] == low).all()
    assert np.isnan(direct[1, 2, 0, 1]) and not np.isnan(direct[1, 1]).any()
    want = x[:, :, 0:2, 0:3].max(axis=(2, 3))  # window (0, 0): rows -1..1 (row -1 padding), columns 0..2
    np.testing.assert_array_equal(direct[0, :, 0, 0], want[0])


def test_stride2_max_pool_windows_wholly_in_the_padding():
    """The same at stride 2 (the 3x3/2 vector kernel, pool_columns.rows3s2): rows 3-4 and columns 3-4
    of the output lie wholly in the padding, column 2 partly; equal to the phase-plane kernel."""
    geo = Geometry((4, 5), (3, 3), (2, 2), (1, 1), (1, 0), (6, 6), (5, 5))
    x = np.random.default_rng(1).standard_normal((2, 3, 4, 5)).astype(np.float32)
    x[1, 2, 3, 4] = np.nan
    direct, planes, low = _max_pools(x, geo)
    assert direct.tobytes() == planes.tobytes()
    assert (direct[:, :, 3:, :] == low).all() and (direct[:, :, :, 3:] == low).all()
    assert np.isnan(direct[1, 2, 2, 2]) and np.isnan(direct[1, 2, 1, 2])
    want = pool_reference(x, "max", "NCHW", (3, 3), (2, 2), (1, 1), (1, 0), (6, 6), (5, 5))
    np.testing.assert_array_equal(direct[:, :, :3, :3], want[:, :, :3, :3])


def check_stride2_max_pool(width: int, pad: int, lanes: int) -> None:
    """3x3 stride-2 max pooling over rows ``width`` wide (several vector steps of the column kernel,
    pool_columns.rows3s2, and a partial last one): equal, bit for bit, to the phase-plane kernel's and
    to the reference; NaN at a step's first and last window wins, +0/-0 ties keep the scalar order."""
    from framework.kernels import pool_columns

    assert pool_columns.L == lanes
    rng = np.random.default_rng(width)
    h = 7
    x = rng.standard_normal((2, 3, h, width)).astype(np.float32)
    x[0, 0, 1, 0] = x[0, 1, 2, min(2 * lanes, width) - 1] = x[1, 2, 4, width - 1] = np.nan
    x[1, 0, :, :6] = np.array([0.0, -0.0, -0.0, 0.0, -0.0, -0.0], np.float32)
    ow = (width + 2 * pad - 3) // 2 + 1
    oh = (h + 2 * pad - 3) // 2 + 1
    geo = Geometry((h, width), (3, 3), (2, 2), (1, 1), (pad, pad), (pad, pad), (oh, ow))
    direct, planes, _ = _max_pools(x, geo)
    assert direct.tobytes() == planes.tobytes()  # bit for bit: NaN payloads and zero signs too
    want = pool_reference(x, "max", "NCHW", (3, 3), (2, 2), (1, 1), (pad, pad), (pad, pad), (oh, ow))
    np.testing.assert_array_equal(direct, want)


@pytest.mark.parametrize("width,pad", [(41, 0), (41, 1), (64, 1), (66, 0), (9, 1)])
def test_stride2_max_pool_columns_in_vector_steps(width, pad):
    from framework.kernels import pool_columns

    assert window_jit.available()
    check_stride2_max_pool(width, pad, pool_columns.L)


@pytest.mark.parametrize("stride,pad,width,fusion", [(1, 1, 41, 3), (2, 1, 41, 1), (2, 0, 70, 2), (1, 0, 35, 0)])
def test_depthwise3_rows_in_several_vector_steps(stride, pad, width, fusion):
    """window_jit.depthwise3 over rows of several vector steps and a partial last one (stride 1 and 2,
    with and without padding), the residual summed in place and Relu: equal to the float64 reference
    and to the phase-plane kernel; NaN at a step's edge stays in its own windows."""
    rng = np.random.default_rng(width + stride)
    c = 3
    x = rng.standard_normal((2, c, 9, width)).astype(np.float32)
    x[1, 2, 4, 2 * 16 - 1] = np.nan
    w = rng.standard_normal((c, 1, 3, 3)).astype(np.float32)
    b = rng.standard_normal(c).astype(np.float32)
    want = ref_conv(x.astype(np.float64), w, b, stride, pad, c)
    feeds = {"X": x, "W": w, "b": b}
    kw = dict(kernel=3, stride=stride, pad=pad, group=c)
    op_def, want = _fused(["X", "W", "b"], fusion, want, feeds, rng, **kw)
    with pytest.MonkeyPatch.context() as mp:
        got, op = _run(op_def, feeds, True, mp)
        assert op._kernel.dw3
        mp.setattr(conv_strategies.DEPTHWISE3, "enabled", False)
        mp.setattr(conv_strategies.DIRECT_DEPTHWISE, "enabled", False)
        planes, _ = _run(op_def, feeds, True, mp)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert np.isnan(got).any()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got, planes, rtol=1e-5, atol=1e-5)


def test_alexnet_first_conv_on_the_channel_lane_kernel():
    """11x11 at stride 4 over 3 channels (AlexNet's first conv): the channel-lane kernel's stride-4
    blocks (0.71-0.80x of the direct kernel's time on this host), not the direct kernel's 16 phase planes."""
    geo = Geometry((224, 224), (11, 11), (4, 4), (1, 1), (2, 2), (2, 2), (55, 55))
    assert conv_nchw.conv_kind(geo, 3, 64, 1, np.float32, 1) == "channel"
