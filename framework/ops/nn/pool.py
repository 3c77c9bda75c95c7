"""Pooling: MaxPool, AveragePool, LpPool (with 1D/2D/3D spellings) and their gradients.

Pooling is done over strided slices of the (padded) input, one numpy call per
kernel offset, into the preallocated output. Output sizes and arguments are
Caffe2's ConvPoolOpBase ones (see conv_args). AveragePool divides, as Caffe2,
by the number of window cells inside the input (padding excluded); with
``count_include_pad=1`` by the cells inside the padded input. A window wholly in the padding (possible
with CAFFE_LEGACY_POOLING) averages to 0 (Caffe2 divides by zero there).
"""

from __future__ import annotations

import math

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.kernels import bn_train, pool_strategies
from framework.memory.allocator import allocate_array
from framework.ops.gradient import gradient
from framework.ops.nn.conv_args import ConvPoolOp, conv_pool_args, index, infer_geometry, join_layout, kernel_slices
from framework.ops.prepared_states import prepare_for
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, FLOAT, UNKNOWN, Arg, TensorSpec, same_as_input
from framework.runtime.parallel import get_num_threads

_POOL_ARGS = conv_pool_args(group=False)
_AVG_ARGS = _POOL_ARGS + [
    Arg(
        "count_include_pad",
        BOOL,
        False,
        "divide by the window cells inside the padded input (default: inside the input)",
    )
]
_LP_ARGS = _POOL_ARGS + [Arg("p", FLOAT, 2.0, "the norm's exponent")]


def _infer_pool(args, ins):
    x = ins[0]
    if x.shape is None:
        return [UNKNOWN]
    spec, n, c, geo = infer_geometry(args, x.shape, "Pool")
    return [TensorSpec(join_layout(n, c, geo.out, spec.order), x.dtype)]


def _pool_schema(name, args, y_doc):
    """register_op keywords of a forward pooling op (with its 1D/2D/3D spellings)."""
    return dict(
        args=args,
        input_docs=[("X", "input, NCHW or NHWC")],
        output_docs=[("Y", y_doc)],
        infer=_infer_pool,
        category="pool",
        aliases=tuple(f"{name}{d}D" for d in (1, 2, 3)),
    )


