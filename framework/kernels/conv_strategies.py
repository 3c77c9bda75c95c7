"""The strategies of a 2-D NCHW forward convolution: one object per way of computing it, tried in
``STRATEGIES``' order; the first whose ``fits`` is true runs the conv (``choose``). ``ConvNCHW``
(conv_nchw.py) plans the scratch and the split between threads for the chosen one and calls it.

Each strategy has

- ``name`` (what ``framework warmup`` and the tests name it) and ``kind``, the family of strategies it
  belongs to (what ``conv_kind`` answers: ``pointwise``, ``depthwise``, ``channel``, ``winograd``,
  ``direct``, ``im2col``; ConvNCHW plans its scratch by kind);
- ``families``: the compiled kernel families it calls (``kernel_support.NEEDS``' keys; none for the
  numpy strategies, which run anywhere);
- ``fits(geo, c, m, group, dtype, n)``: whether it handles the conv, from its geometry, the dtype, the
  kernels usable in this process and the thresholds of ``dispatch_table.THRESHOLDS`` (read at each
  call: the one table of numbers; ``framework tune`` and tests change it there);
- ``packs``: whether it keeps its own form of the filter, ``pack_shape(conv)`` its buffer and
  ``prepare(conv, w, out)`` that form written into ``out`` (once per filter version);
- ``run(conv, k, lo, hi, x, w, b1, y, s)``: worker ``k``'s share (images lo:hi, or output channels /
  panels / tile rows lo:hi at batch 1) with ``conv``'s plan and scratch;
- what the plan may rely on: ``one_call`` (a worker's run is one compiled kernel call, which ConvNCHW
  records and replays), ``own_epilogue`` (it reads the residual before it writes the output, so the
  residual may be the output itself), ``caps`` (its kernel applies every activation of ``conv.relu``,
  Relu6, HardSwish and Swish too, in its stores; after the others ConvNCHW applies them in one more pass),
  ``writes_slices(conv)`` (it can write output channels ``moff: moff + M`` of a larger output: a concatenation's).

``enabled`` turns a strategy off for the process (tests and measurements compare without it).
"""

from __future__ import annotations

import math

import numpy as np

from framework.kernels import window_jit, winograd
from framework.kernels.dispatch_table import THRESHOLDS
from framework.kernels.geometry import window_view
from framework.kernels.kernel_support import usable


class ConvStrategy:
    """One way of computing a 2-D NCHW convolution (see the module doc)."""

    name = ""
    kind = ""
    families: tuple = ()
    packs = False
    one_call = False
    own_epilogue = False
    caps = False
    enabled = True
    # a worker's one call has a native task function (its kernel module's native_task): the parts of a split conv
    # run as a native job (conv_nchw._NativeParts), a split costs a few microseconds, not a Python task's
    # hand-off, and smaller convs split (NATIVE_SPLIT_MIN_FLOPS)
    native = False

    def fits(self, geo, c: int, m: int, group: int, dtype, n: int) -> bool:
        raise NotImplementedError

    def pack_shape(self, conv) -> tuple:
        raise NotImplementedError(f"strategy '{self.name}' reads the filter as it is")

    def prepare(self, conv, w, out) -> None:
        raise NotImplementedError(f"strategy '{self.name}' reads the filter as it is")

    def run(self, conv, k, lo, hi, x, w, b1, y, s) -> None:
        raise NotImplementedError

    def writes_slices(self, conv) -> bool:
        return False

    def __repr__(self) -> str:
        return f"<conv strategy {self.name}>"


def _pointwise(geo) -> bool:
    return geo.kernel == (1, 1) and geo.stride == (1, 1) and not geo.padded


