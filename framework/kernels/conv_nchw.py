"""Forward kernels of 2-D NCHW convolution without needless copies (used by Conv and ConvFusion).

Six kernels, picked once per input signature (``conv_kind``, by the measured rules below):

- ``pointwise`` (1x1, stride 1, no padding): in NCHW each image already is the GEMM operand
  (C, H*W), so Y[i] = W (M, C) @ X[i] with no copy at all; groups as one batched matmul. Up to
  POINTWISE_MK_C input channels (float32, numba), the direct micro-kernel instead (``mk``).
- ``channel`` (group 1, float32, with numba): the output channels in the vector lanes, the input
  cells broadcast from the zero-bordered plane at stride 1 or 2 (``window_jit.channel_conv``,
  channel_kernel.py): narrow outputs (at most CHANNEL_OW wide), where ``direct`` would waste its pixel
  lanes (and, for its memory, instead of Winograd); wide ones too with at least CHANNEL_S2_M outputs
  and CHANNEL_S2_K input cells a window (at stride 1 under CHANNEL_WIDE_C input channels), and 1x1
  stride-2 convs over few channels.
- ``winograd`` (3x3 stride 1, wide, float32, with numba): Winograd's F(2x2, 3x3) (winograd.py), from
  CHANNEL_WIDE_C input channels on.
- ``direct`` (group 1, float32, with numba): the register-blocked micro-kernel of
  ``window_jit.direct`` (microkernel.py) over zero-bordered image planes: no columns at all, the
  epilogue on its registers; the 3x3 convs at stride 1 (stride 2 up to DIRECT_S2_M outputs) that
  neither of those takes (fewer than 32 outputs, few input cells), and larger windows over few
  channels (DIRECT_K).
- ``im2col``: columns (C, kh, kw, OH, OW) of one image filled straight from the unpadded input, one
  strided copy per kernel tap over the window's valid region; the border cells that fall in the
  padding are zero from the buffer's creation and never written, so padding costs nothing per run.
  Then one GEMM per image (per group: one batched matmul). What is left: float64, groups, dilation,
  the stride-2 3x3 convs with many outputs onto wide images, 5x5 over many channels, 1x1 at stride 2.
- ``depthwise`` (group = C = M): with numba (float32, dilation 1), the compiled kernels of
  ``window_jit`` (2-4x faster; 3x3 at stride 1 and 2 ``depthwise3``, DEPTHWISE3; other windows at
  stride 1 the micro-kernel's one-row block, DEPTHWISE_MK);
  otherwise per image, columns from a zero-bordered copy of the image and one batched matmul over
  the channels (1.5x faster at batch 16 than the whole batch at once).

At batch > 1 with small images (fewer than BLOCK_P output pixels) the images of a worker are batched
into one GEMM on (K, images, P) operands instead of one thin GEMM per image. Scratch
buffers (columns, temporaries, planes) come from ``shared_scratch``: one per thread and shape/geometry,
shared by all the convs that run on that thread, so a net holds a few column buffers, not one per conv.

For the GEMM kinds the filter in Caffe2's layout (M, C/group, kh, kw) is already the (M, K) operand:
no packing; ``direct`` packs it (8 rows interleaved) and ``winograd`` transforms it, once per filter
tensor version. Work is split over images (batch >= workers) or output channels (batch 1; Winograd:
the batch's tile rows) between the intra-op threads (framework.runtime.parallel), each worker with its own
scratch; every buffer comes from the allocator. The GEMM epilogue runs on each image's output while
it is in cache: bias, then an optional residual ``S`` (added from a temporary when ``S`` is the
output buffer itself, as ConvFusion's in-place sum), then an optional Relu.
"""

from __future__ import annotations

import math
import threading
import weakref

import numpy as np

from framework.kernels import window_jit, winograd
from framework.kernels.dispatch_table import THRESHOLDS as _T
from framework.kernels.kernel_support import KernelUnavailable, usable
from framework.memory.allocator import allocate_array
from framework.memory.binding import matches, stamp
from framework.runtime.parallel import num_threads, run_parallel, split

