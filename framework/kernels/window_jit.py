"""Compiled (numba) kernels for 2-D NCHW window ops numpy expresses badly: depthwise convolution,
max/average pooling and direct convolution, float32, dilation 1, non-negative pads. Optional: without
numba (or with ``FRAMEWORK_NO_JIT=1``) ``available()`` is False and the callers keep their numpy
kernels.

One image channel at a time, in three steps that all stay in L1/L2:

1. its s*s *phase planes* (stride s): plane (pa, pb)[u, v] = padded image[u*s + pa, v*s + pb], the
   pad value outside the image; a (hq, wq) plane per phase, hq = OH + (KH-1)//s + 1, wq likewise;
2. the reduction over the taps on the *wide* output z[r*wq + q] (q < wq; the columns q >= OW are
   junk): tap (a, b) reads plane (a%s, b%s) shifted by (a//s)*wq + b//s, so every tap is one
   contiguous, vectorizable pass; 3x3 windows do all nine taps in one pass, in registers (indices
   are unsigned: numba tests a signed index for negative wraparound, which stops LLVM vectorizing);
3. the epilogue writing the OW valid columns: bias, residual, Relu (conv), 1/count (average).

Larger pooling windows stay with numpy (the generic tap loop is slower there). Max pooling does not
use the planes (``max_pool``: the image read in place, per output row the max over the window's rows,
then over its columns), which is faster and gives the same values bit for bit.

The direct convolution (``direct``: group 1, any window up to 11x11, strides up to 4) reads the same
zero-bordered (phase) planes, one image at a time, through a register-blocked micro-kernel written
in LLVM IR (microkernel.py: an implicit GEMM over K = C x taps, 8 output channels x 32 output pixels
held in 16 AVX-512 registers, the epilogue on the registers, where numba's loops would keep the
accumulators in memory). Output rows of at least
DIRECT_WIDE_OW pixels are written straight into y, in runs of 32; narrower outputs run over the wide
layout into a scratch whose valid columns are then copied. ``pointwise`` runs 1x1 convs on the same
micro-kernel, each image read in place; ``direct_depthwise`` runs stride-1 depthwise convs on a
one-row block of it over each channel's own planes. Three more LLVM IR kernels: ``channel_conv``
(channel_kernel.py) for narrow outputs, with the output channels in the vector lanes and the
pixels broadcast; ``depthwise3`` (depthwise3.py) for 3x3 and 5x5 depthwise convs at stride 1 and 2, read
from the image itself (masked loads for the padding), L outputs of several rows per step (narrow images:
runs of L pixels over several rows); and the 3-wide stride-2 column step of ``max_pool`` (pool_columns.py).
conv_strategies.py says where each is used.

Two one-pass elementwise kernels serve the GEMM convs and SpatialBN, where numpy needs a pass per
operation: the conv epilogue (``epilogue``: bias, residual, Relu) and test-mode SpatialBN's
per-channel scale and shift (``scale_shift``; also SqueezeExcite's channel scale, beside
``channel_means``). Compiled kernels are cached on disk (numba
``cache=True``); the first use in a process without a cache compiles them (``compile_seconds()`` tells
how long it took; docs/performance.md has the figures).
"""

from __future__ import annotations

import os
import threading
import time
from typing import NamedTuple

import numpy as np

from framework.kernels import kernel_support
from framework.kernels.dispatch_table import THRESHOLDS as _T
from framework.kernels.kernel_support import KernelUnavailable, usable
from framework.runtime.state import RUNTIME

_COMPILE = RUNTIME.held("kernels.compile_time", lambda: {"seconds": 0.0})
_UNSET = object()
_kernels = _UNSET  # the kernels module once imported (None: numba missing or FRAMEWORK_NO_JIT=1)


def available() -> bool:
    """True when the compiled kernels can be used (numba importable, not disabled); the first call
    imports numba and the kernels module."""
    global _kernels
    if _kernels is _UNSET:
        try:  # optional dependency (the ``jit`` extra)
            if os.environ.get("FRAMEWORK_NO_JIT", "") not in ("", "0"):
                raise ImportError("FRAMEWORK_NO_JIT is set")
            window_kernels = _import_kernels()
        except ImportError:  # pragma: no cover - depends on the environment
            window_kernels = None
        except Exception as exc:  # pragma: no cover - a numba that imports but breaks (versions mismatched)
            kernel_support.disable("numba", f"{type(exc).__name__}: {exc}")
            window_kernels = None
        _kernels = window_kernels
    return _kernels is not None