def _winograd_narrow(geo, c: int, m: int, group: int, dtype, n: int) -> bool:
    """Whether Winograd takes a narrow 3x3 stride-1 conv from the channel-lane kernel: where it fits (enough 2x2
    tiles over the batch: batches of several images) and the harmonic mean of the channel counts is at least
    WINOGRAD_NARROW_C times the square of the tiles' cells per output cell (odd sizes: 8x8 cells tile 7x7, 1.31).
    Its 2.25x fewer multiplies pay for its transforms (a share ~ (c + m) / (c m) of the work) from there on:
    measured at 1 thread on batches of 8-32, Winograd / channel-lane 0.72 at 256 -> 256 on 14x14, 0.82 at 128,
    0.94-1.16 at 96; on 7x7 0.78 at 512, 0.83-0.95 at 256, 0.97-1.13 at 192, 1.11-1.17 at 128; on 13x13 0.82 at
    192, 1.07 at 128."""
    if not (WINOGRAD.enabled and WINOGRAD.fits(geo, c, m, group, dtype, n)):
        return False
    th, tw = winograd.tiles(geo)
    waste = 4 * th * tw / math.prod(geo.out)
    return 2 * c * m / (c + m) >= THRESHOLDS["WINOGRAD_NARROW_C"] * waste * waste


def _narrow_pointwise(geo, m: int, group: int, dtype) -> bool:
    """A 1x1 stride-1 conv over at most CHANNEL_1X1_P pixels (a 7x7 image) with at least CHANNEL_S2_M outputs,
    which the Channel strategy takes: with pixels in the lanes, 49 pixels fill 64 lanes (runs of 2 x 16), with
    the output channels in them every lane works (MnasNet, EfficientNet-B0, MobileNetV2 and DenseNet-121 3-10%
    faster in whole nets; AMD EPYC with AVX-512, 1 thread; 14x14 images were slower)."""
    p = math.prod(geo.out)
    if not (_pointwise(geo) and group == 1 and 1 < p <= THRESHOLDS["CHANNEL_1X1_P"]):
        return False
    return m >= THRESHOLDS["CHANNEL_S2_M"] and window_jit.channel_fits(geo, dtype, group)


def _depthwise(c: int, m: int, group: int) -> bool:
    return group > 1 and group == c == m


def _bias(conv, b1):
    return b1.reshape(-1) if b1 is not None else conv._zero_b


class PointwiseMicroKernel(ConvStrategy):
    """1x1 convs on the direct micro-kernel (window_jit.pointwise, each image read in place, the epilogue in
    its stores) instead of BLAS's GEMM and an epilogue pass: up to POINTWISE_MK_C input channels, and up to
    POINTWISE_MK_MAX_C where the GEMM's packing of both operands on every call weighs most (few outputs or
    few pixels; over more than window_jit.POINTWISE_KC channels the micro-kernel runs in chunks of them).
    Alone, from about 160 input channels on the GEMM wins (the micro-kernel reads its k rows unpacked); inside
    whole nets it does not (the 1x1 convs of MobileNetV2, MnasNet, EfficientNet-B0, DenseNet-121, GoogLeNet
    and ShuffleNetV2, 1-5% of the net's time faster on the micro-kernel, ResNet-50 unchanged; AMD EPYC with
    AVX-512, 1 thread), so POINTWISE_MK_C's default takes every channel count."""

    name, kind, families, packs = "pointwise_mk", "pointwise", ("pointwise",), True
    one_call = own_epilogue = caps = native = True

    def writes_slices(self, conv) -> bool:
        return True

    def fits(self, geo, c, m, group, dtype, n) -> bool:
        ok = _pointwise(geo) and group == 1 and np.dtype(dtype) == np.float32 and window_jit.available()
        return ok and usable("pointwise") and _pointwise_mk(c, m, math.prod(geo.out))

    def pack_shape(self, conv) -> tuple:
        return (window_jit.direct_packed_size(conv.m, conv.kg),)

    def prepare(self, conv, w, out) -> None:
        window_jit.direct_pack(w, out)

    def run(self, conv, k, lo, hi, x, w, b1, y, s) -> None:
        runs = conv._scratch(k)[0]
        i0, i1, m0, m1 = (lo, hi, 0, conv.m) if conv.by_image else (0, conv.n, lo, hi)
        b = _bias(conv, b1)
        window_jit.pointwise(x, conv._u, b, y, s, runs, conv.relu, i0, i1, m0, m1, conv.band, conv.moff)


