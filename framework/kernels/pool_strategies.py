"""The strategies of 2-D NCHW max/average pooling (forward): one object per way of computing it, tried
in ``STRATEGIES``' order; the first whose ``fits`` is true runs it (``choose``). None fitting leaves the
op's own numpy path (the per-cell fold over window views).

Each strategy has ``name``, ``families`` (compiled kernel families, ``kernel_support.NEEDS``' keys),
``fits(geo, dtype, mode)`` (``mode`` "max" or "avg") and ``prepare(geo, n, c, dtype, mode, pad_value,
inv)``, the prepared runner: ``run(x, y)`` writes every window's max, or its sum (scaled by ``inv``, the
(OH, OW) inverse window counts, where the runner's ``scaled`` is true), into ``y``; ``threads`` is the
thread count it was split for. ``enabled`` turns one off for the process (tests compare without it).
"""

from __future__ import annotations

import math

import numpy as np

from framework.kernels import window_jit
from framework.kernels.kernel_support import usable
from framework.kernels.pool_nchw import JitPool2D, SeparablePool2D


class PoolStrategy:
    """One way of computing 2-D NCHW max/average pooling (see the module doc)."""

    name = ""
    families: tuple = ()
    enabled = True

    def fits(self, geo, dtype, mode: str) -> bool:
        raise NotImplementedError

    def prepare(self, geo, n: int, c: int, dtype, mode: str, pad_value, inv=None):
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<pool strategy {self.name}>"


class Pool2x2(PoolStrategy):
    """Unpadded 2x2 windows in one compiled pass (window_jit.pool2x2: every window's four cells read in
    place, summed in the per-cell fold's order, so the values are the numpy path's bit for bit)."""

    name, families = "pool2x2", ("pool2x2",)

    def fits(self, geo, dtype, mode) -> bool:
        return window_jit.pool2x2_fits(geo, dtype)

    def prepare(self, geo, n, c, dtype, mode, pad_value, inv=None):
        return JitPool2D(geo, n, c, mode, pad_value, kernel="pool2x2")


def _compiled_3x3(geo, dtype) -> bool:
    return window_jit.fits(geo, dtype) and tuple(geo.kernel) == (3, 3)


class MaxRows(PoolStrategy):
    """3x3 max pooling reading each image in place (window_jit.max_pool: per output row the max over the
    window's rows, then over its columns; the stride-2 column step in LLVM IR, pool_columns.py)."""

    name, families = "max_pool", ("max_pool",)

    def fits(self, geo, dtype, mode) -> bool:
        return mode == "max" and _compiled_3x3(geo, dtype) and usable("max_pool")

    def prepare(self, geo, n, c, dtype, mode, pad_value, inv=None):
        return JitPool2D(geo, n, c, mode, pad_value, inv, kernel="max_pool")


class PhasePlanes(PoolStrategy):
    """3x3 max or average pooling over each channel's phase planes (window_jit.pool: the nine taps in one
    pass on a wide output row, the average scaled by the inverse counts in the same pass)."""

    name, families = "pool_planes", ("pool",)

    def fits(self, geo, dtype, mode) -> bool:
        return _compiled_3x3(geo, dtype) and usable("pool")

    def prepare(self, geo, n, c, dtype, mode, pad_value, inv=None):
        return JitPool2D(geo, n, c, mode, pad_value, inv, kernel="pool")


class Separable(PoolStrategy):
    """Windows of more than 4 cells in numpy, one image at a time (pool_nchw.SeparablePool2D: the max or
    sum over each window's rows, then over its columns); 2x2 windows keep the op's per-cell fold."""

    name = "separable"

    def fits(self, geo, dtype, mode) -> bool:
        return math.prod(geo.kernel) > 4

    def prepare(self, geo, n, c, dtype, mode, pad_value, inv=None):
        ufunc = np.maximum if mode == "max" else np.add
        return SeparablePool2D(geo, n, c, dtype, ufunc, pad_value)


POOL2X2 = Pool2x2()
MAX_POOL = MaxRows()
POOL_PLANES = PhasePlanes()
SEPARABLE = Separable()
STRATEGIES: tuple[PoolStrategy, ...] = (POOL2X2, MAX_POOL, POOL_PLANES, SEPARABLE)
BY_NAME = {s.name: s for s in STRATEGIES}


def choose(geo, dtype, mode: str) -> PoolStrategy | None:
    """The first enabled strategy that fits 2-D NCHW ``mode`` pooling of this geometry, or None."""
    for strategy in STRATEGIES:
        if strategy.enabled and strategy.fits(geo, dtype, mode):
            return strategy
    return None
