"""The filter gradient dW of a 2-D NCHW convolution by a compiled kernel, without an im2col column buffer.

``dW[m, c, a, b] = sum over images n and output pixels (i, j) of dY[n, m, i, j] * X[n, c, i * sh + a - ph,
j * sw + b - pw]`` (zero outside X), for group 1 and dilation 1, any kernel size, strides and pads, float32.
conv_grad_filter_kernels.py lays each image's input out as zero-bordered phase planes and dY as rows of
the planes' width, so that every tap is a contiguous shifted read, and sums the products in a
register block of output channels x (input channel, tap) pairs (an LLVM IR kernel with fused
multiply-adds; family ``conv_grad_filter``: x86-64 with AVX2 and FMA, kernel_support). Its vectors run
over an image's pixels, or, on small images where padding columns and rounded tails would take a good
share of those vectors, over output channels (dY transposed to pixels x channels; ``mode``).

The images are summed in two fixed halves, whatever the thread count: the first half's sums go into dW,
the second's into a share added at the end, so the result does not depend on the number of threads. On two
threads each lays out and sums its own half as one task of a native job (native_pool; its planes stay in its
own cache); with more, the layout is split over them by images, then the sums by half and blocks of output
channels. ``plan`` returns None where the kernel does not apply (other
groups, dilations, ranks or dtypes, numba missing, a CPU without the features, the family disabled);
``FilterGradient.run`` returns False when the kernel's first compile fails (nothing written): the caller
runs its numpy path, which gives the same values up to float rounding.
"""

from __future__ import annotations

import numpy as np

from framework.kernels import kernel_support, machine, native_pool, window_jit
from framework.kernels.geometry import Geometry
from framework.kernels.kernel_support import KernelUnavailable
from framework.runtime.parallel import get_num_threads, split

FAMILY = "conv_grad_filter"
_CHUNK_BYTES = 512 * 1024  # one run of images' planes and dY rows: about half a core's L2
_MIN_STEPS = 128  # vector steps of one register block's run at least, however large the images
COPY_SPLIT_MIN = 1 << 18  # dW values from which the channels layout's copy-out is split over the threads
_UNSET = object()
_kernels = _UNSET


def _module():
    global _kernels
    if _kernels is _UNSET:
        # numba importable and not disabled (FRAMEWORK_NO_JIT)
        _kernels = machine.import_kernels("conv_grad_filter_kernels") if window_jit.available() else None
    return _kernels


def available() -> bool:
    """Whether the compiled kernel may run in this process (the CPU has what it needs, numba imports,
    its compile has not failed)."""
    return kernel_support.usable(FAMILY) and _module() is not None