_ZERO = np.float32(0)
# Output pixels per image below which images are batched into one GEMM. Re-measured in interleaved
# rounds (1 thread, batch 16): 128 against 256 + the former "thin" rule (<= 32 output channels on up
# to 1024 pixels): CIFAR ResNet-20 32.8 vs 39.4 ms (its 16/32-channel convs on 32x32/15x15 images run
# faster as one GEMM per image), ResNet-50, DenseNet-121, ShuffleNet within 2% (their 7x7 stages
# stay batched).
BLOCK_P = _T["BLOCK_P"]
# Images per GEMM limited so the batched columns stay under this size: 4 MiB (was 16) costs no measured
# time (AlexNet/ResNet-50/DenseNet-121 batch 16 within 3%) and saves ~55 MiB of columns on AlexNet.
BLOCK_BYTES = _T["BLOCK_BYTES"]
# Convs below this many FLOPs run on one thread even when more are set: measured at batch 1 on 2
# threads, CIFAR ResNet-20 (4 MFLOP convs) took 4.8 ms against 2.9 ms on one (the hand-off costs
# more than half of the work), ShuffleNet 10.7 vs 8.7 ms.
SPLIT_MIN_FLOPS = _T["SPLIT_MIN_FLOPS"]
THIN_M, THIN_P = (
    _T["THIN_M"],
    _T["THIN_P"],
)  # thin im2col convs (few output channels) batch their images up to THIN_P pixels
# The compiled direct conv (window_jit.direct: a register-blocked micro-kernel over the zero-bordered
# image planes, microkernel.py) replaces im2col + GEMM for 3x3 convs with outputs at least DIRECT_OW
# wide, at stride 2 only with at most DIRECT_S2_M output channels. Measured (1 thread, CPU time, bias
# + Relu, against the previous kernels on this Xeon): 16 -> 16 on 30x30 128 GFLOP/s (0.40-0.45x of
# the previous direct kernel's time), 32 -> 32 on 14x14 0.45x, DenseNet-121's 128 -> 32 0.55-0.73x
# (also against Winograd), 64 -> 64 on 56x56 0.62x, 256 -> 256 on 14x14 0.87x of im2col at batch 1;
# stride 2: 16 -> 32 0.49x, 64 -> 64 onto 56x56 0.73x, 128 and 256 outputs 1.04-1.08x of im2col
# (kept there).
# Narrow outputs (below window_jit.DIRECT_WIDE_OW) run on the wide layout: 128 -> 32 on 7x7 0.45-0.55x
# of im2col's time, 64 -> 64 on 8x8 0.75x, 512 -> 512 on 7x7 1.03x.
DIRECT_OW, DIRECT_S2_M = _T["DIRECT_OW"], _T["DIRECT_S2_M"]
# Other windows (not 1x1) run direct up to DIRECT_K = C x window taps: the first convs of ResNet-50 and
# DenseNet-121 (7x7 stride 2 over 3 channels) 0.56-0.65x of im2col's time, AlexNet's 11x11 stride 4
# 0.58-0.65x; its 5x5 over 64 channels (K = 1600) ties (1.03), 1x1 stride 2 loses (1.2-1.8: three of
# the four phase planes filled for nothing).
DIRECT_K = _T["DIRECT_K"]
# 1x1 convs with at most POINTWISE_MK_C input channels run on the same micro-kernel (window_jit.pointwise,
# each image read in place, the epilogue in its stores) instead of OpenBLAS's GEMM + an epilogue pass:
# measured (1 thread, CPU time, bias + Relu) 58 -> 58 on 28x28 0.61x, 116 -> 116 on 14x14 0.76-0.80x,
# 128 -> 32 on 56x56 0.81x, 64 -> 256 on 56x56 0.71-0.89x, 16 -> 64 on 55x55 0.42-0.50x. From about 160
# input channels on the GEMM wins (1.1-1.3x; 1.25-1.5x from 256): the micro-kernel reads its k rows
# unpacked, OpenBLAS packs them. 232 (the previous bound) against 128, whole models interleaved: DenseNet-121
# at batch 16 1.06x slower (its 1x1 convs over 160-224 channels), batch 1 and the others within 3%.
POINTWISE_MK_C = _T["POINTWISE_MK_C"]
# Over more input channels the micro-kernel runs in chunks of window_jit.POINTWISE_KC channels (a chunk's
# rows of a 64-pixel band stay in L1 over every block of output channels), and still wins where OpenBLAS's
# packing of both operands on every call weighs most: few outputs or few pixels. Measured (1 thread,
# batch 1, bias + Relu, interleaved, against OpenBLAS + the epilogue pass): SqueezeNet's squeeze convs
# 256 -> 48, 384 -> 64, 512 -> 64 on 13x13 0.71x, 0.83x, 0.89x, 256 -> 32 on 27x27 0.77x; 7x7 outputs
# (ShuffleNet's 232 -> 232 and 464 -> 1024, DenseNet's 512-1024 -> 128) 0.75-0.96x; 256 -> 128 and
# 232 -> 232 on 14x14 0.83x, 0.96x. Not taken: 512 -> 1000 on 13x13 1.30x, 992 -> 128 on 14x14 1.17x,
# 2048 -> 512 and 512 -> 2048 on 7x7 1.03-1.12x, 256 -> 64 on 56x56 1.34x, 1024 -> 256 on 14x14 1.23x.
POINTWISE_MK_MAX_C = _T["POINTWISE_MK_MAX_C"]


def _pointwise_mk(c: int, m: int, p: int) -> bool:
    """Whether a 1x1 conv of c -> m channels over p pixels runs on the micro-kernel (see POINTWISE_MK_C)."""
    if c <= POINTWISE_MK_C:
        return True
    few = (m <= 64 and p <= 1024) or (p <= 64 and m <= 1024) or (c <= 256 and p <= 256)
    return c <= POINTWISE_MK_MAX_C and few


