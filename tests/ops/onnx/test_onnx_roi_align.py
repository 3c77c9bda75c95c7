"""ONNXRoiAlign against a scalar per-sample loop written from ONNX's reference (both modes, both
coordinate transformation modes)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.ops.testing import assert_reference_checks, run_op_on


def reference(x, rois, bidx, mode, half, ph, pw, ratio, scale):
    n, c, h, w = x.shape
    out = np.zeros((len(rois), c, ph, pw))
    off = 0.5 if half else 0.0
    for r, roi in enumerate(rois):
        x1, y1, x2, y2 = (v * scale - off for v in roi)
        rw, rh = x2 - x1, y2 - y1
        if not half:
            rw, rh = max(rw, 1.0), max(rh, 1.0)
        gh = ratio or int(np.ceil(rh / ph))
        gw = ratio or int(np.ceil(rw / pw))
        img = x[bidx[r]]
        for i in range(ph):
            for j in range(pw):
                vals = []
                for iy in range(gh):
                    yy = y1 + i * rh / ph + (iy + 0.5) * rh / ph / gh
                    for ix in range(gw):
                        xx = x1 + j * rw / pw + (ix + 0.5) * rw / pw / gw
                        if yy < -1 or yy > h or xx < -1 or xx > w:
                            vals.append(np.zeros(c) if mode == "avg" else np.zeros(c))
                            continue
                        y, xv = max(yy, 0.0), max(xx, 0.0)
                        y0, x0 = int(y), int(xv)
                        if y0 >= h - 1:
                            y0 = y1i = h - 1
                            y = y0
                        else:
                            y1i = y0 + 1
                        if x0 >= w - 1:
                            x0 = x1i = w - 1
                            xv = x0
                        else:
                            x1i = x0 + 1
                        ly, lx = y - y0, xv - x0
                        terms = [(1 - ly) * (1 - lx) * img[:, y0, x0], (1 - ly) * lx * img[:, y0, x1i],
                                 ly * (1 - lx) * img[:, y1i, x0], ly * lx * img[:, y1i, x1i]]  # fmt: skip
                        vals.append(sum(terms) if mode == "avg" else np.max(terms, axis=0))
                if vals:
                    out[r, :, i, j] = np.mean(vals, axis=0) if mode == "avg" else np.max(vals, axis=0)
    return out


@pytest.mark.parametrize("mode", ["max", "avg"])
@given(data=st.data())
@settings(max_examples=15, deadline=None)
def test_matches_reference(mode, data):
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31 - 1)))
    n, c, h, w = 2, data.draw(st.integers(1, 3)), data.draw(st.integers(1, 6)), data.draw(st.integers(1, 6))
    x = rng.standard_normal((n, c, h, w))
    r = data.draw(st.integers(0, 3))
    corners = rng.uniform(-2, 8, (r, 2, 2))
    rois = np.concatenate([corners.min(axis=1), corners.max(axis=1)], axis=1)  # x1, y1, x2, y2
    bidx = rng.integers(0, n, r)
    half = data.draw(st.booleans())
    ph, pw, ratio = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3)), data.draw(st.integers(0, 2))
    scale = data.draw(st.sampled_from([1.0, 0.5]))
    op = CreateOperator("ONNXRoiAlign", ["X", "R", "B"], ["Y"], mode=mode, output_height=ph, output_width=pw,
                        sampling_ratio=ratio, spatial_scale=scale,
                        coordinate_transformation_mode="half_pixel" if half else "output_half_pixel")  # fmt: skip
    assert_reference_checks(
        op, [x, rois, bidx], lambda *_: reference(x, rois, bidx, mode, half, ph, pw, ratio, scale), threshold=1e-9
    )


def test_bad_batch_index():
    with pytest.raises(FrameworkError, match="ONNXRoiAlign.*'B'"):
        run_op_on(CreateOperator("ONNXRoiAlign", ["X", "R", "B"], ["Y"]),
                  [np.zeros((1, 1, 2, 2)), np.zeros((1, 4)), np.array([3])])  # fmt: skip