def _pointwise_mk(c: int, m: int, p: int) -> bool:
    """Whether a 1x1 conv of c -> m channels over p pixels runs on the micro-kernel (PointwiseMicroKernel).
    Never under POINTWISE_MK_MIN_P pixels: one pixel (a squeeze-excitation's convs) fills one lane of the
    micro-kernel's vectors, where BLAS's GEMV is 3-7x faster (measured on AVX-512). Alone, convs of 49-196 pixels
    were faster on the GEMM too, but not within mobile nets (the micro-kernel's fused epilogue and cache reuse)."""
    if p < THRESHOLDS["POINTWISE_MK_MIN_P"]:
        return False
    if c <= THRESHOLDS["POINTWISE_MK_C"]:
        return True
    few = (m <= 64 and p <= 1024) or (p <= 64 and m <= 1024) or (c <= 256 and p <= 256)
    return c <= THRESHOLDS["POINTWISE_MK_MAX_C"] and few


class PointwiseGemm(ConvStrategy):
    """1x1, stride 1, no padding: in NCHW each image already is the GEMM operand (C, H*W), so
    Y[i] = W (M, C) @ X[i] with no copy at all; groups as one batched matmul."""

    name, kind = "pointwise", "pointwise"

    def fits(self, geo, c, m, group, dtype, n) -> bool:
        return _pointwise(geo)

    def run(self, conv, k, lo, hi, x, w, b1, y, s) -> None:
        g, mg, cg, p = conv.g, conv.mg, conv.cg, conv.p
        if conv.by_image:
            w3 = w.reshape(g, mg, cg)
            for i in range(lo, hi):
                yi = y[i].reshape(conv.m, p)
                acc = conv._scratch(k)[1].reshape(conv.m, p) if conv.use_tmp else yi
                np.matmul(w3, x[i].reshape(g, cg, p), out=acc.reshape(g, mg, p))
                conv._epilogue(yi, acc, b1, s[i].reshape(conv.m, p) if s is not None else None)
        else:  # batch < workers, group 1: output channels lo:hi of every image
            w2 = w.reshape(conv.m, conv.c)[lo:hi]
            bk = b1[lo:hi] if b1 is not None else None
            for i in range(conv.n):
                yi = y[i].reshape(conv.m, p)[lo:hi]
                acc = conv._scratch(k)[1].reshape(hi - lo, p) if conv.use_tmp else yi
                np.matmul(w2, x[i].reshape(conv.c, p), out=acc)
                conv._epilogue(yi, acc, bk, s[i].reshape(conv.m, p)[lo:hi] if s is not None else None)


class Depthwise3(ConvStrategy):
    """3x3 and 5x5 depthwise convs at stride 1 and 2 on window_jit.depthwise3 (depthwise3.py: L outputs of several
    rows per step read straight from the image, the padding by masked loads, stride 2 split into even/odd columns
    by a shuffle), where the phase-plane kernel's fill of its planes was most of its time."""

    name, kind, families = "depthwise3", "depthwise", ("depthwise3",)
    one_call = own_epilogue = caps = True

    def fits(self, geo, c, m, group, dtype, n) -> bool:
        return _depthwise(c, m, group) and window_jit.fits(geo, dtype) and window_jit.depthwise3_fits(geo, dtype)

    def run(self, conv, k, lo, hi, x, w, b1, y, s) -> None:
        window_jit.depthwise3(x, w, _bias(conv, b1), y, s, conv.geo, conv.relu, lo, hi)


class DirectDepthwise(ConvStrategy):
    """Depthwise convs at stride 1 on the direct micro-kernel's one-row block (window_jit.direct_depthwise:
    the image's zero-bordered planes filled once, no wide output to copy); at stride 2 the phase-plane
    kernel keeps them (the plane fill dominates both)."""

    name, kind, families = "direct_depthwise", "depthwise", ("direct_depthwise",)
    one_call = own_epilogue = caps = True

    def fits(self, geo, c, m, group, dtype, n) -> bool:
        one_row = geo.stride == (1, 1) and window_jit.direct_geometry(geo, dtype, 1)
        return _depthwise(c, m, group) and window_jit.fits(geo, dtype) and one_row and usable("direct_depthwise")

    def run(self, conv, k, lo, hi, x, w, b1, y, s) -> None:
        col, _, pad, _ = conv._scratch(k)  # pad: the image's zero-bordered planes, col: run offsets
        window_jit.direct_depthwise(x, w, _bias(conv, b1), y, s, pad, col, conv.plan, conv.relu, lo, hi)


