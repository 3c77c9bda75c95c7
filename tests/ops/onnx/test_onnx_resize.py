"""ONNXResize against per-output-element references (linear, cubic, nearest, tf_crop_and_resize)."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.ops.testing import arrays, assert_reference_checks, run_op_on


def _coord(mode, y, scale, w_in, w_out):
    if mode == "align_corners":
        return 0.0 if w_out == 1 else y * (w_in - 1) / (w_out - 1)
    if mode == "asymmetric":
        return y / scale
    return (y + 0.5) / scale - 0.5  # half_pixel


def _keys(t, a=-0.75):
    t = abs(t)
    if t <= 1:
        return (a + 2) * t**3 - (a + 3) * t**2 + 1
    return a * t**3 - 5 * a * t**2 + 8 * a * t - 4 * a if t < 2 else 0.0


def _resize_1d(row, w_out, scale, mode, kind):
    n = len(row)
    out = []
    for y in range(w_out):
        x = _coord(mode, y, scale, n, scale * n)
        x0 = math.floor(x)
        if kind == "linear":
            taps = [(x0, 1 - (x - x0)), (x0 + 1, x - x0)]
        elif kind == "cubic":
            taps = [(x0 + k, _keys(x - (x0 + k))) for k in (-1, 0, 1, 2)]
        else:  # nearest, round_prefer_floor
            taps = [(x0 + 1 if x - x0 > 0.5 else x0, 1.0)]
        out.append(sum(w * row[min(max(i, 0), n - 1)] for i, w in taps))
    return out


def _reference(x, sizes, mode, kind):
    res = x.astype(np.float64)
    for axis, w_out in enumerate(sizes):
        if w_out == res.shape[axis]:
            continue
        scale = w_out / res.shape[axis]
        moved = np.moveaxis(res, axis, -1)
        flat = moved.reshape(-1, moved.shape[-1])
        new = np.array([_resize_1d(r, w_out, scale, mode, kind) for r in flat]).reshape(moved.shape[:-1] + (w_out,))
        res = np.moveaxis(new, -1, axis)
    return res.astype(x.dtype)


@pytest.mark.parametrize("kind", ["linear", "cubic", "nearest"])
@pytest.mark.parametrize("mode", ["half_pixel", "align_corners", "asymmetric"])
@given(data=st.data())
@settings(max_examples=6, deadline=None)
def test_resize_sizes(kind, mode, data):
    shape = [data.draw(st.integers(1, 2)), data.draw(st.integers(1, 5)), data.draw(st.integers(1, 5))]
    sizes = [shape[0]] + [data.draw(st.integers(1, 7)) for _ in range(2)]
    x = data.draw(arrays(shape, np.float32))
    op = CreateOperator("ONNXResize", ["x"], ["y"], mode=kind, coordinate_transformation_mode=mode, sizes=sizes)
    assert_reference_checks(op, [x], lambda x: _reference(x, sizes, mode, kind), threshold=1e-4)


def test_resize_scales_nearest_integer_is_repeat_and_integers_round():
    x = np.arange(6, dtype=np.uint8).reshape(1, 2, 3)
    op = CreateOperator(
        "ONNXResize", ["x"], ["y"], scales=[1.0, 2.0, 3.0], coordinate_transformation_mode="asymmetric",
        nearest_mode="floor",
    )  # fmt: skip
    assert_reference_checks(op, [x], lambda x: x.repeat(2, axis=1).repeat(3, axis=2))
    lin = CreateOperator("ONNXResize", ["x"], ["y"], mode="linear", sizes=[1, 2, 2], axes=[0, 1, 2])
    # half_pixel 3 -> 2 along the last dim: sources 0.25 and 1.75, rounded back to uint8
    assert_reference_checks(lin, [x], lambda x: np.array([[[0, 2], [3, 5]]], np.uint8))


def test_resize_tf_crop_and_resize_extrapolates():
    x = np.arange(4, dtype=np.float32).reshape(1, 4)
    op = CreateOperator(
        "ONNXResize", ["x"], ["y"], mode="linear", coordinate_transformation_mode="tf_crop_and_resize",
        sizes=[3], axes=[1], roi=[0.5, 1.5], extrapolation_value=-7.0,
    )  # fmt: skip
    # x_src = 0.5 * 3 + y * (1.0 * 3) / 2 = 1.5, 3.0, 4.5 (outside)
    assert_reference_checks(op, [x], lambda x: np.array([[1.5, 3.0, -7.0]], np.float32))


def test_resize_errors():
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(FrameworkError, match="ONNXResize.*'x'"):
        run_op_on(CreateOperator("ONNXResize", ["x"], ["y"], sizes=[2]), [x])
    with pytest.raises(FrameworkError, match="ONNXResize"):
        run_op_on(CreateOperator("ONNXResize", ["x"], ["y"], scales=[1.0, -2.0]), [x])
    with pytest.raises(FrameworkError, match="ONNXResize"):
        run_op_on(CreateOperator("ONNXResize", ["x"], ["y"], mode="area", sizes=[2, 2]), [x])
