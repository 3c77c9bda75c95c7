"""Forward kernels of 2-D NCHW convolution without needless copies (used by Conv and ConvFusion).

One strategy per input signature, the first of ``conv_strategies.STRATEGIES`` that fits (their doc
says what each is and where it wins); ``ConvNCHW`` plans its scratch, the split between threads and
the replay for it, and runs it. ``conv_kind`` names the chosen strategy's kind.

At batch > 1 with small images (fewer than BLOCK_P output pixels) the images of a worker are batched
into one GEMM on (K, images, P) operands instead of one thin GEMM per image. Scratch
buffers (columns, temporaries, planes) come from ``shared_scratch``: one per thread and shape/geometry,
shared by all the convs that run on that thread, so a net holds a few column buffers, not one per conv.

For the GEMM strategies the filter in Caffe2's layout (M, C/group, kh, kw) is already the (M, K)
operand: no packing; the others pack or transform it (``prepare``), once per filter tensor version.
Work is split over images (batch >= workers) or output channels (batch 1; Winograd:
the batch's tile rows) between the intra-op threads (framework.runtime.parallel), each worker with its own
scratch; every buffer comes from the allocator. The GEMM epilogue runs on each image's output while
it is in cache: bias, then an optional residual ``S`` (added from a temporary when ``S`` is the
output buffer itself, as ConvFusion's in-place sum), then an optional activation, ``relu``: True or 1 Relu,
2 Relu6 (min(max(0, y), 6), NaN kept, as Clip 0..6), 3 HardSwish, 4 Swish (window_jit.RELU...): strategies
with ``caps`` apply it in their stores; after the others (given at most the Relu) one more pass does the rest.
"""

from __future__ import annotations

import math
import sys
import threading
import weakref

import numpy as np

from framework.kernels import conv_strategies as cs
from framework.kernels import native_pool, window_jit, winograd
from framework.kernels.conv_strategies import choose
from framework.kernels.dispatch_table import THRESHOLDS as _T
from framework.kernels.kernel_support import KernelUnavailable
from framework.memory.allocator import allocate_array
from framework.memory.binding import matches, stamp
from framework.runtime.parallel import caller_ident, num_threads, run_parallel, split

_ZERO = np.float32(0)
_SIX = np.float32(6)
# The thresholds of the plan (dispatch_table.THRESHOLDS, read when a conv is prepared):
# - BLOCK_P: output pixels per image below which the images of a worker are batched into one GEMM;
#   THIN_M, THIN_P: im2col convs with at most THIN_M outputs batch their images up to THIN_P pixels;
# - BLOCK_BYTES: images per batched GEMM limited so its columns stay under this size;
# - SPLIT_MIN_FLOPS: convs below this many FLOPs run on one thread (the hand-off would cost more than
#   the work it hands over); NATIVE_SPLIT_MIN_FLOPS the same for convs whose parts run as a native job.


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
    """The kind of the strategy that runs this conv (conv_strategies.choose): 'pointwise', 'depthwise'
    (group = C = M), 'channel', 'winograd', 'direct' or 'im2col'."""
    return choose(geo, c, m, group, dtype, n).kind


