"""Winograd's F(2x2, 3x3) convolution (Lavin & Gray, 2015) for 3x3 stride-1 NCHW convs, float32, with
numba (the ``jit`` extra); conv_nchw.py picks it by ``fits`` (kind ``winograd``).

Each 2x2 output tile is A^T [ (G g G^T) . (B^T d B) ] A over the 4x4 input tile d around it, so a
conv becomes 16 independent GEMMs, one per position xi of the 4x4 transformed tile:

    M[xi] (M, T) = U[xi] (M, C) @ V[xi] (C, T)

with U = G g G^T the transformed filter (computed once per filter tensor version, in float64), V the
transformed input tiles (T = tiles of the images in a chunk) and M transformed back to the output by
A^T M A, where the epilogue (bias, residual, Relu) is applied as the values are written. 2.25x fewer
multiply-adds than the direct or im2col conv, and the transformed input is 4/9 of im2col's columns.
Its transforms only add and subtract (B, A have entries 0 and +-1; G has +-1/2), so the rounding
error stays at the level of a direct fp32 sum, as im2col + GEMM's (F(4x4, 3x3) has errors an order
of magnitude larger, so it is not used).

It wins on wide convs with many tiles (the wide 3x3 convs of ResNet-50 and AlexNet at batch 16). Where
the 16 GEMMs get few columns (under WINOGRAD_T tiles: 14x14 and smaller at batch 1) or few rows (under
WINOGRAD_M outputs: DenseNet-121's 128 -> 32), the direct kernel wins (conv_strategies.py).

Layout: the planes of V (16, C, T) and M (16, M, T) are one buffer each whose plane stride is padded
off multiples of 4 KiB (the 16 concurrent write streams of a transform otherwise map to the same
cache sets, which slows the transforms several-fold); the batch's tile rows are
taken in blocks of at most ``BLOCK_BYTES`` of V and M, which share one scratch buffer per thread
(``scratch_layout``).
"""

from __future__ import annotations

import functools

import numpy as np

from framework.kernels import window_jit
from framework.kernels.dispatch_table import THRESHOLDS as _T
from framework.kernels.kernel_support import KernelUnavailable, usable
from framework.kernels.window_jit import _EMPTY, _EMPTY4, _timed
from framework.runtime.parallel import run_parallel, work_split

_kernels = None

# F(2x2, 3x3): G (4 x 3) transforms the filter; B^T and A^T are written out in winograd_kernels.py.
G = np.array([[1.0, 0.0, 0.0], [0.5, 0.5, 0.5], [0.5, -0.5, 0.5], [0.0, 0.0, 1.0]])
# V and M of one block of tile rows at most this many bytes together (one tile row at least): a cap
# on the scratch memory. Blocks small enough to stay in L2 are slower (the GEMMs lose more on fewer
# columns than the transforms gain from the cache); the default trades a little time for peak memory.
BLOCK_BYTES = _T["WINOGRAD_BLOCK_BYTES"]


def _load():
    global _kernels
    if _kernels is None:
        from framework.kernels import winograd_kernels

        _kernels = winograd_kernels
    return _kernels


def fits(geo, dtype, group: int) -> bool:
    """Whether the Winograd kernels handle a conv: 3x3, stride 1, dilation 1, group 1, float32,
    non-negative pads, numba available and the kernels not disabled (kernel_support)."""
    return (
        window_jit.fits(geo, dtype)
        and group == 1
        and geo.kernel == (3, 3)
        and geo.stride == (1, 1)
        and geo.out[0] >= 1
        and geo.out[1] >= 1
        and usable("winograd")
    )


def tiles(geo) -> tuple[int, int]:
    """(tile rows, tile columns) covering the output."""
    return (geo.out[0] + 1) // 2, (geo.out[1] + 1) // 2


def plane_stride(rows: int, t: int) -> int:
    """Elements between two planes of a (16, rows, t) transform buffer: rows * t, padded (by whole
    cache lines) so that the stride in bytes is at least 256 bytes away from a multiple of 4 KiB."""
    s = rows * t
    while not 256 <= (s * 4) % 4096 <= 3840:
        s += 16
    return s


