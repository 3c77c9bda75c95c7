"""Cross-checks of Conv, ConvTranspose, pools and SpatialBN (forward and gradients) against PyTorch."""

from __future__ import annotations

import numpy as np
import pytest

from framework.core import CreateOperator
from framework.memory.workspace import Workspace
from framework.ops import create_operator, get_gradient_for_op

torch = pytest.importorskip("torch")
F = torch.nn.functional

pytestmark = pytest.mark.torch


def run_with_grads(op, inputs, dy_seed=0):
    """Forward outputs and gradients of every input for upstream gradient dY (random)."""
    ws = Workspace()
    for name, v in zip(op.input, inputs):
        ws.feed_blob(name, v)
    create_operator(op, ws).run()
    y = ws.fetch_blob(op.output[0])
    dy = np.random.default_rng(dy_seed).standard_normal(y.shape).astype(y.dtype)
    ws.feed_blob(op.output[0] + "_grad", dy)
    g_out = [op.output[0] + "_grad"] + [None] * (len(op.output) - 1)
    gops, g_in = get_gradient_for_op(op, g_out)
    for g in gops:
        create_operator(g, ws).run()
    return y, dy, [ws.fetch_blob(n) if n else None for n in g_in]


def torch_grads(fn, inputs, dy):
    ts = [torch.tensor(a, requires_grad=True) for a in inputs]
    y = fn(*ts)
    y.backward(torch.tensor(dy))
    return y.detach().numpy(), [t.grad.numpy() for t in ts]


