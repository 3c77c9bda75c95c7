"""MaxPool, AveragePool, LpPool and their gradients against a loop-based numpy reference."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import ArgumentError, ShapeError
from framework.memory.workspace import Workspace
from framework.ops import create_operator, get_gradient_for_op
from framework.ops.testing import assert_gradient_checks, assert_reference_checks, feed_inputs
from tests.ops.helpers import case_geometry, run_once


def pool_reference(x, kind, order, kernel, stride, dil, heads, tails, outs, p=2.0, include_pad=False):
    x = x if order == "NCHW" else np.moveaxis(x, -1, 1)
    n, c = x.shape[:2]
    sp = x.shape[2:]
    y = np.zeros((n, c, *outs), dtype=np.float64)
    for o in itertools.product(*(range(v) for v in outs)):
        vals, count_pad = [], 0
        for k in itertools.product(*(range(v) for v in kernel)):
            idx = [o[i] * stride[i] - heads[i] + k[i] * dil[i] for i in range(len(sp))]
            if all(0 <= idx[i] < sp[i] for i in range(len(sp))):
                vals.append(x[(slice(None), slice(None), *idx)].astype(np.float64))
            if all(-heads[i] <= idx[i] < sp[i] + tails[i] for i in range(len(sp))):
                count_pad += 1
        at = (slice(None), slice(None), *o)
        if not vals:  # a window wholly in the padding (CAFFE_LEGACY_POOLING)
            y[at] = np.finfo(x.dtype).min if kind == "max" else 0.0
            continue
        vals = np.stack(vals)
        if kind == "max":
            y[at] = vals.max(axis=0)
        elif kind == "avg":
            y[at] = vals.sum(axis=0) / (count_pad if include_pad else len(vals))
        else:
            y[at] = (np.abs(vals) ** p).sum(axis=0) ** (1.0 / p)
    y = y if order == "NCHW" else np.moveaxis(y, 1, -1)
    return y.astype(x.dtype)


@st.composite
def pool_cases(draw):
    r = draw(st.sampled_from([1, 2, 2, 3]))
    order = draw(st.sampled_from(["NCHW", "NHWC"]))
    legacy = draw(st.sampled_from([0, 0, 1, 2, 3]))
    kernel = [draw(st.integers(1, 3)) for _ in range(r)]
    stride = [draw(st.integers(1, 3)) for _ in range(r)]
    dil = [1] * r
    if legacy in (1, 2):
        pads = [0] * (2 * r)
    elif legacy == 3:
        pp = [draw(st.integers(0, kernel[i] - 1)) for i in range(r)]
        pads = pp + pp
    else:
        pads = [draw(st.integers(0, kernel[i // 1 % r] - 1)) for i in range(2 * r)]
        if draw(st.booleans()):
            dil = [draw(st.integers(1, 2)) for _ in range(r)]
    sizes = [draw(st.integers(dil[i] * (kernel[i] - 1) + 1, dil[i] * (kernel[i] - 1) + 5)) for i in range(r)]
    return dict(
        r=r,
        order=order,
        legacy=legacy,
        kernel=kernel,
        stride=stride,
        dil=dil,
        pads=pads,
        sizes=sizes,
        n=draw(st.integers(1, 2)),
        c=draw(st.integers(1, 3)),
    )


def pool_kwargs(case):
    kw = dict(kernels=case["kernel"], strides=case["stride"], order=case["order"])
    if case["r"] == 2 and case["kernel"][0] == case["kernel"][1]:
        kw.pop("kernels")
        kw["kernel"] = case["kernel"][0]
    if case["legacy"] not in (1, 2):
        kw["pads"] = case["pads"]
    if any(d != 1 for d in case["dil"]):
        kw["dilations"] = case["dil"]
    if case["legacy"]:
        kw["legacy_pad"] = case["legacy"]
    return kw


def make_x(case, rng, dtype=np.float32):
    shape = (case["n"], case["c"], *case["sizes"])
    x = rng.standard_normal(shape).astype(dtype)
    return x if case["order"] == "NCHW" else np.moveaxis(x, 1, -1).copy()


@pytest.mark.parametrize("kind,op_type", [("max", "MaxPool"), ("avg", "AveragePool"), ("lp", "LpPool")])
@given(case=pool_cases(), seed=st.integers(0, 2**31 - 1), include=st.booleans())
@settings(max_examples=30)
def test_pool_matches_loop_reference(kind, op_type, case, seed, include):
    rng = np.random.default_rng(seed)
    x = make_x(case, rng)
    if kind == "max":  # distinct values 0.01 apart: no near-tie in a window for the central differences
        x = (rng.permutation(x.size).reshape(x.shape) * 0.01 - x.size * 0.005).astype(x.dtype)
    heads, tails, outs = case_geometry(case)
    kw = pool_kwargs(case)
    p = 2.0
    if kind == "avg" and include:
        kw["count_include_pad"] = 1
    if kind == "lp" and include:
        kw["p"] = p = 3.0
    suffix = {1: "1D", 2: "", 3: "3D"}[case["r"]]
    op = CreateOperator(op_type + suffix, ["X"], ["Y"], **kw)
    (y,) = assert_reference_checks(
        op,
        [x],
        lambda x: pool_reference(
            x, kind, case["order"], case["kernel"], case["stride"], case["dil"], heads, tails, outs, p, include
        ),
        threshold=1e-4,
    )
    c, n = case["c"], case["n"]
    assert y.shape == ((n, c, *outs) if case["order"] == "NCHW" else (n, *outs, c))
    if x.size <= 100 and not np.any(y == np.finfo(y.dtype).min):
        assert_gradient_checks(op, [x], 0, stepsize=1e-4, threshold=2e-3)


def test_caffe2_average_excludes_padding_by_default():
    x = np.ones((1, 1, 2, 2), np.float32)
    op = CreateOperator("AveragePool", ["X"], ["Y"], kernel=2, pad=1, stride=1)
    (y,) = assert_reference_checks(op, [x], lambda x: np.ones((1, 1, 3, 3), np.float32))
    op = CreateOperator("AveragePool", ["X"], ["Y"], kernel=2, pad=1, stride=1, count_include_pad=1)
    expect = np.array([[0.25, 0.5, 0.25], [0.5, 1.0, 0.5], [0.25, 0.5, 0.25]], np.float32)[None, None]
    assert_reference_checks(op, [x], lambda x: expect)


@pytest.mark.parametrize("op_type", ["MaxPool", "AveragePool", "LpPool"])
@pytest.mark.parametrize("order", ["NCHW", "NHWC"])
def test_global_pooling(op_type, order):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 3, 4, 5)).astype(np.float64)
    if order == "NHWC":
        x = np.moveaxis(x, 1, -1).copy()
    axes = (2, 3) if order == "NCHW" else (1, 2)
    ref = {
        "MaxPool": lambda x: x.max(axis=axes, keepdims=True),
        "AveragePool": lambda x: x.mean(axis=axes, keepdims=True),
        "LpPool": lambda x: np.sqrt((x**2).sum(axis=axes, keepdims=True)),
    }[op_type]
    op = CreateOperator(op_type, ["X"], ["Y"], global_pooling=1, order=order)
    assert_reference_checks(op, [x], ref)
    assert_gradient_checks(op, [x], 0)


@pytest.mark.parametrize("op_type", ["MaxPool", "AveragePool"])
@pytest.mark.parametrize("order", ["NCHW", "NHWC"])
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_a_window_covering_the_whole_image_pools_globally(op_type, order, dtype):
    """kernel == the image size, no padding (a CIFAR ResNet's final 8x8 pool): the one-reduction path
    of global_pooling, equal to the loop reference and to the gradient check; NaN wins max pooling."""
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 4, 8, 6)).astype(dtype)
    x[1, 2, 3, 4] = np.nan
    if order == "NHWC":
        x = np.moveaxis(x, 1, -1).copy()
    kind = "max" if op_type == "MaxPool" else "avg"
    op = CreateOperator(op_type, ["X"], ["Y"], kernels=[8, 6], stride=2, order=order)
    ref = pool_reference(x, kind, order, (8, 6), (2, 2), (1, 1), (0, 0), (0, 0), (1, 1))
    want = ref
    got = assert_reference_checks(op, [x], lambda x: want.astype(dtype), threshold=1e-5)
    assert np.isnan(got[0]).sum() == 1 and got[0].shape == want.shape
    ws = Workspace()
    ws.feed_blob("X", x)
    created = create_operator(op, ws)
    created.run()
    assert created._global
    finite = np.nan_to_num(x, nan=0.5)
    assert_gradient_checks(op, [finite], 0)


def test_maxpool_integers_and_ties_multi_assign():
    x = np.array([[[[1, 5], [5, 2]]]], np.int32)
    op = CreateOperator("MaxPool", ["X"], ["Y"], kernel=2)
    assert_reference_checks(op, [x], lambda x: np.array([[[[5]]]], np.int32))
    ws = Workspace()
    xf = x.astype(np.float32)
    g = CreateOperator("MaxPoolGradient", ["X", "Y", "dY"], ["dX"], kernel=2)
    feed_inputs(ws, g, [xf, np.full((1, 1, 1, 1), 5, np.float32), np.ones((1, 1, 1, 1), np.float32)])
    create_operator(g, ws).run()
    np.testing.assert_array_equal(ws.fetch_blob("dX"), [[[[0, 1], [1, 0]]]])


def test_lenet_pool_shape_and_gradient_maker():
    x = np.random.default_rng(0).standard_normal((4, 20, 24, 24)).astype(np.float32)
    op = CreateOperator("MaxPool2D", ["X"], ["Y"], kernel=2, stride=2)
    ref = x.reshape(4, 20, 12, 2, 12, 2).max(axis=(3, 5))
    assert_reference_checks(op, [x], lambda x: ref)
    ops, g_in = get_gradient_for_op(op, ["Y_grad"])
    assert ops[0].type == "MaxPool2DGradient" and list(ops[0].input) == ["X", "Y", "Y_grad"]
    assert g_in == ["X_grad"]


def test_pool_errors():
    x = np.zeros((1, 2, 4, 4), np.float32)
    with pytest.raises(ArgumentError, match="kernel size"):
        run_once(CreateOperator("MaxPool", ["X"], ["Y"], name="p"), [x])
    with pytest.raises(ArgumentError, match="global_pooling"):
        run_once(CreateOperator("MaxPool", ["X"], ["Y"], global_pooling=1, stride=2), [x])
    with pytest.raises(ArgumentError, match="VALID"):
        run_once(CreateOperator("AveragePool", ["X"], ["Y"], kernel=2, pad=1, legacy_pad=1), [x])
    with pytest.raises(ShapeError, match="smaller than the kernel"):
        run_once(CreateOperator("MaxPool", ["X"], ["Y"], kernel=5), [x])
    with pytest.raises(ShapeError, match="'Y'"):
        run_once(
            CreateOperator("MaxPoolGradient", ["X", "Y", "dY"], ["dX"], kernel=2, stride=2),
            [x, np.zeros((1, 2, 3, 3), np.float32), np.zeros((1, 2, 2, 2), np.float32)],
        )
    with pytest.raises(ShapeError, match="1-D"):
        run_once(CreateOperator("MaxPool1D", ["X"], ["Y"], kernel=2), [x])
