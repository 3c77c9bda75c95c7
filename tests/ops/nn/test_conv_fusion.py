"""The 2-D NCHW conv kernels (framework/kernels/conv_nchw.py: 1x1 as a direct GEMM, im2col handling the
padding itself, split over threads by images or output channels) through Conv and ConvFusion, against
an independent numpy reference; their buffers go through the allocator; re-runs allocate nothing."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import framework
from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.kernels import conv_nchw, conv_strategies
from framework.kernels.dispatch_table import THRESHOLDS
from framework.kernels.geometry import Geometry
from framework.memory.allocator import memory_reporter
from framework.memory.workspace import Workspace
from framework.ops import create_operator
from framework.ops.testing import assert_reference_checks


def ref_conv(x, w, b, stride, pad, group, dilation=1):
    """Direct convolution by zero-padding and summing over taps (float64)."""
    n, c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    xp = np.zeros((n, c, h + 2 * pad, wd + 2 * pad))
    xp[:, :, pad : pad + h, pad : pad + wd] = x
    d = dilation
    oh, ow = (h + 2 * pad - d * (kh - 1) - 1) // stride + 1, (wd + 2 * pad - d * (kw - 1) - 1) // stride + 1
    y = np.zeros((n, m, oh, ow))
    mg = m // group
    for g in range(group):
        xs = xp[:, g * cg : (g + 1) * cg]
        for a in range(kh):
            for bb in range(kw):
                r0, c0 = a * d, bb * d
                patch = xs[:, :, r0 : r0 + stride * (oh - 1) + 1 : stride, c0 : c0 + stride * (ow - 1) + 1 : stride]
                wg = w[g * mg : (g + 1) * mg, :, a, bb]
                y[:, g * mg : (g + 1) * mg] += np.einsum("nchw,mc->nmhw", patch, wg)
    if b is not None:
        y += b.reshape(1, -1, 1, 1)
    return y


@pytest.fixture(params=[1, 2], ids=["1thread", "2threads"])
def threads(request):
    old, old_min = framework.get_num_threads(), THRESHOLDS["SPLIT_MIN_FLOPS"]
    framework.set_num_threads(request.param)
    THRESHOLDS["SPLIT_MIN_FLOPS"] = 0  # the tests' small convs split over the threads too
    yield request.param
    framework.set_num_threads(old)
    THRESHOLDS["SPLIT_MIN_FLOPS"] = old_min


@pytest.mark.parametrize("n, m, size, parts", [(1, 8, 6, 1), (1, 64, 64, 2), (4, 8, 6, 1), (4, 64, 64, 2)])
def test_small_convs_stay_on_one_thread(n, m, size, parts):
    """Below SPLIT_MIN_FLOPS a conv runs as one part on 2 threads; above, images (or, at batch 1,
    output channels) are split."""
    old = framework.get_num_threads()
    framework.set_num_threads(2)
    try:
        geo = Geometry((size, size), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1), (size, size))
        kernel = conv_nchw.ConvNCHW(n, 64, m, 1, geo, np.float32, True)
        assert len(kernel.parts) == parts
        assert kernel.by_image == (n > 1 or parts == 1)
    finally:
        framework.set_num_threads(old)


@st.composite
def cases(draw):
    group = draw(st.sampled_from([1, 1, 1, 2, 3]))
    k = draw(st.sampled_from([1, 1, 3, 5]))
    stride = draw(st.sampled_from([1, 1, 2]))
    pad = draw(st.integers(0, k // 2 + 1)) if draw(st.booleans()) else 0
    size = draw(st.integers(max(1, k - 2 * pad), 9))
    return dict(
        n=draw(st.sampled_from([1, 1, 2, 3])),
        cg=draw(st.integers(1, 4)),
        mg=draw(st.integers(1, 5)),
        group=group,
        k=k,
        stride=stride,
        pad=pad,
        size=size,
        bias=draw(st.booleans()),
        seed=draw(st.integers(0, 2**31 - 1)),
    )


def _arrays(case):
    rng = np.random.default_rng(case["seed"])
    g = case["group"]
    x = rng.standard_normal((case["n"], case["cg"] * g, case["size"], case["size"])).astype(np.float32)
    w = rng.standard_normal((case["mg"] * g, case["cg"], case["k"], case["k"])).astype(np.float32)
    b = rng.standard_normal(case["mg"] * g).astype(np.float32)
    return x, w, b


def _kw(case):
    kw = dict(kernel=case["k"], stride=case["stride"], pad=case["pad"])
    if case["group"] != 1:
        kw["group"] = case["group"]
    return kw


@given(case=cases())
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_conv_nchw_kernels_match_reference(threads, case):
    x, w, b = _arrays(case)
    ins = ["X", "W", "b"] if case["bias"] else ["X", "W"]
    op = CreateOperator("Conv", ins, ["Y"], **_kw(case))
    args = [x, w, b] if case["bias"] else [x, w]
    assert_reference_checks(
        op,
        args,
        lambda x, w, b=None: ref_conv(x, w, b, case["stride"], case["pad"], case["group"]).astype(np.float32),
        threshold=1e-4,
        atol=1e-4,
    )


@given(case=cases(), fusion=st.sampled_from([1, 2, 3]))
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_conv_fusion_matches_reference(threads, case, fusion):
    x, w, b = _arrays(case)
    ref = ref_conv(x, w, b if case["bias"] else None, case["stride"], case["pad"], case["group"])
    s = np.random.default_rng(1).standard_normal(ref.shape).astype(np.float32)
    ins = ["X", "W"] + (["b"] if case["bias"] else []) + (["Y"] if fusion > 1 else [])
    args = [x, w] + ([b] if case["bias"] else []) + ([s] if fusion > 1 else [])
    want = ref + (s if fusion > 1 else 0)
    if fusion in (1, 3):
        want = np.maximum(want, 0)
    op = CreateOperator("ConvFusion", ins, ["Y"], fusion_type=fusion, **_kw(case))
    # The in-place sum overwrites S, so re-runs give other values: check one run, then no allocations.
    got = assert_reference_checks(
        op, args, lambda *a: want.astype(np.float32), threshold=1e-4, atol=1e-4, check_no_realloc=False
    )
    assert got[0].shape == want.shape


def test_conv_buffers_come_from_the_allocator_and_reruns_allocate_nothing(threads, monkeypatch):
    monkeypatch.setitem(THRESHOLDS, "DIRECT_OW", 1 << 30)  # im2col's columns (the direct kernel: test_window_jit)
    monkeypatch.setattr(conv_strategies.CHANNEL, "enabled", False)
    ws = Workspace()
    rng = np.random.default_rng(0)
    ws.feed_blob("X", rng.standard_normal((2, 8, 12, 12)).astype(np.float32))
    ws.feed_blob("W", rng.standard_normal((16, 8, 3, 3)).astype(np.float32))
    ws.feed_blob("b", rng.standard_normal(16).astype(np.float32))
    ws.feed_blob("S", rng.standard_normal((2, 16, 12, 12)).astype(np.float32))
    rep = memory_reporter()
    before = rep.current_bytes
    op = create_operator(CreateOperator("Conv", ["X", "W", "b"], ["Y"], kernel=3, pad=1), ws)
    op.run()
    # Y (2*16*144 floats) plus one column buffer (8*9*144 floats) per worker are all reported.
    col = 8 * 9 * 144 * 4
    assert rep.current_bytes - before >= 2 * 16 * 144 * 4 + col * min(threads, 2)
    fused = create_operator(
        CreateOperator("ConvFusion", ["X", "W", "b", "S"], ["S"], kernel=3, pad=1, fusion_type=3), ws
    )
    fused.run()
    n0 = rep.allocations
    for _ in range(3):
        op.run()
        fused.run()
    assert rep.allocations == n0


def test_conv_fusion_argument_errors():
    ws = Workspace()
    with pytest.raises(FrameworkError, match="fusion_type"):
        create_operator(CreateOperator("ConvFusion", ["X", "W"], ["Y"], kernel=1), ws)
    with pytest.raises(FrameworkError, match="in place"):
        create_operator(CreateOperator("ConvFusion", ["X", "W", "S"], ["Y"], kernel=1, fusion_type=2), ws)
    with pytest.raises(FrameworkError, match="NCHW"):
        create_operator(CreateOperator("ConvFusion", ["X", "W"], ["Y"], kernel=1, fusion_type=1, order="NHWC"), ws)
    ws.feed_blob("X", np.zeros((1, 2, 4, 4), np.float32))
    ws.feed_blob("W", np.zeros((3, 2, 1, 1), np.float32))
    ws.feed_blob("S", np.zeros((1, 2, 4, 4), np.float32))
    op = create_operator(CreateOperator("ConvFusion", ["X", "W", "S"], ["S"], kernel=1, fusion_type=2), ws)
    with pytest.raises(FrameworkError, match="'S'"):
        op.run()


@pytest.mark.parametrize("stride,pad,n", [(1, 1, 3), (2, 1, 1), (2, 0, 2), (1, 2, 1)])
def test_depthwise_kernel_matches_reference(threads, stride, pad, n):
    rng = np.random.default_rng(stride * 10 + pad)
    x = rng.standard_normal((n, 6, 9, 8)).astype(np.float32)
    w = rng.standard_normal((6, 1, 3, 3)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    want = ref_conv(x, w, b, stride, pad, 6)
    op = CreateOperator("Conv", ["X", "W", "b"], ["Y"], kernel=3, stride=stride, pad=pad, group=6)
    assert_reference_checks(op, [x, w, b], lambda *a: want.astype(np.float32), threshold=1e-4, atol=1e-4)
    fused = CreateOperator(
        "ConvFusion", ["X", "W", "b"], ["Y"], kernel=3, stride=stride, pad=pad, group=6, fusion_type=1
    )
    assert_reference_checks(fused, [x, w, b], lambda *a: np.maximum(want, 0).astype(np.float32), atol=1e-4)


def test_small_images_are_batched_into_one_gemm_and_column_buffers_are_shared(threads, monkeypatch):
    monkeypatch.setitem(THRESHOLDS, "DIRECT_OW", 1 << 30)  # im2col (these thin convs would run direct)
    monkeypatch.setattr(conv_strategies.CHANNEL, "enabled", False)  # (or on the channel-lane kernel)
    rng = np.random.default_rng(3)
    ws = Workspace()
    x = rng.standard_normal((4, 5, 6, 6)).astype(np.float32)
    ws.feed_blob("X", x)
    for k in ("W1", "W2"):
        ws.feed_blob(k, rng.standard_normal((7, 5, 3, 3)).astype(np.float32))
    ws.feed_blob("b", rng.standard_normal(7).astype(np.float32))
    first = create_operator(CreateOperator("Conv", ["X", "W1", "b"], ["Y1"], kernel=3, pad=1), ws)
    first.run()
    assert first._kernel.blocked  # 36 output pixels per image < BLOCK_P
    rep = memory_reporter()
    n0, b0 = rep.allocations, rep.current_bytes
    second = create_operator(CreateOperator("Conv", ["X", "W2", "b"], ["Y2"], kernel=3, pad=1), ws)
    second.run()
    # same geometry on the same thread(s): only the output is new, the column buffers are shared
    assert rep.allocations - n0 == 1 and rep.current_bytes - b0 == 4 * 7 * 36 * 4
    for name, w in (("Y1", "W1"), ("Y2", "W2")):
        want = ref_conv(x, ws.fetch_blob(w), ws.fetch_blob("b"), 1, 1, 1)
        np.testing.assert_allclose(ws.fetch_blob(name), want, rtol=1e-4, atol=1e-4)
    big = create_operator(CreateOperator("Conv", ["Y1", "W3", "b3"], ["Y3"], kernel=1), _feed_big(ws, rng))
    big.run()
    assert not big._kernel.blocked  # 1024 pixels per image, 40 channels: one GEMM per image


def _feed_big(ws, rng):
    ws.feed_blob("Y1", rng.standard_normal((2, 7, 32, 32)).astype(np.float32))
    ws.feed_blob("W3", rng.standard_normal((40, 7, 1, 1)).astype(np.float32))
    ws.feed_blob("b3", rng.standard_normal(40).astype(np.float32))
    return ws


@pytest.mark.parametrize("kernel,pad", [(3, 1), (1, 0)])
def test_batched_gemm_in_chunks_with_a_smaller_last_chunk(threads, monkeypatch, kernel, pad):

    monkeypatch.setitem(THRESHOLDS, "BLOCK_BYTES", 2 * 4 * kernel * kernel * 25 * 4)  # 2 images per GEMM
    monkeypatch.setitem(THRESHOLDS, "POINTWISE_MK_C", 0)  # the GEMM path (the micro-kernel: test_window_jit)
    monkeypatch.setitem(THRESHOLDS, "POINTWISE_MK_MAX_C", 0)
    monkeypatch.setattr(conv_strategies.CHANNEL, "enabled", False)  # im2col for the narrow 3x3 case too
    monkeypatch.setitem(THRESHOLDS, "DIRECT_OW", 1 << 30)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((7, 4, 5, 5)).astype(np.float32)
    w = rng.standard_normal((6, 4, kernel, kernel)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    s = rng.standard_normal((7, 6, 5, 5)).astype(np.float32)
    want = np.maximum(ref_conv(x, w, b, 1, pad, 1) + s, 0)
    op = CreateOperator("ConvFusion", ["X", "W", "b", "Y"], ["Y"], kernel=kernel, pad=pad, fusion_type=3)
    ws = Workspace()
    assert_reference_checks(
        op, [x, w, b, s], lambda *a: want.astype(np.float32), atol=1e-4, check_no_realloc=False, ws=ws
    )
    fused = create_operator(op, ws)
    ws.feed_blob("Y", s)
    fused.run()
    assert fused._kernel.blocked and fused._kernel.chunk < 7


@pytest.mark.parametrize(
    "k,pad,size,c,native",
    [
        (1, 0, 17, 16, True),  # 1x1 on the micro-kernel
        (3, 1, 13, 16, True),  # direct, rows written in place
        (3, 1, 8, 16, True),  # narrow: output channels in the lanes
        (1, 0, 13, 4100, False),  # 1x1 on OpenBLAS (over POINTWISE_MK_C): into its own output, then copied
        (5, 2, 13, 128, True),
        (5, 2, 20, 128, False),  # im2col + GEMM
        (3, 0, 15, 4, True),
    ],
)
@pytest.mark.parametrize("n", [1, 3])
@pytest.mark.parametrize("fusion", [1, 0])
def test_conv_fusion_writes_its_channels_of_a_larger_output(threads, k, pad, size, c, native, n, fusion):
    """out_channels / out_channel_offset: two convs write channels 2:7 and 8:11 of one 12-channel Y (a
    concatenation's, as the inference pass makes them), every kernel kind, in place where it can; the
    channels neither writes keep their values; reruns allocate nothing. fusion_type 0: no Relu."""
    rng = np.random.default_rng(k * 100 + size + c + n)
    x = rng.standard_normal((n, c, size, size)).astype(np.float32)
    ws = Workspace()
    ws.feed_blob("X", x)
    oh = size + 2 * pad - k + 1
    before = rng.standard_normal((n, 12, oh, oh)).astype(np.float32)
    ws.feed_blob("Y", before.copy())
    want = before.copy()
    ops = []
    for name, m, off in (("A", 5, 2), ("B", 3, 8)):
        w = rng.standard_normal((m, c, k, k)).astype(np.float32)
        b = rng.standard_normal(m).astype(np.float32)
        ws.feed_blob(f"W{name}", w)
        ws.feed_blob(f"b{name}", b)
        conv = ref_conv(x.astype(np.float64), w, b, 1, pad, 1)
        want[:, off : off + m] = np.maximum(conv, 0) if fusion else conv
        op_def = CreateOperator(
            "ConvFusion", ["X", f"W{name}", f"b{name}"], ["Y"], kernel=k, pad=pad, fusion_type=fusion,
            out_channels=12, out_channel_offset=off,
        )  # fmt: skip
        ops.append(create_operator(op_def, ws))
    for op in ops:
        op.run()
    got = ws.fetch_blob("Y")
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    for i in (0, 1, 7, 11):
        np.testing.assert_array_equal(got[:, i], before[:, i])
    assert ops[0]._kernel.writes_slices == native and (ops[0]._tmp is None) == native
    rep = memory_reporter()
    n0 = rep.allocations
    for op in ops:
        op.run()
    assert rep.allocations == n0
    np.testing.assert_allclose(ws.fetch_blob("Y"), want, rtol=1e-4, atol=1e-4)


def test_conv_fusion_out_channels_shape_inference_and_errors():
    from framework.ops.inference import infer_op
    from framework.ops.schema import TensorSpec

    op_def = CreateOperator(
        "ConvFusion", ["X", "W"], ["Y"], kernel=3, pad=1, fusion_type=1, out_channels=20, out_channel_offset=4
    )
    spec = infer_op(op_def, [TensorSpec((2, 3, 9, 9), np.float32), TensorSpec((6, 3, 3, 3), np.float32)])
    assert tuple(spec[0].shape) == (2, 20, 9, 9)
    ws = Workspace()
    ws.feed_blob("X", np.zeros((2, 3, 9, 9), np.float32))
    ws.feed_blob("W", np.zeros((6, 3, 3, 3), np.float32))
    create_operator(op_def, ws).run()
    assert ws.fetch_blob("Y").shape == tuple(spec[0].shape)
    bad = CreateOperator("ConvFusion", ["X", "W"], ["Z"], kernel=3, fusion_type=1, out_channels=8, out_channel_offset=4)
    with pytest.raises(FrameworkError, match="exceed out_channels 8"):
        create_operator(bad, ws).run()
    with pytest.raises(FrameworkError, match=r"0 only with out_channels or an activation\), got 0"):
        create_operator(CreateOperator("ConvFusion", ["X", "W"], ["Y"], kernel=3, fusion_type=0), ws)
    with pytest.raises(FrameworkError, match="fusion_type 0 or 1"):
        create_operator(
            CreateOperator("ConvFusion", ["X", "W", "Y"], ["Y"], kernel=3, fusion_type=2, out_channels=20), ws
        )
    with pytest.raises(FrameworkError, match="out_channels must be > 0"):
        create_operator(
            CreateOperator("ConvFusion", ["X", "W"], ["Y"], kernel=3, fusion_type=1, out_channel_offset=2), ws
        )
