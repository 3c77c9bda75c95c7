"""Winograd F(2x2, 3x3) convolution (framework/kernels/winograd.py, kind ``winograd`` of conv_nchw):
Conv and ConvFusion (every fusion type) against an independent float64 reference and against
im2col + GEMM (the compiled kernels off), odd sizes and asymmetric pads, blocks of tile rows that
span images, the batch's tile rows split over threads, the transformed filter redone only when the
filter tensor changes, NaN propagation, and no allocation per re-run."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.kernels import conv_nchw, conv_strategies, winograd
from framework.kernels.dispatch_table import THRESHOLDS
from framework.kernels.geometry import Geometry
from framework.memory.allocator import memory_reporter
from framework.memory.workspace import Workspace
from framework.ops import create_operator
from framework.runtime import parallel
from tests.ops.nn.test_conv_fusion import ref_conv, threads  # noqa: F401  (fixture)
from tests.ops.nn.test_window_jit import _run as run_jit

pytest.importorskip("numba")


@pytest.fixture(autouse=True)
def _winograd_for_narrow_outputs_too(monkeypatch):
    """These tests run Winograd on small images, whose narrow outputs conv_kind gives the channel-lane
    kernel (conv_strategies.CHANNEL); the kind test turns it back on."""
    monkeypatch.setattr(conv_strategies.CHANNEL, "enabled", False)


@pytest.fixture
def any_size(monkeypatch):
    """Winograd for every 3x3 stride-1 conv (the tests' convs are smaller than the rule's)."""
    monkeypatch.setitem(THRESHOLDS, "WINOGRAD_C", 1)
    monkeypatch.setitem(THRESHOLDS, "WINOGRAD_M", 1)
    monkeypatch.setitem(THRESHOLDS, "WINOGRAD_T", 1)


def _ref(x, w, b, pads):
    """Float64 reference for per-side pads (top, left, bottom, right)."""
    t, lf, bt, r = pads
    return ref_conv(np.pad(x.astype(np.float64), ((0, 0), (0, 0), (t, bt), (lf, r))), w, b, 1, 0, 1)


def _op_def(fusion: int, ins: list, pads) -> object:
    kw = dict(kernel=3, pads=list(pads))
    if fusion == 0:
        return CreateOperator("Conv", ins, ["Y"], **kw)
    if fusion == 1:
        return CreateOperator("ConvFusion", ins, ["Y"], fusion_type=1, **kw)
    return CreateOperator("ConvFusion", [*ins, "S"], ["S"], fusion_type=fusion, **kw)  # summed in place


def _run(op_def, feeds: dict, jit: bool):
    """(output, op) of ``op_def`` on ``feeds``, the compiled kernels on or off."""
    with pytest.MonkeyPatch.context() as m:
        return run_jit(op_def, feeds, jit, m)


@st.composite
def cases(draw):
    pads = draw(st.lists(st.integers(0, 2), min_size=4, max_size=4))
    h = draw(st.integers(max(1, 3 - pads[0] - pads[2]), 13))
    w = draw(st.integers(max(1, 3 - pads[1] - pads[3]), 13))
    return dict(n=draw(st.integers(1, 3)), c=draw(st.integers(1, 7)), m=draw(st.integers(1, 6)), h=h, w=w, pads=pads)


@given(
    case=cases(),
    fusion=st.sampled_from([0, 1, 2, 3]),
    bias=st.booleans(),
    block=st.sampled_from([1, 3, 1000]),
    seed=st.integers(0, 2**31 - 1),
)
@settings(max_examples=40, deadline=None)
def test_winograd_matches_reference_and_numpy_path(case, fusion, bias, block, seed):
    """Odd output sizes (a last half tile), any pads, blocks of 1 or 3 tile rows (spanning images)
    or the whole batch; NaN reaches the outputs whose window holds it, through Relu too."""
    rng = np.random.default_rng(seed)
    n, c, m, pads = case["n"], case["c"], case["m"], case["pads"]
    x = rng.standard_normal((n, c, case["h"], case["w"])).astype(np.float32)
    x[-1, 0, 0, 0] = np.nan
    w = rng.standard_normal((m, c, 3, 3)).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float32) if bias else None
    want = _ref(x, w, b, pads)
    feeds = {"X": x, "W": w, **({"b": b} if bias else {})}
    if fusion >= 2:
        feeds["S"] = rng.standard_normal(want.shape).astype(np.float32)
        want = want + feeds["S"]
    if fusion in (1, 3):
        want = np.where(want < 0, 0, want)  # NaN stays NaN
    op_def = _op_def(fusion, ["X", "W"] + (["b"] if bias else []), pads)
    with pytest.MonkeyPatch.context() as mp:
        for name in ("WINOGRAD_C", "WINOGRAD_M", "WINOGRAD_T"):
            mp.setitem(THRESHOLDS, name, 1)
        # BLOCK_BYTES of ``block`` tile rows
        tw = (want.shape[3] + 1) // 2
        mp.setattr(winograd, "BLOCK_BYTES", block * 16 * (c + m) * tw * 4)
        got, op = _run(op_def, feeds, True)
        assert op._kernel.kind == "winograd"
        assert op._kernel.wrows == min(block, max(1, winograd.BLOCK_BYTES // (16 * (c + m) * tw * 4)))
        plain, op2 = _run(op_def, feeds, False)
        assert op2._kernel.kind == "im2col"
    np.testing.assert_array_equal(np.isnan(got), np.isnan(want))
    assert np.isnan(got).any()
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(got, plain, rtol=1e-4, atol=1e-4)


def test_winograd_error_is_that_of_a_direct_sum():
    """On a wide conv (256 channels) the error against float64 stays at im2col + GEMM's level."""
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 256, 14, 14)).astype(np.float32)
    w = (rng.standard_normal((64, 256, 3, 3)) / 48).astype(np.float32)
    want = _ref(x, w, None, (1, 1, 1, 1))
    op_def = _op_def(0, ["X", "W"], (1, 1, 1, 1))
    got, op = _run(op_def, {"X": x, "W": w}, True)
    assert op._kernel.kind == "winograd"
    plain, _ = _run(op_def, {"X": x, "W": w}, False)
    scale = np.abs(want).max()
    err, err_plain = np.abs(got - want).max() / scale, np.abs(plain - want).max() / scale
    assert err < 2e-6 and err < 3 * err_plain, (err, err_plain)