class DepthwisePlanes(ConvStrategy):
    """Depthwise convs on numba loops over each channel's phase planes (window_jit.depthwise: the taps
    summed on a wide output row, 2-4x faster than the numpy strategy)."""

    name, kind, families = "depthwise_planes", "depthwise", ("depthwise",)
    one_call = own_epilogue = caps = True

    def fits(self, geo, c, m, group, dtype, n) -> bool:
        return _depthwise(c, m, group) and window_jit.fits(geo, dtype) and usable("depthwise")

    def run(self, conv, k, lo, hi, x, w, b1, y, s) -> None:
        col, _, pad, _ = conv._scratch(k)  # pad: phase planes, col: wide output row
        b = b1.reshape(-1) if b1 is not None else None
        window_jit.depthwise(x, w, b, y, s, pad, col, conv.geo, conv.relu, lo, hi)


class DepthwiseNumpy(ConvStrategy):
    """Depthwise convs (group = C = M) in numpy, per image: the zero-bordered copy, its columns (one
    strided copy), then one batched (1, kh*kw) @ (kh*kw, OH*OW) matmul over the channels (faster than
    einsum or per-tap multiply-adds in numpy; per image, measured faster than the whole batch at once)."""

    name, kind = "depthwise", "depthwise"

    def fits(self, geo, c, m, group, dtype, n) -> bool:
        return _depthwise(c, m, group)

    def run(self, conv, k, lo, hi, x, w, b1, y, s) -> None:
        c, kk, p = conv.dw_spec
        col, tmp, pad, _ = conv._scratch(k)
        geo = conv.geo
        inner, win = pad[(0, slice(None), *geo.interior)], window_view(pad, geo, "NCHW")[0]
        col3, wk = col.reshape(c, kk, p), w.reshape(c, 1, kk)
        for i in range(lo, hi):
            np.copyto(inner, x[i])
            np.copyto(col, win)
            yi = y[i].reshape(c, p)
            acc = tmp.reshape(c, p) if conv.use_tmp else yi
            np.matmul(wk, col3, out=acc.reshape(c, 1, p))
            conv._epilogue(yi, acc, b1, s[i].reshape(c, p) if s is not None else None)


class Channel(ConvStrategy):
    """Group-1 convs with the output channels in the vector lanes and the input cells broadcast from the
    zero-bordered plane (window_jit.channel_conv, channel_kernel.py), where the kernels with pixels in the
    lanes waste them:

    - narrow outputs (at most CHANNEL_OW wide) with windows of at least 2x2, at stride 1, 2 or 4; also where
      Winograd would take them, without its transformed filters (16/9 of the filter) and block buffer, but
      over many channels with enough tiles (``_winograd_narrow``);
    - wide outputs at stride 1 with at least CHANNEL_S2_M outputs and CHANNEL_S2_K input cells a window
      (C x taps), under CHANNEL_WIDE_C input channels (from there on Winograd's fewer multiplies win);
    - at stride 2 (reading the bordered plane at twice the pixel step, where the direct kernel fills phase
      planes and im2col copies columns) and 4 the same wide rule, and 1x1 convs over at most
      CHANNEL_S2_1X1_C channels with at least CHANNEL_S2_M outputs (fewer would leave its lanes idle).

    1x1 convs at stride 1 only on small images (``_narrow_pointwise``): elsewhere the 1x1 micro-kernel and BLAS
    win."""

    name, kind, families, packs = "channel", "channel", ("channel",), True
    one_call = own_epilogue = caps = native = True

    def writes_slices(self, conv) -> bool:
        return True

    def fits(self, geo, c, m, group, dtype, n) -> bool:
        if not window_jit.channel_fits(geo, dtype, group):
            return False
        t = THRESHOLDS
        if geo.out[1] <= t["CHANNEL_OW"] and min(geo.kernel) > 1:
            return not _winograd_narrow(geo, c, m, group, dtype, n)  # narrow outputs
        wide_ok = min(geo.kernel) > 1 and m >= t["CHANNEL_S2_M"] and c * math.prod(geo.kernel) >= t["CHANNEL_S2_K"]
        if geo.stride == (1, 1) and wide_ok and c < t["CHANNEL_WIDE_C"]:
            return True  # wide outputs at stride 1 too, but over many channels Winograd's
        one_s2 = geo.kernel == (1, 1) and c <= t["CHANNEL_S2_1X1_C"] and m >= t["CHANNEL_S2_M"]
        if geo.stride == (1, 1) and _narrow_pointwise(geo, m, group, dtype):
            return True
        return geo.stride == (2, 2) and (wide_ok or one_s2) or geo.stride == (4, 4) and wide_ok

    def pack_shape(self, conv) -> tuple:
        return (conv.cplan.mp * conv.kg,)

    def prepare(self, conv, w, out) -> None:
        window_jit.channel_pack(w, conv.cplan, out)

    def run(self, conv, k, lo, hi, x, w, b1, y, s) -> None:
        planes = conv._scratch(k)[2]
        bp = conv._bp  # the kernel reads whole panels of bias: zeros past the filter's rows
        if b1 is not None and not conv._copy_bias:
            bp = b1.reshape(-1)
        elif b1 is not None:
            np.copyto(bp[: conv.m], b1.reshape(-1))
        panels = conv.cplan.mp // conv.cplan.lanes
        i0, i1, mb0, mb1 = (lo, hi, 0, panels) if conv.by_image else (0, conv.n, lo, hi)
        args = (conv._u, bp, y, s, planes, conv.cplan, conv.geo, conv.relu, i0, i1, mb0, mb1, conv.m)
        window_jit.channel_conv(x, *args, conv.moff)