@pytest.mark.parametrize("order", ["NCHW", "NHWC"])
@pytest.mark.parametrize(
    "stride,pad,dilation,group", [(1, 0, 1, 1), (2, 1, 1, 1), (1, 2, 2, 1), (2, 1, 1, 2), (3, 0, 1, 3)]
)
def test_conv2d_against_torch(order, stride, pad, dilation, group):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((3, 6, 11, 9)).astype(np.float32)
    w = rng.standard_normal((6, 6 // group, 3, 3)).astype(np.float32)
    b = rng.standard_normal(6).astype(np.float32)
    kw = dict(kernel=3, stride=stride, pad=pad, group=group, order=order)
    if dilation != 1:
        kw["dilation"] = dilation
    xi, wi = (x, w) if order == "NCHW" else (x.transpose(0, 2, 3, 1).copy(), w.transpose(0, 2, 3, 1).copy())
    y, dy, (dx, dw, db) = run_with_grads(CreateOperator("Conv", ["X", "W", "b"], ["Y"], **kw), [xi, wi, b])
    dy_nchw = dy if order == "NCHW" else dy.transpose(0, 3, 1, 2)
    ty, (tdx, tdw, tdb) = torch_grads(
        lambda x, w, b: F.conv2d(x, w, b, stride=stride, padding=pad, dilation=dilation, groups=group),
        [x, w, b],
        dy_nchw,
    )
    if order == "NHWC":
        ty, tdx, tdw = ty.transpose(0, 2, 3, 1), tdx.transpose(0, 2, 3, 1), tdw.transpose(0, 2, 3, 1)
    for a, t in ((y, ty), (dx, tdx), (dw, tdw), (db, tdb)):
        np.testing.assert_allclose(a, t, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("dims", [1, 3])
def test_conv_1d_3d_against_torch(dims):
    rng = np.random.default_rng(1)
    sp = (7,) * dims
    x = rng.standard_normal((2, 3, *sp)).astype(np.float32)
    w = rng.standard_normal((4, 3, *(3,) * dims)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    op = CreateOperator(f"Conv{dims}D", ["X", "W", "b"], ["Y"], kernel=3, stride=2, pad=1)
    y, dy, (dx, dw, db) = run_with_grads(op, [x, w, b])
    conv = F.conv1d if dims == 1 else F.conv3d
    ty, (tdx, tdw, tdb) = torch_grads(lambda x, w, b: conv(x, w, b, stride=2, padding=1), [x, w, b], dy)
    for a, t in ((y, ty), (dx, tdx), (dw, tdw), (db, tdb)):
        np.testing.assert_allclose(a, t, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("order", ["NCHW", "NHWC"])
@pytest.mark.parametrize("stride,pad,adj", [(1, 0, 0), (2, 1, 1), (3, 2, 2)])
def test_conv_transpose_against_torch(order, stride, pad, adj):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 3, 5, 4)).astype(np.float32)
    w = rng.standard_normal((3, 4, 3, 3)).astype(np.float32)
    b = rng.standard_normal(4).astype(np.float32)
    xi, wi = (x, w) if order == "NCHW" else (x.transpose(0, 2, 3, 1).copy(), w.transpose(0, 2, 3, 1).copy())
    op = CreateOperator("ConvTranspose", ["X", "W", "b"], ["Y"], kernel=3, stride=stride, pad=pad, adj=adj, order=order)
    y, dy, (dx, dw, db) = run_with_grads(op, [xi, wi, b])
    dy_nchw = dy if order == "NCHW" else dy.transpose(0, 3, 1, 2)
    ty, (tdx, tdw, tdb) = torch_grads(
        lambda x, w, b: F.conv_transpose2d(x, w, b, stride=stride, padding=pad, output_padding=adj),
        [x, w, b],
        dy_nchw,
    )
    if order == "NHWC":
        ty, tdx, tdw = ty.transpose(0, 2, 3, 1), tdx.transpose(0, 2, 3, 1), tdw.transpose(0, 2, 3, 1)
    for a, t in ((y, ty), (dx, tdx), (dw, tdw), (db, tdb)):
        np.testing.assert_allclose(a, t, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("kind", ["MaxPool", "AveragePool", "LpPool"])
@pytest.mark.parametrize("kernel,stride,pad", [(2, 2, 0), (3, 2, 1), (3, 1, 1)])
def test_pools_against_torch(kind, kernel, stride, pad):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((2, 3, 9, 8)).astype(np.float32)
    if kind == "LpPool" and pad:
        pytest.skip("torch's lp_pool2d has no padding")
    op = CreateOperator(kind, ["X"], ["Y"], kernel=kernel, stride=stride, pad=pad)
    y, dy, (dx,) = run_with_grads(op, [x])
    fn = {
        # Caffe2 averages over the cells inside the image: torch's count_include_pad=False.
        "AveragePool": lambda x: F.avg_pool2d(x, kernel, stride, pad, count_include_pad=False),
        "MaxPool": lambda x: F.max_pool2d(x, kernel, stride, pad),
        "LpPool": lambda x: F.lp_pool2d(x, 2.0, kernel, stride),
    }[kind]
    ty, (tdx,) = torch_grads(fn, [x], dy)
    np.testing.assert_allclose(y, ty, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(dx, tdx, rtol=1e-4, atol=1e-4)


def test_caffe_legacy_pooling_matches_torch_ceil_mode():
    x = np.random.default_rng(4).standard_normal((1, 2, 10, 10)).astype(np.float32)
    op = CreateOperator("MaxPool", ["X"], ["Y"], kernel=3, stride=2, pad=0, legacy_pad=3)
    y, _, _ = run_with_grads(op, [x])
    ty = F.max_pool2d(torch.tensor(x), 3, 2, 0, ceil_mode=True).numpy()
    np.testing.assert_allclose(y, ty)


@pytest.mark.parametrize("order", ["NCHW", "NHWC"])
def test_spatial_bn_against_torch(order):
    rng = np.random.default_rng(5)
    x = rng.standard_normal((4, 3, 5, 5)).astype(np.float32)
    scale, bias = rng.standard_normal(3).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    rm, rv = rng.standard_normal(3).astype(np.float32), rng.uniform(0.5, 2, 3).astype(np.float32)
    xi = x if order == "NCHW" else x.transpose(0, 2, 3, 1).copy()
    op = CreateOperator(
        "SpatialBN",
        ["X", "s", "b", "rm", "rv"],
        ["Y", "rm", "rv", "sm", "siv"],
        order=order,
        momentum=0.9,
        epsilon=1e-5,
    )
    ws = Workspace()
    for n, v in zip(op.input, [xi, scale, bias, rm, rv]):
        ws.feed_blob(n, v)
    create_operator(op, ws).run()
    y = ws.fetch_blob("Y")
    dy = rng.standard_normal(y.shape).astype(np.float32)
    ws.feed_blob("Y_grad", dy)
    gops, g_in = get_gradient_for_op(op, ["Y_grad", None, None, None, None])
    for g in gops:
        create_operator(g, ws).run()
    trm, trv = torch.tensor(rm), torch.tensor(rv)
    tx, ts, tb = (torch.tensor(a, requires_grad=True) for a in (x, scale, bias))
    ty = F.batch_norm(tx, trm, trv, ts, tb, training=True, momentum=0.1, eps=1e-5)
    dy_nchw = dy if order == "NCHW" else dy.transpose(0, 3, 1, 2)
    ty.backward(torch.tensor(dy_nchw))
    tyn, tdx = ty.detach().numpy(), tx.grad.numpy()
    if order == "NHWC":
        tyn, tdx = tyn.transpose(0, 2, 3, 1), tdx.transpose(0, 2, 3, 1)
    np.testing.assert_allclose(y, tyn, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(ws.fetch_blob("rm"), trm.numpy(), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ws.fetch_blob("rv"), trv.numpy(), rtol=1e-5, atol=1e-6)  # unbiased, as torch
    np.testing.assert_allclose(ws.fetch_blob(g_in[0]), tdx, rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(ws.fetch_blob(g_in[1]), ts.grad.numpy(), rtol=1e-3, atol=1e-4)
    np.testing.assert_allclose(ws.fetch_blob(g_in[2]), tb.grad.numpy(), rtol=1e-3, atol=1e-4)
    # test mode
    op_t = CreateOperator("SpatialBN", ["X", "s", "b", "rm0", "rv0"], ["Yt"], is_test=1, order=order)
    ws.feed_blob("rm0", rm)
    ws.feed_blob("rv0", rv)
    create_operator(op_t, ws).run()
    tyt = F.batch_norm(
        torch.tensor(x),
        torch.tensor(rm),
        torch.tensor(rv),
        torch.tensor(scale),
        torch.tensor(bias),
        training=False,
        eps=1e-5,
    ).numpy()
    if order == "NHWC":
        tyt = tyt.transpose(0, 2, 3, 1)
    np.testing.assert_allclose(ws.fetch_blob("Yt"), tyt, rtol=1e-4, atol=1e-4)
