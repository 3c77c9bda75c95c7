"""Numbers and inputs where Caffe2's exact behaviour is easy to miss. Each reference below is
written from Caffe2's C++ (file named in each test), independently of the code under test."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.memory.workspace import Workspace
from framework.ops import get_gradient_for_op
from framework.ops.testing import assert_gradient_checks, assert_reference_checks, run_op_on

FEW = settings(max_examples=20, deadline=None)


# -- ScatterWeightedSum (utility_ops.h) ----------------------------------------------------------
def _scatter_weighted_sum_ref(x, w0, idx, *pairs):
    x = x.copy()
    if w0[0] != 1.0:
        for r in idx:  # scaled once per occurrence of the index
            x[r] = x[r] * w0[0]
    for s, w in zip(pairs[0::2], pairs[1::2]):
        for k, r in enumerate(idx):
            x[r] = x[r] + w[0] * s[k]
    return x


def test_scatter_weighted_sum_repeated_indices():
    x = np.arange(12, dtype=np.float32).reshape(4, 3)
    idx = np.array([1, 1, 3, 1], np.int64)
    s1, s2 = np.ones((4, 3), np.float32), np.full((4, 3), 3.0, np.float32)
    w0, w1, w2 = (np.array([v], np.float32) for v in (0.5, 2.0, -1.0))
    op = CreateOperator("ScatterWeightedSum", ["x", "w0", "i", "s1", "w1", "s2", "w2"], ["x"])
    out = assert_reference_checks(op, [x, w0, idx, s1, w1, s2, w2], _scatter_weighted_sum_ref, check_no_realloc=False)
    # row 1 (named 3 times): 3 * 0.5**3 + 3 * (2*1 - 1*3) = -2.625 for its first element
    assert out[0][1, 0] == pytest.approx(3 * 0.125 - 3)


# -- ResizeNearest (resize_op.cc: float scales, (int)(y / scale)) -----------------------------------
def _rn_src(n_out, n_in, scale):
    s = np.float32(scale)
    return [min(int(np.float32(i) / s), n_in - 1) for i in range(n_out)]


def _rn_ref(x, hs, ws):
    n, c, h, w = x.shape
    oh, ow = int(np.float32(h) * np.float32(hs)), int(np.float32(w) * np.float32(ws))
    ih, iw = _rn_src(oh, h, hs), _rn_src(ow, w, ws)
    y = np.empty((n, c, oh, ow), x.dtype)
    for a in range(oh):
        for b in range(ow):
            y[:, :, a, b] = x[:, :, ih[a], iw[b]]
    return y


def test_resize_nearest_float32_index():
    # 11 / 1.1f is 10.0f in float32 arithmetic (9.99... in float64): source row 10, not 9
    assert _rn_src(22, 20, 1.1)[11] == 10
    x = np.random.default_rng(0).standard_normal((1, 2, 20, 7)).astype(np.float32)
    op = CreateOperator("ResizeNearest", ["X"], ["Y"], height_scale=1.1, width_scale=3.0)
    assert_reference_checks(op, [x], lambda x: _rn_ref(x, 1.1, 3.0), threshold=0)


@FEW
@given(h=st.integers(1, 12), w=st.integers(1, 12), hs=st.sampled_from([0.5, 1.1, 1.3, 2.0, 2.7]))
def test_resize_nearest_and_gradient_against_caffe2_loops(h, w, hs):
    rng = np.random.default_rng(h * 31 + w)
    x = rng.standard_normal((2, 1, h, w)).astype(np.float32)
    op = CreateOperator("ResizeNearest", ["X"], ["Y"], height_scale=hs, width_scale=1.3)
    y = assert_reference_checks(op, [x], lambda x: _rn_ref(x, hs, 1.3), threshold=0)[0]
    dy = rng.standard_normal(y.shape).astype(np.float32)

    def grad_ref(dy, x):  # resize_op.cc gradient: loop over dY, add into dX
        dx = np.zeros_like(x)
        ih, iw = _rn_src(dy.shape[2], x.shape[2], hs), _rn_src(dy.shape[3], x.shape[3], 1.3)
        for a in range(dy.shape[2]):
            for b in range(dy.shape[3]):
                dx[:, :, ih[a], iw[b]] += dy[:, :, a, b]
        return dx

    gop = CreateOperator("ResizeNearestGradient", ["dY", "X"], ["dX"], height_scale=hs, width_scale=1.3)
    assert_reference_checks(gop, [dy, x], grad_ref, threshold=1e-6)


# -- Adagrad weight_decay, Adam's 4th output (adagrad_op.h, adam_op.h) -------------------------------
def test_adagrad_weight_decay():
    p, h = np.array([1.0, -2.0], np.float32), np.array([0.5, 0.25], np.float32)
    g, lr = np.array([0.1, 0.2], np.float32), np.array([-0.5], np.float32)

    def ref(p, h, g, lr):
        gd = g + 0.1 * p  # fma(weight_decay, param, grad)
        nh = h + gd * gd
        return p + lr[0] * gd / (np.sqrt(nh) + 1e-5), nh

    op = CreateOperator("Adagrad", ["p", "h", "g", "lr"], ["p", "h"], weight_decay=0.1)
    assert_reference_checks(op, [p, h, g, lr], ref)
    idx = np.array([1, 1], np.int64)

    def sparse_ref(p, h, idx, g, lr):
        p, h = p.copy(), h.copy()
        for k, r in enumerate(idx):
            gi = g[k] + 0.1 * p[r]
            h[r] = h[r] + gi * gi
            p[r] = p[r] + lr[0] * gi / (np.sqrt(h[r]) + 1e-5)
        return p, h

    op = CreateOperator("SparseAdagrad", ["p", "h", "i", "g", "lr"], ["p", "h"], weight_decay=0.1)
    assert_reference_checks(op, [p, h, idx, g, lr], sparse_ref, check_no_realloc=False)


def test_adam_fourth_output_is_the_effective_gradient():
    p, m1, m2, g = (np.array(v, np.float32) for v in ([1.0, 2.0], [0.1, 0.0], [0.2, 0.1], [0.5, -0.5]))
    lr, it = np.array([-0.01], np.float32), np.array([2], np.int64)

    def ref(p, m1, m2, g, lr, it):
        t = it[0] + 1
        nm1, nm2 = 0.9 * m1 + 0.1 * g, 0.999 * m2 + 0.001 * g * g
        ng = np.sqrt(1 - 0.999**t) / (1 - 0.9**t) * nm1 / (np.sqrt(nm2) + 1e-5)  # no lr in it
        return p + lr[0] * ng, nm1, nm2, ng

    op = CreateOperator("Adam", ["p", "m1", "m2", "g", "lr", "it"], ["p", "m1", "m2", "ng"])
    assert_reference_checks(op, [p, m1, m2, g, lr, it], ref)


# -- Gather match_outer (gather_op.h) ---------------------------------------------------------------
def test_gather_match_outer():
    rng = np.random.default_rng(1)
    data = rng.standard_normal((2, 5, 3)).astype(np.float32)
    idx = np.array([[0, 4, 4], [1, 2, 0]], np.int32)

    def ref(data, idx):
        out = np.empty((2, 3, 3), np.float32)
        for b in range(2):
            for i in range(3):
                out[b, i] = data[b, idx[b, i]]
        return out

    op = CreateOperator("Gather", ["D", "I"], ["Y"], axis=1, match_outer=1)
    assert_reference_checks(op, [data, idx], ref)
    # without match_outer every outer position takes every index: shape (2, 2, 3, 3)
    assert run_op_on(CreateOperator("Gather", ["D", "I"], ["Y"], axis=1), [data, idx])[0].shape == (2, 2, 3, 3)
    with pytest.raises(RuntimeError, match="match_outer"):
        run_op_on(CreateOperator("Gather", ["D", "I"], ["Y"], axis=1, match_outer=1), [data, idx[:1]])


def test_gather_wraps_negative_indices_on_axis_0_by_default():
    data = np.arange(6, dtype=np.float32).reshape(3, 2)
    op = CreateOperator("Gather", ["D", "I"], ["Y"])
    assert_reference_checks(op, [data, np.array([-1, 0], np.int64)], lambda d, i: d[[2, 0]])
    with pytest.raises(RuntimeError, match="out of DATA"):
        run_op_on(CreateOperator("Gather", ["D", "I"], ["Y"], wrap_indices=0), [data, np.array([-1], np.int64)])


# -- SpatialBN training on an empty batch (spatial_batch_norm_op.h: N == 0) ---------------------------
def test_spatial_bn_training_on_empty_batch_keeps_running_stats():
    x = np.zeros((0, 3, 2, 2), np.float32)
    scale, bias = np.ones(3, np.float32), np.zeros(3, np.float32)
    rm, rv = np.array([1.0, 2.0, 3.0], np.float32), np.array([4.0, 5.0, 6.0], np.float32)
    op = CreateOperator("SpatialBN", ["X", "s", "b", "rm", "rv"], ["Y", "rm", "rv", "sm", "siv"], is_test=0)
    y, rm2, rv2, sm, siv = run_op_on(op, [x, scale, bias, rm, rv])
    assert y.shape == x.shape
    np.testing.assert_array_equal(rm2, rm)
    np.testing.assert_array_equal(rv2, rv)
    np.testing.assert_array_equal(sm, np.zeros(3, np.float32))
    np.testing.assert_array_equal(siv, np.zeros(3, np.float32))


# -- gradient makers: Split (concat_split_op.cc), Pow (pow_op.cc), MatMul (matmul_op.cc) -------------
def test_split_gradient_is_caffe2s_concat_with_split():
    op = CreateOperator("Split", ["X"], ["A", "B"], axis=1, split=[1, 3])
    ops, _ = get_gradient_for_op(op, ["A_grad", "B_grad"])
    assert [o.type for o in ops] == ["Concat"]
    assert list(ops[0].input) == ["A_grad", "B_grad"] and list(ops[0].output) == ["X_grad", "_X_grad_dims"]
    args = {a.name: a for a in ops[0].arg}
    assert list(args["split"].ints) == [1, 3] and args["axis"].i == 1
    x = np.random.default_rng(2).standard_normal((2, 4))
    assert_gradient_checks(op, [x], 0, outputs_with_grads=(0, 1))


def test_pow_gradient_with_exponent_argument_is_caffe2s_chain():
    op = CreateOperator("Pow", ["X"], ["Y"], exponent=3.0)
    ops, _ = get_gradient_for_op(op, ["Y_grad"])
    assert [o.type for o in ops] == ["Pow", "Mul", "Scale"]
    assert ops[0].arg[0].f == 2.0 and ops[2].arg[0].f == 3.0
    x = np.random.default_rng(3).random((2, 3)) + 0.5
    assert_gradient_checks(op, [x], 0)
    # in place (Caffe2: Pow(Y, (e-1)/e) since X is gone); numbers from the chain on Y = X^3
    ops, _ = get_gradient_for_op(CreateOperator("Pow", ["X"], ["X"], exponent=3.0), ["dY"])
    assert ops[0].arg[0].f == pytest.approx(2.0 / 3.0)
    ws = Workspace()
    ws.feed_blob("X", x**3)
    ws.feed_blob("dY", np.ones_like(x))
    for o in ops:
        ws.run_operator_once(o)
    np.testing.assert_allclose(ws.fetch_blob("X_grad"), 3 * x**2, rtol=1e-6)  # Caffe2 warns: precision loss


def test_pow_gradient_tensor_exponent_equals_caffe2s_chain():
    """We keep one PowGradient op for an exponent tensor; Caffe2's 9-op chain, run here op by op
    (float32, as Caffe2), gives the same numbers."""
    rng = np.random.default_rng(4)
    x = (rng.random((2, 3)) + 0.5).astype(np.float32)
    e = rng.standard_normal(3).astype(np.float32)
    dy = rng.standard_normal((2, 3)).astype(np.float32)
    bc = {"broadcast": 1, "axis": -1, "axis_str": "", "order": "NCHW"}
    red = {"axis": -1, "axis_str": "", "order": "NCHW"}
    chain = [
        CreateOperator("ConstantFill", ["E"], ["E_grad"], value=1.0),
        CreateOperator("Sub", ["E", "E_grad"], ["E_grad"]),
        CreateOperator("Pow", ["X", "E_grad"], ["X_grad"], **bc),
        CreateOperator("Mul", ["X_grad", "Y_grad"], ["X_grad"]),
        CreateOperator("Mul", ["X_grad", "E"], ["X_grad"], **bc),
        CreateOperator("Log", ["X"], ["pre"]),
        CreateOperator("Mul", ["pre", "Y"], ["pre"]),
        CreateOperator("Mul", ["pre", "Y_grad"], ["pre"]),
        CreateOperator("SumReduceLike", ["pre", "E"], ["E_grad"], **red),
    ]
    ws = Workspace()
    for name, v in (("X", x), ("E", e), ("Y", x**e), ("Y_grad", dy)):
        ws.feed_blob(name, v.astype(np.float32))
    for o in chain:
        ws.run_operator_once(o)
    ops, _ = get_gradient_for_op(CreateOperator("Pow", ["X", "E"], ["Y"], broadcast=1), ["Y_grad"])
    assert [o.type for o in ops] == ["PowGradient"]
    ours = run_op_on(ops[0], [dy, x, e, (x**e).astype(np.float32)])
    np.testing.assert_allclose(ours[0], ws.fetch_blob("X_grad"), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ours[1], ws.fetch_blob("E_grad"), rtol=1e-5, atol=1e-6)


def test_matmul_gradient_is_caffe2s():
    op = CreateOperator("MatMul", ["A", "B"], ["Y"], axis_a=2)
    ops, _ = get_gradient_for_op(op, ["Y_grad"])
    assert [list(o.input) for o in ops] == [["Y_grad", "B", "A"], ["A", "Y_grad", "B"]]
    assert [{a.name: a.i for a in o.arg} for o in ops] == [{"trans_b": 1, "axis_b": 1}, {"trans_a": 1, "axis_a": 2}]
    rng = np.random.default_rng(5)
    a, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((4, 2))
    assert_gradient_checks(op, [a, b], 0)
    assert_gradient_checks(op, [a, b], 1)


# -- inputs Caffe2 accepts: PadImage negative pads, InstanceNorm in place, Reduce* shape input --------
@pytest.mark.parametrize("mode", ["constant", "edge", "reflect"])
def test_pad_image_negative_pads_crop(mode):
    x = np.random.default_rng(6).standard_normal((1, 2, 5, 6))
    pads = [-1, 2, -2, 1]  # t, l, b, r

    def ref(x):  # pad_op.cc loops: output (ph, pw) reads h = ph - pad_t, w = pw - pad_l
        H, W = x.shape[2:]
        oh, ow = H + pads[0] + pads[2], W + pads[1] + pads[3]
        y = np.empty((1, 2, oh, ow))
        for ph in range(oh):
            for pw in range(ow):
                h, w = ph - pads[0], pw - pads[1]
                if mode == "constant":
                    y[:, :, ph, pw] = x[:, :, h, w] if 0 <= h < H and 0 <= w < W else 0.0
                    continue
                if mode == "edge":
                    h, w = min(H - 1, max(h, 0)), min(W - 1, max(w, 0))
                else:
                    h, w = max(h, -h), max(w, -w)
                    h, w = min(h, 2 * H - h - 2), min(w, 2 * W - w - 2)
                y[:, :, ph, pw] = x[:, :, h, w]
        return y

    op = CreateOperator("PadImage", ["X"], ["Y"], pads=pads, mode=mode)
    assert_reference_checks(op, [x], ref)
    assert_gradient_checks(op, [x], 0)


def test_instance_norm_in_place():
    rng = np.random.default_rng(7)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    scale, bias = rng.standard_normal(3).astype(np.float32), rng.standard_normal(3).astype(np.float32)

    def ref(x, scale, bias):
        mean = x.mean(axis=2, keepdims=True)
        inv = 1 / np.sqrt(((x - mean) ** 2).mean(axis=2, keepdims=True) + 1e-5)
        return (x - mean) * inv * scale[None, :, None] + bias[None, :, None]

    op = CreateOperator("InstanceNorm", ["X", "s", "b"], ["X"])
    assert_reference_checks(op, [x, scale, bias], ref)


@pytest.mark.parametrize("op_type", ["ReduceFrontSum", "ReduceFrontMean", "ReduceBackSum", "ReduceBackMean"])
def test_reduce_front_back_gradient_with_shape_input(op_type):
    front, mean = "Front" in op_type, "Mean" in op_type
    shape = (3, 2, 4)
    dy = np.random.default_rng(8).standard_normal((2, 4) if front else (3, 2)).astype(np.float32)

    def ref(dy, s):  # reduce_front_back_sum_mean_ops.h: dX of the given shape, dY broadcast back
        dx = np.broadcast_to(dy[None] if front else dy[..., None], shape).astype(np.float32)
        return dx / (3 if front else 4) if mean else dx

    op = CreateOperator(op_type + "Gradient", ["dY", "shape"], ["dX"])
    assert_reference_checks(op, [dy, np.array(shape, np.int64)], ref, check_inference=False)
    x = np.zeros(shape, np.float32)  # the X form gives the same
    np.testing.assert_array_equal(run_op_on(op, [dy, x])[0], ref(dy, None))