def _import_kernels():
    """Import every compiled kernel module (numba decorates them: no compile yet) with numba's cache in
    the user cache folder (machine.numba_cache): a read-only install caches there too. The
    window_kernels module."""
    from framework.kernels import machine

    with machine.numba_cache():
        from framework.kernels import channel_kernel, depthwise3, microkernel, window_kernels, winograd_kernels

        del channel_kernel, depthwise3, microkernel, winograd_kernels  # imported for their decorators only
    return window_kernels


def compile_seconds() -> float:
    """Seconds this process spent compiling or loading the kernels from the cache (first calls)."""
    return _COMPILE["seconds"]


def fits(geo, dtype) -> bool:
    """Whether a window geometry / dtype is one these kernels handle."""
    return (
        available()
        and np.dtype(dtype) == np.float32
        and geo.dilation == (1, 1)
        and geo.stride[0] == geo.stride[1]
        and min(geo.head) >= 0
        and min(geo.tail) >= 0
    )


def plane_shape(geo) -> tuple[int, int, int, int]:
    """(phases, hq, wq, wide length) of the scratch a kernel of geometry ``geo`` needs."""
    (kh, kw), s, (oh, ow) = geo.kernel, geo.stride[0], geo.out
    hq, wq = oh + (kh - 1) // s + 1, ow + (kw - 1) // s + 1
    return s * s, hq, wq, (oh - 1) * wq + ow


_EMPTY = np.empty(0, np.float32)
_EMPTY2 = np.empty((0, 0), np.float32)
_EMPTY3 = np.empty((0, 0, 0), np.float32)
_EMPTY4 = np.empty((0, 0, 0, 0), np.float32)
# Activation codes of the conv kernels' stores (ConvNCHW's ``relu``), and the flag bits carrying them to the
# micro-kernel and depthwise3 (simd_ir.activate): 4 Relu, 8 its cap at 6, 16 HardSwish, 32 Swish.
RELU, RELU6, HARDSWISH, SWISH = 1, 2, 3, 4
_ACT_FLAGS = {0: 0, RELU: 4, RELU6: 4 | 8, HARDSWISH: 16, SWISH: 32}


_CALLED: set = RUNTIME.held("kernels.called", set)  # kernels called at least once in this process
_RECORD = threading.local()  # .calls: the kernel calls of this thread while ``record_calls`` runs


def _timed(family: str, fn, *args) -> None:
    """Call a kernel of ``family`` (kernel_support.NEEDS); the first call of each (compiling or loading
    it) is added to compile_seconds(); every call is guarded: a failed compile (the first call's, or a
    later one's of new argument types) disables the family and raises KernelUnavailable (see
    kernel_support.call). (A set of called kernels, not numba's
    ``fn.signatures``: that property builds its list anew on every access, which costs as much as a
    small conv's work.)"""
    if fn in _CALLED:
        try:
            fn(*args)
        except Exception as exc:  # a new type signature may fail to compile: kernel_support decides
            kernel_support.failed_compile(family, fn, args, exc)
            raise
    else:
        t = time.perf_counter()
        try:
            kernel_support.call(family, fn, args)
        finally:
            _COMPILE["seconds"] += time.perf_counter() - t
        _CALLED.add(fn)
    calls = getattr(_RECORD, "calls", None)
    if calls is not None:
        calls.append((fn, args))


def record_calls(run) -> list[tuple]:
    """``run()``, returning the compiled kernel calls (kernel, arguments) it made on this thread: a
    caller whose run is one such call may replay it (conv_nchw.ConvNCHW's replay)."""
    _RECORD.calls = calls = []
    try:
        run()
    finally:
        _RECORD.calls = None
    return calls


def _conv_operands(x, b, y, res) -> tuple:
    """(x, b, res) as the conv kernels take them: x contiguous, b and res empty when absent, res
    contiguous unless it is the output itself (an in-place residual)."""
    if res is None:
        res = _EMPTY4
    elif res is not y:
        res = np.ascontiguousarray(res)
    return np.ascontiguousarray(x), (_EMPTY if b is None else b), res


def _mk_operands(x, y, res, relu: bool) -> tuple:
    """(x, residual, flags) as the micro-kernel drivers take them: x contiguous; the residual y itself
    when absent (never read then: flags & 2 is off); flags 2 residual, then the activation code ``relu`` (True or
    RELU, RELU6, HARDSWISH, SWISH) as 4 Relu, 8 its cap at 6, 16 HardSwish, 32 Swish (only the kernels
    of strategies with ``caps`` read the last three)."""
    x, _, res = _conv_operands(x, None, y, res)
    has_r = res is not _EMPTY4
    return x, (res if has_r else y), (2 if has_r else 0) | _ACT_FLAGS[int(relu)]


