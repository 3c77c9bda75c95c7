"""Convolution: Conv (Conv1D/2D/3D) and ConvGradient, and the base the transposed
convolution (``conv_transpose``) shares with them.

2-D NCHW Conv runs the kernels of ``conv_nchw`` (1x1 convs as a direct GEMM,
depthwise convs as per-tap multiply-adds, thin 3x3 convs as a compiled direct
convolution, im2col that handles the padding itself; split over the intra-op
threads). Other ranks and NHWC: im2col into a
column buffer kept across runs (filled from a strided window view of the
input), then one batched GEMM written straight into the output, with the bias
folded into the GEMM as an extra row of ones; the filter is packed into that
GEMM operand once per filter tensor version. Filter layouts as Caffe2: NCHW
(M, C/group, *kernel), NHWC (M, *kernel, C/group).
"""

from __future__ import annotations

import functools
import math

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.kernels import conv_grad_filter
from framework.kernels.conv_nchw import ConvNCHW
from framework.memory.allocator import check_elements
from framework.memory.binding import matches, stamp
from framework.ops.gradient import gradient
from framework.ops.nn import conv_grad_data
from framework.ops.nn.conv_args import (
    ConvPoolOp,
    as_shape,
    conv_pool_args,
    index,
    infer_geometry,
    join_layout,
    kernel_slices,
    parse_conv_pool,
    resolve,
    split_layout,
    window_view,
)
from framework.ops.prepared_states import prepare_for
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, STRING, UNKNOWN, Arg, Cost, TensorSpec
from framework.runtime.parallel import get_num_threads, run_parallel, split

_SPLIT_FLOPS = 2e6  # a filter gradient below this many FLOPs runs on one thread (the hand-off costs more)
USE_NCHW_KERNELS = True  # False: the generic im2col path for every conv (benchmarks compare the two)

_CONV_ARGS = conv_pool_args() + [
    Arg("no_bias", BOOL, False, "no bias input (gradient ops: no bias gradient output)"),
    Arg("no_gradient_to_input", BOOL, False, "gradient maker: do not compute the input gradient"),
    Arg(
        "activation",
        STRING,
        "identity",
        "Conv: 'Relu' applies a ReLU to the output (NNPACK's fused form); ConvFusion: 'HardSwish' or 'Swish'",
    ),
]


def check_conv_sizes(op, geo, n: int, c: int, m: int) -> None:
    """ResourceLimitError before a plan or buffer is made for pads/strides that ask too much."""
    check_elements(join_layout(n, c, geo.buf_spatial, op.order), 8, f"{op.describe()}: the padded input")
    check_elements(join_layout(n, m, geo.out, op.order), 8, f"{op.describe()}: the output")


def conv_geometry(spec, x_shape, w_shape, where: str, names=("X", "filter")):
    """Check X and filter shapes of a convolution; (geometry, N, C, M)."""
    if len(x_shape) < 3:
        raise ShapeError(f"{where}: input '{names[0]}' must have at least 3 dims (N, C, spatial...), got {x_shape}")
    if len(w_shape) != len(x_shape):
        raise ShapeError(
            f"{where}: filter '{names[1]}' must have as many dims as the input ({len(x_shape)}), got {w_shape}"
        )
    n, c, spatial = split_layout(x_shape, spec.order)
    m, cg, kernel = split_layout(w_shape, spec.order)
    g = spec.group
    if c != cg * g:
        raise ShapeError(
            f"{where}: input channels {c} of '{names[0]}' != filter channels {cg} of '{names[1]}' * group {g}"
        )
    if m % g:
        raise ShapeError(f"{where}: output channels {m} of filter '{names[1]}' are not divisible by group {g}")
    geo = resolve(spec, spatial, where)
    if tuple(kernel) != geo.kernel:
        raise ShapeError(f"{where}: filter '{names[1]}' has kernel {tuple(kernel)} but the arguments say {geo.kernel}")
    return geo, n, c, m


