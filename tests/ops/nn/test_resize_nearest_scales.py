"""ResizeNearest with its scales given as an input tensor (Caffe2's ONNX-Upsample form), and its
gradient taking the same scales; references written from the nearest-neighbour rule."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import ShapeError
from framework.ops import get_gradient_for_op
from framework.ops.testing import assert_gradient_checks, assert_reference_checks
from tests.ops.helpers import run_fed


def _src(n_out, n_in, scale):
    # output cell i reads input min(int(i / scale), n_in - 1), in float32 as Caffe2's C++
    return np.minimum((np.arange(n_out, dtype=np.float32) / np.float32(scale)).astype(np.int64), n_in - 1)


def _resize_ref(x, hs, ws, order):
    h, w = (x.shape[2], x.shape[3]) if order == "NCHW" else (x.shape[1], x.shape[2])
    oh, ow = int(np.float32(h) * np.float32(hs)), int(np.float32(w) * np.float32(ws))
    ih, iw = _src(oh, h, hs), _src(ow, w, ws)
    if order == "NCHW":
        return x[:, :, ih][:, :, :, iw]
    return x[:, ih][:, :, iw]


@settings(max_examples=20, deadline=None)
@given(
    hs=st.sampled_from([0.5, 1.0, 2.0, 1.7, 3.0]),
    ws=st.sampled_from([0.5, 1.0, 2.0, 2.5]),
    order=st.sampled_from(["NCHW", "NHWC"]),
    seed=st.integers(0, 100),
)
def test_scales_input_overrides_the_arguments(hs, ws, order, seed):
    rng = np.random.default_rng(seed)
    x = rng.random((2, 3, 4, 5)).astype(np.float32)
    if order == "NHWC":
        x = x.transpose(0, 2, 3, 1).copy()
    scales = np.array([hs, ws], np.float32)
    # the arguments say otherwise: the input wins
    op = CreateOperator("ResizeNearest", ["X", "scales"], ["Y"], order=order, height_scale=9.0, width_scale=9.0)
    assert_reference_checks(op, [x, scales], lambda x, s: [_resize_ref(x, hs, ws, order)], check_inference=False)
    ops, grads = get_gradient_for_op(op, ["Y_grad"])
    assert list(ops[0].input) == ["Y_grad", "X", "scales"] and grads[1] is None
    assert_gradient_checks(op, [x.astype(np.float64), scales], 0)


def test_gradient_with_scales_input():
    rng = np.random.default_rng(0)
    x = rng.random((1, 2, 3, 4)).astype(np.float32)
    scales = np.array([2.0, 0.5], np.float32)
    dy = rng.random((1, 2, 6, 2)).astype(np.float32)

    def ref(dy, x, s):
        dx = np.zeros_like(x)
        ih, iw = _src(6, 3, 2.0), _src(2, 4, 0.5)
        for i in range(6):
            for j in range(2):
                dx[:, :, ih[i], iw[j]] += dy[:, :, i, j]
        return [dx]

    op = CreateOperator("ResizeNearestGradient", ["dY", "X", "scales"], ["dX"])
    assert_reference_checks(op, [dy, x, scales], ref)


def test_bad_scales_input():
    x = np.zeros((1, 1, 2, 2), np.float32)
    op = CreateOperator("ResizeNearest", ["X", "S"], ["Y"])
    with pytest.raises(ShapeError, match="2 values"):
        run_fed(op, {"X": x, "S": np.array([2.0], np.float32)})
    with pytest.raises(Exception, match="must be > 0"):
        run_fed(op, {"X": x, "S": np.array([2.0, -1.0], np.float32)})