def depthwise(x, w, b, y, res, planes, z, geo, relu: bool, i0: int, i1: int) -> None:
    """Depthwise conv (group = C = M) of images i0:i1 into y; ``planes``/``z`` from ``plane_shape``
    (per worker); ``b`` and ``res`` may be None; ``res`` may be ``y`` itself (added before writing); ``relu`` 2:
    Relu6."""
    ph, pw = geo.head
    x, b, res = _conv_operands(x, b, y, res)
    _timed(
        "depthwise",
        _kernels._depthwise,
        x,
        np.ascontiguousarray(w),
        b,
        y,
        res,
        planes,
        z,
        geo.stride[0],
        ph,
        pw,
        plane_shape(geo)[2],
        int(relu),
        i0,
        i1,
    )


def direct_fits(geo, dtype, group: int) -> bool:
    """Whether ``direct`` handles a conv: 2-D, group 1, equal strides up to 4, kernels up to 11x11
    (and what ``fits`` asks), the kernel usable here (kernel_support)."""
    return direct_geometry(geo, dtype, group) and usable("direct")


def direct_geometry(geo, dtype, group: int) -> bool:
    """``direct_fits`` but for the kernel's usability (its geometry: direct_depthwise's too)."""
    return fits(geo, dtype) and group == 1 and len(geo.kernel) == 2 and geo.stride[0] <= 4 and max(geo.kernel) <= 11


# The micro-kernel drivers run an image in bands: output rows (``direct``) or pixels (``pointwise``)
# whose input rows take about BAND_BYTES, every block of output channels over one band before the
# next, so each output channel is written in long sequential runs while the band's input stays in L2
# (every block over each run of pixels in turn keeps the input in L1 but writes as many streams as output
# channels, which costs more once the output is past L2).
BAND_BYTES = _T["BAND_BYTES"]

# Outputs narrower than this run ``direct`` on the wide layout (microkernel._conv_wide): a 3x3 conv's
# 8-wide rows fill 80% of the vector lanes there, 50% two rows to a register block.
DIRECT_WIDE_OW = _T["DIRECT_WIDE_OW"]


class DirectPlan(NamedTuple):
    """What ``direct`` needs of a conv geometry, computed once when the conv is prepared."""

    stride: int
    head: tuple  # (ph, pw)
    hq: int  # rows of one (phase) plane
    wq: int  # row length of one (phase) plane
    taps: np.ndarray  # offset of each window tap in a channel's planes (int64)
    planes: tuple  # shape of the zero-bordered planes per worker: (C * s * s, hq * wq + 16)
    wide: tuple | None  # narrow outputs (below DIRECT_WIDE_OW): shape of the wide output scratch
    band: int  # output rows per band (even): their input rows fill about BAND_BYTES