class ConvNCHW:
    """A prepared 2-D NCHW forward convolution for one input signature (see module doc)."""

    def __init__(self, n, c, m, group, geo, dtype, has_bias, relu=False, residual=False, inplace_residual=False):
        self._init_args = (n, c, m, group, geo, dtype, has_bias, relu, residual, inplace_residual)
        self._slice_out = None  # see _fall_back
        self.n, self.c, self.m, self.g, self.geo = n, c, m, group, geo
        self.strategy = strategy = choose(geo, c, m, group, dtype, n)
        self.kind = strategy.kind
        self.act = int(relu)
        self.has_bias, self.residual = has_bias, residual
        # the activation code the kernel gets: all of it with ``caps``, else the Relu of Relu/Relu6 only
        self.relu = self.act if strategy.caps else int(self.act in (window_jit.RELU, window_jit.RELU6))
        self.cap_pass = self.act > window_jit.RELU and not strategy.caps  # what the kernel leaves to a pass
        self._act_tmp = None
        self.threads = threads = num_threads()
        native = strategy.native and native_pool.available()
        min_flops = _T["NATIVE_SPLIT_MIN_FLOPS"] if native else _T["SPLIT_MIN_FLOPS"]
        if 2 * n * m * (c // group) * math.prod(geo.kernel) * math.prod(geo.out) < min_flops:
            threads = 1  # too little work to pay for handing half of it to another thread
        self.oshape = (n, m, *geo.out)
        p = math.prod(geo.out)
        self.p, self.cg, self.mg = p, c // group, m // group
        self.kg = self.cg * math.prod(geo.kernel)
        self.taps = _taps(geo) if self.kind == "im2col" else None
        # the strategy's name as the flags the plan below reads
        self.dw3 = strategy is cs.DEPTHWISE3
        self.dmk = strategy is cs.DIRECT_DEPTHWISE
        self.jit = strategy in (cs.DEPTHWISE3, cs.DIRECT_DEPTHWISE, cs.DEPTHWISE_PLANES)  # a compiled depthwise
        self.jit_epilogue = np.dtype(dtype) == np.float32 and window_jit.available()
        self.mk = strategy is cs.POINTWISE_MK  # 1x1 convs on the direct micro-kernel
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
        self.replayable = workers == 1 and strategy.one_call
        self._replay = None
        self._native = None  # the parts' calls as a native job (_NativeParts; False: they are not one)
        self._copy_bias = False  # the channel-lane kernel's bias padded to whole panels (_channel)
        # A temporary for the GEMM result when the residual is the output buffer itself (in-place sum).
        self.use_tmp = residual and inplace_residual and not strategy.own_epilogue
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
        small = p < _T["BLOCK_P"] or (self.kind == "im2col" and m <= _T["THIN_M"] and p < _T["THIN_P"])
        self.blocked = self.by_image and n > 1 and group == 1 and small and self.kind in ("im2col", "pointwise")
        k_rows = self.kg if self.kind == "im2col" else c
        self.chunk = _even_chunk(max(1, min(n, _T["BLOCK_BYTES"] // max(1, k_rows * p * dt.itemsize))), parts[0])
        self.blocked = self.blocked and self.chunk > 1 and not self.mk
        # Strategies with their own form of the filter (packed or transformed), redone per filter version.
        self._transform = self._u = self._u_stamp = None
        if strategy.packs:
            self._transform = strategy.prepare  # (conv, w, out): the strategy's, so no cycle through self
            self._u = allocate_array(strategy.pack_shape(self), dt)
        if self.mk:
            self.band = window_jit.pointwise_band(c)  # (pixels per band, channels per chunk) of the 1x1 kernel
        if self.kind == "direct" or self.mk or self.dmk or self.dw3:  # the kernel adds a bias vector
            self._zero_b = None if has_bias else allocate_array((m,), dt, zero_fill=True)
        if self.kind == "direct" or self.dmk:
            self.plan = window_jit.direct_plan(geo, c, m)
        # Kernels that can write into the channels moff: moff + M of a larger output (a concatenation's;
        # ConvFusion's out_channels), given y whole and no residual.
        self.writes_slices = strategy.writes_slices(self)
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
            if self.dmk:  # zero-bordered planes of the image (shared with direct convs), run offsets
                self.pad_specs[k] = (("direct", geo, self.plan.planes, dt.str), self.plan.planes, True)
                runs = (3, window_jit.depthwise_runs())
                self.col_specs[k] = (("runs", runs, "<i8"), runs, False)
            elif self.kind == "depthwise" and self.jit and not self.dw3:  # (depthwise3 reads the image itself)
                phases, hq, wq, wide = window_jit.plane_shape(geo)
                self.pad_specs[k] = (("planes", (phases, hq * wq), dt.str), (phases, hq * wq), False)
                self.col_specs[k] = (("buf", (wide,), dt.str), (wide,), False)
            elif self.kind == "depthwise" and not self.jit:
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

    def _channel_specs(self, dt) -> None:
        """Scratch of the channel-lane kernel (window_jit.channel_conv), per worker: the image's
        zero-bordered planes (zero-filled once, shared by the convs of this geometry and channel
        count); the packed filter and the bias padded to whole panels are the kernel's own."""
        plan = self.cplan
        for k in range(len(self.parts)):
            self.pad_specs[k] = (("channel", self.geo, plan.planes, dt.str), plan.planes, True)
        self._bp = allocate_array((plan.mp,), dt, zero_fill=True)
        self._copy_bias = plan.mp != self.m  # else the kernel reads the bias array itself

    def _scratch(self, k: int) -> tuple:
        """(columns, temporary, depthwise padded image) of worker slot ``k`` of the calling thread's run
        (``caller_ident``: the same buffers whichever thread runs or steals the part), shared with the
        other kernels' slot ``k`` of that thread's runs (one at a time)."""
        key = (caller_ident(), k)
        got = self._held.get(key)
        if got is None:
            specs = (self.col_specs[k], self.tmp_specs[k], self.pad_specs[k], self.last_specs[k])
            got = self._held[key] = tuple(shared_scratch((k, *s[0]), *s[1:]) if s is not None else None for s in specs)
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
                if self.cap_pass:
                    self._cap(y)
                return
            self._run(x, w, b, self._slice_out, s, wt)
        except KernelUnavailable:  # its first call failed to compile: nothing was written
            self._fall_back()
            self.run(x, w, b, y, s, wt)
            return
        if self.cap_pass:
            self._cap(self._slice_out)
        y[:, self._slice_at : self._slice_at + self.m] = self._slice_out

    def _cap(self, y) -> None:
        """The activation (but the Relu) on this conv's channels of ``y``, after a kernel without ``caps``."""
        yv = y if y.shape[1] == self.m else y[:, self.moff : self.moff + self.m]
        if self.act == window_jit.RELU6:
            np.minimum(yv, _SIX, out=yv)
            return
        t = self._act_tmp
        if t is None or t.shape != yv.shape or t.dtype != yv.dtype:
            t = self._act_tmp = allocate_array(yv.shape, yv.dtype)
        if self.act == window_jit.HARDSWISH:  # y * min(max(y / 6 + 1/2, 0), 1)
            np.multiply(yv, np.float32(1 / 6), out=t)
            t += np.float32(0.5)
            np.clip(t, 0, 1, out=t)
        else:  # Swish: y / (1 + exp(-y))
            with np.errstate(over="ignore"):
                np.negative(yv, out=t)
                np.exp(t, out=t)
            t += 1
            np.divide(yv, t, out=yv)
            return
        yv *= t

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
        fn = self._blocked if self.blocked else self._worker
        if self._transform is not None and not matches(self._u_stamp, wt):
            self._transform(self, w, self._u)  # the kernel's own form of the filter, once per filter version
            self._u_stamp = stamp(wt) if wt is not None else None
        if self.replayable:
            lo, hi = self.parts[0]
            calls = window_jit.record_calls(lambda: fn(0, lo, hi, x, w, b1, y, s))
            self._replay = _Replay.of(calls, x, w, b, y, s)
            return
        nat = self._native
        if nat and nat.fits(self, x, w, b, y, s, wt):
            nat.run(self, x, b, y, s)
            return
        if self.kind == "im2col" and not self.by_image:
            # Batch 1 split by output channels: the shared columns are filled first, by input channels.
            col, x0 = self._scratch(0)[0], x[0]
            run_parallel([_bind(self._fill, col, x0, lo, hi) for lo, hi in split(self.c, len(self.parts))], steal=True)
            run_parallel(
                [_bind(self._im2col_rows, k, lo, hi, col, w, b1, y, s) for k, (lo, hi) in enumerate(self.parts)],
                steal=True,
            )
            return
        parts = self.parts
        if len(parts) == 1:  # one worker: no task list (a few us a conv, as much as a small conv's work)
            fn(0, parts[0][0], parts[0][1], x, w, b1, y, s)
            return
        if caller_ident() == threading.get_ident():  # not a task's own body: this thread calls the parts
            for k in range(len(parts)):  # every slot's scratch, here: no part allocates on the thread running it
                self._scratch(k)
            if nat is None and self.strategy.one_call and native_pool.available():
                # each part's one kernel call, recorded (made here, this once), becomes a task of a native job
                calls = [
                    window_jit.record_calls(_bind(fn, k, lo, hi, x, w, b1, y, s)) for k, (lo, hi) in enumerate(parts)
                ]
                self._native = _NativeParts.of(calls, x, w, b, y, s) or False
                return
        run_parallel([_bind(fn, k, lo, hi, x, w, b1, y, s) for k, (lo, hi) in enumerate(parts)], steal=True)

    def bound(self, x, w, b, y, s, wt, fallback):
        """A zero-argument callable making ``run(x, w, b, y, s, wt)``'s kernel call on these arrays, for
        an op's ``compile()`` (framework/net/program.py): the replay's call with its operands bound, the
        Python of run() skipped. It checks only what may change without the arrays changing: the filter
        tensor's version (a new one, or another thread, runs ``fallback``, the op's run(), which
        re-packs the filter and re-records). None where run() is not one replayable kernel call."""
        rp = self._replay
        if rp is None or y.size == 0 or self._slice_out is not None or not rp.fits(self, x, w, b, y, s, wt):
            return None
        if self.cap_pass:  # run() caps after the kernel
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

    def _worker(self, k, lo, hi, x, w, b1, y, s) -> None:
        """Worker ``k``'s share of the run on the chosen strategy (conv_strategies)."""
        self.strategy.run(self, k, lo, hi, x, w, b1, y, s)

    def _winograd_views(self, k: int) -> tuple:
        """(V, M, phase planes, output tile rows) of worker ``k`` on the running thread: the strided
        views of its scratch, made once per thread (making as_strided views is slow)."""
        key = (caller_ident(), k, "views")
        got = self._held.get(key)
        if got is None:
            buf, _, phases, z = self._scratch(k)
            v = winograd.planes_view(buf, self.c, self.wt)
            mt = winograd.planes_view(buf[self.m_offset :], self.m, self.wt)
            got = self._held[key] = (v, mt, phases, z)
        return got

    def _epilogue(self, yv, acc, b1, sv) -> None:
        """yv <- acc (+ b1) (+ sv), then Relu; ``acc`` is yv or a temporary (2-D (rows, P) views).
        One compiled pass where window_jit has it (float32), else up to three numpy passes, each a
        full pass over the output."""
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

    def _im2col_rows(self, k, lo, hi, col, w, b1, y, s) -> None:
        """Batch 1 (group 1): output channels lo:hi from the shared columns ``col``."""
        p = self.p
        yi = y[0].reshape(self.m, p)[lo:hi]
        acc = self._scratch(k)[1].reshape(hi - lo, p) if self.use_tmp else yi
        np.matmul(w.reshape(self.m, self.kg)[lo:hi], col.reshape(self.kg, p), out=acc)
        bk = b1[lo:hi] if b1 is not None else None
        self._epilogue(yi, acc, bk, s[0].reshape(self.m, p)[lo:hi] if s is not None else None)


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
    the next run's x, y and s in their places, skipping the Python of the per-kind method, the
    window_jit wrapper and the operand checks, which costs as much as a small conv's work. It fits a run on the same
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


class _NativeParts:
    """A conv run on several threads whose every part was one compiled kernel call with a native task
    function (the kernel module's ``native_task``): made again as one native job (native_pool.CallJob) with
    the next run's x, y and s in their places, no GIL taken between its parts. It fits the runs a _Replay of
    each part would."""

    __slots__ = ("reps", "job")

    @classmethod
    def of(cls, parts_calls, x, w, b, y, s):
        reps = [_Replay.of(calls, x, w, b, y, s) for calls in parts_calls]
        if not reps or any(r is None or r.fn is not reps[0].fn for r in reps):
            return None
        fn = reps[0].fn
        module = sys.modules.get(getattr(fn, "py_func", fn).__module__)
        make = getattr(module, "native_task", None)
        got = native_pool.compiled_task(f"{module.__name__}.{fn.__name__}", lambda: make(fn.__name__)) if make else None
        if got is None:
            return None
        task, layout = got
        job = native_pool.CallJob.of(task.address, layout, [r.place(list(r.args), x, y, s) for r in reps])
        if job is None:
            return None
        r = cls()
        r.reps, r.job = reps, job
        return r

    def fits(self, conv, x, w, b, y, s, wt) -> bool:
        return self.reps[0].fits(conv, x, w, b, y, s, wt)

    def run(self, conv, x, b, y, s) -> None:
        if conv._copy_bias and b is not None:
            np.copyto(conv._bp[: conv.m], b)
        job, blk = self.job, self.job.block
        for k, rp in enumerate(self.reps):
            for at, a in ((rp.px, x), (rp.py, y), (rp.ps, s)):
                for i in at:
                    blk.array(job.slot(k, i), a)
        job.run()


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