class _Pool(ConvPoolOp):
    """Shared preparation of the pooling ops (forward and gradient)."""

    kind = "max"
    pad_value = 0.0

    def _prepare(self, x) -> None:
        where = self.describe()
        if x.ndim < 3:
            raise ShapeError(f"{where}: input '{self.input_names[0]}' must be N-d with N >= 3, got shape {x.shape}")
        if x.dtype.kind != "f" and not (self.kind == "max" and x.dtype.kind in "iu"):
            raise TypeMismatchError(f"{where}: input '{self.input_names[0]}' has unsupported dtype {x.dtype}")
        n, c, geo = self.geometry(x.shape)
        self._key = (x.shape, x.dtype)
        self._geo = geo
        self._yshape = join_layout(n, c, geo.out, self.order)
        r = len(geo.spatial)
        self._sp_axes = tuple(range(2, 2 + r)) if self.order == "NCHW" else tuple(range(1, 1 + r))
        self._global = self.spec.global_pooling
        # One window covering the whole unpadded image (CIFAR ResNets' final 8x8 average pool) is a
        # global pooling: one reduction over the spatial axes, not kh + kw - 2 passes per image.
        whole = not geo.padded and tuple(geo.kernel) == tuple(geo.spatial) and all(o == 1 for o in geo.out)
        if whole and self.kind in ("max", "avg") and not self.is_grad:
            self._global = True
        # Global average pooling as one GEMV per layout (rows of cells times ones): numpy's mean over the
        # spatial axes reduces each short row on its own, which is slow on many small images.
        self._ones = None
        if self._global and self.kind == "avg" and not self.is_grad and x.dtype in (np.float32, np.float64):
            self._ones = allocate_array((math.prod(geo.spatial),), x.dtype)
            self._ones.fill(1)
        self._xp = None
        self._sep = None
        strategy = None  # 2-D NCHW max/average pooling: the first kernel strategy that fits, if any
        if self.kind in ("max", "avg") and not self.is_grad and self.order == "NCHW" and r == 2:
            strategy = pool_strategies.choose(geo, x.dtype, self.kind) if not self._global and x.size else None
        if strategy is not None:
            pv = self.pad_value
            if self.kind == "max":  # the lowest finite value, as below
                pv = np.finfo(x.dtype).min if x.dtype.kind == "f" else np.iinfo(x.dtype).min
            inv = self._inverse_counts(geo, x.dtype) if self.kind == "avg" else None
            self._sep = strategy.prepare(geo, n, c, x.dtype, self.kind, pv, inv)
        elif geo.padded and not self._global:
            pv = self.pad_value
            if self.kind == "max":
                # Caffe2 starts each max at the lowest finite value: a window lying wholly in
                # the padding (CAFFE_LEGACY_POOLING can make one) yields it.
                pv = np.finfo(x.dtype).min if x.dtype.kind == "f" else np.iinfo(x.dtype).min
            self._xp, self._xp_in = self.padded_buffer(n, c, geo, x.dtype, pv)
        # one strided slice per kernel offset, for the window loops; a global pooling reduces the spatial axes
        # at once (a 112x112 window would build 12544 of them)
        self._slices = [] if self._global else [index(self.order, sl) for _, sl in kernel_slices(geo)]
        self._tmp = np.empty(self._yshape, x.dtype) if self.kind != "max" or self.is_grad else None
        if self.kind == "avg":
            self._inv = self._inverse_counts(geo, x.dtype)
        self._prepare_more(x)

    is_grad = False

    def _prepare_more(self, x) -> None:
        pass

    def _inverse_counts(self, geo, dtype):
        include = bool(self.args.count_include_pad)
        per_dim = []
        for i in range(len(geo.spatial)):
            lo, hi = (-geo.head[i], geo.spatial[i] + geo.tail[i]) if include else (0, geo.spatial[i])
            starts = np.arange(geo.out[i]) * geo.stride[i] - geo.head[i]
            cells = starts[:, None] + np.arange(geo.kernel[i])[None, :] * geo.dilation[i]
            per_dim.append(((cells >= lo) & (cells < hi)).sum(axis=1))
        counts = per_dim[0]
        for d in per_dim[1:]:
            counts = np.multiply.outer(counts, d)
        inv = (1.0 / np.maximum(counts, 1)).astype(dtype)
        return inv if self.order == "NCHW" else inv[..., None]

    def _padded(self, x):
        if self._xp is None:
            return x
        np.copyto(self._xp_in, x)
        return self._xp

    def _fold(self, x, y, ufunc) -> None:
        """y = ufunc over the windows' cells, one strided slice per kernel offset."""
        src = self._padded(x)
        sl = self._slices
        np.copyto(y, src[sl[0]])
        for s in sl[1:]:
            ufunc(y, src[s], out=y)


class _PoolForward(_Pool):
    def run(self) -> None:
        x = self.input(0)
        if self._key != (x.shape, x.dtype) or (self._sep is not None and self._sep.threads != get_num_threads()):
            # a shape seen before gets its prepared state (and buffers) back instead of a new one
            prepare_for(self, (x.shape, x.dtype, get_num_threads()), lambda: self._prepare(x))
        y = self.output(0, self._yshape, x.dtype)
        if y.size:
            self.pool(x, y)

    def compile(self):
        """``pool`` on the arrays bound now (framework/net/program.py)."""
        x, y = self.inputs[0].array, self.outputs[0].array
        if self._key != (x.shape, x.dtype) or y.shape != self._yshape or y.dtype != x.dtype or not y.size:
            return None
        if self._sep is not None and self._sep.threads != get_num_threads():
            return None
        pool = self.pool
        return lambda: pool(x, y)


