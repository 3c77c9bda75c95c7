"""Conv, ConvTranspose and their gradients against a direct loop-based numpy reference."""

from __future__ import annotations

import itertools
import math

import numpy as np
import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import ArgumentError, FrameworkError, SchemaError, ShapeError
from framework.memory.workspace import Workspace
from framework.ops import create_operator, get_gradient_for_op
from framework.ops.testing import assert_gradient_checks, assert_reference_checks
from tests.ops.helpers import case_geometry, run_once

# -- independent reference ---------------------------------------------------------------


def to_nchw(a, order):
    return a if order == "NCHW" else np.moveaxis(a, -1, 1)


def from_nchw(a, order):
    return a if order == "NCHW" else np.moveaxis(a, 1, -1)


def conv_reference(x, w, b, order, kernel, stride, dil, heads, outs, group):
    x, w = to_nchw(x, order), to_nchw(w, order)
    n, c = x.shape[:2]
    m = w.shape[0]
    sp = x.shape[2:]
    cg, mg = c // group, m // group
    y = np.zeros((n, m, *outs), dtype=np.float64)
    for o in itertools.product(*(range(v) for v in outs)):
        patch = np.zeros((n, c, *kernel))
        for k in itertools.product(*(range(v) for v in kernel)):
            idx = [o[i] * stride[i] - heads[i] + k[i] * dil[i] for i in range(len(sp))]
            if all(0 <= idx[i] < sp[i] for i in range(len(sp))):
                patch[(slice(None), slice(None), *k)] = x[(slice(None), slice(None), *idx)]
        for g in range(group):
            pg = patch[:, g * cg : (g + 1) * cg].reshape(n, cg * math.prod(kernel))
            wg = w[g * mg : (g + 1) * mg].reshape(mg, cg * math.prod(kernel))
            y[(slice(None), slice(g * mg, (g + 1) * mg), *o)] = pg @ wg.T
    if b is not None:
        y += b.reshape((m,) + (1,) * len(sp))
    return from_nchw(y, order).astype(x.dtype)


@st.composite
def conv_cases(draw, transpose=False):
    r = draw(st.sampled_from([1, 2, 2, 2, 3]))
    order = draw(st.sampled_from(["NCHW", "NHWC"]))
    legacy = 0 if transpose else draw(st.sampled_from([0, 0, 1, 2, 3]))
    group = 1 if transpose else draw(st.sampled_from([1, 1, 2]))
    maxk = 3 if r < 3 else 2
    kernel = [draw(st.integers(1, maxk)) for _ in range(r)]
    stride = [draw(st.integers(1, 3)) for _ in range(r)]
    dil = [1] * r
    if legacy in (0, 1) and group == 1 and not transpose:
        dil = [draw(st.integers(1, 2)) for _ in range(r)]
    if legacy in (1, 2):
        pads = [0] * (2 * r)
    elif legacy == 3:
        p = [draw(st.integers(0, kernel[i] - 1)) for i in range(r)]
        pads = p + p
    else:
        pads = [draw(st.integers(0, 2)) for _ in range(2 * r)]
    sizes = []
    for i in range(r):
        dk = dil[i] * (kernel[i] - 1) + 1
        lo = max(1, dk - (pads[i] + pads[r + i] if legacy == 0 else 0))
        sizes.append(draw(st.integers(lo, lo + (4 if r < 3 else 2))))
    n = draw(st.integers(0 if draw(st.booleans()) and r == 2 else 1, 2))
    cg = draw(st.integers(1, 3))
    mg = draw(st.integers(1, 3))
    bias = draw(st.booleans())
    spell = draw(st.sampled_from(["plural", "scalar", "hw"]))
    return dict(
        r=r,
        order=order,
        legacy=legacy,
        group=group,
        kernel=kernel,
        stride=stride,
        dil=dil,
        pads=pads,
        sizes=sizes,
        n=n,
        cg=cg,
        mg=mg,
        bias=bias,
        spell=spell,
    )


def conv_kwargs(case, transpose=False):
    r, kw = case["r"], {}
    spell = case["spell"]

    def put(name, vals, hw_names):
        if spell == "scalar" and len(set(vals)) == 1:
            kw[name] = vals[0]
        elif spell == "hw" and r == 2:
            kw.update({hw_names[0]: vals[0], hw_names[1]: vals[1]})
        else:
            kw[name + "s"] = list(vals)

    put("kernel", case["kernel"], ("kernel_h", "kernel_w"))
    if any(s != 1 for s in case["stride"]) or spell == "plural":
        put("stride", case["stride"], ("stride_h", "stride_w"))
    if not transpose and any(d != 1 for d in case["dil"]):
        put("dilation", case["dil"], ("dilation_h", "dilation_w"))
    pads = case["pads"]
    if case["legacy"] not in (1, 2):
        if spell == "scalar" and len(set(pads)) == 1:
            kw["pad"] = pads[0]
        elif spell == "hw" and r == 2:
            kw.update(pad_t=pads[0], pad_l=pads[1], pad_b=pads[2], pad_r=pads[3])
        else:
            kw["pads"] = list(pads)
    if case["legacy"]:
        kw["legacy_pad"] = case["legacy"]
    if case["group"] != 1:
        kw["group"] = case["group"]
    kw["order"] = case["order"]
    return kw


