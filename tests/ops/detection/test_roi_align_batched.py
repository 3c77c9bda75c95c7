"""RoIAlign's interpolation weights built for all RoIs at once equal the per-RoI construction bit for bit
(same float operations, each bin summed in the same order), over hypothesis geometries: sub-pixel and
out-of-image starts, bins smaller and larger than a pixel, adaptive grids of different sizes, empty grids."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.ops.detection.roi_align import _interp_1d, _interp_rois

roi = st.tuples(st.floats(-8.0, 40.0), st.floats(0.0, 30.0), st.integers(0, 5))


@settings(max_examples=40, deadline=None)
@given(rois=st.lists(roi, min_size=0, max_size=12), pooled=st.integers(1, 7), size=st.integers(0, 33))
def test_batched_weights_equal_per_roi_weights(rois, pooled, size):
    start = np.array([float(np.float32(r[0])) for r in rois], np.float64)
    extent = np.array([float(np.float32(r[1])) for r in rois], np.float64)
    grid = np.array([r[2] for r in rois], np.int64)
    got = _interp_rois(start, extent / pooled, pooled, grid, size)
    assert got.shape == (len(rois), pooled, size)
    for k in range(len(rois)):
        want = _interp_1d(start[k], extent[k] / pooled, pooled, int(grid[k]), size) / max(int(grid[k]), 1)
        assert np.array_equal(got[k], want), k
