"""The resolved sizes of one conv/pool application (``Geometry``) and the strided window view over a
padded input: what every conv/pool kernel and its numpy path is planned from. The ops resolve a
Geometry from their arguments (framework/ops/nn/conv_args.py); the kernels only read it."""

from __future__ import annotations

from typing import NamedTuple, Sequence

import numpy as np


class Geometry(NamedTuple):
    """Resolved sizes of one conv/pool application over spatial sizes ``spatial``."""

    spatial: tuple
    kernel: tuple
    stride: tuple
    dilation: tuple
    head: tuple
    tail: tuple
    out: tuple

    @property
    def padded(self) -> bool:
        return any(self.head) or any(self.tail)

    @property
    def buf_spatial(self) -> tuple:
        """Spatial sizes of the zero-padded buffer (negative pads crop instead)."""
        return tuple(s + max(h, 0) + max(t, 0) for s, h, t in zip(self.spatial, self.head, self.tail))

    @property
    def start(self) -> tuple:
        """Where the first window starts in the padded buffer."""
        return tuple(max(-h, 0) for h in self.head)

    @property
    def interior(self) -> tuple:
        """Slices of the padded buffer's spatial dims holding the input."""
        return tuple(slice(max(h, 0), max(h, 0) + s) for h, s in zip(self.head, self.spatial))


def window_view(xp: np.ndarray, geo: Geometry, order: str, out: Sequence[int] | None = None) -> np.ndarray:
    """Strided sliding-window view of the padded input ``xp`` (no copy).

    NCHW: shape (N, C, *kernel, *out); NHWC: shape (N, *out, *kernel, C).
    """
    out = geo.out if out is None else tuple(out)
    r = len(geo.kernel)
    if not xp.flags.c_contiguous:
        xp = np.ascontiguousarray(xp)
    st = xp.strides
    sp_axes = range(2, 2 + r) if order == "NCHW" else range(1, 1 + r)
    sp_st = [st[a] for a in sp_axes]
    offset = sum(b * s for b, s in zip(geo.start, sp_st))
    # a dim of size 1 never steps: its stride is 0, so a huge stride or dilation there cannot overflow the view
    k_st = tuple(s * d if k > 1 else 0 for s, d, k in zip(sp_st, geo.dilation, geo.kernel))
    o_st = tuple(s * t if o > 1 else 0 for s, t, o in zip(sp_st, geo.stride, out))
    if order == "NCHW":
        shape = (xp.shape[0], xp.shape[1], *geo.kernel, *out)
        strides = (st[0], st[1], *k_st, *o_st)
    else:
        shape = (xp.shape[0], *out, *geo.kernel, xp.shape[-1])
        strides = (st[0], *o_st, *k_st, st[-1])
    if xp.size == 0 or any(v == 0 for v in shape):
        return np.zeros(shape, xp.dtype)
    return np.ndarray(shape, xp.dtype, buffer=xp, offset=offset, strides=strides)
