"""ConvGradient's float32 NCHW path (dX of stride-1 convs as a forward conv of dY on the compiled kernels,
dW as col @ dY^T) against an independent float64 numpy reference, against the column path it replaced,
and by a float32 central-difference check."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.memory.workspace import Workspace
from framework.ops.nn import conv_grad_data
from framework.proto.framework_pb2 import NetDef


def reference_grads(x, w, dy, pads, stride, group):
    """(dW, dX) of Y = conv(X, W) in float64 by loops over the kernel taps (pads: t, l, b, r)."""
    x, w, dy = (a.astype(np.float64) for a in (x, w, dy))
    n, c, h, wd = x.shape
    m, cg, kh, kw = w.shape
    mg = m // group
    pt, pl, pb, pr = pads
    xp = np.zeros((n, c, h + pt + pb, wd + pl + pr))
    xp[:, :, pt : pt + h, pl : pl + wd] = x
    dxp = np.zeros_like(xp)
    dw = np.zeros(w.shape)
    oh, ow = dy.shape[2:]
    for j in range(group):
        xs, ms = slice(j * cg, (j + 1) * cg), slice(j * mg, (j + 1) * mg)
        for a in range(kh):
            for b in range(kw):
                win = xp[:, xs, a : a + stride * oh : stride, b : b + stride * ow : stride]  # (n, cg, oh, ow)
                dw[ms, :, a, b] = np.einsum("nmhw,nchw->mc", dy[:, ms], win)
                dxp[:, xs, a : a + stride * oh : stride, b : b + stride * ow : stride] += np.einsum(
                    "nmhw,mc->nchw", dy[:, ms], w[ms, :, a, b]
                )
    return dw, dxp[:, :, pt : pt + h, pl : pl + wd]


@st.composite
def cases(draw, stride1=True):
    group = draw(st.sampled_from([1, 1, 2, 3]))
    cg, mg = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    kh, kw = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    pads = (draw(st.integers(0, kh - 1)), draw(st.integers(0, kw - 1)))
    pads = (*pads, draw(st.integers(0, kh - 1)), draw(st.integers(0, kw - 1)))
    stride = 1 if stride1 else draw(st.integers(1, 3))
    h = draw(st.integers(max(1, kh - pads[0] - pads[2]), 12))
    w = draw(st.integers(max(1, kw - pads[1] - pads[3]), 12))
    n = draw(st.integers(1, 4))
    return dict(n=n, c=cg * group, m=mg * group, group=group, k=(kh, kw), pads=pads, stride=stride, hw=(h, w))


def _data(case, seed, dtype=np.float32):
    rng = np.random.default_rng(seed)
    (kh, kw), (h, wd), (pt, pl, pb, pr), s = case["k"], case["hw"], case["pads"], case["stride"]
    oh, ow = (h + pt + pb - kh) // s + 1, (wd + pl + pr - kw) // s + 1
    x = rng.standard_normal((case["n"], case["c"], h, wd)).astype(dtype)
    w = rng.standard_normal((case["m"], case["c"] // case["group"], kh, kw)).astype(dtype)
    dy = rng.standard_normal((case["n"], case["m"], oh, ow)).astype(dtype)
    return x, w, dy


def _op(case, bias=False):
    (kh, kw), (pt, pl, pb, pr) = case["k"], case["pads"]
    outs = ["dW", "db", "dX"] if bias else ["dW", "dX"]
    kw_ = dict(kernel_h=kh, kernel_w=kw, pad_t=pt, pad_l=pl, pad_b=pb, pad_r=pr, stride=case["stride"])
    return CreateOperator("ConvGradient", ["X", "W", "dY"], outs, group=case["group"], no_bias=int(not bias), **kw_)


def _run_grad(case, x, w, dy, runs=2, bias=False):
    ws = Workspace()
    for k, v in (("X", x), ("W", w), ("dY", dy)):
        ws.feed_blob(k, v)
    net = NetDef(name="g")
    net.op.append(_op(case, bias))
    created = ws.create_net(net)
    for _ in range(runs):
        created.run()
    return ws.fetch_blob("dW").copy(), ws.fetch_blob("dX").copy(), ws


@given(case=cases(stride1=False), seed=st.integers(0, 2**31 - 1))
@settings(max_examples=60, deadline=None)
def test_conv_gradient_float32_matches_reference(case, seed):
    x, w, dy = _data(case, seed)
    dw, dx, _ = _run_grad(case, x, w, dy)
    rdw, rdx = reference_grads(x, w, dy, case["pads"], case["stride"], case["group"])
    np.testing.assert_allclose(dx, rdx, rtol=1e-4, atol=1e-4 * max(1.0, np.abs(rdx).max()))
    np.testing.assert_allclose(dw, rdw, rtol=1e-4, atol=1e-4 * max(1.0, np.abs(rdw).max()))


@given(case=cases(), seed=st.integers(0, 2**31 - 1))
@settings(max_examples=30, deadline=None)
def test_data_gradient_path_agrees_with_column_path(case, seed):
    x, w, dy = _data(case, seed)
    dw, dx, _ = _run_grad(case, x, w, dy)
    orig = conv_grad_data.plan
    conv_grad_data.plan = lambda *a, **k: None  # the column path for every conv
    try:
        dw0, dx0, _ = _run_grad(case, x, w, dy)
    finally:
        conv_grad_data.plan = orig
    scale = max(1.0, np.abs(dx0).max())
    np.testing.assert_allclose(dx, dx0, rtol=1e-5, atol=2e-6 * scale * np.sqrt(dy.shape[1] * np.prod(case["k"])))
    np.testing.assert_allclose(dw, dw0, rtol=1e-5, atol=1e-5 * max(1.0, np.abs(dw0).max()))


def test_plan_applies_to_stride_one_only():
    from framework.kernels.geometry import Geometry

    g = Geometry((8, 8), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1), (8, 8))
    assert conv_grad_data.transposed_geometry(g) == Geometry((8, 8), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1), (8, 8))
    assert conv_grad_data.transposed_geometry(g._replace(stride=(2, 1))) is None
    assert conv_grad_data.transposed_geometry(g._replace(dilation=(1, 2))) is None
    assert conv_grad_data.transposed_geometry(g._replace(head=(3, 1))) is None  # pad beyond kernel - 1
    assert conv_grad_data.plan(2, 4, 4, 1, g, np.float64) is None  # float32 only
    assert conv_grad_data.plan(2, 4, 4, 1, g, np.float32) is not None


def test_new_filter_values_are_used_each_run():
    """W' is rewritten when the filter tensor changes (training updates it in place every step)."""
    case = dict(n=2, c=4, m=6, group=1, k=(3, 3), pads=(1, 1, 1, 1), stride=1, hw=(7, 7))
    x, w, dy = _data(case, 3)
    _, dx1, ws = _run_grad(case, x, w, dy)
    net = ws.create_net(_net_of(case))
    ws.get_blob("W").get_mutable().mutable_data()[...] *= 2  # in place, as an optimizer update does
    net.run()
    np.testing.assert_allclose(ws.fetch_blob("dX"), 2 * dx1, rtol=1e-5, atol=1e-4)
    _, rdx = reference_grads(x, 2 * w, dy, case["pads"], 1, 1)
    np.testing.assert_allclose(ws.fetch_blob("dX"), rdx, rtol=1e-4, atol=1e-4 * np.abs(rdx).max())


