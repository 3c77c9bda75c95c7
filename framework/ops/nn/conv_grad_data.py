"""The input gradient of a stride-1 2-D NCHW convolution as a forward convolution on the compiled kernels.

For stride 1 and dilation 1, ``dX = conv(dY, W')`` where ``W'`` swaps the filter's input and output
channels (within each group) and flips it spatially, with pads ``kernel - 1 - pad`` on each side: each
input pixel gathers the output gradients of the windows that covered it. That forward convolution runs
on ``framework.kernels.conv_nchw`` (Winograd, direct and pointwise strategies, split over the intra-op
threads) instead of a column GEMM followed by a col2im scatter of ``kernel`` strided adds over the
batch. ``W'`` is rewritten only when the filter tensor's version changes; it lives in a Tensor of its
own so the kernel re-transforms it exactly then.

Where the rule does not hold (strides, dilation, pads beyond ``kernel - 1``, a negative pad) ``plan``
returns None and ConvGradient keeps its column path.
"""

from __future__ import annotations

import numpy as np

from framework.kernels.conv_nchw import ConvNCHW
from framework.kernels.geometry import Geometry
from framework.memory.binding import matches, stamp
from framework.memory.tensor import Tensor


def transposed_geometry(geo: Geometry) -> Geometry | None:
    """The geometry of the forward conv computing dX from dY, or None where the rule does not apply."""
    if len(geo.kernel) != 2 or any(s != 1 for s in geo.stride) or any(d != 1 for d in geo.dilation):
        return None
    pads = (*geo.head, *geo.tail)
    k2 = (*geo.kernel, *geo.kernel)
    if any(p < 0 or p > k - 1 for p, k in zip(pads, k2)):
        return None
    head = tuple(k - 1 - p for k, p in zip(geo.kernel, geo.head))
    tail = tuple(k - 1 - p for k, p in zip(geo.kernel, geo.tail))
    return Geometry(geo.out, geo.kernel, (1, 1), (1, 1), head, tail, geo.spatial)


def flip_filter(w: np.ndarray, group: int, out: np.ndarray) -> None:
    """``out[j*cg + c, m, a, b] = w[j*mg + m, c, kh-1-a, kw-1-b]`` for group j: (C, M/group, kh, kw)."""
    m, cg, kh, kw = w.shape
    mg = m // group
    src = w.reshape(group, mg, cg, kh, kw).transpose(0, 2, 1, 3, 4)[:, :, :, ::-1, ::-1]
    np.copyto(out.reshape(group, cg, mg, kh, kw), src)


class DataGradient:
    """dX of one ConvGradient signature (n, c, m, group, geometry) by the transposed forward conv."""

    def __init__(self, n: int, c: int, m: int, group: int, geo_t: Geometry, dtype) -> None:
        self.group = group
        self.kernel = ConvNCHW(n, m, c, group, geo_t, dtype, False)
        self.threads = self.kernel.threads
        self._wt = Tensor((c, m // group, *geo_t.kernel), dtype)
        self._seen = None  # stamp of the filter tensor W' was made from

    def run(self, dy: np.ndarray, w: np.ndarray, w_tensor, dx: np.ndarray) -> None:
        """dX = conv(dY, W') written into ``dx``; ``w_tensor``: the filter's Tensor (its version)."""
        if self._seen is None or not matches(self._seen, w_tensor):
            flip_filter(w, self.group, self._wt.mutable_data())  # bumps W''s version: the kernel re-packs it
            self._seen = stamp(w_tensor) if w_tensor is not None else None
        self.kernel.run(dy, self._wt.data(), None, dx, wt=self._wt)


def plan(n: int, c: int, m: int, group: int, geo: Geometry, dtype) -> DataGradient | None:
    """A DataGradient for a conv of this signature, or None where the rule does not apply."""
    geo_t = transposed_geometry(geo)
    if geo_t is None or np.dtype(dtype) != np.float32:
        return None
    return DataGradient(n, c, m, group, geo_t, dtype)