def direct_plan(geo, c: int, m: int) -> DirectPlan:
    """The ``DirectPlan`` of a conv of ``c`` input and ``m`` output channels over ``geo``."""
    (kh, kw), s, (oh, ow) = geo.kernel, geo.stride[0], geo.out
    hq, wq = oh + (kh - 1) // s, ow + (kw - 1) // s  # a (phase) plane: the window rows below the output
    plane = hq * wq + 16
    wide = (m, oh * wq + 32) if ow < DIRECT_WIDE_OW else None
    taps = _microkernel().tap_offsets(s, plane, wq, kh, kw)
    band = max(2, BAND_BYTES // (4 * c * s * s * wq))
    return DirectPlan(s, geo.head, hq, wq, taps, (c * s * s, plane), wide, band + (band & 1))


# the micro-kernel module, once imported (it imports numba and llvmlite)
_MK: list = RUNTIME.held("kernels.microkernel_module", list)


def _microkernel():
    if not _MK:
        from framework.kernels import microkernel

        _MK.append(microkernel)
    return _MK[0]


def direct_pack(w: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """The filter (M, C, kh, kw) packed for ``direct``/``pointwise`` (into ``out`` when given, of
    ``direct_packed_size``)."""
    mk = _microkernel()
    m = w.shape[0]
    w2 = w.reshape(m, -1)
    if out is None:
        out = np.empty(mk.packed_size(m, w2.shape[1]), np.float32)
    mk.pack(w2, out)
    return out


def direct_packed_size(m: int, k: int) -> int:
    """Elements of the packed copy of an (M, k) filter (k = C x taps)."""
    return _microkernel().packed_size(m, k)


def direct_block_rows() -> int:
    """Output channels per register block: at batch 1, splits of the output channels between threads
    start at multiples of it."""
    return _microkernel().R


def direct(
    x, wp, b, y, res, planes, scratch, plan, relu: bool, i0: int, i1: int, m0: int, m1: int, z=None, moff: int = 0
) -> None:
    """Group-1 conv (see ``direct_fits``) of images i0:i1, output channels m0:m1 (m0 a multiple of
    ``direct_block_rows``), into y, with no columns: ``wp`` from ``direct_pack``, ``b`` (M,) (zeros
    for a conv without bias), ``planes`` of ``plan.planes`` (zero-filled once: only the image's cells
    are written), ``scratch`` (3, 2) int64 per worker, ``z`` of ``plan.wide`` for narrow outputs;
    ``res`` may be None or ``y`` itself. ``moff``: output channel m goes to y[:, moff + m] (y holds a
    concatenation's channels; not with ``z`` or a residual)."""
    mk = _microkernel()
    x, res, flags = _mk_operands(x, y, res, relu)
    (ph, pw), s = plan.head, plan.stride
    args = (x, wp, b, y, res, planes, plan.taps, s, ph, pw, plan.hq, plan.wq, flags)
    if z is not None:
        _timed("direct", mk._conv_wide, *args, i0, i1, m0, m1, scratch[0], scratch[1], scratch[2], z)
    else:
        _timed("direct", mk._conv, *args, i0, i1, m0, m1, scratch[0], scratch[1], scratch[2], plan.band, moff)


def depthwise_runs() -> int:
    """Runs of output pixels per call of ``direct_depthwise``'s block (its scratch is (3, this))."""
    return _microkernel().VD


def direct_depthwise(x, w, b, y, res, planes, scratch, plan, relu: bool, i0: int, i1: int) -> None:
    """Depthwise conv (group = C = M, a geometry ``direct_fits`` takes but for the group) of images
    i0:i1 into y through the micro-kernel's one-row block: ``w`` (C, 1, kh, kw), ``b`` (C,) (zeros
    for a conv without bias), ``planes`` of ``plan.planes`` (zero-filled once), ``scratch`` (3,
    ``depthwise_runs()``) int64 per worker; ``res`` may be None or ``y`` itself."""
    mk = _microkernel()
    x, res, flags = _mk_operands(x, y, res, relu)
    (ph, pw), s = plan.head, plan.stride
    args = (x, np.ascontiguousarray(w), b, y, res, planes, plan.taps, s, ph, pw, plan.hq, plan.wq, flags)
    _timed("direct_depthwise", mk._depthwise, *args, i0, i1, scratch[0], scratch[1], scratch[2])


def depthwise3_fits(geo, dtype) -> bool:
    """Whether ``depthwise3`` handles a depthwise conv: 3x3 or 5x5 at stride 1 or 2 (and what ``fits`` asks)."""
    geometry = tuple(geo.kernel) in ((3, 3), (5, 5)) and tuple(geo.stride) in ((1, 1), (2, 2))
    return fits(geo, dtype) and geometry and usable("depthwise3")


def bordered_plane(geo) -> tuple[int, int]:
    """(hq, wq) of one channel's zero-bordered plane in the stride-1 layout that channel_conv reads at
    any stride: the image's cells from (ph, pw) on, and every row and column a
    window reads."""
    (h, w), (kh, kw), (oh, ow), (ph, pw), s = geo.spatial, geo.kernel, geo.out, geo.head, geo.stride[0]
    return max(ph + h, s * (oh - 1) + kh), max(pw + w, s * (ow - 1) + kw)


def depthwise3(x, w, b, y, res, geo, relu: bool, i0: int, i1: int) -> None:
    """3x3 or 5x5 depthwise conv at stride 1 or 2 (``depthwise3_fits``; depthwise3.py) of images i0:i1 into
    y: ``w`` (C, 1, K, K), ``b`` (C,) (zeros for a conv without bias); ``res`` may be None or ``y`` itself."""
    from framework.kernels import depthwise3 as d3

    x, res, flags = _mk_operands(x, y, res, relu)
    (ph, pw), s = geo.head, geo.stride[0]
    _timed("depthwise3", d3._depthwise3, x, np.ascontiguousarray(w), b, y, res, s, ph, pw, flags, i0, i1)


class ChannelPlan(NamedTuple):
    """What ``channel_conv`` needs of a conv geometry (channel_kernel.py), computed once."""

    var: int  # register block variant: channel_kernel.BLOCKS[var] = (R, V)
    rows: int  # R: output pixels of a row per block
    lanes: int  # V * L: output channels per panel
    mp: int  # output channels rounded up to whole panels
    hq: int  # rows of a channel's zero-bordered plane
    wq: int  # its row length
    taps: np.ndarray  # plane offset of each window tap (int64)
    planes: tuple  # (C, hq * wq + slack) scratch per worker


CHANNEL_STRIDES = (1, 2, 4)  # the strides channel_kernel builds its register blocks for


def channel_fits(geo, dtype, group: int) -> bool:
    """Whether ``channel_conv`` handles a conv: 2-D, group 1, strides 1, 2 or 4, windows up to 11x11."""
    return (
        fits(geo, dtype)
        and group == 1
        and len(geo.kernel) == 2
        and geo.stride[0] in CHANNEL_STRIDES
        and max(geo.kernel) <= 11
        and usable("channel")
    )


def channel_plan(geo, c: int, m: int) -> ChannelPlan:
    """The ``ChannelPlan`` of a conv of ``c`` input and ``m`` output channels over ``geo``: the block
    variant that wastes the fewest lane-steps (channels rounded up to panels x pixels to blocks)."""
    from framework.kernels import channel_kernel as ck

    (kh, kw), ow = geo.kernel, geo.out[1]

    def cost(var):  # lane-steps x cycles per multiply-add (2 FMA ports; R + V loads at 2 per cycle; ~2 for the loop)
        r, v = ck.BLOCKS[var]
        per_fma = (max(r * v, r + v) / 2 + 2) / (r * v)
        return ck.padded_channels(m, v) * -(-ow // r) * r * per_fma

    var = min(range(len(ck.BLOCKS)), key=cost)
    r, v = ck.BLOCKS[var]
    hq, wq = bordered_plane(geo)
    taps = np.array([a * wq + b for a in range(kh) for b in range(kw)], np.int64)
    mp = ck.padded_channels(m, v)
    return ChannelPlan(var, r, v * ck.L, mp, hq, wq, taps, (c, hq * wq + ck.SLACK))


# Filters of at least this many values are packed by the intra-op threads (a native job, panels split): a
# training step packs each filter anew, and ResNet-18's 512 x 512 x 3 x 3 filters took 4.3 ms each on one
# thread, serial time of the 2-thread step.
PACK_SPLIT_MIN = 1 << 18


def channel_pack(w: np.ndarray, plan: ChannelPlan, out: np.ndarray) -> None:
    """The filter (M, C, kh, kw) packed for ``channel_conv`` into ``out`` (plan.mp * C * kh * kw,)."""
    from framework.kernels import channel_kernel as ck

    w2, v = w.reshape(w.shape[0], -1), plan.lanes // ck.L
    if w2.size < PACK_SPLIT_MIN or not _pack_split(ck, w2, v, out):
        ck.pack(w2, v, out)


def _pack_split(ck, w2: np.ndarray, v: int, out: np.ndarray) -> bool:
    """``ck.pack`` by panels over the intra-op threads as one native job; False (nothing written) with one
    thread or without native jobs."""
    from framework.kernels import native_pool
    from framework.runtime.parallel import get_num_threads, split

    threads = get_num_threads()
    if threads < 2 or not native_pool.available():
        return False
    vl = v * ck.L
    calls = [[w2, out, vl, p0, p1] for p0, p1 in split(out.size // (w2.shape[1] * vl), threads)]
    return native_pool.run_calls("channel_kernel._pack", lambda: ck.native_task("_pack"), calls)


def channel_conv(x, wp, b, y, res, planes, plan, geo, relu, i0, i1, mb0, mb1, m, moff=0) -> None:
    """Group-1 conv (``channel_fits``) of images i0:i1, output channel panels mb0:mb1 (of plan.lanes
    channels; ``m`` the filter's rows), into y[:, moff:]: ``wp`` from ``channel_pack``, ``b`` (plan.mp,)
    (zeros past the filter's rows), ``planes`` of plan.planes per worker (zero-filled once); ``res``
    may be None or ``y`` itself."""
    from framework.kernels import channel_kernel as ck

    x, res, flags = _mk_operands(x, y, res, relu)
    (ph, pw), s = geo.head, geo.stride[0]
    args = (x, wp, b, y, res, planes, plan.taps, s, ph, pw, plan.hq, plan.wq, flags, i0, i1, mb0, mb1, moff, m)
    _timed("channel", ck._conv, *args, plan.var, plan.rows, plan.lanes)


_TAPS1 = np.zeros(1, np.int64)  # a 1x1 window's one tap


POINTWISE_KC, POINTWISE_KC_BAND = _T["POINTWISE_KC"], _T["POINTWISE_KC_BAND"]


def pointwise_band(c: int) -> tuple[int, int]:
    """(pixels per band, input channels per chunk) of ``pointwise`` over ``c`` input channels: up to
    POINTWISE_KC channels whole, C rows of a band filling BAND_BYTES; over more, chunks of POINTWISE_KC
    channels over bands of POINTWISE_KC_BAND pixels (a chunk's rows of the band stay in L1)."""
    if c <= POINTWISE_KC:
        return max(64, BAND_BYTES // (4 * c) // 32 * 32), c
    return POINTWISE_KC_BAND, POINTWISE_KC


def pointwise(
    x, wp, b, y, res, scratch, relu: bool, i0: int, i1: int, m0: int, m1: int, band: tuple, moff: int = 0
) -> None:
    """1x1 stride-1 unpadded group-1 conv of images i0:i1, output channels m0:m1 (m0 a multiple of
    ``direct_block_rows``) through the direct micro-kernel, each image read in place: ``wp`` from
    ``direct_pack``, ``b`` (M,) (zeros for a conv without bias), ``scratch`` (3, 2) int64 per worker,
    ``band`` (pixels, channels per chunk) from ``pointwise_band``; ``res`` may be None or ``y`` itself;
    ``moff`` as ``direct``'s."""
    mk = _microkernel()
    x, res, flags = _mk_operands(x, y, res, relu)
    sc, (pixels, kc) = scratch, band
    _timed(
        "pointwise",
        mk._pointwise,
        x,
        wp,
        b,
        y,
        res,
        _TAPS1,
        flags,
        i0,
        i1,
        m0,
        m1,
        sc[0],
        sc[1],
        sc[2],
        pixels,
        moff,
        kc,
    )


def epilogue(acc, b, res, y, relu: bool) -> bool:
    """y = acc (+ b per row) (+ res) (Relu) in one pass, for float32 2-D (rows, P) arrays whose rows
    are contiguous; False (nothing done) where the kernel does not apply or is unavailable. ``acc``
    and ``res`` may be ``y`` itself."""
    if not available() or not usable("epilogue") or y.dtype != np.float32 or acc.dtype != np.float32 or y.ndim != 2:
        return False
    if any(a is not None and (a.ndim != 2 or a.strides[1] != 4) for a in (acc, res, y)):
        return False
    if b is not None and (b.dtype != np.float32 or b.ndim != 1):
        return False
    if res is not None and res.dtype != np.float32:
        return False
    try:
        res = _EMPTY2 if res is None else res
        _timed("epilogue", _kernels._epilogue, acc, _EMPTY if b is None else b, res, y, bool(relu))
    except KernelUnavailable:
        return False
    return True


def epilogue_block(acc, b, res, y, relu: bool) -> bool:
    """``epilogue`` for a GEMM over a block of images, in one call: y[i] = acc[:, i] (+ b) (+ res[i])
    (Relu) with acc (rows, images, P) C-contiguous and res/y (images, rows, P) with contiguous rows;
    False (nothing done) where it does not apply or is unavailable."""
    if not available() or not usable("epilogue") or acc.ndim != 3 or y.ndim != 3 or not acc.flags.c_contiguous:
        return False
    if any(a is not None and (a.dtype != np.float32 or a.strides[-1] != 4) for a in (acc, res, y)):
        return False
    if b is not None and (b.dtype != np.float32 or b.ndim != 1):
        return False
    res = _EMPTY3 if res is None else res
    try:
        _timed("epilogue", _kernels._epilogue_block, acc, _EMPTY if b is None else b, res, y, bool(relu))
    except KernelUnavailable:
        return False
    return True


def scale_shift(x, a, b, y, relu: int = 0) -> bool:
    """y[n, c] = x[n, c] * a[c] + b[c] (then a Relu: ``relu`` 1 max(0, y) with NaN -> 0, 2 NaN kept) in one pass for
    float32 arrays (C-contiguous y; x C-contiguous or, a channel prefix of a larger tensor, per image;
    channel axis 1); False (nothing done) where the kernel does not apply or is unavailable."""
    if not available() or not usable("scale_shift") or x.ndim < 2 or x.size == 0:
        return False
    if any(v.dtype != np.float32 or not v.flags.c_contiguous for v in (a, b, y)) or x.dtype != np.float32:
        return False
    n, c = x.shape[0], x.shape[1]
    y3 = y.reshape(n, c, -1)
    if x.flags.c_contiguous:
        try:
            _timed("scale_shift", _kernels._scale_shift, x.reshape(n, c, -1), a, b, y3, int(relu))
        except KernelUnavailable:
            return False
        return True
    if not x[:1].flags.c_contiguous:
        return False
    try:  # the first call compiles: a failure there leaves y untouched
        for i in range(n):
            _timed("scale_shift", _kernels._scale_shift, x[i : i + 1].reshape(1, c, -1), a, b, y3[i : i + 1], int(relu))
    except KernelUnavailable:
        return False
    return True


def channel_means(x, s) -> bool:
    """s[n, c] = the mean of x[n, c] over its other axes (x float32 C-contiguous (N, C, ...), s float32 (N, C)) in
    one vectorized pass (the ``scale_shift`` family's plain loops); False (nothing done) where the kernel does not
    apply or is unavailable."""
    if not available() or not usable("scale_shift") or x.ndim < 2 or x.dtype != np.float32 or s.dtype != np.float32:
        return False
    if not (x.flags.c_contiguous and s.flags.c_contiguous) or s.shape != x.shape[:2]:
        return False
    try:
        _timed("scale_shift", _kernels._channel_means, x.reshape(x.shape[0], x.shape[1], -1), s)
    except KernelUnavailable:
        return False
    return True


def squeeze_excite(x, w1, b1, w2, b2, s, h, g, y, act: int, gate: int, alpha: float, beta: float) -> bool:
    """The whole SqueezeExcite (framework/ops/nn/squeeze_excite.py) in one compiled call: x/y float32 C-contiguous
    (N, C, ...) (y may be x), w1 (R, C) and w2 (C, R) C-contiguous, b1 (R,), b2 (C,), scratch s/g (C,) and h (R,),
    all float32; ``act`` 0 none, 1 Relu, 2 Relu6, 3 Swish, 4 HardSwish; ``gate`` 0 Sigmoid, 1 HardSigmoid(alpha,
    beta). False (nothing done) where the kernel does not apply or is unavailable."""
    if not available() or not usable("scale_shift") or x.ndim < 2:
        return False
    arrays = (x, w1, b1, w2, b2, s, h, g, y)
    if any(a.dtype != np.float32 or not a.flags.c_contiguous for a in arrays):
        return False
    n, c = x.shape[0], x.shape[1]
    x3, y3 = x.reshape(n, c, -1), y.reshape(n, c, -1)
    try:
        _timed("scale_shift", _kernels._squeeze_excite, x3, w1, b1, w2, b2, s, h, g, y3, act, gate, alpha, beta)
    except KernelUnavailable:
        return False
    return True


def pool(x, y, inv, planes, z, geo, mode: str, pad_value, i0: int, i1: int) -> None:
    """Max (``mode='max'``, windows start at ``pad_value``) or average (times ``inv`` (OH, OW))
    pooling of images i0:i1 into y."""
    (kh, kw), (ph, pw) = geo.kernel, geo.head
    x = np.ascontiguousarray(x)
    inv2 = inv if inv is not None else np.empty((0, 0), np.float32)
    m = 1 if mode == "max" else 2
    _timed(
        "pool",
        _kernels._pool,
        x,
        y,
        inv2,
        planes,
        z,
        geo.stride[0],
        kh,
        kw,
        ph,
        pw,
        plane_shape(geo)[2],
        m,
        np.float32(pad_value),
        i0,
        i1,
    )


def max_pool_row(geo) -> tuple:
    """Shape of the row scratch ``max_pool`` needs per worker (at stride 1 a plane of OH rows of W cells)."""
    kw, s, ow, pw = geo.kernel[1], geo.stride[0], geo.out[1], geo.head[1]
    row = max(pw + geo.spatial[1], (ow - 1) * s + kw)
    # stride 1: whole planes, and several of them (about 32 KB) when the output is as large as the input
    return (max(row, geo.out[0] * geo.spatial[1], _PLANES_BLOCK) if s == 1 else row,)


_PLANES_BLOCK = 8192  # float32 cells of the stride-1 max pooling scratch: several small planes per pass


def max_pool(x, y, vm, geo, pad_value, i0: int, i1: int) -> None:
    """Max pooling of images i0:i1 into y, each read in place (no planes); ``vm`` of ``max_pool_row``."""
    (kh, kw), (ph, pw) = geo.kernel, geo.head
    x = np.ascontiguousarray(x)
    _timed("max_pool", _kernels._max_pool, x, y, vm, geo.stride[0], kh, kw, ph, pw, np.float32(pad_value), i0, i1)


def pool2x2(x, y, stride, is_max: bool, inv: float, i0: int, i1: int) -> None:
    """2x2 max or average (times ``inv``) pooling of images i0:i1 of ``x`` (any strides) into y, every
    window inside the image (see pool2x2_fits)."""
    _timed("pool2x2", _kernels._pool2x2, x, y, stride[0], stride[1], is_max, np.float32(inv), i0, i1)


def pool2x2_fits(geo, dtype) -> bool:
    """Whether ``pool2x2`` takes this geometry: a 2x2 window, no dilation, no padding, float32."""
    if not (available() and np.dtype(dtype) == np.float32 and geo.kernel == (2, 2) and geo.dilation == (1, 1)):
        return False
    if not usable("pool2x2"):
        return False
    inside = all((o - 1) * s + 2 <= n for o, s, n in zip(geo.out, geo.stride, geo.spatial))
    return not geo.padded and inside


def _warm_steps() -> list:
    """(family, compile step) for every kernel family: each step calls that family's kernels on tiny
    float32 arrays, with the argument types the ops pass (so the same numba signatures compile)."""
    from framework.kernels.geometry import Geometry

    geo = Geometry((4, 4), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1), (4, 4))
    x = np.zeros((1, 2, 4, 4), np.float32)
    y = np.empty_like(x)
    phases, hq, wq, wide = plane_shape(geo)
    zero_b = np.zeros(2, np.float32)
    w3 = np.zeros((2, 1, 3, 3), np.float32)

    def phase_planes():
        return np.empty((phases, hq * wq), np.float32), np.empty(wide, np.float32)

    def pooling2x2():
        y22 = np.empty((1, 2, 2, 2), np.float32)
        pool2x2(x, y22, (2, 2), True, 1.0, 0, 1)
        pool2x2(x, y22, (2, 2), False, 0.25, 0, 1)

    def epilogues():
        y2 = y.reshape(2, 16)
        epilogue(y2, zero_b, y2, y2, True)
        y3 = y.reshape(1, 2, 16)
        epilogue_block(np.ascontiguousarray(y3.transpose(1, 0, 2)), zero_b, y3, y3, True)

    def directs():
        w2 = direct_pack(np.zeros((2, 2, 3, 3), np.float32))
        plan = direct_plan(geo, 2, 2)
        planes, scratch = np.zeros(plan.planes, np.float32), np.zeros((3, 2), np.int64)
        direct(x, w2, zero_b, y, None, planes, scratch, plan, True, 0, 1, 0, 2)
        direct(x, w2, zero_b, y, y, planes, scratch, plan, True, 0, 1, 0, 2, np.empty(plan.wide, np.float32))

    def direct_depthwises():
        plan = direct_plan(geo, 2, 2)
        runs = np.zeros((3, depthwise_runs()), np.int64)
        direct_depthwise(x, w3, zero_b, y, y, np.zeros(plan.planes, np.float32), runs, plan, True, 0, 1)

    def depthwise3s():
        depthwise3(x, w3, zero_b, y, y, geo, True, 0, 1)

    def pointwises():
        wp = direct_pack(np.zeros((2, 2, 1, 1), np.float32))
        pointwise(x, wp, zero_b, y, y, np.zeros((3, 2), np.int64), True, 0, 1, 0, 2, (64, 2))

    def channels():
        cplan = channel_plan(geo, 2, 2)
        cw, cb = np.zeros(cplan.mp * 18, np.float32), np.zeros(cplan.mp, np.float32)
        channel_conv(x, cw, cb, y, y, np.zeros(cplan.planes, np.float32), cplan, geo, True, 0, 1, 0, 1, 2)

    def winograds():
        from framework.kernels import winograd

        winograd.warm_up()

    return [
        ("depthwise", lambda: depthwise(x, w3, None, y, None, *phase_planes(), geo, False, 0, 1)),
        ("pool", lambda: pool(x, y, None, *phase_planes(), geo, "max", 0.0, 0, 1)),
        ("max_pool", lambda: max_pool(x, y, np.empty(max_pool_row(geo), np.float32), geo, 0.0, 0, 1)),
        ("pool2x2", pooling2x2),
        ("epilogue", epilogues),
        ("scale_shift", lambda: scale_shift(x, np.ones(2, np.float32), zero_b, y, 1)),
        ("direct", directs),
        ("direct_depthwise", direct_depthwises),
        ("depthwise3", depthwise3s),
        ("pointwise", pointwises),
        ("channel", channels),
        ("winograd", winograds),
    ]


def warm_up() -> float:
    """Compile (or load from the cache) the kernels of every strategy (catalog.families: the families
    the conv and pool strategies call, then the shared ones) this CPU can run, for float32, now;
    seconds it took this call. A family whose compile fails is disabled with its one warning
    (kernel_support), the others still compile."""
    from framework.kernels import catalog

    if not available():
        return 0.0
    t = time.perf_counter()
    steps = dict(_warm_steps())
    for family in catalog.families():
        if usable(family):
            try:
                steps[family]()
            except KernelUnavailable:
                pass
    return time.perf_counter() - t