@register_op("MaxPool", **_pool_schema("MaxPool", _POOL_ARGS, "max over each window"))
class MaxPool(_PoolForward):
    """Max pooling over windows of the input (Caffe2's MaxPool); padding never wins."""

    kind = "max"

    def pool(self, x, y) -> None:
        if self._global:
            np.max(x, axis=self._sp_axes, keepdims=True, out=y)
            return
        if self._sep is not None:
            self._sep.run(x, y)
            return
        self._fold(x, y, np.maximum)


@register_op("AveragePool", **_pool_schema("AveragePool", _AVG_ARGS, "mean over each window"))
class AveragePool(_PoolForward):
    """Average pooling (Caffe2's AveragePool): the sum over the window's cells inside the
    input divided by their number (padding excluded unless count_include_pad=1)."""

    kind = "avg"

    def pool(self, x, y) -> None:
        if self._global:
            if self._ones is not None and x.flags.c_contiguous:
                cells = self._ones.shape[0]
                if self.order == "NCHW":  # (N*C, cells) @ ones
                    np.matmul(x.reshape(-1, cells), self._ones, out=y.reshape(-1))
                else:  # ones @ (N, cells, C)
                    np.matmul(self._ones, x.reshape(x.shape[0], cells, -1), out=y.reshape(x.shape[0], -1))
                np.divide(y, cells, out=y)  # the sum over the count, as np.mean
                return
            np.mean(x, axis=self._sp_axes, keepdims=True, out=y)
            return
        if self._sep is not None:
            self._sep.run(x, y)
            if getattr(self._sep, "scaled", False):
                return
        else:
            self._fold(x, y, np.add)
        np.multiply(y, self._inv, out=y)


@register_op("LpPool", **_pool_schema("LpPool", _LP_ARGS, "(sum |x|^p)^(1/p) over each window"))
class LpPool(_PoolForward):
    """Lp pooling (Caffe2's LpPool): Y = (sum over the window of |X|^p)^(1/p)."""

    kind = "lp"

    def setup(self) -> None:
        super().setup()
        if not self.args.p > 0:
            raise self.arg_error(f"p must be > 0, got {self.args.p}")

    def _prepare_more(self, x) -> None:
        self._p = x.dtype.type(self.args.p)
        self._inv_p = x.dtype.type(1.0 / self.args.p)
        if self._global:
            self._ax = np.empty_like(x)

    def pool(self, x, y) -> None:
        if self._global:
            np.abs(x, out=self._ax)
            np.power(self._ax, self._p, out=self._ax)
            np.sum(self._ax, axis=self._sp_axes, keepdims=True, out=y)
        else:
            src = self._padded(x)
            tmp = self._tmp
            y.fill(0)
            for s in self._slices:
                np.abs(src[s], out=tmp)
                np.power(tmp, self._p, out=tmp)
                np.add(y, tmp, out=y)
        np.power(y, self._inv_p, out=y)


# -- gradients ------------------------------------------------------------------------------


class _PoolGradient(_Pool):
    is_grad = True

    def _prepare_more(self, x) -> None:
        self._dxp = np.zeros_like(self._xp) if self._xp is not None else None
        if self._dxp is not None:
            self._dxp_in = self._dxp[index(self.order, self._geo.interior)]
        self._mask = np.empty(self._yshape, bool)
        if self.kind == "lp":
            self._p = x.dtype.type(self.args.p)
            self._gx = np.empty(self._xp.shape if self._xp is not None else x.shape, x.dtype)

    def run(self) -> None:
        x, y, dy = self.input(0), self.input(1), self.input(2)
        if self._key != (x.shape, x.dtype):
            self._prepare(x)
        for k, a in ((1, y), (2, dy)):
            if a.shape != self._yshape:
                raise ShapeError(
                    f"{self.describe()}: '{self.input_names[k]}' must have the pooled shape {self._yshape}, "
                    f"got {a.shape}"
                )
        dx = self.output(0, x.shape, x.dtype)
        if self._global:
            self.global_grad(x, y, dy, dx)
            return
        if self.kind == "max" and self.order == "NCHW" and bn_train.max_pool_grad(x, y, dy, dx, self._geo):
            return  # 2-D float32: one compiled pass over the windows
        src = self._padded(x)
        tgt = self._dxp if self._dxp is not None else dx
        tgt.fill(0)
        if dy.size:
            self.scatter(src, y, dy, tgt)
        if self._dxp is not None:
            np.copyto(dx, self._dxp_in)


