"""Activations in the conv's stores (ConvFusion ``relu6`` and ``activation``, ConvNCHW ``relu`` 2-4: Relu6,
HardSwish, Swish) and the inference rewrite putting Clip(0, 6), HardSwish, Swish and Relu after depthwise convs
there (framework/net/fuse_activation.py): every strategy, the compiled kernels on and off and after a failed
compile, gives the activation of an independent float64 reference; optimized nets give the unoptimized net's
values."""

from __future__ import annotations

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.kernels import conv_nchw, conv_strategies, kernel_support, window_jit
from framework.kernels.geometry import Geometry
from framework.memory.workspace import Workspace
from framework.net.optimize import optimize_inference
from framework.ops import create_operator
from framework.proto.framework_pb2 import NetDef
from tests.ops.nn.test_conv_fusion import ref_conv


def _geo(size, k, s, pad):
    out = (size + 2 * pad - k) // s + 1
    return Geometry((size, size), (k, k), (s, s), (1, 1), (pad, pad), (pad, pad), (out, out))


def _reference(x, w, b, k, s, pad, group):
    """float64 NCHW conv with zero padding and groups, plus bias."""
    return ref_conv(x.astype(np.float64), w.astype(np.float64), b, s, pad, group)


# (n, c, m, group, size, window, stride, pad, strategy)
CONVS = [
    (1, 16, 24, 1, 17, 1, 1, 0, "pointwise_mk"),
    (1, 4100, 24, 1, 5, 1, 1, 0, "pointwise"),
    (2, 8, 8, 8, 12, 3, 1, 1, "depthwise3"),
    (1, 8, 8, 8, 13, 3, 2, 1, "depthwise3"),
    (2, 8, 8, 8, 11, 5, 1, 2, "depthwise3"),
    (1, 8, 8, 8, 21, 5, 2, 2, "depthwise3"),
    (2, 8, 8, 8, 12, 7, 1, 3, "direct_depthwise"),
    (2, 8, 8, 8, 13, 7, 2, 3, "depthwise_planes"),
    (1, 8, 32, 1, 8, 3, 1, 1, "channel"),
    (2, 24, 96, 1, 7, 1, 1, 0, "channel"),  # a 1x1 conv on a 7x7 image
    (2, 8, 16, 1, 20, 3, 1, 1, "direct"),
    (2, 4, 6, 2, 9, 3, 1, 1, "im2col"),
]