def test_winograd_splits_tile_rows_over_threads(threads, any_size):  # noqa: F811
    """Batch 1 and 3 on 1 or 2 threads: the batch's tile rows split over the workers, same result."""
    rng = np.random.default_rng(2)
    for n in (1, 3):
        x = rng.standard_normal((n, 5, 11, 9)).astype(np.float32)
        w = rng.standard_normal((4, 5, 3, 3)).astype(np.float32)
        got, op = _run(_op_def(1, ["X", "W"], (1, 1, 1, 1)), {"X": x, "W": w}, True)
        assert op._kernel.kind == "winograd" and len(op._kernel.parts) == threads
        want = np.maximum(_ref(x, w, None, (1, 1, 1, 1)), 0)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


def test_transformed_filter_follows_the_filter_tensor(any_size, monkeypatch):
    """U is computed once per filter tensor version: not again on a re-run, again after a new filter
    is fed (and the result follows it)."""
    calls = []
    real = winograd.transform_filter
    monkeypatch.setattr(winograd, "transform_filter", lambda w, out: (calls.append(1), real(w, out)))
    rng = np.random.default_rng(3)
    ws = Workspace()
    x = rng.standard_normal((1, 3, 6, 6)).astype(np.float32)
    ws.feed_blob("X", x)
    ws.feed_blob("W", rng.standard_normal((2, 3, 3, 3)).astype(np.float32))
    op = create_operator(_op_def(0, ["X", "W"], (1, 1, 1, 1)), ws)
    op.run()
    op.run()
    assert len(calls) == 1
    w2 = rng.standard_normal((2, 3, 3, 3)).astype(np.float32)
    ws.feed_blob("W", w2)
    op.run()
    assert len(calls) == 2
    np.testing.assert_allclose(ws.fetch_blob("Y"), _ref(x, w2, None, (1, 1, 1, 1)), rtol=1e-4, atol=1e-4)