class Winograd(ConvStrategy):
    """Winograd's F(2x2, 3x3) (winograd.py) for 3x3 stride-1 convs with at least WINOGRAD_C input and
    WINOGRAD_M output channels and at least WINOGRAD_T 2x2 output tiles over the batch (its 16 GEMMs have
    T columns: fewer run them too slowly); thinner convs keep the direct kernel or im2col."""

    name, kind, families, packs = "winograd", "winograd", ("winograd",), True
    own_epilogue = True

    def fits(self, geo, c, m, group, dtype, n) -> bool:
        t = THRESHOLDS
        wide = c >= t["WINOGRAD_C"] and m >= t["WINOGRAD_M"] and n * math.prod(winograd.tiles(geo)) >= t["WINOGRAD_T"]
        return wide and winograd.fits(geo, dtype, group)

    def pack_shape(self, conv) -> tuple:
        return (16, conv.m, conv.c)

    def prepare(self, conv, w, out) -> None:
        winograd.transform_filter(w, out)

    def run(self, conv, k, lo, hi, x, w, b1, y, s) -> None:
        """The batch's tile rows lo:hi, a block of them at a time: input transform, the 16 GEMMs, output
        transform with the epilogue."""
        v, mt, phases, z = conv._winograd_views(k)
        b = b1.reshape(-1) if b1 is not None else None
        tw = conv.wt // conv.wrows
        for g0 in range(lo, hi, conv.wrows):
            g1 = min(hi, g0 + conv.wrows)
            t = (g1 - g0) * tw
            winograd.input_transform(x, v, g0, g1, conv.geo, phases)
            np.matmul(conv._u, v[:, :, :t], out=mt[:, :, :t])
            winograd.output_transform(mt, b, s, y, g0, g1, conv.geo, conv.relu, z)