def scratch_layout(c: int, m: int, t: int) -> tuple[int, int]:
    """(offset of M, elements) of the one scratch buffer holding V (16, c, t) from offset 0 and M
    (16, m, t) after it (at a cache line). Every conv whose block fits BLOCK_BYTES gets the same size,
    so all the Winograd convs of a thread share one buffer (shared_scratch keys on the size): AlexNet
    at batch 16 held 36 MiB of V and M buffers of four distinct power-of-two sizes, 8 MiB now."""
    off = -(-16 * plane_stride(c, t) // 16) * 16
    need = off + 16 * plane_stride(m, t)
    return off, max(need, BLOCK_BYTES // 4 + 2 * 16 * 1024)  # plane_stride pads each plane by < 1024


def planes_view(buf: np.ndarray, rows: int, t: int) -> np.ndarray:
    """The (16, rows, t) view of a flat buffer of at least 16 * plane_stride(rows, t) elements."""
    s = plane_stride(rows, t)
    return np.lib.stride_tricks.as_strided(buf, (16, rows, t), (s * 4, t * 4, 4))


def transform_filter(w: np.ndarray, out: np.ndarray) -> None:
    """out (16, M, C) = G g G^T for every (M, C) 3x3 filter g of ``w`` (M, C, 3, 3), in float64: compiled
    (winograd_kernels._filter) for float32 ``w`` and ``out``, else numpy's tensordots."""
    m, c = w.shape[:2]
    if w.dtype == np.float32 and out.dtype == np.float32 and out.flags.c_contiguous and usable("winograd"):
        w, u = np.ascontiguousarray(w), out.reshape(16, m, c)
        try:
            _timed("winograd", _load()._filter, w, u, 0, 0)  # compiled first (an empty range)
        except KernelUnavailable:  # its compile failed: the family is disabled, numpy's passes run
            pass
        else:
            fn = _load()._filter
            parts = work_split(m, 16 * m * c) or [(0, m)]  # by output channels over the intra-op threads
            run_parallel([functools.partial(fn, w, u, m0, m1) for m0, m1 in parts], steal=True)
            return
    t = np.tensordot(w.astype(np.float64), G, axes=([3], [1]))  # (M, C, 3, 4): g G^T
    u = np.tensordot(G, t, axes=([1], [2]))  # (4, M, C, 4): G g G^T
    np.copyto(out.reshape(4, 4, m, c), u.transpose(0, 3, 1, 2))


def input_transform(x, v, g0, g1, geo, phases) -> None:
    """V (16, C, T) of the tile rows g0:g1 of the batch (row g % th of image g // th); ``phases``
    (2, 2*th + 2, tw + 1) zero-filled once (only image cells are written)."""
    th, tw = tiles(geo)
    ph, pw = geo.head
    _timed("winograd", _load()._input, np.ascontiguousarray(x), v, g0, g1, ph, pw, th, tw, phases[0], phases[1])


def output_transform(mt, b, res, y, g0, g1, geo, relu: bool, z) -> None:
    """The output rows of tile rows g0:g1 from M (16, M, T) (+ b) (+ res) (Relu); ``z`` (2, 2 * tw)
    scratch; b and res may be None, res may be y itself."""
    th, tw = tiles(geo)
    if res is None:
        res = _EMPTY4
    elif res is not y:
        res = np.ascontiguousarray(res)
    _timed("winograd", _load()._output, mt, _EMPTY if b is None else b, res, y, g0, g1, th, tw, bool(relu), z)


def warm_up() -> None:
    """Compile (or load from the cache) the transforms."""
    from framework.kernels.geometry import Geometry

    geo = Geometry((4, 4), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1), (4, 4))
    x = np.zeros((1, 2, 4, 4), np.float32)
    v = planes_view(np.zeros(16 * plane_stride(2, 4), np.float32), 2, 4)
    input_transform(x, v, 0, 2, geo, np.zeros((2, 6, 3), np.float32))
    output_transform(v, None, x, x, 0, 2, geo, True, np.zeros((2, 4), np.float32))