def make_inputs(case, rng, transpose=False, dtype=np.float32):
    g, r = case["group"], case["r"]
    c, m = case["cg"] * g, case["mg"] * g
    xs = (case["n"], c, *case["sizes"])
    ws = (c, m, *case["kernel"]) if transpose else (m, case["cg"], *case["kernel"])
    x = rng.standard_normal(xs).astype(dtype)
    w = rng.standard_normal(ws).astype(dtype)
    b = rng.standard_normal(m).astype(dtype)
    if case["order"] == "NHWC":
        x, w = np.moveaxis(x, 1, -1).copy(), np.moveaxis(w, 1, -1).copy()
    assert len(xs) == r + 2
    return x, w, b


@given(case=conv_cases(), seed=st.integers(0, 2**31 - 1))
@settings(max_examples=60)
def test_conv_matches_loop_reference(case, seed):
    rng = np.random.default_rng(seed)
    x, w, b = make_inputs(case, rng)
    r = case["r"]
    heads, _, outs = case_geometry(case)
    inputs = [x, w, b] if case["bias"] else [x, w]
    op_type = {1: "Conv1D", 2: "Conv", 3: "Conv3D"}[r]
    op = CreateOperator(op_type, ["X", "W", "b"][: len(inputs)], ["Y"], **conv_kwargs(case))

    def ref(x, w, b=None):
        return conv_reference(
            x, w, b, case["order"], case["kernel"], case["stride"], case["dil"], heads, outs, case["group"]
        )

    (y,) = assert_reference_checks(op, inputs, ref, threshold=1e-4)
    n, m = case["n"], case["mg"] * case["group"]
    expect = (n, m, *outs) if case["order"] == "NCHW" else (n, *outs, m)
    assert y.shape == expect


@given(case=conv_cases(), seed=st.integers(0, 2**31 - 1), which=st.sampled_from([0, 1, 2]))
@settings(max_examples=25)
def test_conv_gradients(case, seed, which):
    case = {**case, "n": max(case["n"], 1)}
    case["sizes"] = [min(s, 5) for s in case["sizes"]] if case["legacy"] == 0 else case["sizes"]
    rng = np.random.default_rng(seed)
    x, w, b = make_inputs(case, rng, dtype=np.float64)
    if x.size > 150:
        return
    inputs = [x, w, b] if case["bias"] else [x, w]
    try:
        op = CreateOperator("Conv", ["X", "W", "b"][: len(inputs)], ["Y"], **conv_kwargs(case))
        create_operator(op, Workspace())
    except FrameworkError:
        return
    which = min(which, len(inputs) - 1)
    event(f"checked {case['order']} legacy={case['legacy']} group={case['group']}")
    assert_gradient_checks(op, inputs, which, stepsize=1e-3, threshold=1e-3)


def test_conv_gradient_op_layout_and_no_bias():
    op = CreateOperator("Conv", ["X", "W", "b"], ["Y"], kernel=3)
    ops, g_in = get_gradient_for_op(op, ["Y_grad"])
    assert [o.type for o in ops] == ["ConvGradient"]
    assert list(ops[0].input) == ["X", "W", "Y_grad"]
    assert list(ops[0].output) == ["W_grad", "b_grad", "X_grad"]
    assert g_in == ["X_grad", "W_grad", "b_grad"]
    op2 = CreateOperator("Conv2D", ["X", "W"], ["Y"], kernel=3)
    ops, g_in = get_gradient_for_op(op2, ["Y_grad"])
    assert list(ops[0].output) == ["W_grad", "X_grad"]
    assert any(a.name == "no_bias" and a.i == 1 for a in ops[0].arg)
    op3 = CreateOperator("Conv", ["X", "W", "b"], ["Y"], kernel=3, no_gradient_to_input=1)
    ops, g_in = get_gradient_for_op(op3, ["Y_grad"])
    assert list(ops[0].output) == ["W_grad", "b_grad"] and g_in[0] is None


