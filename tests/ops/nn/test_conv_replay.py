"""ConvNCHW's replay of a run that was one compiled kernel call (conv_nchw._Replay): later runs with
new input arrays, a filter or bias changed in place (the filter's version bumped), another residual
array or role give what a fresh conv gives; operands that would be copied are never replayed."""

from __future__ import annotations

import numpy as np
import pytest

from framework.kernels import conv_nchw
from framework.kernels.geometry import Geometry
from framework.runtime.parallel import set_num_threads

pytest.importorskip("numba")


class _Filter:
    """Stands for the filter's Tensor: the kernels that pack the filter stamp it (identity, storage, version)."""

    version = 0
    _storage = None


def _geo(size, k, s, pad):
    out = (size + 2 * pad - k) // s + 1
    return Geometry((size, size), (k, k), (s, s), (1, 1), (pad, pad), (pad, pad), (out, out))


# (n, c, m, size, window, stride, pad, group, expected kind)
CASES = [
    (2, 8, 20, 20, 3, 1, 1, 1, "direct"),
    (1, 8, 20, 8, 3, 1, 1, 1, "channel"),  # 20 rows: the bias is copied into whole panels
    (1, 8, 32, 8, 3, 1, 1, 1, "channel"),  # 32 rows: the bias array itself
    (1, 16, 24, 17, 1, 1, 0, 1, "pointwise"),  # the 1x1 micro-kernel
    (2, 6, 6, 10, 3, 2, 1, 6, "depthwise"),
]


def _fresh(n, c, m, geo, group, x, w, b, s, relu):
    conv = conv_nchw.ConvNCHW(n, c, m, group, geo, np.float32, b is not None, relu=relu, residual=s is not None)
    y = np.zeros(conv.oshape, np.float32)
    conv.run(x, w, b, y, None if s is None else s.copy(), wt=None)
    return y


@pytest.mark.parametrize("case", CASES)
@pytest.mark.parametrize("mode", ["none", "separate", "in_place"])
def test_replayed_runs_follow_new_operands(case, mode):
    n, c, m, size, k, stride, pad, group, kind = case
    set_num_threads(1)
    rng = np.random.default_rng(0)
    geo = _geo(size, k, stride, pad)
    conv = conv_nchw.ConvNCHW(n, c, m, group, geo, np.float32, True, relu=True, residual=mode != "none")
    assert conv.kind == kind and conv.replayable
    w = rng.standard_normal((m, c // group, k, k)).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float32)
    wt = _Filter()
    before = None
    for step in range(4):
        x = rng.standard_normal((n, c, size, size)).astype(np.float32)  # a new array every run
        s = rng.standard_normal(conv.oshape).astype(np.float32) if mode != "none" else None
        if step == 2:  # filter and bias changed in place
            w *= -1.5
            b += 3
            wt.version += 1
        want = _fresh(n, c, m, geo, group, x, w, b, s, True)
        if mode == "in_place":
            y = s.copy()
            conv.run(x, w, b, y, y, wt=wt)
        else:
            y = np.full(conv.oshape, np.nan, np.float32)
            conv.run(x, w, b, y, s, wt=wt)
        np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-5)
        assert conv._replay is not None
        # replayed (the same record) but where the filter's version changed (recorded anew)
        assert (conv._replay is before) == (step in (1, 3)) or (kind == "depthwise" and step == 2)
        before = conv._replay
        assert all(a is None for i, a in enumerate(conv._replay.args) if i in conv._replay.px + conv._replay.py)


def test_not_replayed_with_copied_operands_or_two_workers():
    set_num_threads(1)
    rng = np.random.default_rng(1)
    n, c, m, size = 1, 8, 16, 12
    geo = _geo(size, 3, 1, 1)
    conv = conv_nchw.ConvNCHW(n, c, m, 1, geo, np.float32, True)
    w = rng.standard_normal((m, c, 3, 3)).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float32)
    x = rng.standard_normal((n, c, size, 2 * size)).astype(np.float32)[:, :, :, ::2]  # not contiguous
    y = np.empty(conv.oshape, np.float32)
    conv.run(x, w, b, y, wt=_Filter())
    assert conv._replay is None  # the kernel got a contiguous copy of x: nothing to put the next x into
    np.testing.assert_allclose(y, _fresh(n, c, m, geo, 1, np.ascontiguousarray(x), w, b, None, False), rtol=1e-5)
    x2 = np.ascontiguousarray(x) * 2
    filt = _Filter()
    conv.run(x2, w, b, y, wt=filt)
    conv.run(x, w, b, y, wt=filt)  # recorded with x2; x not contiguous: the full path again
    np.testing.assert_allclose(y, _fresh(n, c, m, geo, 1, np.ascontiguousarray(x), w, b, None, False), rtol=1e-5)
    try:
        set_num_threads(2)
        big = conv_nchw.ConvNCHW(4, 64, 64, 1, _geo(32, 3, 1, 1), np.float32, True)
        assert len(big.parts) == 2 and not big.replayable
    finally:
        set_num_threads(1)