def _net_of(case):
    net = NetDef(name="g2")
    net.op.append(_op(case))
    return net


def _conv_forward(case, x, w):
    (kh, kw), (pt, pl, pb, pr) = case["k"], case["pads"]
    ws = Workspace()
    ws.feed_blob("X", x)
    ws.feed_blob("W", w)
    op = CreateOperator(
        "Conv", ["X", "W"], ["Y"], kernel_h=kh, kernel_w=kw, pad_t=pt, pad_l=pl, pad_b=pb, pad_r=pr,
        group=case["group"], no_bias=1,
    )  # fmt: skip
    ws.run_operator_once(op)
    return ws.fetch_blob("Y").astype(np.float64)


@given(case=cases(), seed=st.integers(0, 2**31 - 1))
@settings(max_examples=15, deadline=None)
def test_conv_float32_numerical_gradient(case, seed):
    """Directional central differences of L = sum(Conv(X, W) * R) in float32 against this path's (dW, dX)
    for dY = R, along random directions of X and of W."""
    x, w, r = _data(case, seed)
    dw, dx, _ = _run_grad(case, x, w, r, runs=1)
    rng = np.random.default_rng(seed + 1)
    eps = np.float32(0.5)  # L is linear in X and in W: a large step only loses float rounding
    for which in (0, 1):
        v = rng.standard_normal((x if which == 0 else w).shape).astype(np.float32)
        if which == 0:
            hi, lo = _conv_forward(case, x + eps * v, w), _conv_forward(case, x - eps * v, w)
            analytic = float((dx.astype(np.float64) * v).sum())
        else:
            hi, lo = _conv_forward(case, x, w + eps * v), _conv_forward(case, x, w - eps * v)
            analytic = float((dw.astype(np.float64) * v).sum())
        numeric = float(((hi - lo) * r).sum()) / (2 * float(eps))
        scale = np.sqrt(float((r.astype(np.float64) ** 2).sum()) * max(hi.size, 1))
        assert abs(analytic - numeric) <= 1e-4 * scale, (which, analytic, numeric)


@given(case=cases(stride1=False), seed=st.integers(0, 2**31 - 1))
@settings(max_examples=25, deadline=None)
def test_filter_gradient_split_over_two_threads(case, seed):
    """dW filled and multiplied by image ranges on two intra-op threads, then summed: the reference."""
    from framework.ops.nn import conv
    from framework.runtime.parallel import get_num_threads, set_num_threads

    x, w, dy = _data(case, seed)
    old_threads, old_split = get_num_threads(), conv._SPLIT_FLOPS
    set_num_threads(2)
    conv._SPLIT_FLOPS = 0  # split even these small convs
    try:
        dw, dx, _ = _run_grad(case, x, w, dy)
    finally:
        conv._SPLIT_FLOPS = old_split
        set_num_threads(old_threads)
    rdw, rdx = reference_grads(x, w, dy, case["pads"], case["stride"], case["group"])
    np.testing.assert_allclose(dw, rdw, rtol=1e-4, atol=1e-4 * max(1.0, np.abs(rdw).max()))
    np.testing.assert_allclose(dx, rdx, rtol=1e-4, atol=1e-4 * max(1.0, np.abs(rdx).max()))