def test_conv_in_the_lenet_shapes_and_realloc():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 1, 28, 28)).astype(np.float32)
    w = rng.standard_normal((20, 1, 5, 5)).astype(np.float32)
    b = rng.standard_normal(20).astype(np.float32)
    op = CreateOperator("Conv", ["X", "W", "b"], ["Y"], kernel=5)
    heads, outs = [0, 0], [24, 24]
    assert_reference_checks(
        op,
        [x, w, b],
        lambda x, w, b: conv_reference(x, w, b, "NCHW", [5, 5], [1, 1], [1, 1], heads, outs, 1),
        threshold=1e-3,
    )


def test_conv_reads_new_input_data_each_run():
    ws = Workspace()
    op = CreateOperator("Conv", ["X", "W"], ["Y"], kernel=1)
    ws.feed_blob("W", np.ones((1, 1, 1, 1), np.float32))
    ws.feed_blob("X", np.ones((1, 1, 2, 2), np.float32))
    o = create_operator(op, ws)
    o.run()
    ws.feed_blob("X", np.full((1, 1, 2, 2), 3.0, np.float32))
    o.run()
    np.testing.assert_array_equal(ws.fetch_blob("Y"), np.full((1, 1, 2, 2), 3.0))


# -- ConvTranspose ------------------------------------------------------------------------
def convt_reference(x, w, b, order, kernel, stride, adj, heads, tails):
    x, w = to_nchw(x, order), to_nchw(w, order)
    n, c = x.shape[:2]
    m = w.shape[1]
    sp = x.shape[2:]
    full = [(sp[i] - 1) * stride[i] + kernel[i] + adj[i] for i in range(len(sp))]
    y = np.zeros((n, m, *full))
    for i in itertools.product(*(range(v) for v in sp)):
        for k in itertools.product(*(range(v) for v in kernel)):
            o = tuple(i[d] * stride[d] + k[d] for d in range(len(sp)))
            y[(slice(None), slice(None), *o)] += x[(slice(None), slice(None), *i)] @ w[(slice(None), slice(None), *k)]
    crop = tuple(slice(heads[d], full[d] - tails[d]) for d in range(len(sp)))
    y = y[(slice(None), slice(None), *crop)]
    if b is not None:
        y = y + b.reshape((m,) + (1,) * len(sp))
    return from_nchw(y, order).astype(x.dtype)


@given(case=conv_cases(transpose=True), seed=st.integers(0, 2**31 - 1), data=st.data())
@settings(max_examples=40)
def test_conv_transpose_matches_loop_reference(case, seed, data):
    rng = np.random.default_rng(seed)
    r = case["r"]
    adj = [data.draw(st.integers(0, s - 1)) for s in case["stride"]]
    kw = conv_kwargs(case, transpose=True)
    kw["adjs"] = adj
    heads, tails = case["pads"][:r], case["pads"][r:]
    full = [(case["sizes"][i] - 1) * case["stride"][i] + case["kernel"][i] + adj[i] for i in range(r)]
    if any(f - h - t < 1 for f, h, t in zip(full, heads, tails)):
        return
    x, w, b = make_inputs(case, rng, transpose=True)
    inputs = [x, w, b] if case["bias"] else [x, w]
    op = CreateOperator("ConvTranspose", ["X", "W", "b"][: len(inputs)], ["Y"], **kw)

    def ref(x, w, b=None):
        return convt_reference(x, w, b, case["order"], case["kernel"], case["stride"], adj, heads, tails)

    assert_reference_checks(op, inputs, ref, threshold=1e-4)
    if x.size and x.size <= 60 and w.size <= 60:
        x64, w64, b64 = (a.astype(np.float64) for a in (x, w, b))
        ins = [x64, w64, b64][: len(inputs)]
        for which in range(len(ins)):
            assert_gradient_checks(op, ins, which, stepsize=1e-3, threshold=1e-3)


def test_conv_transpose_output_size_formula():
    x = np.zeros((1, 2, 5, 5), np.float32)
    w = np.zeros((2, 3, 3, 3), np.float32)
    op = CreateOperator("ConvTranspose", ["X", "W"], ["Y"], kernel=3, stride=2, pad=1, adj=1)
    (y,) = assert_reference_checks(op, [x, w], lambda x, w: np.zeros((1, 3, 10, 10), np.float32))
    assert y.shape == (1, 3, (5 - 1) * 2 + 3 + 1 - 2, 10)