def _infer_conv(args, ins):
    x, w = ins[0], ins[1]
    if x.shape is None:
        return [UNKNOWN]
    if w.shape is None:
        spec, n, _, geo = infer_geometry(args, x.shape, "Conv")
        return [TensorSpec(join_layout(n, None, geo.out, spec.order), x.dtype)]
    spec = parse_conv_pool(args, "Conv", "Conv")
    geo, n, _, m = conv_geometry(spec, x.shape, w.shape, "Conv")
    return [TensorSpec(join_layout(n, m, geo.out, spec.order), x.dtype)]


def _conv_like_cost(x, w, b, y, macs: float) -> Cost:
    """Cost of a convolution-like op doing ``macs`` multiply-adds (2 FLOPs each), plus one add
    per output element for the bias; bytes moved = X, filter, bias read and Y written."""
    item = x.dtype.itemsize if x.dtype is not None else 4
    nb = math.prod(b.shape) if b is not None and b.known else 0
    ny = math.prod(y)
    params = (math.prod(w.shape) + nb) * item
    return Cost(
        flops=2.0 * macs + (ny if b is not None else 0),
        bytes_moved=(math.prod(x.shape) + ny) * item + params,
        params_bytes=params,
    )


def _cost_conv(args, ins, outs):
    """FLOPs = 2 * |Y| * (C/group) * prod(kernel) (+ |Y| with a bias): each output element is a
    dot product over its group's input channels and the kernel window."""
    x, w = ins[0], ins[1]
    if not (x.known and w.known):
        return Cost()
    y = outs[0] if outs and outs[0].known else _infer_conv(args, ins)[0]
    k = math.prod(w.shape[1:])  # (C/group) * prod(kernel) in both layouts
    return _conv_like_cost(x, w, ins[2] if len(ins) > 2 else None, y.shape, math.prod(y.shape) * k)


def _typed(where, names, arrays):
    dt = arrays[0].dtype
    for nm, a in zip(names[1:], arrays[1:]):
        if a.dtype != dt:
            raise TypeMismatchError(f"{where}: '{nm}' has dtype {a.dtype}, expected {dt} (as '{names[0]}')")
    if dt.kind != "f":
        raise TypeMismatchError(f"{where}: '{names[0]}' must be a float tensor, got {dt}")
    return dt


class ConvOpBase(ConvPoolOp):
    """What Conv, ConvTranspose and their gradient ops share: input checks, the re-prepare
    test on the input signature, and (gradient ops) which outputs are asked for."""

    is_gradient = False

    def setup(self) -> None:
        super().setup()
        self.check_args()
        if self.is_gradient:
            self.gradient_outputs()

    def check_args(self) -> None:
        """Op-specific argument checks, after the ConvPoolOpBase ones."""

    def _dtype(self, arrays) -> np.dtype:
        """The common float dtype of the given inputs (None entries skipped)."""
        return _typed(self.describe(), self.input_names, [a for a in arrays if a is not None])

    def _check_shape(self, what: str, a: np.ndarray, shape: tuple) -> None:
        """Input 2 (bias of a forward op, dY of a gradient op) must have ``shape``."""
        if a is not None and a.shape != shape:
            name = self.input_names[2]
            raise ShapeError(f"{self.describe()}: {what} '{name}' must have shape {shape}, got {a.shape}")

    def forward_inputs(self) -> tuple:
        """(X, filter, bias or None), re-preparing when their signature changed."""
        x, w = self.input(0), self.input(1)
        b = self.input(2) if len(self.inputs) == 3 else None
        if self._key != (x.shape, w.shape, x.dtype, b is not None) or w.dtype != x.dtype:
            self._prepare_for(x, w, b)
        return x, w, b

    def _prepare_for(self, x, w, b) -> None:
        """``_prepare``, or the state prepared before for this signature (framework/ops/prepared_states.py)."""
        key = (x.shape, w.shape, x.dtype, w.dtype, b is not None, get_num_threads())
        prepare_for(self, key, lambda: self._prepare(x, w, b))

    def gradient_inputs(self) -> tuple:
        """(X, filter, dY), re-preparing when their signature changed."""
        x, w, dy = self.input(0), self.input(1), self.input(2)
        if self._key != (x.shape, w.shape, dy.shape, x.dtype) or w.dtype != x.dtype or dy.dtype != x.dtype:
            self._prepare(x, w, dy)
        return x, w, dy

    def gradient_outputs(self) -> None:
        """Output slots of a gradient op: dfilter, then dbias unless no_bias, then dX if asked for."""
        self.no_bias = bool(self.args.no_bias)
        nout = len(self.outputs)
        if self.no_bias and nout == 3:
            raise self.arg_error("with no_bias=1 there is no bias gradient: give 1 or 2 outputs (dfilter, dX)")
        if not self.no_bias and nout < 2:
            raise self.arg_error("without no_bias=1 the outputs are dfilter, dbias[, dX]: give 2 or 3 outputs")
        self.i_db = None if self.no_bias else 1
        self.i_dx = (1 if self.no_bias else 2) if nout > (1 if self.no_bias else 2) else None