def _pool_grad_doc(name):
    return dict(
        inputs=3,
        args=_AVG_ARGS if name == "AveragePool" else (_LP_ARGS if name == "LpPool" else _POOL_ARGS),
        input_docs=[("X", "forward input"), ("Y", "forward output"), ("dY", "gradient of Y")],
        output_docs=[("dX", "gradient of X")],
        infer=same_as_input(0),
        category="pool",
        aliases=tuple(f"{name}{d}DGradient" for d in (1, 2, 3)),
        private=True,
        input_types="float",
        same_type=[(0, 1, 2)],
    )


@register_op("MaxPoolGradient", **_pool_grad_doc("MaxPool"))
class MaxPoolGradient(_PoolGradient):
    """dX: dY goes to every cell of the window equal to the window's max (as Caffe2). 2-D NCHW float32 runs
    one compiled pass adding ``dY * (X == Y)`` row of windows by row of windows; Caffe2 adds window by window
    and the numpy path kernel offset by kernel offset, so where a cell is the max of three or more windows
    the sums may round differently."""

    kind = "max"

    def global_grad(self, x, y, dy, dx) -> None:
        np.multiply(x == y, dy, out=dx)

    def scatter(self, src, y, dy, tgt) -> None:
        mask, tmp = self._mask, self._tmp
        for s in self._slices:
            np.equal(src[s], y, out=mask)
            np.multiply(dy, mask, out=tmp)
            view = tgt[s]
            np.add(view, tmp, out=view)


@register_op("AveragePoolGradient", **_pool_grad_doc("AveragePool"))
class AveragePoolGradient(_PoolGradient):
    """dX: each window spreads dY / count over its cells."""

    kind = "avg"

    def global_grad(self, x, y, dy, dx) -> None:
        cells = math.prod(self._geo.spatial)
        np.multiply(dy, x.dtype.type(1.0 / max(cells, 1)), out=self._tmp)
        np.copyto(dx, self._tmp)

    def scatter(self, src, y, dy, tgt) -> None:
        tmp = self._tmp
        np.multiply(dy, self._inv, out=tmp)
        for s in self._slices:
            view = tgt[s]
            np.add(view, tmp, out=view)


@register_op("LpPoolGradient", **_pool_grad_doc("LpPool"))
class LpPoolGradient(_PoolGradient):
    """dX = dY * X * |X|^(p-2) / Y^(p-1), summed over the windows holding each cell."""

    kind = "lp"

    def _scale(self, y, dy, out) -> None:
        with np.errstate(divide="ignore", invalid="ignore"):
            np.power(y, self._p - 1, out=out)
            np.divide(dy, out, out=out)
        out[~np.isfinite(out)] = 0

    def _g(self, src, out) -> None:
        np.abs(src, out=out)
        np.power(out, self._p - 2, out=out)
        np.multiply(out, src, out=out)

    def global_grad(self, x, y, dy, dx) -> None:
        self._scale(y, dy, self._tmp)
        self._g(x, self._gx)
        np.multiply(self._gx, self._tmp, out=dx)

    def scatter(self, src, y, dy, tgt) -> None:
        tmp = self._tmp
        self._scale(y, dy, tmp)
        gx = self._gx
        self._g(src, gx)
        for s in self._slices:
            view = tgt[s]
            view += gx[s] * tmp


def _pool_grad(g):
    return [g.op(g.def_.type + "Gradient", [g.I(0), g.O(0), g.GO(0)], [g.GI(0)])]


for _base in ("MaxPool", "AveragePool", "LpPool"):
    for _t in (_base, _base + "1D", _base + "2D", _base + "3D"):
        gradient(_t)(_pool_grad)