def test_winograd_reruns_without_allocating(threads, any_size):  # noqa: F811
    rng = np.random.default_rng(4)
    ws = Workspace()
    ws.feed_blob("X", rng.standard_normal((2, 6, 9, 9)).astype(np.float32))
    ws.feed_blob("W", rng.standard_normal((6, 6, 3, 3)).astype(np.float32))
    ops = [
        create_operator(CreateOperator("Conv", ["X", "W"], ["Y"], kernel=3, pad=1), ws),
        create_operator(CreateOperator("ConvFusion", ["Y", "W", "X"], ["X"], kernel=3, pad=1, fusion_type=3), ws),
    ]
    for _ in range(2):
        for op in ops:
            op.run()
    assert ops[0]._kernel.kind == ops[1]._kernel.kind == "winograd"
    rep = memory_reporter()
    before = rep.allocations
    for op in ops:
        op.run()
    assert rep.allocations == before


@pytest.mark.parametrize(
    "n, c, m, size, kind",
    [
        (1, 128, 128, 30, "channel"),  # ResNet-50's 28x28 stage: under CHANNEL_WIDE_C input channels
        (1, 256, 256, 30, "winograd"),  # 256 input channels: Winograd's fewer multiplies win
        (16, 256, 256, 30, "winograd"),
        (16, 256, 256, 15, "winograd"),  # AlexNet's 13x13 convs at batch 16: narrow, over many channels
        (16, 512, 512, 9, "winograd"),  # ResNet-50's 7x7 stage at batch 16
        (16, 128, 128, 9, "channel"),  # narrow and over fewer channels: the channel-lane kernel
        (16, 128, 32, 16, "channel"),  # DenseNet-121's 128 -> 32: too few outputs
        (1, 256, 256, 16, "channel"),  # 49 tiles: too few columns for the 16 GEMMs
        (16, 64, 64, 10, "channel"),  # CIFAR ResNet-20's 64-channel stage: too thin
        (16, 16, 16, 32, "direct"),
    ],
)
def test_winograd_chosen_for_wide_or_many_channel_convs(n, c, m, size, kind, monkeypatch):
    monkeypatch.setattr(conv_strategies.CHANNEL, "enabled", True)
    geo = Geometry((size, size), (3, 3), (1, 1), (1, 1), (0, 0), (0, 0), (size - 2, size - 2))
    assert conv_nchw.conv_kind(geo, c, m, 1, np.float32, n) == kind
    assert conv_nchw.conv_kind(geo, c, m, 1, np.float64, n) == "im2col"
    assert conv_nchw.conv_kind(geo._replace(stride=(2, 2), out=((size - 3) // 2 + 1,) * 2), c, m, 1, np.float32, n) != (
        "winograd"
    )


@given(
    m=st.integers(1, 70),
    c=st.integers(1, 140),
    count=st.sampled_from([1, 2]),
    seed=st.integers(0, 2**16),
)
@settings(max_examples=25, deadline=None)
def test_compiled_filter_transform_gives_the_float64_formula_bits(m, c, count, seed):
    """winograd_kernels._filter (blocks of filters, split by output channels over the intra-op threads) gives
    G g G^T computed in float64 by an independent formula, rounded to float32, bit for bit."""
    if not winograd.fits(Geometry((4, 4), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1), (4, 4)), np.float32, 1):
        pytest.skip("numba missing: numpy's tensordots run")
    w = np.random.default_rng(seed).standard_normal((m, c, 3, 3)).astype(np.float32)
    g = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]])
    want = np.einsum("ai,mcij,bj->abmc", g, w.astype(np.float64), g).reshape(16, m, c).astype(np.float32)
    out = np.full((16, m, c), np.nan, np.float32)
    old, old_min = parallel.get_num_threads(), parallel.SPLIT_MIN_WORK
    try:
        parallel.set_num_threads(count)
        parallel.SPLIT_MIN_WORK = 1
        winograd.transform_filter(w, out)
    finally:
        parallel.set_num_threads(old)
        parallel.SPLIT_MIN_WORK = old_min
    np.testing.assert_array_equal(out, want)