def forward_schema(args: list, infer, docs: tuple, **extra) -> dict:
    """register_op keywords of the forward convolutions (Conv, ConvTranspose, LC*): inputs X, filter and
    an optional bias, output Y; ``docs`` = (X, filter, bias, Y) descriptions."""
    x, w, b, y = docs
    return dict(
        inputs=(2, 3),
        args=args,
        input_docs=[("X", x), ("filter", w), ("bias", b)],
        output_docs=[("Y", y)],
        infer=infer,
        category="conv",
        **extra,
    )


def gradient_schema(args: list, infer, **extra) -> dict:
    """register_op keywords of ConvGradient and ConvTransposeGradient."""
    return dict(
        inputs=3,
        outputs=(1, 3),
        args=args,
        input_docs=[("X", "forward input"), ("filter", "filter"), ("dY", "gradient of Y")],
        output_docs=[
            ("dfilter", "gradient of filter"),
            ("dbias", "gradient of bias (unless no_bias)"),
            ("dX", "gradient of X (optional)"),
        ],
        infer=infer,
        category="conv",
        private=True,
        **extra,
    )


def conv_schema(**extra) -> dict:
    """register_op keywords of Conv (and of ops running a Conv, e.g. ConvRelu)."""
    return forward_schema(
        _CONV_ARGS,
        _infer_conv,
        (
            "input, NCHW or NHWC",
            "(M, C/group, *kernel) or NHWC (M, *kernel, C/group)",
            "optional (M,)",
            "output, (N, M, *out) or (N, *out, M)",
        ),
        cost=_cost_conv,
        **extra,
    )


