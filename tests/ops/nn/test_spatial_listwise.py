"""SpatialSoftmaxWithLoss, ResizeNearest3D, LambdaRankNdcg and WeightedSample against loop
references, with gradient checks."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.ops import get_gradient_for_op
from framework.ops.testing import arrays, assert_gradient_checks, assert_reference_checks, run_op_on
from framework.proto.framework_pb2 import DeviceOption

S = settings(max_examples=15, deadline=None)


def ref_spatial(x, t, w):
    n, d, h, wd = x.shape
    p = np.zeros(x.shape)
    num = den = 0.0
    for i in range(n):
        for y in range(h):
            for xx in range(wd):
                v = x[i, :, y, xx]
                e = np.exp(v - v.max())
                p[i, :, y, xx] = e / e.sum()
                if t[i, y, xx] != -1:
                    wt = 1.0 if w is None else w[i, y, xx]
                    num += -math.log(max(p[i, t[i, y, xx], y, xx], 1e-20)) * wt
                    den += wt
    return [p, np.array(num / den if den else 0.0)]


@given(data=st.data(), weighted=st.booleans())
@S
def test_spatial_softmax_with_loss(data, weighted):
    n, d, h, w = (data.draw(st.integers(1, 3)) for _ in range(4))
    x = data.draw(arrays((n, d, h, w), np.float64, elements=st.floats(-3, 3)))
    t = data.draw(arrays((n, h, w), np.int32, elements=st.integers(-1, d - 1)))
    wt = data.draw(arrays((n, h, w), np.float64, elements=st.floats(0.5, 2))) if weighted else None
    ins = [x, t] + ([wt] if weighted else [])
    op = CreateOperator("SpatialSoftmaxWithLoss", ["X", "T", "W"][: len(ins)], ["P", "L"])
    assert_reference_checks(op, ins, lambda x, t, *w: ref_spatial(x, t, w[0] if w else None))
    if wt is None:  # with weights Caffe2's gradient is not the loss's derivative (it weights the whole cell)
        assert_gradient_checks(op, ins, 0, outputs_with_grads=(1,))
    ops, _ = get_gradient_for_op(op, ["P_grad", "L_grad"])
    assert list(ops[0].input) == ["X", "T"] + (["W"] if weighted else []) + ["P", "L_grad"]


def test_spatial_softmax_errors():
    op = CreateOperator("SpatialSoftmaxWithLoss", ["X", "T"], ["P", "L"])
    with pytest.raises(FrameworkError, match="SpatialSoftmaxWithLoss.*'T'"):
        run_op_on(op, [np.zeros((1, 2, 2, 2), np.float32), np.full((1, 2, 2), 5, np.int32)])


@given(
    data=st.data(), ts=st.sampled_from([1.0, 2.0]), hs=st.sampled_from([1.0, 2.0, 0.5]), ws=st.sampled_from([2.0, 3.0])
)
@S
def test_resize_nearest_3d(data, ts, hs, ws):
    shape = (1, 2) + tuple(data.draw(st.integers(1, 3)) for _ in range(3))
    x = data.draw(arrays(shape, np.float64))
    op = CreateOperator("ResizeNearest3D", ["X"], ["Y"], temporal_scale=ts, height_scale=hs, width_scale=ws)
    out = [int(shape[2] * ts), int(shape[3] * hs), int(shape[4] * ws)]

    def ref(x):
        y = np.zeros(shape[:2] + tuple(out))
        for t in range(out[0]):
            for a in range(out[1]):
                for b in range(out[2]):
                    y[:, :, t, a, b] = x[
                        :,
                        :,
                        min(int(t / ts), shape[2] - 1),
                        min(int(a / hs), shape[3] - 1),
                        min(int(b / ws), shape[4] - 1),
                    ]
        return y

    if min(out) == 0:
        return
    assert_reference_checks(op, [x], ref)
    assert_gradient_checks(op, [x], 0)


def ref_lambda(y, r, sessions):
    loss, dy, off = [], np.zeros(len(y)), 0
    for n in sessions:
        ys, rs = y[off : off + n], r[off : off + n]
        if n == 0 or sum(abs(v) for v in rs) < 1e-6:
            loss.append(0.0)
            off += n
            continue
        rank = sorted(range(n), key=lambda i: (-ys[i], i))
        ideal = sorted(range(n), key=lambda i: (-rs[i], i))
        disc, idisc = [0.0] * n, [0.0] * n
        for pos, i in enumerate(rank):
            disc[i] = 1 / math.log2(pos + 2)
        for pos, i in enumerate(ideal):
            idisc[i] = 1 / math.log2(pos + 2)
        gain = [2.0**v for v in rs]
        idcg = sum(g * d for g, d in zip(gain, idisc))
        total = 0.0
        for i in range(n):
            g_i = 0.0
            for j in range(n):
                lam = abs((disc[i] - disc[j]) * (gain[i] - gain[j]))
                s = 1.0 if rs[i] - rs[j] > 0 else -1.0
                g_i += -lam * s / (1 + math.exp(s * (ys[i] - ys[j])))
                total += -lam * math.log(1 / (1 + math.exp(-s * (ys[i] - ys[j]))))
            dy[off + i] = g_i / idcg
        loss.append(total / idcg)
        off += n
    return [np.array(loss, np.float32), dy.astype(np.float32)]


@given(data=st.data())
@S
def test_lambda_rank_ndcg(data):
    sessions = data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=3))
    n = sum(sessions)
    y = np.array(data.draw(st.lists(st.integers(-20, 20), min_size=n, max_size=n, unique=True)), np.float32) / 10
    r = data.draw(arrays((n,), np.float32, elements=st.sampled_from([0.0, 1.0, 2.0])))
    sl = np.array(sessions, np.int32)
    op = CreateOperator("LambdaRankNdcg", ["y", "r", "s"], ["loss", "dy"])
    out = assert_reference_checks(
        op, [y, r, sl], lambda y, r, s: ref_lambda(list(y), list(r), sessions), threshold=1e-4
    )
    # dy is half the loss's derivative (each pair counted twice in the loss): check it numerically
    eps = 1e-3
    for k in range(n):
        yp, ym = y.astype(np.float64), y.astype(np.float64)
        yp = yp.copy()
        ym = ym.copy()
        yp[k] += eps
        ym[k] -= eps
        lp = run_op_on(op, [yp.astype(np.float32), r, sl])[0].sum()
        lm = run_op_on(op, [ym.astype(np.float32), r, sl])[0].sum()
        assert out[1][k] == pytest.approx(0.5 * (lp - lm) / (2 * eps), abs=5e-3)
    ops, _ = get_gradient_for_op(op, ["loss_grad", None])
    assert [(o.type, list(o.input)) for o in ops] == [("LambdaRankNdcgGradient", ["y", "s", "dy", "loss_grad"])]
    dl = np.arange(1, len(sessions) + 1, dtype=np.float32)
    (g,) = run_op_on(ops[0], [y, sl, out[1], dl])
    np.testing.assert_allclose(g, np.repeat(dl, sessions) * out[1], rtol=1e-6)


def test_weighted_sample():
    w = np.array([[0, 0, 1.0], [0.0, 2.0, 0], [1.0, 0, 0]], np.float32)
    v = np.array([[1, 2, 3], [4, 5, 6], [7, 8, 9]], np.float32)
    idx, vals = run_op_on(CreateOperator("WeightedSample", ["W", "V"], ["I", "O"]), [w, v])
    assert idx.tolist() == [[2], [1], [0]] and vals.tolist() == [[3], [5], [7]]
    (e,) = run_op_on(CreateOperator("WeightedSample", ["W"], ["I"]), [np.zeros((0, 3), np.float32)])
    assert e.shape == (0,)
    seeded = CreateOperator("WeightedSample", ["W"], ["I"], device_option=DeviceOption(random_seed=7))
    many = np.tile(np.array([[1.0, 3.0]], np.float32), (4000, 1))
    (draws,) = run_op_on(seeded, [many])
    assert abs(draws.mean() - 0.75) < 0.03
    (again,) = run_op_on(seeded, [many])
    np.testing.assert_array_equal(draws, again)
    with pytest.raises(FrameworkError, match="WeightedSample"):
        run_op_on(CreateOperator("WeightedSample", ["W"], ["I"]), [-np.ones((1, 2), np.float32)])
