"""Separable 2-D NCHW max/sum pooling, one image at a time, split over the intra-op threads.

A kh x kw window reduction is done in two steps: over the kh rows of each output row (R, shape
(C, OH, W')), then over the kw columns of R. That is kh - 1 + kw - 1 ufunc calls on row-contiguous
data instead of kh * kw - 1 calls on doubly strided views, and one image at a time stays in cache.
Padding: a per-worker copy of one image in a buffer whose border holds the pad value (set once).
Used for windows of more than 4 cells (3x3 and up: 2.7-4x faster than the per-cell fold on
ResNet/SqueezeNet/ShuffleNet's 3x3 stride-2 pools); 2x2 windows keep the fold (15% faster there).
"""

from __future__ import annotations

import numpy as np

from framework.kernels.kernel_support import KernelUnavailable
from framework.memory.allocator import allocate_array
from framework.runtime.parallel import num_threads, run_parallel, split


class SeparablePool2D:
    """Prepared for one input signature: ``run(x, y)`` writes the reduction of every window into y."""

    def __init__(self, geo, n: int, c: int, dtype, ufunc, pad_value) -> None:
        self.geo, self.ufunc = geo, ufunc
        (kh, kw), (sh, sw), (dh, dw) = geo.kernel, geo.stride, geo.dilation
        (oh, ow), (r0, c0) = geo.out, geo.start
        self.threads = num_threads()
        self.parts = split(n, self.threads)
        self.padded = geo.padded
        src_w = geo.buf_spatial[1] if self.padded else geo.spatial[1]
        self.rows = [(slice(None), slice(r0 + a * dh, r0 + a * dh + sh * (oh - 1) + 1, sh)) for a in range(kh)]
        self.cols = [
            (slice(None), slice(None), slice(c0 + b * dw, c0 + b * dw + sw * (ow - 1) + 1, sw)) for b in range(kw)
        ]
        self.pads, self.inners, self.rbufs = [], [], []
        for _ in self.parts:
            if self.padded:
                buf = allocate_array((c, *geo.buf_spatial), dtype)
                buf.fill(pad_value)
                self.pads.append(buf)
                self.inners.append(buf[(slice(None), *geo.interior)])
            self.rbufs.append(allocate_array((c, oh, src_w), dtype))

    def run(self, x: np.ndarray, y: np.ndarray) -> None:
        run_parallel([_Task(self, k, lo, hi, x, y) for k, (lo, hi) in enumerate(self.parts)], steal=True)

    def _images(self, k: int, lo: int, hi: int, x: np.ndarray, y: np.ndarray) -> None:
        f, rows, cols, r = self.ufunc, self.rows, self.cols, self.rbufs[k]
        for i in range(lo, hi):
            if self.padded:
                np.copyto(self.inners[k], x[i])
                src = self.pads[k]
            else:
                src = x[i]
            if len(rows) == 1:
                np.copyto(r, src[rows[0]])
            else:
                f(src[rows[0]], src[rows[1]], out=r)
                for s in rows[2:]:
                    f(r, src[s], out=r)
            yi = y[i]
            if len(cols) == 1:
                np.copyto(yi, r[cols[0]])
            else:
                f(r[cols[0]], r[cols[1]], out=yi)
                for s in cols[2:]:
                    f(yi, r[s], out=yi)


class _Task:
    __slots__ = ("args", "pool")

    def __init__(self, pool: SeparablePool2D, *args) -> None:
        self.pool, self.args = pool, args

    def __call__(self) -> None:
        self.pool._images(*self.args)


class JitPool2D:
    """Max/average pooling through the compiled kernel ``kernel`` of ``window_jit`` (float32, dilation 1,
    non-negative pads; the pool strategy chose it): ``pool2x2`` (unpadded 2x2 windows, their four cells
    read in place), ``max_pool`` (each image read in place: the max over a window's rows, then over its
    columns) or ``pool`` (phase planes per channel), split over images like SeparablePool2D. The average
    is scaled by ``inv`` (the (OH, OW) inverse window counts) inside the kernel: ``scaled`` tells the caller. Where the
    kernel fails to compile (kernel_support), SeparablePool2D runs instead, from then on unscaled."""

    scaled = True

    def __init__(self, geo, n: int, c: int, mode: str, pad_value, inv=None, kernel: str = "pool") -> None:
        from framework.kernels import window_jit

        self.geo, self.mode, self.pad_value, self.jit = geo, mode, pad_value, window_jit
        self.n, self.c, self._fallback = n, c, None
        self.inv = None if inv is None else np.ascontiguousarray(inv.reshape(geo.out), np.float32)
        self.threads = num_threads()
        self.parts = split(n, self.threads)
        self.two = kernel == "pool2x2"
        self.direct = kernel == "max_pool"
        if self.two:
            self.scratch = None
            return
        if self.direct:  # one row scratch per worker
            self.scratch = [allocate_array(window_jit.max_pool_row(geo), np.float32) for _ in self.parts]
            return
        phases, hq, wq, wide = window_jit.plane_shape(geo)
        self.scratch = [
            (allocate_array((phases, hq * wq), np.float32), allocate_array((wide,), np.float32)) for _ in self.parts
        ]

    def run(self, x: np.ndarray, y: np.ndarray) -> None:
        if self._fallback is not None:
            self._fallback.run(x, y)
            return
        try:
            run_parallel([_JitTask(self, k, lo, hi, x, y) for k, (lo, hi) in enumerate(self.parts)], steal=True)
        except KernelUnavailable:  # its first call failed to compile: nothing was written
            ufunc = np.maximum if self.mode == "max" else np.add
            self._fallback = SeparablePool2D(self.geo, self.n, self.c, np.float32, ufunc, self.pad_value)
            self.scaled = False  # the caller divides the sums by the counts
            self._fallback.run(x, y)

    def _images(self, k: int, lo: int, hi: int, x: np.ndarray, y: np.ndarray) -> None:
        if self.two:
            self.jit.pool2x2(x, y, self.geo.stride, self.mode == "max", 0.25, lo, hi)
            return
        if self.direct:
            self.jit.max_pool(x, y, self.scratch[k], self.geo, self.pad_value, lo, hi)
            return
        planes, wide = self.scratch[k]
        self.jit.pool(x, y, self.inv, planes, wide, self.geo, self.mode, self.pad_value, lo, hi)


class _JitTask(_Task):
    __slots__ = ()