@register_op("Conv", **conv_schema(aliases=("Conv1D", "Conv2D", "Conv3D")))
class Conv(ConvOpBase):
    """N-d convolution (Caffe2's Conv): Y = X * filter (+ bias), with stride, pads,
    dilation, group, order and legacy_pad as in Caffe2. Out size per dim:
    floor((in + pad_head + pad_tail - dilation*(kernel-1) - 1) / stride) + 1.
    ``activation="Relu"`` (the argument of Caffe2's NNPACK engine, which transformations.FuseNNPACKConvRelu
    sets) applies a ReLU to Y; whatever the engine, here it runs on the CPU convolution."""

    _relu = False  # set by check_args from ``activation``

    def check_args(self) -> None:
        act = self.args.activation
        if act not in ("identity", "Relu"):
            raise self.arg_error(f"activation must be 'identity' or 'Relu' (as Caffe2's NNPACK conv), got {act!r}")
        self._relu = act == "Relu"

    def _prepare(self, x, w, b) -> None:
        dt = self._dtype([x, w, b])
        geo, n, c, m = conv_geometry(self.spec, x.shape, w.shape, self.describe(), self.input_names)
        check_conv_sizes(self, geo, n, c, m)
        self._check_shape("bias", b, (m,))
        self._key = (x.shape, w.shape, dt, b is not None)
        g = self.spec.group
        cg, mg, r = c // g, m // g, len(geo.kernel)
        kg = cg * math.prod(geo.kernel)
        p = math.prod(geo.out)
        k1 = kg + (b is not None)
        self._geo, self._yshape = geo, join_layout(n, m, geo.out, self.order)
        self._w_seen = None  # stamps (framework.memory.binding) of the filter and bias copied into _wpack
        if self.order == "NCHW" and r == 2 and USE_NCHW_KERNELS:
            self._kernel = ConvNCHW(n, c, m, g, geo, dt, b is not None)
            return
        self._kernel = None
        self._xp = None
        if geo.padded:
            self._xp, self._xp_in = self.padded_buffer(n, c, geo, dt)
        if self.order == "NCHW":
            col = np.empty((n, g, k1, p), dt)
            if b is not None:
                col[:, :, kg, :] = 1
            self._col_dst = as_shape(col[:, :, :kg, :], (n, g, cg, *geo.kernel, *geo.out))
            self._src_shape = (n, g, cg, *geo.kernel, *geo.out)
            self._src_axes = None
            self._wpack = np.empty((g, mg, k1), dt)
            self._w_dst = self._wpack[:, :, :kg]
            self._w_src = lambda w: w.reshape(g, mg, kg)
            self._b_dst = self._wpack[:, :, kg] if b is not None else None
            self._gemm = lambda y: np.matmul(self._wpack, col, out=y.reshape(n, g, mg, p))
        else:
            col = np.empty((g, n * p, k1), dt)
            if b is not None:
                col[:, :, kg] = 1
            self._col_dst = as_shape(col[:, :, :kg], (g, n, *geo.out, *geo.kernel, cg))
            self._src_shape = (n, *geo.out, *geo.kernel, g, cg)
            self._src_axes = (2 * r + 1, 0, *range(1, 2 * r + 1), 2 * r + 2)
            self._wpack = np.empty((g, k1, mg), dt)
            self._w_dst = self._wpack[:, :kg, :]
            self._w_src = lambda w: w.reshape(g, mg, kg).transpose(0, 2, 1)
            self._b_dst = self._wpack[:, kg, :] if b is not None else None
            self._gemm = lambda y: np.matmul(col, self._wpack, out=y.reshape(n * p, g, mg).transpose(1, 0, 2))
        self._bshape = (g, mg)
        self._src = self._make_src(self._xp) if self._xp is not None else None
        self._x_seen = None

    def _make_src(self, xp):
        v = window_view(xp, self._geo, self.order).reshape(self._src_shape)
        return v if self._src_axes is None else v.transpose(self._src_axes)

    def run(self) -> None:
        self._conv()
        if self._relu:
            y = self.outputs[0].array
            np.maximum(y, 0, out=y)

    def _conv(self) -> None:
        x, w, b = self.forward_inputs()
        kernel = self._kernel
        if kernel is not None and kernel.threads != get_num_threads():
            self._prepare_for(x, w, b)
            kernel = self._kernel
        y = self.output(0, self._yshape, x.dtype)
        if kernel is not None:
            kernel.run(x, w, b, y, wt=self.inputs[1].held)
            return
        wt = self.inputs[1].held
        bt = self.inputs[2].held if b is not None else None
        seen = self._w_seen
        if seen is None or not matches(seen[0], wt) or (bt is not None and not matches(seen[1], bt)):
            np.copyto(self._w_dst, self._w_src(w))  # packed once per filter (and bias) tensor version
            if b is not None:
                np.copyto(self._b_dst, b.reshape(self._bshape))
            self._w_seen = (stamp(wt), stamp(bt) if bt is not None else None)
        if self._xp is not None:
            np.copyto(self._xp_in, x)
            src = self._src
        elif x is self._x_seen:
            src = self._src
        else:
            src = self._src = self._make_src(x)
            self._x_seen = x
        np.copyto(self._col_dst, src)
        if y.size:
            self._gemm(y)

    def compile(self):
        """The NCHW kernel's call on the arrays bound now (ConvNCHW.bound, framework/net/program.py)."""
        kernel = self._kernel
        if kernel is None or self._relu or kernel.threads != get_num_threads():
            return None
        a = [blob.array for blob in self.inputs]
        if self._key != (a[0].shape, a[1].shape, a[0].dtype, len(a) == 3) or a[1].dtype != a[0].dtype:
            return None
        b = a[2] if len(a) == 3 else None
        return kernel.bound(a[0], a[1], b, self.outputs[0].array, None, self.inputs[1].held, self.run)


