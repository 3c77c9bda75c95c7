"""The input gradient of a 2-D NCHW convolution as forward convolutions on the compiled kernels.

For stride 1 and dilation 1, ``dX = conv(dY, W')`` where ``W'`` swaps the filter's input and output
channels (within each group) and flips it spatially, with pads ``kernel - 1 - pad`` on each side: each
input pixel gathers the output gradients of the windows that covered it. That forward convolution runs
on ``framework.kernels.conv_nchw`` (Winograd, direct and pointwise strategies, split over the intra-op
threads) instead of a column GEMM followed by a col2im scatter of ``kernel`` strided adds over the
batch. ``W'`` is rewritten only when the filter tensor's version changes; it lives in a Tensor of its
own so the kernel re-transforms it exactly then.

With strides (group 1) dX splits into stride_h x stride_w phases of rows and columns, each a stride-1
conv of dY with the taps that reach it (``StridedDataGradient``). Where neither rule holds (dilation,
groups with strides, float64, a phase that would need a negative pad) ``plan`` returns None and
ConvGradient keeps its column path.
"""

from __future__ import annotations

import math

import numpy as np

from framework.kernels import bn_train
from framework.kernels.conv_nchw import ConvNCHW
from framework.kernels.geometry import Geometry
from framework.memory.binding import matches, stamp
from framework.memory.tensor import Tensor
from framework.runtime.parallel import get_num_threads


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


def phase_geometries(geo: Geometry) -> list | None:
    """For a strided conv (group 1, dilation 1): per phase (r, t) of dX's rows and columns (``y + pad_t``
    = r mod stride_h, ``x + pad_l`` = t mod stride_w), ``(r, t, first dX row, first dX column, geometry of the
    stride-1 conv of dY computing that phase, or None where no tap reaches it: zeros)``; phases holding no
    dX cell are left out. None where a phase's conv would need a negative pad (crop)."""
    if len(geo.kernel) != 2 or any(d != 1 for d in geo.dilation):
        return None
    (sh, sw), (kh, kw), (h, w), (ph, pw), (oh, ow) = geo.stride, geo.kernel, geo.spatial, geo.head, geo.out
    out = []
    for r in range(sh):
        for t in range(sw):
            y0i, x0i = -((r - ph) // sh), -((t - pw) // sw)  # first dY-grid index of the phase
            hr, wr = (h - 1 + ph - r) // sh - y0i + 1, (w - 1 + pw - t) // sw - x0i + 1
            if hr <= 0 or wr <= 0:
                continue
            ka, kb = len(range(r, kh, sh)), len(range(t, kw, sw))
            y0, x0 = sh * y0i + r - ph, sw * x0i + t - pw
            if ka == 0 or kb == 0:
                out.append((r, t, y0, x0, (hr, wr)))
                continue
            head = (ka - 1 - y0i, kb - 1 - x0i)
            tail = (hr - 1 + ka - oh - head[0], wr - 1 + kb - ow - head[1])
            if min(*head, *tail) < 0:
                return None
            out.append((r, t, y0, x0, Geometry((oh, ow), (ka, kb), (1, 1), (1, 1), head, tail, (hr, wr))))
    return out


class StridedDataGradient:
    """dX of a strided conv (group 1) as one stride-1 forward conv of dY per phase of dX: the rows y with
    ``y + pad_t = r (mod stride_h)`` (and the columns likewise) gather only the taps a = r, r + stride_h, ...,
    so each phase is a conv of dY with that sub-filter (flipped, input and output channels swapped) on the
    compiled kernels, then written into dX's strided cells (one native job over the threads, bn_train's
    ``scatter_phases_job``); phases no tap reaches are zero. Instead of a column GEMM and a col2im scatter of
    K*K strided adds."""

    def __init__(self, n: int, c: int, m: int, geo: Geometry, phases: list, dtype) -> None:
        self.stride = geo.stride
        self.phases = []
        for r, t, y0, x0, pg in phases:
            if not isinstance(pg, Geometry):  # (rows, columns) of a phase no tap reaches
                self.phases.append((None, None, None, y0, x0, pg, (r, t)))
                continue
            kernel = ConvNCHW(n, m, c, 1, pg, dtype, False)
            wt = Tensor((c, m, *pg.kernel), dtype)
            self.phases.append((kernel, wt, np.empty((n, c, *pg.out), dtype), y0, x0, pg.out, (r, t)))
        self.threads = get_num_threads()  # what the phases' kernels were planned for
        self.zeros = any(p[0] is None for p in self.phases)
        self._seen = None
        self._scatter: tuple | None = None  # (dX, the job writing it from the phases) once made

    def run(self, dy: np.ndarray, w: np.ndarray, w_tensor, dx: np.ndarray) -> None:
        """dX of ``dy`` through filter ``w`` into ``dx``; ``w_tensor``: the filter's Tensor (its version)."""
        sh, sw = self.stride
        fresh = self._seen is None or not matches(self._seen, w_tensor)
        for kernel, wt, out, _, _, _, (r, t) in self.phases:
            if kernel is None:
                continue
            if fresh:  # wt[c, m, a', b'] = w[m, c, sh (ka - 1 - a') + r, sw (kb - 1 - b') + t]
                np.copyto(wt.mutable_data(), w[:, :, r::sh, t::sw][:, :, ::-1, ::-1].transpose(1, 0, 2, 3))
            kernel.run(dy, wt.data(), None, out, wt=wt)
        if fresh:
            self._seen = stamp(w_tensor) if w_tensor is not None else None
        if self._scatter is None or self._scatter[0] is not dx:
            phases = [(y0, x0, out if kernel is not None else size) for kernel, _, out, y0, x0, size, _ in self.phases]
            self._scatter = (dx, bn_train.scatter_phases_job(dx, self.stride, phases))
        if self._scatter[1] is not None:  # every cell of dX once, split by (image, channel) planes
            self._scatter[1]()
            return
        if self.zeros:  # one contiguous pass rather than a strided one per phase no tap reaches
            dx.fill(0)
        for kernel, _, out, y0, x0, (hr, wr), _ in self.phases:
            if kernel is not None:
                np.copyto(dx[:, :, y0 : y0 + sh * (hr - 1) + 1 : sh, x0 : x0 + sw * (wr - 1) + 1 : sw], out)


def plan(n: int, c: int, m: int, group: int, geo: Geometry, dtype) -> DataGradient | StridedDataGradient | None:
    """A DataGradient (stride 1) or StridedDataGradient (strides, group 1) for a conv of this signature, or
    None where neither rule applies."""
    if np.dtype(dtype) != np.float32:
        return None
    geo_t = transposed_geometry(geo)
    if geo_t is not None:
        return DataGradient(n, c, m, group, geo_t, dtype)
    if group != 1 or len(geo.kernel) != 2 or all(s == 1 for s in geo.stride):
        return None
    # the phases' convs write c channels: below a block of the direct kernel's rows most of it idles, and
    # the column path is as fast or faster (below 16 channels already, for kernels over 5 x 5)
    if c < (8 if math.prod(geo.kernel) <= 25 else 16):
        return None
    phases = phase_geometries(geo)
    if phases is None:
        return None
    return StridedDataGradient(n, c, m, geo, phases, dtype)