def plane_width(geo: Geometry) -> int:
    """The row pitch of the phase planes: every input cell of a phase's row fits (up to plane column j1,
    from its first input column j0: the left padding), and a tap's read past the row's end (up to column
    OW - 1 + (kw - 1) // sw) lands in the next row's left padding, zeros: the right padding of a row is
    the left padding of the next, so a 3x3 stride-1 conv wastes one column per row, not two."""
    (sw,), (kw,), (w,), (pw,), (ow,) = geo.stride[1:], geo.kernel[1:], geo.spatial[1:], geo.head[1:], geo.out[1:]
    reach = ow + (kw - 1) // sw
    width = 1
    for v in range(min(sw, kw)):
        j0 = max(0, -((v - pw) // sw))
        j1 = (w - 1 + pw - v) // sw + 1 if w - 1 + pw - v >= 0 else 0
        width = max(width, j1, reach - j0)
    return width


class FilterGradient:
    """dW of one conv signature: x (n, c, *geo.spatial), dy (n, m, *geo.out), w (m, c, *geo.kernel)."""

    def __init__(self, n: int, c: int, m: int, geo: Geometry, mode: str | None = None) -> None:
        mod = _module()
        (sh, sw), (kh, kw), (oh, ow) = geo.stride, geo.kernel, geo.out
        self.geo, self.n, self.c, self.m = geo, n, c, m
        self.hq, self.wq = oh + (kh - 1) // sh, plane_width(geo)
        lanes = mod.L
        nq = -(-(oh * self.wq) // lanes)
        qp = nq * lanes
        # pixels: vectors over each image's plane cells (padding columns and the rounded tail computed for
        # nothing); channels (_block_m): vectors over output channels (padded to blocks of R x L channels):
        # whichever computes less for nothing, pixels unless clearly worse. Not for 1x1 convs: there the
        # T broadcasts of a channels step come from T channels' planes, and it measured slower
        block = mod.R * lanes
        mp = -(-m // block) * block
        if mode is None:
            wins = 1.05 * mp / m < qp / (oh * ow) and kh * kw > 1
            mode = "channels" if wins else "pixels"
        self.mode = mode
        # a plane holds every cell a tap reads for q < qp: the last vector's tail reads past hq rows
        plen = max(self.hq * self.wq, qp + ((kh - 1) // sh) * self.wq + (kw - 1) // sw)
        self.nq = nq
        self.uh, self.uw = uh, uw = min(sh, kh), min(sw, kw)  # the phases a tap reads (1x1: the first only)
        self.planes = np.zeros((n, c, uh * uw, plen), np.float32)
        self.taps = np.array(
            [((a % sh) * uw + b % sw) * plen + (a // sh) * self.wq + b // sw for a in range(kh) for b in range(kw)],
            np.int64,
        )
        if mode == "channels":
            self.dye = np.zeros((n, 0, qp), np.float32)  # no rows: _fill leaves dY to _transpose_dy
            self.dyt = np.zeros((n, oh * ow, mp), np.float32)
            pairs = c * kh * kw
            # dW^T, pairs x channels, of each half of the images
            self.dwt = np.empty((2, -(-pairs // mod.T) * mod.T, mp), np.float32)
            per_image, steps, unit = 4 * (c * uh * uw * plen + oh * ow * mp), oh * ow, block
            self.share = None
        else:
            self.dye = np.zeros((n, m, qp), np.float32)
            self.dyt = None
            per_image, steps, unit = 4 * (c * uh * uw * plen + m * qp), nq, mod.R
            self.share = np.empty((m, c * kh * kw), np.float32)  # the second half's sums
        # a run of images long enough that summing the lanes at its end costs little (small images)
        # (channels: 4 times as long; its runs add R x T vectors into dW^T at their end)
        runs = _MIN_STEPS * (4 if mode == "channels" else 1)
        self.nb = min(n, max(1, _CHUNK_BYTES // per_image, -(-runs // steps)))
        self.halves = split(n, 2)
        self.threads = threads = get_num_threads()
        blocks = -(-m // unit)
        per_half = max(1, min(threads // len(self.halves), blocks))
        m_parts = [(b0 * unit, min(m, b1 * unit)) for b0, b1 in split(blocks, per_half)]
        # (half, m0, m1, lay out its images first): with a thread per half, each lays out its own half
        self.tasks = [(h, m0, m1, per_half == 1) for h in range(len(self.halves)) for m0, m1 in m_parts]
        # with more threads, the layout first, split by images (tasks of an empty channel range)
        self.fills = [] if per_half == 1 else [(0, 0, 0, True, i0, i1) for i0, i1 in split(n, min(threads, n))]
        self.scratch = [
            (np.empty(mod.R, np.int64), np.empty(mod.T, np.int64), np.empty(mod.R * mod.T, np.float32))
            for _ in self.tasks
        ]
        self.jobs = [self._block(mod, self.fills)] if self.fills else []
        self.jobs.append(self._block(mod, [(*t, *self.halves[t[0]]) for t in self.tasks], self.scratch))
        self._first = True

    def _block(self, mod, tasks: list, scratch: list | None = None) -> native_pool.Block:
        """The native job of ``tasks`` ((half, m0, m1, lay out, i0, i1) each): its argument block, with every
        slot but the per-call arrays (x, dy, dW) filled."""
        blk = native_pool.Block(mod.TASKS + mod.TASK_FIELDS * len(tasks))
        empty = np.zeros((0, 0, 0), np.float32)
        blk.array(mod.PLANES, self.planes)
        blk.array(mod.DYE, self.dye)
        blk.array(mod.DYT, self.dyt if self.dyt is not None else empty)
        blk.array(mod.DWT, self.dwt if self.dyt is not None else empty)
        blk.array(mod.SHARE, self.share if self.share is not None else empty.reshape(0, 0))
        blk.array(mod.TAPS, self.taps)
        (sh, sw), (ph, pw), (oh, ow) = self.geo.stride, self.geo.head, self.geo.out
        sizes = (sh, sw, self.uh, self.uw, ph, pw, self.hq, self.wq, self.nb, self.nq, oh, ow, self.m)
        blk.data[mod.SIZES : mod.SIZES + 14] = (*sizes, self.dyt is not None)
        for k, (h, m0, m1, lay_out, i0, i1) in enumerate(tasks):
            dyo, xo, out = scratch[k] if scratch else self.scratch[0]
            at = mod.TASKS + mod.TASK_FIELDS * k
            blk.data[at : at + mod.TASK_FIELDS] = (
                h,
                m0,
                m1,
                i0,
                i1,
                lay_out,
                dyo.ctypes.data,
                xo.ctypes.data,
                out.ctypes.data,
            )
        blk.keep = (empty, self.scratch)  # the arrays whose addresses it holds
        return blk

    def run(self, x: np.ndarray, dy: np.ndarray, dw: np.ndarray) -> bool:
        """dW of ``x`` and ``dy`` into ``dw`` (float32, contiguous); False (nothing written) when the
        kernel is unavailable."""
        mod = _module()
        if mod is None or FAMILY in kernel_support.disabled():
            return False
        dwf = dw.reshape(self.m, -1)
        try:
            if self._first:  # the first run compiles the loops under the guard, then the task function
                self._run_here(mod, x, dy, dwf)
                self._task = _task_address(mod)
                self._first = False
            elif self._task is None:
                self._run_here(mod, x, dy, dwf)
            else:
                for blk in self.jobs:
                    blk.array(mod.X, x)
                    blk.array(mod.DY, dy)
                    blk.array(mod.DWF, dwf)
                    native_pool.run(self._task, blk.data, (blk.data.size - mod.TASKS) // mod.TASK_FIELDS)
            self._sum_halves(mod, dwf)
        except KernelUnavailable:
            return False
        return True

    def _run_here(self, mod, x, dy, dwf) -> None:
        """Every task on this thread through the numba dispatchers (compiling them under kernel_support's guard)."""
        (sh, sw), (ph, pw), (oh, ow) = self.geo.stride, self.geo.head, self.geo.out
        for k, (h, m0, m1, _) in enumerate(self.tasks):
            i0, i1 = self.halves[h]
            if m0 == 0:
                args = (x, dy, self.planes, self.dye, sh, sw, self.uh, self.uw, ph, pw, self.hq, self.wq, i0, i1)
                kernel_support.call(FAMILY, mod._fill, args)
                if self.dyt is not None:
                    kernel_support.call(FAMILY, mod._transpose_dy, (dy, self.dyt, i0, i1))
            dyo, xo, out = self.scratch[k]
            planes = self.planes[i0:i1]
            if self.dyt is not None:
                m1t = m1 if m1 < self.m else self.dwt.shape[2]  # the last part's padding channels too
                args = (planes, self.dyt[i0:i1], self.taps, self.dwt[h], m0, m1t, self.nb, oh, ow, self.wq, xo)
                kernel_support.call(FAMILY, mod._accumulate_m, args)
                continue
            dst = dwf if h == 0 else self.share
            dst[m0:m1] = 0
            args = (planes, self.dye[i0:i1], self.taps, dst, m0, m1, self.nb, self.nq, dyo, xo, out)
            kernel_support.call(FAMILY, mod._accumulate, args)

    def _sum_halves(self, mod, dwf: np.ndarray) -> None:
        """dW = the first half's sums + the second's (one half, one image: the first's alone)."""
        two = len(self.halves) == 2
        if self.dyt is not None:
            if not self._copy_split(mod, two, dwf):
                kernel_support.call(FAMILY, mod._copy_out, (self.dwt[0], self.dwt[1], two, dwf, 0, dwf.shape[0]))
        elif two:
            np.add(dwf, self.share, out=dwf)

    def _copy_split(self, mod, two: bool, dwf: np.ndarray) -> bool:
        """The channels layout's copy-out by rows of dW over the intra-op threads as one native job (it is
        memory-bound: ResNet-18's 512 x 4608 dW took 8 ms on one thread); False (nothing written) with one
        thread, a small dW, before the first run compiled the loops or without native jobs."""
        threads = get_num_threads()
        if threads < 2 or dwf.size < COPY_SPLIT_MIN or self._first or self._task is None:
            return False
        calls = [[self.dwt[0], self.dwt[1], int(two), dwf, k0, k1] for k0, k1 in split(dwf.shape[0], threads)]
        return native_pool.run_calls("conv_grad_filter._copy_out", mod.copy_task, calls)


def _task_address(mod) -> int | None:
    """The address of the compiled task function (native_pool); None, the family's loops running on this
    thread alone, where it does not compile (one RuntimeWarning says why)."""
    task = native_pool.compiled_task("conv_grad_filter", mod.task)
    return task.address if task is not None else None


def plan(n: int, c: int, m: int, group: int, geo: Geometry, dtype, mode: str | None = None) -> FilterGradient | None:
    """A FilterGradient for a conv of this signature, or None where the compiled kernel does not apply;
    ``mode`` "pixels" or "channels" forces that layout (None: FilterGradient chooses)."""
    if len(geo.kernel) != 2 or group != 1 or any(d != 1 for d in geo.dilation) or np.dtype(dtype) != np.float32:
        return None
    if min(n, c, m, *geo.out) <= 0 or not available():
        return None
    return FilterGradient(n, c, m, geo, mode)


def warm_up() -> None:
    """Compile (or load from numba's cache) the kernels of both layouts on a tiny conv; nothing where they
    cannot run. A failed compile disables the family (one RuntimeWarning)."""
    geo = Geometry((4, 4), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1), (4, 4))
    x = np.zeros((1, 1, 4, 4), np.float32)
    for mode in ("pixels", "channels"):
        fg = plan(1, 1, 1, 1, geo, np.float32, mode)
        if fg is None or not fg.run(x, x.copy(), np.zeros((1, 1, 3, 3), np.float32)):
            return