@pytest.mark.parametrize("order", ["NCHW", "NHWC"])
@pytest.mark.parametrize("adj_h, adj_w", [(1, 0), (0, 2), (2, 1)])
def test_conv_transpose_adj_h_adj_w(order, adj_h, adj_w):
    """Caffe2 reads adj_h and adj_w (given together) when adj and adjs are absent; adj may equal the stride."""
    rng = np.random.default_rng(adj_h * 3 + adj_w)
    x = rng.standard_normal((1, 2, 3, 2))
    w = rng.standard_normal((2, 3, 2, 3))
    b = rng.standard_normal(3)
    if order == "NHWC":
        x, w = x.transpose(0, 2, 3, 1).copy(), w.transpose(0, 2, 3, 1).copy()
    op = CreateOperator(
        "ConvTranspose", ["X", "W", "b"], ["Y"], kernel_h=2, kernel_w=3, stride=2, pad=0, adj_h=adj_h, adj_w=adj_w,
        order=order,
    )  # fmt: skip

    def ref(x, w, b):
        return convt_reference(x, w, b, order, (2, 3), (2, 2), (adj_h, adj_w), (0, 0), (0, 0))

    (y,) = assert_reference_checks(op, [x, w, b], ref)
    spatial = y.shape[1:3] if order == "NHWC" else y.shape[2:]
    assert spatial == ((3 - 1) * 2 + 2 + adj_h, (2 - 1) * 2 + 3 + adj_w)
    for which in range(3):
        assert_gradient_checks(op, [x, w, b], which, stepsize=1e-3, threshold=1e-3)


# -- errors ------------------------------------------------------------------------------
def test_conv_errors_name_the_op_and_blob():
    x = np.zeros((1, 4, 5, 5), np.float32)
    w = np.zeros((2, 4, 3, 3), np.float32)
    with pytest.raises(ArgumentError, match="kernel size"):
        run_once(CreateOperator("Conv", ["X", "W"], ["Y"], name="c1"), [x, w])
    with pytest.raises(ArgumentError, match="VALID"):
        run_once(CreateOperator("Conv", ["X", "W"], ["Y"], kernel=3, pad=1, legacy_pad=1), [x, w])
    with pytest.raises(ArgumentError, match="SAME"):
        run_once(CreateOperator("Conv", ["X", "W"], ["Y"], kernel=3, pads=[1, 1, 1, 1], legacy_pad=2), [x, w])
    with pytest.raises(ShapeError, match=r"Conv \"c3\".*channels.*group"):
        run_once(
            CreateOperator("Conv", ["X", "W3"], ["Y"], kernel=3, group=3, name="c3"),
            [np.zeros((1, 4, 5, 5), np.float32), np.zeros((3, 1, 3, 3), np.float32)],
        )
    with pytest.raises(ShapeError, match="not divisible by group"):
        run_once(CreateOperator("Conv", ["X", "W"], ["Y"], kernel=3, group=2), [x, np.zeros((3, 2, 3, 3), np.float32)])
    with pytest.raises(ShapeError, match="'W'.*kernel"):
        run_once(CreateOperator("Conv", ["X", "W"], ["Y"], kernel=5), [x, w])
    with pytest.raises(ShapeError, match="bias 'b'"):
        run_once(CreateOperator("Conv", ["X", "W", "b"], ["Y"], kernel=3), [x, w, np.zeros(3, np.float32)])
    with pytest.raises(ShapeError, match="smaller than the kernel"):
        run_once(CreateOperator("Conv", ["X", "W"], ["Y"], kernel=7), [x, np.zeros((2, 4, 7, 7), np.float32)])
    with pytest.raises(ArgumentError, match="kernel_h"):
        run_once(CreateOperator("Conv", ["X", "W"], ["Y"], kernel_h=3), [x, w])
    with pytest.raises(ArgumentError, match="order"):
        run_once(CreateOperator("Conv", ["X", "W"], ["Y"], kernel=3, order="NCWH"), [x, w])
    with pytest.raises(ArgumentError, match="spatial dimensions"):
        run_once(CreateOperator("Conv", ["X", "W"], ["Y"], kernels=[3, 3], strides=[1, 1, 1]), [x, w])
    with pytest.raises(ShapeError, match="3-D"):
        run_once(CreateOperator("Conv3D", ["X", "W"], ["Y"], kernel=3), [x, w])
    with pytest.raises(SchemaError):
        run_once(CreateOperator("Conv", ["X"], ["Y"], kernel=3), [x])
    with pytest.raises(ArgumentError, match="no_bias"):
        run_once(
            CreateOperator("ConvGradient", ["X", "W", "dY"], ["dW", "db", "dX"], kernel=3, no_bias=1),
            [x, w, np.zeros((1, 2, 3, 3), np.float32)],
        )
    with pytest.raises(ShapeError, match="'dY'"):
        run_once(
            CreateOperator("ConvGradient", ["X", "W", "dY"], ["dW", "db", "dX"], kernel=3),
            [x, w, np.zeros((1, 2, 4, 3), np.float32)],
        )
    with pytest.raises(ShapeError, match="adj"):
        run_once(
            CreateOperator("ConvTranspose", ["X", "W"], ["Y"], kernel=3, adj=2), [x, np.zeros((4, 2, 3, 3), np.float32)]
        )