# Winograd F(2x2, 3x3) (winograd.py) for 3x3 stride-1 convs with at least WINOGRAD_C input and
# WINOGRAD_M output channels and at least WINOGRAD_T 2x2 output tiles over the batch (its 16 GEMMs
# have T columns: fewer run them too slowly); thinner convs keep the direct kernel or im2col (see
# winograd.py for measurements). ``WINOGRAD = False`` turns it off.
WINOGRAD = True
WINOGRAD_C, WINOGRAD_M, WINOGRAD_T = _T["WINOGRAD_C"], _T["WINOGRAD_M"], _T["WINOGRAD_T"]
# Depthwise convs at stride 1 on the direct micro-kernel's one-row block (window_jit.direct_depthwise:
# the image's zero-bordered planes filled once, no wide output to copy): measured (1 thread, 3x3, against
# window_jit.depthwise: phase planes per channel, the taps in numba) 232 channels on 7x7 0.50-0.52x,
# 116 on 14x14 0.53-0.61x, 58 on 28x28 0.85-0.88x; at stride 2 0.86-1.14x (the phase-plane fill
# dominates both), kept on window_jit.depthwise.
DEPTHWISE_MK = True
# 3x3 depthwise convs at stride 1 and 2 on window_jit.depthwise3 (depthwise3.py: L outputs of a row per
# step over the channel's zero-bordered plane, stride 2 split into even/odd columns by a shuffle).
# Measured (1 thread, ShuffleNet's depthwise convs, bias + Relu, kernel calls): stride 2 232 channels
# on 14x14 0.19-0.25x of window_jit.depthwise's time (its phase-plane fill was 90% of it), 116 on
# 28x28 0.26-0.34x, 24 on 56x56 0.29-0.45x; stride 1 against direct_depthwise 0.68-0.95x.
DEPTHWISE3 = True
# Narrow outputs (at most CHANNEL_OW wide) of group-1 convs with windows of at least 2x2, at stride 1 or 2,
# run with the output channels in the vector lanes (window_jit.channel_conv, channel_kernel.py), where the
# kernels with pixels in the lanes waste them. Also where Winograd would take them (batch 16: ResNet-50's 7x7
# and 14x14 stages, AlexNet's 13x13 convs): 1.03x slower there (AlexNet and ResNet-50 at batch 16,
# interleaved) but without Winograd's transformed filters (16/9 of the filter) and its block buffer: AlexNet's
# peak at batch 16 330 -> 285 MiB, under PyTorch eager's 314-337. Measured (1 thread, batch 1, bias + Relu,
# against the previous choice): 3x3 64 -> 64 on 8x8 0.78-0.80x, 128 -> 32 on 7x7 0.87-0.92x, 512 -> 512 on 7x7
# 0.87-1.0x, 256 -> 256 on 14x14 0.84x; stride 2 (im2col or the phase-plane direct kernel before) 256 -> 512
# onto 7x7 0.70-0.80x, 128 -> 256 onto 14x14 0.80-0.91x, 16 -> 32 and 32 -> 64 onto 15x15 / 8x8 0.62-0.83x.
# Not taken then: 1x1 convs at stride 1 (0.88-1.58x against the 1x1 micro-kernel and OpenBLAS). Wider outputs
# came later (CHANNEL_S2_K, CHANNEL_WIDE_C below).
CHANNEL, CHANNEL_OW = True, _T["CHANNEL_OW"]
# At stride 2 the channel-lane kernel reads the bordered plane at twice the pixel step, where the direct
# kernel fills phase planes and im2col copies columns: it takes stride-2 convs at any output width with
# windows over at least CHANNEL_S2_K input cells (C x taps), and 1x1 ones over at most CHANNEL_S2_1X1_C
# channels, both with at least CHANNEL_S2_M output channels (its lanes: 12 -> 8 onto 111x111 ran 3.6x
# slower than direct). Measured (1 thread, bias + Relu, batch 1 / 16, against the previous kind): ResNet-50's 3x3
# 128 -> 128 onto 28x28 0.79x / 0.69x of im2col, its first conv (7x7 over 3 channels) 0.91x / 0.65x of
# direct, CIFAR's 16 -> 32 onto 15x15 0.66x / 0.62x of direct, its 1x1 shortcuts (16 and 32 channels)
# 0.68-0.75x / 1.03-1.16x of im2col. Kept: 3x3 over 3 channels (SqueezeNet, ShuffleNet: 1.04-1.6x slower),
# 1x1 over 256 and more channels (ResNet-50's shortcuts: 1.1-1.9x slower).
CHANNEL_S2_K, CHANNEL_S2_1X1_C, CHANNEL_S2_M = _T["CHANNEL_S2_K"], _T["CHANNEL_S2_1X1_C"], _T["CHANNEL_S2_M"]
# Stride 1 at any width, the same C x taps and M, over fewer than CHANNEL_WIDE_C input channels (from
# 256 on Winograd's fewer multiplies win: 256 -> 256 on 56x56 and on 14x14 at batch 16, 0.75-0.85x of the
# channel-lane kernel's time). Measured against the previous kind (1 thread, bias + Relu, batch 1 / 16):
# DenseNet's 3x3 128 -> 32 on 56x56 and 28x28 0.74-0.75x / 0.73x of direct, ResNet-50's 64 -> 64 on
# 56x56 0.78x / 0.81x of direct and 128 -> 128 on 28x28 0.84x / 0.93x of Winograd, SqueezeNet's 32 ->
# 128 on 27x27 0.76x / 0.92x and 16 -> 64 on 55x55 1.0x, CIFAR's 32 -> 32 on 15x15 0.94-0.97x, AlexNet's
# 5x5 64 -> 192 on 27x27 0.73-1.08x of im2col (without its 25-tap columns, 4.7 MB an image). Not 16
# outputs (16 -> 16 on 30x30: 2x slower, half of a panel's lanes idle).
CHANNEL_WIDE_C = _T["CHANNEL_WIDE_C"]


def _taps(geo) -> list[tuple[tuple, tuple, bool]]:
    """Per kernel tap (a, b): (output slices, input slices, covers the whole output)."""
    (kh, kw), (sh, sw), (dh, dw) = geo.kernel, geo.stride, geo.dilation
    (ph, pw), (h, w), (oh, ow) = geo.head, geo.spatial, geo.out
    res = []
    for a in range(kh):
        rows = _valid(oh, h, sh, ph - a * dh)
        for b in range(kw):
            cols = _valid(ow, w, sw, pw - b * dw)
            if rows is None or cols is None:
                res.append(None)
                continue
            (o0, o1, i0), (q0, q1, j0) = rows, cols
            dst = (slice(o0, o1), slice(q0, q1))
            src = (slice(i0, i0 + (o1 - o0 - 1) * sh + 1, sh), slice(j0, j0 + (q1 - q0 - 1) * sw + 1, sw))
            res.append((dst, src, o0 == 0 and q0 == 0 and o1 == oh and q1 == ow))
    return res