class Direct(ConvStrategy):
    """The register-blocked micro-kernel of window_jit.direct (microkernel.py) over zero-bordered image
    planes: no columns at all, the epilogue on its registers. 3x3 convs with outputs at least DIRECT_OW
    wide, at stride 1 (stride 2 up to DIRECT_S2_M output channels) that neither the channel-lane kernel
    nor Winograd takes; other windows (not 1x1) up to DIRECT_K = C x window taps (a net's first convs,
    where im2col's columns are mostly copying). Narrow outputs (below window_jit.DIRECT_WIDE_OW) run on
    the wide layout."""

    name, kind, families, packs = "direct", "direct", ("direct",), True
    one_call = own_epilogue = caps = native = True

    def writes_slices(self, conv) -> bool:
        return conv.plan.wide is None  # narrow outputs go through a wide scratch first

    def fits(self, geo, c, m, group, dtype, n) -> bool:
        t = THRESHOLDS
        if geo.kernel == (3, 3):
            fits_direct = geo.stride == (1, 1) or (geo.stride == (2, 2) and m <= t["DIRECT_S2_M"])
        else:  # other windows over few channels (a net's first conv; 2x1 and 1x2 phases of a strided conv's dX,
            # 1xk): im2col's columns are mostly copying, and the kernel's parts run as native jobs
            fits_direct = max(geo.kernel) > 1 and (c // group) * math.prod(geo.kernel) <= t["DIRECT_K"]
        return fits_direct and geo.out[1] >= t["DIRECT_OW"] and window_jit.direct_fits(geo, dtype, group)

    def pack_shape(self, conv) -> tuple:
        return (window_jit.direct_packed_size(conv.m, conv.kg),)

    def prepare(self, conv, w, out) -> None:
        window_jit.direct_pack(w, out)

    def run(self, conv, k, lo, hi, x, w, b1, y, s) -> None:
        """Images lo:hi, or output channels lo:hi at batch 1."""
        runs, wide, pad, _ = conv._scratch(k)
        i0, i1, m0, m1 = (lo, hi, 0, conv.m) if conv.by_image else (0, conv.n, lo, hi)
        args = (pad, runs, conv.plan, conv.relu, i0, i1, m0, m1, wide, conv.moff)
        window_jit.direct(x, conv._u, _bias(conv, b1), y, s, *args)


class Im2col(ConvStrategy):
    """Columns (C, kh, kw, OH, OW) of one image filled straight from the unpadded input, one strided copy
    per kernel tap over the window's valid region (the border cells in the padding are zero from the
    buffer's creation and never written), then one GEMM per image (per group: one batched matmul). What
    the others leave: float64, groups, dilation, stride-2 3x3 convs with many outputs onto wide images,
    5x5 over many channels, 1x1 at stride 2."""

    name, kind = "im2col", "im2col"

    def fits(self, geo, c, m, group, dtype, n) -> bool:
        return True

    def run(self, conv, k, lo, hi, x, w, b1, y, s) -> None:
        g, mg, kg, p = conv.g, conv.mg, conv.kg, conv.p
        col, tmp, _, _ = conv._scratch(k)
        w3, col3 = w.reshape(g, mg, kg), col.reshape(g, kg, p)
        for i in range(lo, hi):
            conv._fill(col, x[i], 0, conv.c)
            yi = y[i].reshape(conv.m, p)
            acc = tmp.reshape(conv.m, p) if conv.use_tmp else yi
            np.matmul(w3, col3, out=acc.reshape(g, mg, p))
            conv._epilogue(yi, acc, b1, s[i].reshape(conv.m, p) if s is not None else None)


POINTWISE_MK = PointwiseMicroKernel()
POINTWISE = PointwiseGemm()
DEPTHWISE3 = Depthwise3()
DIRECT_DEPTHWISE = DirectDepthwise()
DEPTHWISE_PLANES = DepthwisePlanes()
DEPTHWISE = DepthwiseNumpy()
CHANNEL = Channel()
WINOGRAD = Winograd()
DIRECT = Direct()
IM2COL = Im2col()

# In the order they are tried: each family's compiled strategies before its numpy one, the kinds in
# the order channel, pointwise, depthwise, winograd, direct, im2col (channel first for the 1x1 convs on small
# images it takes from the pointwise ones, ``_narrow_pointwise``; none of its other convs fits those).
STRATEGIES: tuple[ConvStrategy, ...] = (
    CHANNEL,
    POINTWISE_MK,
    POINTWISE,
    DEPTHWISE3,
    DIRECT_DEPTHWISE,
    DEPTHWISE_PLANES,
    DEPTHWISE,
    WINOGRAD,
    DIRECT,
    IM2COL,
)
BY_NAME = {s.name: s for s in STRATEGIES}


def choose(geo, c: int, m: int, group: int, dtype=np.float32, n: int = 1) -> ConvStrategy:
    """The first enabled strategy of ``STRATEGIES`` that fits this conv (im2col fits every one)."""
    for strategy in STRATEGIES:
        if strategy.enabled and strategy.fits(geo, c, m, group, dtype, n):
            return strategy
    return IM2COL
