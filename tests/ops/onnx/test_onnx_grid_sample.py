"""ONNXGridSample and ONNXAffineGrid against per-pixel references (2-D)."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.ops.testing import arrays, assert_reference_checks, run_op_on


def _pixel(img, i, j, padding):
    h, w = img.shape
    if padding == "border":
        i, j = min(max(i, 0), h - 1), min(max(j, 0), w - 1)
    elif not (0 <= i < h and 0 <= j < w):
        return 0.0
    return float(img[i, j])


def _sample(img, gx, gy, mode, padding, align):
    h, w = img.shape

    def unnorm(v, d):  # float32 arithmetic, as the ONNX reference (ties of nearest depend on it)
        v = np.float32(v)
        return float((v + 1) / 2.0 * (d - 1) if align else ((v + 1) * d - 1) / 2.0)

    x, y = unnorm(gx, w), unnorm(gy, h)
    if padding == "border":
        x, y = min(max(x, 0), w - 1), min(max(y, 0), h - 1)
    if mode == "nearest":
        return _pixel(img, int(round(y)), int(round(x)), padding)  # round half to even, as np.rint
    x0, y0 = math.floor(x), math.floor(y)
    tx, ty = x - x0, y - y0
    return sum(
        wy * wx * _pixel(img, y0 + dy, x0 + dx, padding)
        for dy, wy in ((0, 1 - ty), (1, ty))
        for dx, wx in ((0, 1 - tx), (1, tx))
    )


@pytest.mark.parametrize("mode", ["linear", "nearest"])
@pytest.mark.parametrize("padding", ["zeros", "border"])
@given(data=st.data())
@settings(max_examples=8, deadline=None)
def test_grid_sample(mode, padding, data):
    n, c, h, w = 1, data.draw(st.integers(1, 2)), data.draw(st.integers(1, 4)), data.draw(st.integers(1, 4))
    oh, ow = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))
    align = data.draw(st.integers(0, 1))
    x = data.draw(arrays([n, c, h, w], np.float64))
    grid = data.draw(arrays([n, oh, ow, 2], np.float64, st.floats(-1.3, 1.3)))
    grid = grid.astype(np.float32).astype(np.float64)  # the op maps coordinates in float32

    def ref(x, grid):
        out = np.zeros((n, c, oh, ow))
        for b, ch, i, j in np.ndindex(*out.shape):
            out[b, ch, i, j] = _sample(x[b, ch], grid[b, i, j, 0], grid[b, i, j, 1], mode, padding, align)
        return out

    op = CreateOperator("ONNXGridSample", ["x", "g"], ["y"], mode=mode, padding_mode=padding, align_corners=align)
    assert_reference_checks(op, [x, grid], ref, threshold=1e-5)


@pytest.mark.parametrize("align", [0, 1])
def test_affine_grid(align):
    theta = np.array([[[1.0, 0.5, 0.1], [-0.2, 2.0, 0.3]]], np.float32)
    size = np.array([1, 3, 2, 4], np.int64)

    def ref(theta, size):
        h, w = 2, 4
        out = np.zeros((1, h, w, 2), np.float32)
        for i, j in np.ndindex(h, w):
            xn = -1 + 2 * j / (w - 1) if align else (2 * j + 1) / w - 1
            yn = -1 + 2 * i / (h - 1) if align else (2 * i + 1) / h - 1
            out[0, i, j] = theta[0] @ np.array([xn, yn, 1.0])
        return out

    op = CreateOperator("ONNXAffineGrid", ["t", "s"], ["g"], align_corners=align)
    outs = assert_reference_checks(op, [theta, size], ref, check_inference=False)
    assert outs[0].dtype == np.float32


def test_grid_sample_errors():
    x = np.zeros((1, 1, 2, 2), np.float32)
    with pytest.raises(FrameworkError, match="ONNXGridSample.*'g'"):
        run_op_on(CreateOperator("ONNXGridSample", ["x", "g"], ["y"]), [x, np.zeros((1, 2, 2, 3), np.float32)])
    with pytest.raises(FrameworkError, match="ONNXAffineGrid.*'t'"):
        run_op_on(CreateOperator("ONNXAffineGrid", ["t", "s"], ["g"]),
                  [np.zeros((1, 3, 3), np.float32), np.array([1, 1, 2, 2], np.int64)])  # fmt: skip