def _valid(out: int, size: int, stride: int, shift: int):
    """Outputs o in [o0, o1) read input o*stride - shift inside [0, size); (o0, o1, first input)."""
    o0 = max(0, -(-shift // stride))
    o1 = min(out, (size - 1 + shift) // stride + 1)
    if o1 <= o0:
        return None
    return o0, o1, o0 * stride - shift


def _even_chunk(chunk: int, part: tuple) -> int:
    """A divisor of the worker's image count at least half as large as ``chunk``, if there is one (then
    no smaller last chunk, with its own column buffer, is needed), else ``chunk``."""
    count = part[1] - part[0]
    for d in range(min(chunk, count), max(2, (chunk + 1) // 2) - 1, -1):
        if count % d == 0:
            return d
    return chunk


def conv_kind(geo, c: int, m: int, group: int, dtype=np.float32, n: int = 1) -> str:
    """'pointwise', 'depthwise' (group = C = M), 'channel' (narrow outputs, see CHANNEL; wide ones, see
    CHANNEL_S2_K and CHANNEL_WIDE_C), 'winograd' (wide 3x3 stride 1 over at least WINOGRAD_T tiles of
    the batch ``n``), 'direct' (see DIRECT_OW, DIRECT_K) or 'im2col'."""
    if geo.kernel == (1, 1) and geo.stride == (1, 1) and not geo.padded:
        return "pointwise"
    if group > 1 and group == c == m:
        return "depthwise"
    if CHANNEL and window_jit.channel_fits(geo, dtype, group):
        if geo.out[1] <= CHANNEL_OW and min(geo.kernel) > 1:
            return "channel"  # narrow outputs
        wide_ok = min(geo.kernel) > 1 and m >= CHANNEL_S2_M and c * math.prod(geo.kernel) >= CHANNEL_S2_K
        if geo.stride == (1, 1) and wide_ok and c < CHANNEL_WIDE_C:
            return "channel"  # wide outputs at stride 1 too, but over many channels Winograd's
        one_s2 = geo.kernel == (1, 1) and c <= CHANNEL_S2_1X1_C and m >= CHANNEL_S2_M
        if geo.stride == (2, 2) and (wide_ok or one_s2) or geo.stride == (4, 4) and wide_ok:
            return "channel"
    wide = c >= WINOGRAD_C and m >= WINOGRAD_M and n * math.prod(winograd.tiles(geo)) >= WINOGRAD_T
    if WINOGRAD and wide and winograd.fits(geo, dtype, group):
        return "winograd"
    if geo.kernel == (3, 3):
        fits_direct = geo.stride == (1, 1) or (geo.stride == (2, 2) and m <= DIRECT_S2_M)
    else:  # larger windows over few channels (a net's first conv): im2col's columns are mostly copying
        fits_direct = min(geo.kernel) > 1 and (c // group) * math.prod(geo.kernel) <= DIRECT_K
    if fits_direct and geo.out[1] >= DIRECT_OW and window_jit.direct_fits(geo, dtype, group):
        return "direct"
    return "im2col"


class ConvNCHW:
    """A prepared 2-D NCHW forward convolution for one input signature (see module doc)."""

    def __init__(self, n, c, m, group, geo, dtype, has_bias, relu=False, residual=False, inplace_residual=False):
        self._init_args = (n, c, m, group, geo, dtype, has_bias, relu, residual, inplace_residual)
        self._slice_out = None  # see _fall_back
        self.n, self.c, self.m, self.g, self.geo = n, c, m, group, geo
        self.kind = conv_kind(geo, c, m, group, dtype, n)
        self.has_bias, self.relu, self.residual = has_bias, relu, residual
        self.threads = threads = num_threads()
        if 2 * n * m * (c // group) * math.prod(geo.kernel) * math.prod(geo.out) < SPLIT_MIN_FLOPS:
            threads = 1  # too little work to pay for handing half of it to another thread
        self.oshape = (n, m, *geo.out)
        p = math.prod(geo.out)
        self.p, self.cg, self.mg = p, c // group, m // group
        self.kg = self.cg * math.prod(geo.kernel)
        self.taps = _taps(geo) if self.kind == "im2col" else None
        jit_dw = self.kind == "depthwise" and window_jit.fits(geo, dtype)
        # 3x3 at stride 1 or 2: window_jit.depthwise3; other stride-1 windows: the micro-kernel's one-row
        # block (window_jit.direct_depthwise) where its geometry allows; else the phase-plane kernel
        self.dw3 = jit_dw and DEPTHWISE3 and window_jit.depthwise3_fits(geo, dtype)
        self.dw3_plane = window_jit.depthwise3_planes(geo) if self.dw3 else None  # (hq, wq, cells)
        one_row = DEPTHWISE_MK and geo.stride == (1, 1) and window_jit.direct_geometry(geo, dtype, 1)
        self.dmk = jit_dw and not self.dw3 and one_row and usable("direct_depthwise")
        self.jit = self.dw3 or self.dmk or (jit_dw and usable("depthwise"))  # a compiled depthwise kernel
        self.jit_epilogue = np.dtype(dtype) == np.float32 and window_jit.available()
        # 1x1 convs on the direct micro-kernel (see POINTWISE_MK_C)
        mk_ok = self.jit_epilogue and usable("pointwise")
        self.mk = self.kind == "pointwise" and group == 1 and mk_ok and _pointwise_mk(c, m, p)
        if self.kind == "channel":
            self.cplan = window_jit.channel_plan(geo, c, m)
        # Split images, except batch 1 with group 1: split output channels.
        self.by_image = n > 1 or threads == 1 or group != 1
        if self.by_image:
            parts = split(n, threads)
        elif self.kind == "direct" or self.mk:  # blocks of the micro-kernel's output channels
            parts = _split_aligned(m, threads, window_jit.direct_block_rows())
        elif self.kind == "channel":  # panels of output channels
            parts = split(self.cplan.mp // self.cplan.lanes, threads)
        else:
            parts = split(m, threads)
        self.parts = parts
        workers = len(parts)
        # Kernels whose run on one worker is one compiled call: replayed (see run()).
        self.replayable = workers == 1 and (
            self.kind in ("direct", "channel") or self.mk or (self.kind == "depthwise" and self.jit)
        )
        self._replay = None
        self._copy_bias = False  # the channel-lane kernel's bias padded to whole panels (_channel)
        # A temporary for the GEMM result when the residual is the output buffer itself (in-place sum).
        own_epilogue = self.jit or self.mk or self.kind in ("direct", "winograd", "channel")  # reads S, then writes Y
        self.use_tmp = residual and inplace_residual and not own_epilogue
        # Scratch buffers are specs (key, shape, zero-filled); the buffers come from shared_scratch at run
        # time: one per running thread and key, shared by every conv of that geometry (see module doc).
        dt = np.dtype(dtype)
        self.col_specs = [None] * workers  # im2col columns
        self.tmp_specs = [None] * workers  # GEMM result when the output holds the residual
        self.pad_specs = [None] * workers  # depthwise: the zero-bordered image
        self.last_specs = [None] * workers  # blocked im2col: columns of a last, smaller chunk of images
        self._held: dict = {}
        # Small images (P < BLOCK_P) at batch > 1: one GEMM per worker over its block of images, on
        # operands laid out (K, images, P), instead of one thin GEMM per image.
        small = p < BLOCK_P or (self.kind == "im2col" and m <= THIN_M and p < THIN_P)
        self.blocked = self.by_image and n > 1 and group == 1 and small and self.kind in ("im2col", "pointwise")
        k_rows = self.kg if self.kind == "im2col" else c
        self.chunk = _even_chunk(max(1, min(n, BLOCK_BYTES // max(1, k_rows * p * dt.itemsize))), parts[0])
        self.blocked = self.blocked and self.chunk > 1 and not self.mk
        self._fn_name = "_blocked" if self.blocked else "_" + self.kind  # the per-worker kernel run() hands out
        if self.mk:
            self._fn_name = "_mk_pointwise"
        # Kernels with their own form of the filter (packed or transformed), redone per filter version.
        self._transform = self._u = self._u_stamp = None
        if self.kind == "direct" or self.mk:
            self._transform = window_jit.direct_pack
            self._u = allocate_array((window_jit.direct_packed_size(m, self.kg),), dt)
        if self.mk:
            self.band = window_jit.pointwise_band(c)  # (pixels per band, channels per chunk) of the 1x1 kernel
        if self.kind == "direct" or self.mk or self.dmk or self.dw3:  # the kernel adds a bias vector
            self._zero_b = None if has_bias else allocate_array((m,), dt, zero_fill=True)
        if self.kind == "direct" or self.dmk:
            self.plan = window_jit.direct_plan(geo, c, m)
        # Kernels that can write into the channels moff: moff + M of a larger output (a concatenation's;
        # ConvFusion's out_channels), given y whole and no residual.
        self.writes_slices = self.mk or self.kind == "channel" or (self.kind == "direct" and self.plan.wide is None)
        self.moff = 0
        if self.kind == "winograd":
            self._winograd_specs(dt)
            return
        if self.kind == "channel":
            self._channel_specs(dt)
            return
        for k, (lo, hi) in enumerate(parts):
            nb = min(hi - lo, self.chunk)
            if self.blocked:
                if self.kind == "im2col":
                    shape = (c, *geo.kernel, nb, *geo.out)
                    self.col_specs[k] = (("col", geo, shape, dt.str), shape, True)
                    last = (hi - lo) % self.chunk
                    if last:
                        shape = (c, *geo.kernel, last, *geo.out)
                        self.last_specs[k] = (("col", geo, shape, dt.str), shape, True)
                else:
                    self.col_specs[k] = (("buf", (c, nb, p), dt.str), (c, nb, p), False)
                self.tmp_specs[k] = (("tmp", (m, nb, p), dt.str), (m, nb, p), False)
                continue
            rows = m if self.by_image else hi - lo
            if self.kind == "im2col" and (self.by_image or k == 0):
                shape = (c, *geo.kernel, *geo.out)
                self.col_specs[k] = (("col", geo, shape, dt.str), shape, True)
            if self.mk:  # the micro-kernel's run offsets
                self.col_specs[k] = (("runs", (3, 2), "<i8"), (3, 2), False)
            if self.kind == "direct":  # zero-bordered planes of the image, the micro-kernel's run offsets
                planes = self.plan.planes
                self.pad_specs[k] = (("direct", geo, planes, dt.str), planes, True)
                self.col_specs[k] = (("runs", (3, 2), "<i8"), (3, 2), False)
                if self.plan.wide is not None:  # narrow outputs: the wide output rows
                    self.tmp_specs[k] = (("buf", self.plan.wide, dt.str), self.plan.wide, False)
            if self.dw3:  # zero-bordered planes of the image
                shape = (c, self.dw3_plane[2])
                self.pad_specs[k] = (("dw3", geo, shape, dt.str), shape, True)
            elif self.dmk:  # zero-bordered planes of the image (shared with direct convs), run offsets
                self.pad_specs[k] = (("direct", geo, self.plan.planes, dt.str), self.plan.planes, True)
                runs = (3, window_jit.depthwise_runs())
                self.col_specs[k] = (("runs", runs, "<i8"), runs, False)
            elif self.kind == "depthwise" and self.jit:
                phases, hq, wq, wide = window_jit.plane_shape(geo)
                self.pad_specs[k] = (("planes", (phases, hq * wq), dt.str), (phases, hq * wq), False)
                self.col_specs[k] = (("buf", (wide,), dt.str), (wide,), False)
            elif self.kind == "depthwise":
                shape = (1, c, *geo.buf_spatial)
                self.pad_specs[k] = (("pad", geo, shape, dt.str), shape, True)
                self.col_specs[k] = (("buf", (c, *geo.kernel, *geo.out), dt.str), (c, *geo.kernel, *geo.out), False)
            if self.use_tmp:
                self.tmp_specs[k] = (("tmp", (rows, *geo.out), dt.str), (rows, *geo.out), False)
        self.dw_spec = (c, math.prod(geo.kernel), p)

    def _winograd_specs(self, dt) -> None:
        """Scratch of the Winograd kernel (winograd.py), per worker: V and M of one block of tile rows
        (one flat buffer shared by the thread's Winograd convs, viewed as (16, C|M, T) with padded
        plane strides), the even/odd column planes of one zero-bordered image, a tile row pair of the
        output. Workers split the batch's tile rows. The transformed filter U is the kernel's own
        (refreshed per filter tensor version)."""
        geo, c, m = self.geo, self.c, self.m
        th, tw = winograd.tiles(geo)
        self.wrows = max(1, winograd.BLOCK_BYTES // (16 * (c + m) * tw * dt.itemsize))  # tile rows per block
        self.wt = self.wrows * tw  # tiles per block
        self.parts = split(self.n * th, len(self.parts))
        self.m_offset, size = winograd.scratch_layout(c, m, self.wt)
        for k in range(len(self.parts)):
            self.col_specs[k] = (("wino", size, dt.str), (size,), False)  # V, then M
            shape = (2, 2 * th + 2, tw + 1)
            self.pad_specs[k] = (("wino_planes", geo, shape, dt.str), shape, True)
            self.last_specs[k] = (("buf", (2, 2 * tw), dt.str), (2, 2 * tw), False)
        self._transform = winograd.transform_filter
        self._u = allocate_array((16, m, c), dt)

    def _channel_specs(self, dt) -> None:
        """Scratch of the channel-lane kernel (window_jit.channel_conv), per worker: the image's
        zero-bordered planes (zero-filled once, shared by the convs of this geometry and channel
        count); the packed filter and the bias padded to whole panels are the kernel's own."""
        plan = self.cplan
        for k in range(len(self.parts)):
            self.pad_specs[k] = (("channel", self.geo, plan.planes, dt.str), plan.planes, True)
        self._transform = lambda w, out: window_jit.channel_pack(w, plan, out)
        self._u = allocate_array((plan.mp * self.kg,), dt)
        self._bp = allocate_array((plan.mp,), dt, zero_fill=True)
        self._copy_bias = plan.mp != self.m  # else the kernel reads the bias array itself

    def _scratch(self, k: int) -> tuple:
        """(columns, temporary, depthwise padded image) of worker slot ``k`` for the running thread."""
        key = (threading.get_ident(), k)
        got = self._held.get(key)
        if got is None:
            specs = (self.col_specs[k], self.tmp_specs[k], self.pad_specs[k], self.last_specs[k])
            got = self._held[key] = tuple(shared_scratch(*s) if s is not None else None for s in specs)
        return got

    # -- one run -----------------------------------------------------------------------------------

    def run(self, x, w, b, y, s=None, wt=None) -> None:
        """Y = conv(X, W) (+ b) (+ S) (then Relu); ``s`` may be ``y`` itself (in-place residual).
        ``wt``: the filter's Tensor, if any (kernels keeping a transformed filter then redo it only
        when its version changes; without it they redo it every run)."""
        if y.size == 0:
            return
        try:
            if self._slice_out is None:
                self._run(x, w, b, y, s, wt)
                return
            self._run(x, w, b, self._slice_out, s, wt)
        except KernelUnavailable:  # its first call failed to compile: nothing was written
            self._fall_back()
            self.run(x, w, b, y, s, wt)
            return
        y[:, self._slice_at : self._slice_at + self.m] = self._slice_out

    def _fall_back(self) -> None:
        """Prepare again, now that a kernel family is disabled (kernel_support): another kind runs. A
        kernel writing a concatenation's channels (``moff``) may give way to one that cannot: that one
        writes a buffer of its own, copied into the channels."""
        moff = self.moff
        self.__init__(*self._init_args)
        if moff and not self.writes_slices:
            self._slice_out = allocate_array(self.oshape, np.dtype(self._init_args[5]))
            self._slice_at = moff
        else:
            self.moff = moff

    def _run(self, x, w, b, y, s, wt) -> None:
        rp = self._replay
        if rp is not None and rp.fits(self, x, w, b, y, s, wt):
            if self._copy_bias and b is not None:
                np.copyto(self._bp[: self.m], b)
            rp.call(x, y, s)
            return
        b1 = b.reshape(-1, 1) if b is not None else None
        fn = getattr(self, self._fn_name)
        if self._transform is not None and not matches(self._u_stamp, wt):
            self._transform(w, self._u)  # the kernel's own form of the filter, once per filter version
            self._u_stamp = stamp(wt) if wt is not None else None
        if self.replayable:
            lo, hi = self.parts[0]
            calls = window_jit.record_calls(lambda: fn(0, lo, hi, x, w, b1, y, s))
            self._replay = _Replay.of(calls, x, w, b, y, s)
            return
        if self.kind == "im2col" and not self.by_image:
            # Batch 1 split by output channels: the shared columns are filled first, by input channels.
            col, x0 = self._scratch(0)[0], x[0]
            run_parallel([_bind(self._fill, col, x0, lo, hi) for lo, hi in split(self.c, len(self.parts))])
            run_parallel(
                [_bind(self._im2col_rows, k, lo, hi, col, w, b1, y, s) for k, (lo, hi) in enumerate(self.parts)]
            )
            return
        parts = self.parts
        if len(parts) == 1:  # one worker: no task list (a few us a conv, as much as a small conv's work)
            fn(0, parts[0][0], parts[0][1], x, w, b1, y, s)
            return
        run_parallel([_bind(fn, k, lo, hi, x, w, b1, y, s) for k, (lo, hi) in enumerate(parts)])

    def bound(self, x, w, b, y, s, wt, fallback):
        """A zero-argument callable making ``run(x, w, b, y, s, wt)``'s kernel call on these arrays, for
        an op's ``compile()`` (framework/net/program.py): the replay's call with its operands bound, the
        Python of run() skipped. It checks only what may change without the arrays changing: the filter
        tensor's version (a new one, or another thread, runs ``fallback``, the op's run(), which
        re-packs the filter and re-records). None where run() is not one replayable kernel call."""
        rp = self._replay
        if rp is None or y.size == 0 or self._slice_out is not None or not rp.fits(self, x, w, b, y, s, wt):
            return None
        fn, args, tid, get_ident = rp.fn, tuple(rp.place(list(rp.args), x, y, s)), rp.tid, threading.get_ident
        bias = (self._bp[: self.m], b) if self._copy_bias and b is not None else None
        if self._transform is None and bias is None:

            def call() -> None:
                if get_ident() != tid:
                    return fallback()
                fn(*args)

            return call
        copyto, kernel = np.copyto, self

        def call_checked() -> None:
            if get_ident() != tid or (kernel._transform is not None and not matches(kernel._u_stamp, wt)):
                return fallback()
            if bias is not None:
                copyto(*bias)
            fn(*args)

        return call_checked

    def _epilogue(self, yv, acc, b1, sv) -> None:
        """yv <- acc (+ b1) (+ sv), then Relu; ``acc`` is yv or a temporary (2-D (rows, P) views).
        One compiled pass where window_jit has it (float32), else up to three numpy passes: measured
        on a 1x1 conv with 256 outputs over 56x56 pixels, bias + Relu as numpy passes add 41% to the
        GEMM's time."""
        if acc is yv and b1 is None and sv is None and not self.relu:
            return
        if self.jit_epilogue and window_jit.epilogue(
            acc, b1.reshape(-1) if b1 is not None else None, sv, yv, self.relu
        ):
            return
        if sv is not None:  # first: ``sv`` may be ``yv`` itself (in-place residual)
            np.add(acc, sv, out=yv)
            acc = yv
        if b1 is not None:
            np.add(acc, b1, out=yv)
            acc = yv
        if acc is not yv:
            np.copyto(yv, acc)
        if self.relu:
            np.maximum(yv, _ZERO, out=yv)

    def _pointwise(self, k, lo, hi, x, w, b1, y, s) -> None:
        g, mg, cg, p = self.g, self.mg, self.cg, self.p
        if self.by_image:
            w3 = w.reshape(g, mg, cg)
            for i in range(lo, hi):
                yi = y[i].reshape(self.m, p)
                acc = self._scratch(k)[1].reshape(self.m, p) if self.use_tmp else yi
                np.matmul(w3, x[i].reshape(g, cg, p), out=acc.reshape(g, mg, p))
                self._epilogue(yi, acc, b1, s[i].reshape(self.m, p) if s is not None else None)
        else:  # batch < workers, group 1: output channels lo:hi of every image
            w2 = w.reshape(self.m, self.c)[lo:hi]
            bk = b1[lo:hi] if b1 is not None else None
            for i in range(self.n):
                yi = y[i].reshape(self.m, p)[lo:hi]
                acc = self._scratch(k)[1].reshape(hi - lo, p) if self.use_tmp else yi
                np.matmul(w2, x[i].reshape(self.c, p), out=acc)
                self._epilogue(yi, acc, bk, s[i].reshape(self.m, p)[lo:hi] if s is not None else None)

    def _blocked(self, k, lo, hi, x, w, b1, y, s) -> None:
        for c0 in range(lo, hi, self.chunk):
            self._block(k, c0, min(hi, c0 + self.chunk), x, w, b1, y, s)

    def _block(self, k, lo, hi, x, w, b1, y, s) -> None:
        m, p, nb = self.m, self.p, hi - lo
        col, acc, _, col_last = self._scratch(k)
        if nb < self.chunk:  # the last, smaller chunk: contiguous views of the first nb images' worth
            acc = acc.reshape(-1)[: m * nb * p].reshape(m, nb, p)
            if self.kind == "im2col":
                col = col_last  # its own zero-bordered layout
            else:
                col = col.reshape(-1)[: self.c * nb * p].reshape(self.c, nb, p)
        if self.kind == "im2col":
            self._fill_block(col, x[lo:hi].transpose(1, 0, 2, 3))
            np.matmul(w.reshape(m, self.kg), col.reshape(self.kg, nb * p), out=acc.reshape(m, nb * p))
        else:
            np.copyto(col, x[lo:hi].reshape(nb, self.c, p).transpose(1, 0, 2))
            np.matmul(w.reshape(m, self.c), col.reshape(self.c, nb * p), out=acc.reshape(m, nb * p))
        yb = y[lo:hi].reshape(nb, m, p)
        sb = s[lo:hi].reshape(nb, m, p) if s is not None else None
        if self.jit_epilogue and window_jit.epilogue_block(
            acc, b1.reshape(-1) if b1 is not None else None, sb, yb, self.relu
        ):
            return  # one compiled call for the whole block (fewer Python calls: less GIL held on 2 threads)
        for j in range(nb):
            self._epilogue(yb[j], acc[:, j], b1, sb[j] if sb is not None else None)

    def _fill(self, col, xi, c0, c1) -> None:
        """Columns of image ``xi`` for input channels c0:c1 (valid window region of every tap)."""
        kh, kw = self.geo.kernel
        for t, tap in enumerate(self.taps):
            if tap is None:
                continue
            dst, src = tap[0], tap[1]
            a, bb = divmod(t, kw)
            np.copyto(col[c0:c1, a, bb][(slice(None), *dst)], xi[c0:c1][(slice(None), *src)])

    def _fill_block(self, col, xb) -> None:
        """Columns (C, kh, kw, images, OH, OW) of the images ``xb`` (C, images, H, W): one strided copy
        per kernel tap for the whole block of images."""
        kw = self.geo.kernel[1]
        for t, tap in enumerate(self.taps):
            if tap is not None:
                a, bb = divmod(t, kw)
                np.copyto(col[:, a, bb][(slice(None), slice(None), *tap[0])], xb[(slice(None), slice(None), *tap[1])])

    def _im2col(self, k, lo, hi, x, w, b1, y, s) -> None:
        g, mg, kg, p = self.g, self.mg, self.kg, self.p
        col, tmp, _, _ = self._scratch(k)
        w3, col3 = w.reshape(g, mg, kg), col.reshape(g, kg, p)
        for i in range(lo, hi):
            self._fill(col, x[i], 0, self.c)
            yi = y[i].reshape(self.m, p)
            acc = tmp.reshape(self.m, p) if self.use_tmp else yi
            np.matmul(w3, col3, out=acc.reshape(g, mg, p))
            self._epilogue(yi, acc, b1, s[i].reshape(self.m, p) if s is not None else None)

    def _im2col_rows(self, k, lo, hi, col, w, b1, y, s) -> None:
        """Batch 1 (group 1): output channels lo:hi from the shared columns ``col``."""
        p = self.p
        yi = y[0].reshape(self.m, p)[lo:hi]
        acc = self._scratch(k)[1].reshape(hi - lo, p) if self.use_tmp else yi
        np.matmul(w.reshape(self.m, self.kg)[lo:hi], col.reshape(self.kg, p), out=acc)
        bk = b1[lo:hi] if b1 is not None else None
        self._epilogue(yi, acc, bk, s[0].reshape(self.m, p)[lo:hi] if s is not None else None)

    def _mk_pointwise(self, k, lo, hi, x, w, b1, y, s) -> None:
        """1x1 conv on the micro-kernel (window_jit.pointwise): images lo:hi, or output channels lo:hi."""
        runs = self._scratch(k)[0]
        b = b1.reshape(-1) if b1 is not None else self._zero_b
        i0, i1, m0, m1 = (lo, hi, 0, self.m) if self.by_image else (0, self.n, lo, hi)
        window_jit.pointwise(x, self._u, b, y, s, runs, self.relu, i0, i1, m0, m1, self.band, self.moff)

    def _direct(self, k, lo, hi, x, w, b1, y, s) -> None:
        """Compiled direct conv (window_jit.direct): images lo:hi, or output channels lo:hi at batch 1."""
        runs, wide, pad, _ = self._scratch(k)
        b = b1.reshape(-1) if b1 is not None else self._zero_b
        i0, i1, m0, m1 = (lo, hi, 0, self.m) if self.by_image else (0, self.n, lo, hi)
        window_jit.direct(x, self._u, b, y, s, pad, runs, self.plan, self.relu, i0, i1, m0, m1, wide, self.moff)

    def _channel(self, k, lo, hi, x, w, b1, y, s) -> None:
        """Narrow outputs with the output channels in the vector lanes (window_jit.channel_conv):
        images lo:hi, or output channel panels lo:hi at batch 1."""
        planes = self._scratch(k)[2]
        bp = self._bp  # the kernel reads whole panels of bias: zeros past the filter's rows
        if b1 is not None and not self._copy_bias:
            bp = b1.reshape(-1)
        elif b1 is not None:
            np.copyto(bp[: self.m], b1.reshape(-1))
        panels = self.cplan.mp // self.cplan.lanes
        i0, i1, mb0, mb1 = (lo, hi, 0, panels) if self.by_image else (0, self.n, lo, hi)
        args = (self._u, bp, y, s, planes, self.cplan, self.geo, self.relu, i0, i1, mb0, mb1, self.m)
        window_jit.channel_conv(x, *args, self.moff)

    def _winograd(self, k, lo, hi, x, w, b1, y, s) -> None:
        """Winograd F(2x2, 3x3) of the batch's tile rows lo:hi, a block of them at a time: input
        transform, the 16 GEMMs, output transform with the epilogue."""
        key = (threading.get_ident(), k, "views")
        got = self._held.get(key)
        if got is None:  # as_strided views cost ~10 us: made once per thread
            buf, _, phases, z = self._scratch(k)
            v = winograd.planes_view(buf, self.c, self.wt)
            mt = winograd.planes_view(buf[self.m_offset :], self.m, self.wt)
            got = self._held[key] = (v, mt, phases, z)
        v, mt, phases, z = got
        b = b1.reshape(-1) if b1 is not None else None
        tw = self.wt // self.wrows
        for g0 in range(lo, hi, self.wrows):
            g1 = min(hi, g0 + self.wrows)
            t = (g1 - g0) * tw
            winograd.input_transform(x, v, g0, g1, self.geo, phases)
            np.matmul(self._u, v[:, :, :t], out=mt[:, :, :t])
            winograd.output_transform(mt, b, s, y, g0, g1, self.geo, self.relu, z)

    def _depthwise(self, k, lo, hi, x, w, b1, y, s) -> None:
        """Per image: the zero-bordered copy, its columns (one strided copy), then one batched
        (1, kh*kw) @ (kh*kw, OH*OW) matmul over the channels (faster than einsum or per-tap
        multiply-adds in numpy)."""
        from framework.kernels.geometry import window_view

        c, kk, p = self.dw_spec
        col, tmp, pad, _ = self._scratch(k)
        if self.dw3:  # pad: the image's zero-bordered planes
            b = b1.reshape(-1) if b1 is not None else self._zero_b
            window_jit.depthwise3(x, w, b, y, s, pad, self.dw3_plane, self.geo, self.relu, lo, hi)
            return
        if self.dmk:  # pad: the image's zero-bordered planes, col: run offsets
            b = b1.reshape(-1) if b1 is not None else self._zero_b
            window_jit.direct_depthwise(x, w, b, y, s, pad, col, self.plan, self.relu, lo, hi)
            return
        if self.jit:  # pad: phase planes, col: wide output row (window_jit)
            b = b1.reshape(-1) if b1 is not None else None
            window_jit.depthwise(x, w, b, y, s, pad, col, self.geo, self.relu, lo, hi)
            return
        geo = self.geo
        inner, win = pad[(0, slice(None), *geo.interior)], window_view(pad, geo, "NCHW")[0]
        col3, wk = col.reshape(c, kk, p), w.reshape(c, 1, kk)
        for i in range(lo, hi):
            np.copyto(inner, x[i])
            np.copyto(col, win)
            yi = y[i].reshape(c, p)
            acc = tmp.reshape(c, p) if self.use_tmp else yi
            np.matmul(wk, col3, out=acc.reshape(c, 1, p))
            self._epilogue(yi, acc, b1, s[i].reshape(c, p) if s is not None else None)


_REGISTRY = threading.local()


def shared_scratch(key: tuple, shape: tuple, zero: bool) -> np.ndarray:
    """The running thread's scratch buffer for ``key`` (whose last item is the dtype), allocated on first
    use (zero-filled if ``zero``). Held weakly here and strongly by the kernels using it, so it lives as
    long as one of them; ops of one thread run one at a time, so they may share it. Column buffers are
    keyed by geometry: every user writes the same cells, the padding cells stay zero."""
    reg = getattr(_REGISTRY, "buffers", None)
    if reg is None:
        reg = _REGISTRY.buffers = weakref.WeakValueDictionary()
    buf = reg.get(key)
    if buf is None:
        buf = allocate_array(shape, np.dtype(key[-1]), zero_fill=zero)
        reg[key] = buf
    return buf


def _split_aligned(total: int, parts: int, align: int) -> list[tuple[int, int]]:
    """``split`` of range(total) with inner bounds at multiples of ``align`` (empty parts dropped)."""
    bounds = [0] + [min(total, round(total * i / parts / align) * align) for i in range(1, parts)] + [total]
    return [(a, b) for a, b in zip(bounds, bounds[1:]) if b > a]


class _Replay:
    """A conv run that was one compiled kernel call (window_jit.record_calls), to be made again with
    the next run's x, y and s in their places: 8-10 us of Python a conv less (the per-kind method, the
    window_jit wrapper, operand checks), as much as a small conv's work. It fits a run on the same
    thread, filter and bias arrays (and filter version, where the kernel packs it), x contiguous and
    the residual in the same role (none, y itself, or another contiguous array)."""

    __slots__ = ("fn", "args", "px", "py", "ps", "w", "b", "tid", "mode")

    @classmethod
    def of(cls, calls, x, w, b, y, s):
        mode = _residual_mode(y, s)
        if len(calls) != 1 or mode < 0 or not (x.flags.c_contiguous and w.flags.c_contiguous):
            return None
        fn, args = calls[0]
        r = cls()
        r.fn, r.args, r.w, r.b, r.tid, r.mode = fn, list(args), w, b, threading.get_ident(), mode
        r.px = [i for i, a in enumerate(args) if a is x]
        r.py = [i for i, a in enumerate(args) if a is y]
        r.ps = [i for i, a in enumerate(args) if a is s] if mode == 2 else []
        if not r.px or not r.py or (mode == 2 and not r.ps):
            return None  # an operand was copied: nothing to put the next run's into
        r._clear()
        return r

    def _clear(self) -> None:  # hold no operand between runs (it may be a buffer the workspace dropped)
        args = self.args
        for i in (*self.px, *self.py, *self.ps):
            args[i] = None

    def fits(self, conv, x, w, b, y, s, wt) -> bool:
        """Whether this run of ``conv`` may be the replay (no reference to ``conv`` is kept: no cycle)."""
        return (
            w is self.w
            and b is self.b
            and self.tid == threading.get_ident()
            and _residual_mode(y, s) == self.mode
            and x.flags.c_contiguous
            and (conv._transform is None or matches(conv._u_stamp, wt))
        )

    def place(self, args: list, x, y, s) -> list:
        """``args`` (the recorded call's) with x, y and s put in their places."""
        for i in self.px:
            args[i] = x
        for i in self.py:
            args[i] = y
        for i in self.ps:
            args[i] = s
        return args

    def call(self, x, y, s) -> None:
        try:
            self.fn(*self.place(self.args, x, y, s))
        finally:
            self._clear()


def _residual_mode(y, s) -> int:
    """0 no residual, 1 y itself (in place), 2 another contiguous array, -1 another array."""
    if s is None:
        return 0
    if s is y:
        return 1
    return 2 if s.flags.c_contiguous else -1


class _bind:  # noqa: N801  (a tiny closure object)
    __slots__ = ("fn", "args")

    def __init__(self, fn, *args) -> None:
        self.fn, self.args = fn, args

    def __call__(self) -> None:
        self.fn(*self.args)