def _infer_conv_grad(args, ins):
    x, w = ins[0], ins[1]
    outs = [w]
    no_bias = bool(args.no_bias)
    if not no_bias:
        outs.append(TensorSpec((w.shape[0],) if w.shape is not None else None, w.dtype))
    if args.num_outputs > len(outs):
        outs.append(x)
    return outs


@register_op(
    "ConvGradient",
    **gradient_schema(_CONV_ARGS, _infer_conv_grad, aliases=("Conv1DGradient", "Conv2DGradient", "Conv3DGradient")),
)
class ConvGradient(ConvOpBase):
    """Gradients of Conv: (dfilter, dbias, dX), dbias absent when no_bias=1, dX optional."""

    is_gradient = True

    def _prepare(self, x, w, dy) -> None:
        dt = self._dtype([x, w, dy])
        geo, n, c, m = conv_geometry(self.spec, x.shape, w.shape, self.describe(), self.input_names)
        check_conv_sizes(self, geo, n, c, m)
        self._check_shape("gradient", dy, join_layout(n, m, geo.out, self.order))
        self._key = (x.shape, w.shape, dy.shape, dt)
        g, r, o = self.spec.group, len(geo.kernel), self.order
        cg, mg = c // g, m // g
        kg, p = cg * math.prod(geo.kernel), math.prod(geo.out)
        self._geo = geo
        self._dx_conv = None
        if o == "NCHW" and USE_NCHW_KERNELS and self.i_dx is not None:
            self._dx_conv = conv_grad_data.plan(n, c, m, g, geo, dt)  # dX as forward convs of dY
        self._dwk = None
        if o == "NCHW" and USE_NCHW_KERNELS:
            self._dwk = conv_grad_filter.plan(n, c, m, g, geo, dt)  # dW by the compiled kernel, no columns
        self._xp = self._dxp = None
        if geo.padded:
            if self._dwk is None:
                self._xp, self._xp_in = self.padded_buffer(n, c, geo, dt)
            if self._dx_conv is None and self.i_dx is not None:
                self._dxp, self._dxp_in = self.padded_buffer(n, c, geo, dt)
        self._slices = kernel_slices(geo)
        sl_full = (slice(None),) * r
        if o == "NCHW":
            self._col = np.empty((g, cg, *geo.kernel, n, *geo.out) if self._dwk is None else (0,), dt)
            self._src_shape = (n, g, cg, *geo.kernel, *geo.out)
            self._src_axes = (1, 2, *range(3, 3 + r), 0, *range(3 + r, 3 + 2 * r))
            # dY^T feeds the dfilter GEMM and the column path of dX
            need_dyt = self._dwk is None or (self._dx_conv is None and self.i_dx is not None)
            self._dyT = np.empty((g, mg, n, p) if need_dyt else (0,), dt)
            self._dy_src = lambda dy: dy.reshape(n, g, mg, p).transpose(1, 2, 0, 3)
            col3 = self._col.reshape(g, kg, n * p) if self._dwk is None else None
            dyT3 = self._dyT.reshape(g, mg, n * p) if need_dyt else None
            # dW^T = col @ dY^T: OpenBLAS runs this form of the thin product faster than dY @ col^T
            dwT = np.empty((g, kg, mg), dt)
            self._dw = lambda w, dw: (
                np.matmul(col3, dyT3.transpose(0, 2, 1), out=dwT),
                np.copyto(dw.reshape(g, mg, kg), dwT.transpose(0, 2, 1)),
            )
            # with several intra-op threads each fills the columns of its images and multiplies them
            big = 2 * m * kg * n * p >= _SPLIT_FLOPS and self._dwk is None
            self._dw_parts = split(n, min(get_num_threads(), n)) if big else [(0, n)]
            self._dw_shares = [np.empty((g, kg, mg), dt) for _ in self._dw_parts]
            self._dw_threads = get_num_threads()
            if self._dx_conv is None and self.i_dx is not None:  # dX's column path (no dX: no buffers)
                self._dcol = np.empty((g, kg, n * p), dt)
                self._dcol_mm = lambda w: np.matmul(w.reshape(g, mg, kg).transpose(0, 2, 1), dyT3, out=self._dcol)
                colv = self._dcol.reshape(g, cg, *geo.kernel, n, *geo.out).transpose(self._inverse(self._src_axes))
                self._col2im = [
                    (index(o, sl, lead=1, chan=2), colv[(slice(None),) * 3 + k + sl_full]) for k, sl in self._slices
                ]
            self._tgt_shape = (n, g, cg, *geo.buf_spatial) if geo.padded else (n, g, cg, *geo.spatial)
            self._db_axes = (0, *range(2, 2 + r))
        else:
            self._col = np.empty((g, n * p, kg), dt)
            self._col_dst = as_shape(self._col, (g, n, *geo.out, *geo.kernel, cg))
            self._src_shape = (n, *geo.out, *geo.kernel, g, cg)
            self._src_axes = (2 * r + 1, 0, *range(1, 2 * r + 1), 2 * r + 2)
            self._dyT = None
            self._dy_src = None
            col = self._col
            self._dw = lambda w, dw: np.matmul(self._dyv.transpose(0, 2, 1), col, out=dw.reshape(g, mg, kg))
            self._dcol = np.empty((g, n * p, kg), dt)
            self._dcol_mm = lambda w: np.matmul(self._dyv, w.reshape(g, mg, kg), out=self._dcol)
            colv = np.moveaxis(self._dcol.reshape(g, n, *geo.out, *geo.kernel, cg), 0, -2)
            self._col2im = [
                (index(o, sl, lead=1, chan=2), colv[(slice(None),) * (1 + r) + k]) for k, sl in self._slices
            ]
            self._tgt_shape = (n, *geo.buf_spatial, g, cg) if geo.padded else (n, *geo.spatial, g, cg)
            self._db_axes = tuple(range(0, 1 + r))
        self._np, self._g, self._mg, self._n, self._p = n * p, g, mg, n, p
        if o != "NCHW":
            self._dw_parts, self._dw_threads = [(0, n)], get_num_threads()
        self._x_seen = None

    @staticmethod
    def _inverse(axes):
        inv = [0] * len(axes)
        for i, a in enumerate(axes):
            inv[a] = i
        return tuple(inv)

    def run(self) -> None:
        x, w, dy = self.gradient_inputs()
        dxc = self._dx_conv
        if dxc is not None and dxc.threads != get_num_threads():
            self._prepare(x, w, dy)
            dxc = self._dx_conv
        o = self.order
        if self._dw_threads != get_num_threads():
            self._prepare(x, w, dy)
            dxc = self._dx_conv
        if self._dwk is not None:
            if self._dw_compiled(x, w, dy, dxc):
                return
            self._prepare(x, w, dy)  # its compile failed: the family is disabled, the column path runs
            dxc = self._dx_conv
        if o == "NCHW" and len(self._dw_parts) > 1:
            dw = self.output(0, w.shape, w.dtype)
            run_parallel([functools.partial(self._dw_part, k, x, dy) for k in range(len(self._dw_parts))], steal=True)
            total = self._dw_shares[0]
            for share in self._dw_shares[1:]:
                np.add(total, share, out=total)
            np.copyto(dw.reshape(self._g, self._mg, -1), total.transpose(0, 2, 1))
            self._rest(x, w, dy, dxc)
            return
        # im2col of X (layout chosen for the dfilter GEMM)
        if self._xp is not None:
            np.copyto(self._xp_in, x)
            xp = self._xp
        else:
            xp = x
        src = window_view(xp, self._geo, o).reshape(self._src_shape).transpose(self._src_axes)
        if o == "NCHW":
            np.copyto(self._col, src)
            np.copyto(self._dyT, self._dy_src(dy))
        else:
            np.copyto(self._col_dst, src)
            self._dyv = dy.reshape(self._np, self._g, self._mg).transpose(1, 0, 2)
        dw = self.output(0, w.shape, w.dtype)
        self._dw(w, dw)
        self._rest(x, w, dy, dxc)

    def _dw_compiled(self, x, w, dy, dxc) -> bool:
        """dW by the compiled kernel (conv_grad_filter), then dbias and dX; False (nothing written) when
        the kernel is unavailable."""
        if not (x.flags.c_contiguous and dy.flags.c_contiguous):
            x, dy = np.ascontiguousarray(x), np.ascontiguousarray(dy)
        dw = self.output(0, w.shape, w.dtype)
        if not self._dwk.run(x, dy, dw):
            return False
        if self._dx_conv is None and self.i_dx is not None:
            np.copyto(self._dyT, self._dy_src(dy))  # the column path of dX reads dY^T
        self._rest(x, w, dy, dxc)
        return True

    def _dw_part(self, k: int, x, dy) -> None:
        """Worker k's images: their columns and dY rows, and their share of dW^T (NCHW)."""
        n0, n1 = self._dw_parts[k]
        xp = x
        if self._xp is not None:
            np.copyto(self._xp_in[n0:n1], x[n0:n1])
            xp = self._xp
        src = window_view(xp[n0:n1], self._geo, "NCHW")  # (nb, C, kh, kw, oh, ow)
        nb, g, mg, p = n1 - n0, self._g, self._mg, self._p
        src = src.reshape((nb, *self._src_shape[1:])).transpose(self._src_axes)
        np.copyto(self._col[(slice(None),) * (2 + len(self._geo.kernel)) + (slice(n0, n1),)], src)
        np.copyto(self._dyT[:, :, n0:n1], dy[n0:n1].reshape(nb, g, mg, p).transpose(1, 2, 0, 3))
        col = self._col.reshape(g, -1, self._n * p)[:, :, n0 * p : n1 * p]
        dyt = self._dyT.reshape(g, mg, self._n * p)[:, :, n0 * p : n1 * p]
        np.matmul(col, dyt.transpose(0, 2, 1), out=self._dw_shares[k])

    def _rest(self, x, w, dy, dxc) -> None:
        """dbias and dX, once dW is written."""
        if self.i_db is not None:
            db = self.output(self.i_db, (w.shape[0],), w.dtype)
            np.sum(dy, axis=self._db_axes, out=db)
        if self.i_dx is not None:
            dx = self.output(self.i_dx, x.shape, x.dtype)
            if dxc is not None:
                dxc.run(dy, w, self.inputs[1].held, dx)
                return
            self._dcol_mm(w)
            tgt = self._dxp if self._dxp is not None else dx
            tgt.fill(0)
            tgt = tgt.reshape(self._tgt_shape)
            for idx, part in self._col2im:
                view = tgt[idx]
                np.add(view, part, out=view)
            if self._dxp is not None:
                np.copyto(dx, self._dxp_in)


@gradient("Conv")
def _conv_grad(g):
    compute_dx = not bool(g.arg("no_gradient_to_input", 0))
    t = g.def_.type + "Gradient"
    if len(g.def_.input) == 3:
        outs = [g.GI(1), g.GI(2)] + ([g.GI(0)] if compute_dx else [])
        return [g.op(t, [g.I(0), g.I(1), g.GO(0)], outs)]
    outs = [g.GI(1)] + ([g.GI(0)] if compute_dx else [])
    return [g.op(t, [g.I(0), g.I(1), g.GO(0)], outs, no_bias=1)]


for _alias in ("Conv1D", "Conv2D", "Conv3D"):
    gradient(_alias)(_conv_grad)