def _operands(n, c, m, group, size, k, seed=0):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((n, c, size, size)) * 3).astype(np.float32)  # outputs well past 0 and 6
    w = rng.standard_normal((m, c // group, k, k)).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float32)
    return x, w, b


def _act(y, code):
    """Reference activations (float64) of ConvNCHW's codes."""
    if code == 2:
        return np.clip(y, 0, 6)
    if code == 3:
        return y * np.clip(y / 6 + 0.5, 0, 1)
    return y / (1 + np.exp(-y))


def _close(got, want):
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3 * max(1.0, np.abs(want).max()))


@pytest.mark.parametrize("code", [2, 3, 4], ids=["relu6", "hardswish", "swish"])
@pytest.mark.parametrize("case", CONVS, ids=[f"{c[-1]}-s{c[6]}" for c in CONVS])
def test_each_strategy_applies_the_activation(case, code):
    n, c, m, group, size, k, s, pad, name = case
    strategy = conv_strategies.BY_NAME[name]
    usable = not strategy.families or (window_jit.available() and all(map(kernel_support.usable, strategy.families)))
    if not usable:
        pytest.skip(f"'{name}' is not usable here")
    geo = _geo(size, k, s, pad)
    conv = conv_nchw.ConvNCHW(n, c, m, group, geo, np.float32, True, relu=code)
    assert conv.strategy is strategy
    assert conv.cap_pass == (not strategy.caps)
    x, w, b = _operands(n, c, m, group, size, k)
    y = np.empty((n, m, *geo.out), np.float32)
    for _ in range(2):  # the second run is the replay where the kernel is one call
        conv.run(x, w, b, y)
    ref = _reference(x, w, b, k, s, pad, group)
    assert ref.max() > 6 and ref.min() < -3
    _close(y, _act(ref, code))


_ARGS = {2: dict(fusion_type=1, relu6=1), 3: dict(fusion_type=0, activation="HardSwish")}
_ARGS[4] = dict(fusion_type=0, activation="Swish")


def _fusion(x, w, b, k, s, pad, group, jit=True, times=2, code=2, **kw):
    with pytest.MonkeyPatch.context() as mp:
        if not jit:
            mp.setattr(window_jit, "_kernels", None)
        ws = Workspace()
        for name, v in (("X", x), ("W", w), ("b", b)):
            ws.feed_blob(name, v)
        op_def = CreateOperator(
            "ConvFusion", ["X", "W", "b"], ["Y"], kernel=k, stride=s, pad=pad, group=group, **_ARGS[code], **kw
        )
        op = create_operator(op_def, ws)
        for _ in range(times):
            op.run()
        return ws.fetch_blob("Y").copy()


@settings(max_examples=25, deadline=None)
@given(
    depthwise=st.booleans(),
    k=st.sampled_from([1, 3, 5]),
    s=st.sampled_from([1, 2]),
    size=st.integers(3, 17),
    c=st.integers(1, 12),
    n=st.integers(1, 2),
    code=st.sampled_from([2, 3, 4]),
)
def test_conv_fusion_activation_equals_the_reference_with_and_without_compiled_kernels(
    depthwise, k, s, size, c, n, code
):
    pad = k // 2
    group, m = (c, c) if depthwise else (1, c + 3)
    x, w, b = _operands(n, c, m, group, size, k, seed=size * 7 + c)
    want = _act(_reference(x, w, b, k, s, pad, group), code)
    _close(_fusion(x, w, b, k, s, pad, group, code=code), want)
    _close(_fusion(x, w, b, k, s, pad, group, jit=False, code=code), want)


def test_relu6_writing_a_concatenations_channels():
    x, w, b = _operands(1, 8, 8, 8, 12, 3)
    got = _fusion(x, w, b, 3, 1, 1, 8, out_channels=12, out_channel_offset=2, times=1)
    _close(got[:, 2:10], np.clip(_reference(x, w, b, 3, 1, 1, 8), 0, 6))


@pytest.mark.parametrize("code", [2, 3, 4])
@pytest.mark.parametrize(
    "family, module, attr",
    [
        ("depthwise3", "depthwise3", "_depthwise3"),
        ("pointwise", "microkernel", "_pointwise"),
        ("channel", "channel_kernel", "_conv"),
    ],
)
def test_a_failed_compile_still_activates(family, module, attr, code, monkeypatch):
    if not kernel_support.usable(family):
        pytest.skip(f"'{family}' is not usable here")
    monkeypatch.setattr(kernel_support, "_DISABLED", {})
    monkeypatch.setattr(kernel_support, "_COMPILED", set())
    monkeypatch.setattr(window_jit, "_CALLED", set())
    import numba

    def broken(*args):
        raise numba.core.errors.LoweringError("injected")

    monkeypatch.setattr(__import__(f"framework.kernels.{module}", fromlist=[attr]), attr, broken)
    k, group, m, size = {"depthwise3": (3, 8, 8, 17), "pointwise": (1, 1, 16, 17), "channel": (1, 1, 32, 7)}[family]
    x, w, b = _operands(2, 8, m, group, size, k)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        got = _fusion(x, w, b, k, 1, k // 2, group, code=code)
    assert family in kernel_support.disabled()
    _close(got, _act(_reference(x, w, b, k, 1, k // 2, group), code))


@pytest.mark.parametrize("fusion_type, relu6", [(2, 1), (1, 2)])
def test_relu6_needs_a_relu_fusion(fusion_type, relu6):
    ws = Workspace()
    ws.feed_blob("X", np.zeros((1, 2, 4, 4), np.float32))
    ws.feed_blob("W", np.zeros((2, 2, 1, 1), np.float32))
    op_def = CreateOperator("ConvFusion", ["X", "W", "Y"], ["Y"], kernel=1, fusion_type=fusion_type, relu6=relu6)
    with pytest.raises(FrameworkError, match="relu6"):
        create_operator(op_def, ws)


# -- the inference rewrite ------------------------------------------------------------------------------


def _net(ops, outputs):
    net = NetDef(name="n")
    net.op.extend(ops)
    net.external_input.append("X")
    net.external_output.extend(outputs)
    return net


def _run_net(net, params, x):
    ws = Workspace()
    for k, v in params.items():
        ws.feed_blob(k, v)
    ws.feed_blob("X", x)
    ws.run_net_once(net) if hasattr(ws, "run_net_once") else ws.create_net(net).run()
    return [ws.fetch_blob(o).copy() for o in net.external_output], ws


def _optimized(net, params, x):
    ws = Workspace()
    for k, v in params.items():
        ws.feed_blob(k, v)
    ws.feed_blob("X", x)
    opt = optimize_inference(net, ws)
    ws.create_net(opt).run()
    return opt, [ws.fetch_blob(o).copy() for o in net.external_output]


def _clip(x, y, lo=0.0, hi=6.0):
    return CreateOperator("Clip", [x], [y], min=lo, max=hi)


@settings(max_examples=15, deadline=None)
@given(s=st.sampled_from([1, 2]), size=st.integers(4, 15), c=st.integers(2, 9), k=st.sampled_from([3, 5]))
def test_rewrite_fuses_clip_and_depthwise_relu_and_keeps_the_values(s, size, c, k):
    rng = np.random.default_rng(size + c)
    params = {
        "we": rng.standard_normal((2 * c, c, 1, 1)).astype(np.float32),
        "be": rng.standard_normal(2 * c).astype(np.float32),
        "wd": rng.standard_normal((2 * c, 1, k, k)).astype(np.float32),
        "bd": rng.standard_normal(2 * c).astype(np.float32),
        "wd2": rng.standard_normal((2 * c, 1, 3, 3)).astype(np.float32),
        "wp": rng.standard_normal((c, 2 * c, 1, 1)).astype(np.float32),
    }
    ops = [
        CreateOperator("Conv", ["X", "we", "be"], ["e"], kernel=1),
        _clip("e", "e6"),  # Conv + Clip(0, 6)
        CreateOperator("Conv", ["e6", "wd", "bd"], ["d"], kernel=k, stride=s, pad=k // 2, group=2 * c),
        _clip("d", "d"),  # depthwise + Clip in place
        CreateOperator("Conv", ["d", "wd2"], ["d2"], kernel=3, pad=1, group=2 * c, no_bias=1),
        CreateOperator("Relu", ["d2"], ["r"]),  # depthwise + Relu
        CreateOperator("Conv", ["r", "wp"], ["p"], kernel=1, no_bias=1),
        CreateOperator("Relu", ["p"], ["p1"]),
        _clip("p1", "p6"),  # Conv + Relu + Clip
        _clip("p6", "q", -1.0, 2.0),  # not Relu6: stays
    ]
    net = _net(ops, ["q"])
    x = (rng.standard_normal((1, c, size, size)) * 3).astype(np.float32)
    x[0, 0, 0, 0] = np.nan  # NaN is kept by Clip and by the fused cap alike
    (want,), _ = _run_net(net, params, x)
    opt, (got,) = _optimized(net, params, x)
    types = [op.type for op in opt.op]
    assert types == ["ConvFusion"] * 4 + ["Clip"], types
    relu6 = [next((a.i for a in op.arg if a.name == "relu6"), 0) for op in opt.op[:4]]
    assert relu6 == [1, 1, 0, 1]
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert np.isnan(got).sum() == np.isnan(want).sum()


def test_rewrite_leaves_a_conv_output_read_elsewhere():
    rng = np.random.default_rng(0)
    params = {"w": rng.standard_normal((4, 4, 1, 1)).astype(np.float32)}
    ops = [
        CreateOperator("Conv", ["X", "w"], ["y"], kernel=1, no_bias=1),
        _clip("y", "z"),
        CreateOperator("Add", ["y", "z"], ["out"]),
    ]
    net = _net(ops, ["out"])
    x = (rng.standard_normal((1, 4, 5, 5)) * 4).astype(np.float32)
    (want,), _ = _run_net(net, params, x)
    opt, (got,) = _optimized(net, params, x)
    assert [op.type for op in opt.op] == ["Conv", "Clip", "Sum"]  # (a same-shape Add is a Sum: net/add_as_sum.py)
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("form", ["Swish", "ONNXHardSwish", "mul_sigmoid", "hardsigmoid_mul"])
@pytest.mark.parametrize("depthwise", [False, True])
def test_rewrite_fuses_swish_and_hardswish_forms(form, depthwise):
    rng = np.random.default_rng(3)
    c = 6
    w = rng.standard_normal((c, 1, 3, 3) if depthwise else (c, c, 1, 1)).astype(np.float32)
    params = {"w": w, "b": rng.standard_normal(c).astype(np.float32)}
    conv = CreateOperator(
        "Conv", ["X", "w", "b"], ["y"], kernel=w.shape[2], pad=w.shape[2] // 2, group=c if depthwise else 1
    )
    if form in ("Swish", "ONNXHardSwish"):
        acts = [CreateOperator(form, ["y"], ["z"])]
    elif form == "mul_sigmoid":
        acts = [CreateOperator("Sigmoid", ["y"], ["g"]), CreateOperator("Mul", ["y", "g"], ["z"])]
    else:
        acts = [
            CreateOperator("HardSigmoid", ["y"], ["g"], alpha=1 / 6, beta=0.5),
            CreateOperator("Mul", ["g", "y"], ["z"]),
        ]
    net = _net([conv, *acts, CreateOperator("Scale", ["z"], ["out"], scale=0.5)], ["out"])
    x = (rng.standard_normal((2, c, 7, 9)) * 3).astype(np.float32)
    (want,), _ = _run_net(net, params, x)
    opt, (got,) = _optimized(net, params, x)
    assert [op.type for op in opt.op] == ["ConvFusion", "Scale"]
    args = {a.name: a for a in opt.op[0].arg}
    assert args["fusion_type"].i == 0
    assert args["activation"].s.decode() == ("HardSwish" if "ard" in form else "Swish")
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_rewrite_leaves_a_gate_of_another_blob_and_other_hardsigmoids():
    rng = np.random.default_rng(4)
    params = {"w": rng.standard_normal((4, 4, 1, 1)).astype(np.float32)}
    ops = [
        CreateOperator("Conv", ["X", "w"], ["y"], kernel=1, no_bias=1),
        CreateOperator("HardSigmoid", ["y"], ["g"]),  # alpha 0.2: not HardSwish's gate
        CreateOperator("Mul", ["y", "g"], ["z"]),
        CreateOperator("Sigmoid", ["X"], ["g2"]),
        CreateOperator("Mul", ["z", "g2"], ["out"]),  # the gate of another blob
    ]
    net = _net(ops, ["out"])
    x = rng.standard_normal((1, 4, 5, 5)).astype(np.float32)
    (want,), _ = _run_net(net, params, x)
    opt, (got,) = _optimized(net, params, x)
    assert [op.type for op in opt.op] == ["Conv", "HardSigmoid", "Mul", "Sigmoid", "Mul"]
    np.testing.assert_array_equal(got, want)
