"""Convolution: Conv (Conv1D/2D/3D), ConvTranspose, and their gradient ops.

Conv is im2col into a column buffer kept across runs (filled from a strided
window view of the input, no Python loops), then one batched GEMM per run
written straight into the output, with the bias folded into the GEMM as an
extra row of ones. Filter layouts as Caffe2: NCHW (M, C/group, *kernel),
NHWC (M, *kernel, C/group).
"""

from __future__ import annotations

import math

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.ops.conv_args import (
    CAFFE_LEGACY_POOLING,
    NOTSET,
    Geometry,
    as_shape,
    conv_pool_args,
    index,
    join_layout,
    kernel_slices,
    parse_conv_pool,
    resolve,
    split_layout,
    window_view,
)
from framework.ops.gradient import gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, INT, INTS, UNKNOWN, Arg, Cost, TensorSpec

_CONV_ARGS = conv_pool_args() + [
    Arg("no_bias", BOOL, False, "no bias input (gradient ops: no bias gradient output)"),
    Arg("no_gradient_to_input", BOOL, False, "gradient maker: do not compute the input gradient"),
]


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
    spec = parse_conv_pool(args, "Conv", "Conv")
    if w.shape is None:
        n, _, spatial = split_layout(x.shape, spec.order)
        return [TensorSpec(join_layout(n, None, resolve(spec, spatial, "Conv").out, spec.order), x.dtype)]
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


class _ConvPool(Operator):
    """Common setup: parsed ConvPoolOpBase arguments in self.spec."""

    need_kernel = True

    def setup(self) -> None:
        self.spec = parse_conv_pool(self.args, self.describe(), self.type, need_kernel=self.need_kernel)
        self.order = self.spec.order
        self._key = None


@register_op(
    "Conv",
    inputs=(2, 3),
    args=_CONV_ARGS,
    input_docs=[
        ("X", "input, NCHW or NHWC"),
        ("filter", "(M, C/group, *kernel) or NHWC (M, *kernel, C/group)"),
        ("bias", "optional (M,)"),
    ],
    output_docs=[("Y", "output, (N, M, *out) or (N, *out, M)")],
    infer=_infer_conv,
    cost=_cost_conv,
    category="conv",
    aliases=("Conv1D", "Conv2D", "Conv3D"),
)
class Conv(_ConvPool):
    """N-d convolution (Caffe2's Conv): Y = X * filter (+ bias), with stride, pads,
    dilation, group, order and legacy_pad as in Caffe2. Out size per dim:
    floor((in + pad_head + pad_tail - dilation*(kernel-1) - 1) / stride) + 1."""

    def _prepare(self, x, w, b) -> None:
        where = self.describe()
        names = self.input_names
        dt = _typed(where, names, [x, w] + ([b] if b is not None else []))
        geo, n, c, m = conv_geometry(self.spec, x.shape, w.shape, where, names)
        if b is not None and b.shape != (m,):
            raise ShapeError(f"{where}: bias '{names[2]}' must have shape ({m},), got {b.shape}")
        self._key = (x.shape, w.shape, dt, b is not None)
        g = self.spec.group
        cg, mg, r = c // g, m // g, len(geo.kernel)
        kg = cg * math.prod(geo.kernel)
        p = math.prod(geo.out)
        k1 = kg + (b is not None)
        self._geo, self._yshape = geo, join_layout(n, m, geo.out, self.order)
        self._xp = None
        if geo.padded:
            self._xp = np.zeros(join_layout(n, c, geo.buf_spatial, self.order), dt)
            self._xp_in = self._xp[index(self.order, geo.interior)]
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
        x, w = self.input(0), self.input(1)
        b = self.input(2) if len(self.inputs) == 3 else None
        if self._key is None or self._key != (x.shape, w.shape, x.dtype, b is not None) or w.dtype != x.dtype:
            self._prepare(x, w, b)
        y = self.output(0, self._yshape, x.dtype)
        np.copyto(self._w_dst, self._w_src(w))
        if b is not None:
            np.copyto(self._b_dst, b.reshape(self._bshape))
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
    inputs=3,
    outputs=(1, 3),
    args=_CONV_ARGS,
    input_docs=[("X", "forward input"), ("filter", "filter"), ("dY", "gradient of Y")],
    output_docs=[
        ("dfilter", "gradient of filter"),
        ("dbias", "gradient of bias (unless no_bias)"),
        ("dX", "gradient of X (optional)"),
    ],
    infer=_infer_conv_grad,
    category="conv",
    aliases=("Conv1DGradient", "Conv2DGradient", "Conv3DGradient"),
    private=True,
)
class ConvGradient(_ConvPool):
    """Gradients of Conv: (dfilter, dbias, dX), dbias absent when no_bias=1, dX optional."""

    def setup(self) -> None:
        super().setup()
        self.no_bias = bool(self.args.no_bias)
        nout = len(self.outputs)
        if self.no_bias and nout == 3:
            raise self.arg_error("with no_bias=1 there is no bias gradient: give 1 or 2 outputs (dfilter, dX)")
        self.i_db = None if self.no_bias else 1
        self.i_dx = (1 if self.no_bias else 2) if nout > (1 if self.no_bias else 2) else None

    def _prepare(self, x, w, dy) -> None:
        where, names = self.describe(), self.input_names
        dt = _typed(where, names, [x, w, dy])
        geo, n, c, m = conv_geometry(self.spec, x.shape, w.shape, where, names)
        yshape = join_layout(n, m, geo.out, self.order)
        if dy.shape != yshape:
            raise ShapeError(f"{where}: gradient '{names[2]}' must have shape {yshape}, got {dy.shape}")
        self._key = (x.shape, w.shape, dy.shape, dt)
        g, r, o = self.spec.group, len(geo.kernel), self.order
        cg, mg = c // g, m // g
        kg, p = cg * math.prod(geo.kernel), math.prod(geo.out)
        self._geo = geo
        self._xp = self._dxp = None
        if geo.padded:
            self._xp = np.zeros(join_layout(n, c, geo.buf_spatial, o), dt)
            self._xp_in = self._xp[index(o, geo.interior)]
            self._dxp = np.zeros_like(self._xp)
            self._dxp_in = self._dxp[index(o, geo.interior)]
        self._slices = kernel_slices(geo)
        sl_full = (slice(None),) * r
        if o == "NCHW":
            self._col = np.empty((g, cg, *geo.kernel, n, *geo.out), dt)
            self._src_shape = (n, g, cg, *geo.kernel, *geo.out)
            self._src_axes = (1, 2, *range(3, 3 + r), 0, *range(3 + r, 3 + 2 * r))
            self._dyT = np.empty((g, mg, n, p), dt)
            self._dy_src = lambda dy: dy.reshape(n, g, mg, p).transpose(1, 2, 0, 3)
            col3 = self._col.reshape(g, kg, n * p)
            dyT3 = self._dyT.reshape(g, mg, n * p)
            self._dw = lambda w, dw: np.matmul(dyT3, col3.transpose(0, 2, 1), out=dw.reshape(g, mg, kg))
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
        self._np, self._g, self._mg = n * p, g, mg
        self._x_seen = None

    @staticmethod
    def _inverse(axes):
        inv = [0] * len(axes)
        for i, a in enumerate(axes):
            inv[a] = i
        return tuple(inv)

    def run(self) -> None:
        x, w, dy = self.input(0), self.input(1), self.input(2)
        if self._key != (x.shape, w.shape, dy.shape, x.dtype) or w.dtype != x.dtype or dy.dtype != x.dtype:
            self._prepare(x, w, dy)
        o = self.order
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
        if self.i_db is not None:
            db = self.output(self.i_db, (w.shape[0],), w.dtype)
            np.sum(dy, axis=self._db_axes, out=db)
        if self.i_dx is not None:
            dx = self.output(self.i_dx, x.shape, x.dtype)
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


# -- ConvTranspose ---------------------------------------------------------------------

_CT_ARGS = conv_pool_args(dilation=False) + [
    Arg("adj", INT, 0, "extra output size at the tail of every spatial dimension (< stride)"),
    Arg("adjs", INTS, [], "adj per spatial dimension"),
    Arg("no_bias", BOOL, False, "no bias input (gradient ops: no bias gradient output)"),
]


def convt_geometry(spec, adjs, x_shape, w_shape, where, names=("X", "filter")):
    """(full-buffer geometry, N, C, M, out sizes) of ConvTranspose.

    Out size per dim = (in - 1) * stride + kernel + adj - pad_head - pad_tail (pads 0 with
    VALID/SAME), as Caffe2's ConvTransposeUnpoolBase.
    """
    if len(x_shape) < 3 or len(w_shape) != len(x_shape):
        raise ShapeError(f"{where}: input '{names[0]}' {x_shape} and filter '{names[1]}' {w_shape} must be N-d alike")
    n, c, spatial = split_layout(x_shape, spec.order)
    cw, m, kernel = split_layout(w_shape, spec.order)
    if c != cw:
        raise ShapeError(f"{where}: filter '{names[1]}' has {cw} input channels, input '{names[0]}' has {c}")
    if spec.legacy_pad == CAFFE_LEGACY_POOLING:
        raise ShapeError(f"{where}: legacy_pad CAFFE_LEGACY_POOLING is not supported by ConvTranspose")
    r = len(spatial)
    given_kernel = tuple(kernel) if spec.kernel is None else None
    probe = resolve(spec._replace(legacy_pad=NOTSET), tuple(kernel), where, kernel=given_kernel)
    if probe.kernel != tuple(kernel):
        raise ShapeError(
            f"{where}: filter '{names[1]}' has kernel {tuple(kernel)} but the arguments say {probe.kernel}"
        )
    adj = tuple(adjs) if isinstance(adjs, tuple) else (adjs,) * r
    if len(adj) != r:
        raise ShapeError(f"{where}: adjs has {len(adj)} values for {r} spatial dimensions")
    heads, tails = (probe.head, probe.tail) if spec.legacy_pad == NOTSET else ((0,) * r, (0,) * r)
    full, out = [], []
    for i in range(r):
        if adj[i] >= probe.stride[i] or adj[i] < 0:
            raise ShapeError(f"{where}: adj {adj[i]} must be in [0, stride {probe.stride[i]})")
        f = (spatial[i] - 1) * probe.stride[i] + kernel[i] + adj[i]
        if f - heads[i] - tails[i] < 1:
            raise ShapeError(f"{where}: pads ({heads[i]}, {tails[i]}) leave no output in spatial dim {i}")
        full.append(f)
        out.append(f - heads[i] - tails[i])
    # Geometry of the im2col/col2im stage over the full (uncropped) output.
    geo = Geometry(tuple(out), tuple(kernel), probe.stride, (1,) * r, heads, tails, tuple(spatial))
    return geo, n, c, m, tuple(out), tuple(full)


def _ct_adjs(args):
    return tuple(args.adjs) if args.has("adjs") else args.adj


def _infer_convt(args, ins):
    x, w = ins[0], ins[1]
    if x.shape is None or w.shape is None:
        return [UNKNOWN]
    spec = parse_conv_pool(args, "ConvTranspose", "ConvTranspose", need_kernel=False)
    _, n, _, m, out, _ = convt_geometry(spec, _ct_adjs(args), x.shape, w.shape, "ConvTranspose")
    return [TensorSpec(join_layout(n, m, out, spec.order), x.dtype)]


def _cost_convt(args, ins, outs):
    """FLOPs = 2 * |X| * M * prod(kernel) (+ |Y| with a bias): every input element is scattered
    through every output channel and kernel tap."""
    x, w = ins[0], ins[1]
    if not (x.known and w.known):
        return Cost()
    y = outs[0] if outs and outs[0].known else _infer_convt(args, ins)[0]
    m_kernel = math.prod(w.shape[1:])  # M * prod(kernel) in both layouts
    return _conv_like_cost(x, w, ins[2] if len(ins) > 2 else None, y.shape, math.prod(x.shape) * m_kernel)


class _ConvTBase(_ConvPool):
    need_kernel = False

    def setup(self) -> None:
        super().setup()
        if self.spec.group != 1:
            raise self.arg_error("ConvTranspose supports group=1 only")
        self.adjs = _ct_adjs(self.args)

    def _geometry(self, x, w):
        return convt_geometry(self.spec, self.adjs, x.shape, w.shape, self.describe(), self.input_names)


@register_op(
    "ConvTranspose",
    inputs=(2, 3),
    args=_CT_ARGS,
    input_docs=[("X", "input"), ("filter", "NCHW (C, M, *kernel); NHWC (C, *kernel, M)"), ("bias", "optional (M,)")],
    output_docs=[("Y", "output")],
    infer=_infer_convt,
    cost=lambda args, ins, outs: _cost_convt(args, ins, outs),
    category="conv",
)
class ConvTranspose(_ConvTBase):
    """Transposed convolution (the gradient of Conv with respect to its input), Caffe2's
    ConvTranspose: out = (in - 1) * stride + kernel + adj - pad_head - pad_tail."""

    def _prepare(self, x, w, b) -> None:
        where, names = self.describe(), self.input_names
        dt = _typed(where, names, [x, w] + ([b] if b is not None else []))
        geo, n, c, m, out, full = self._geometry(x, w)
        if b is not None and b.shape != (m,):
            raise ShapeError(f"{where}: bias '{names[2]}' must have shape ({m},), got {b.shape}")
        self._key = (x.shape, w.shape, dt, b is not None)
        o, r = self.order, len(out)
        kp, p = math.prod(geo.kernel), math.prod(geo.out)
        self._yshape = join_layout(n, m, out, o)
        padded = any(geo.head) or any(geo.tail)
        self._full = np.zeros(join_layout(n, m, full, o), dt) if padded else None
        self._crop = index(o, tuple(slice(h, h + s) for h, s in zip(geo.head, out)))
        slices = kernel_slices(geo)
        if o == "NCHW":
            self._col = np.empty((n, m * kp, p), dt)
            colv = self._col.reshape(n, m, *geo.kernel, *geo.out)
            self._mm = lambda x, w: np.matmul(w.reshape(c, m * kp).T, x.reshape(n, c, p), out=self._col)
            self._parts = [(index(o, sl), colv[(slice(None),) * 2 + k]) for k, sl in slices]
            self._bshape = (m,) + (1,) * r
        else:
            self._col = np.empty((n * p, kp * m), dt)
            colv = self._col.reshape(n, *geo.out, *geo.kernel, m)
            self._mm = lambda x, w: np.matmul(x.reshape(n * p, c), w.reshape(c, kp * m), out=self._col)
            self._parts = [(index(o, sl), colv[(slice(None),) * (1 + r) + k]) for k, sl in slices]
            self._bshape = (m,)

    def run(self) -> None:
        x, w = self.input(0), self.input(1)
        b = self.input(2) if len(self.inputs) == 3 else None
        if self._key != (x.shape, w.shape, x.dtype, b is not None) or w.dtype != x.dtype:
            self._prepare(x, w, b)
        y = self.output(0, self._yshape, x.dtype)
        self._mm(x, w)
        tgt = self._full if self._full is not None else y
        tgt.fill(0)
        for idx, part in self._parts:
            view = tgt[idx]
            np.add(view, part, out=view)
        if self._full is not None:
            np.copyto(y, self._full[self._crop])
        if b is not None:
            np.add(y, b.reshape(self._bshape), out=y)


@register_op(
    "ConvTransposeGradient",
    inputs=3,
    outputs=(1, 3),
    args=_CT_ARGS,
    input_docs=[("X", "forward input"), ("filter", "filter"), ("dY", "gradient of Y")],
    output_docs=[
        ("dfilter", "gradient of filter"),
        ("dbias", "gradient of bias (unless no_bias)"),
        ("dX", "gradient of X (optional)"),
    ],
    infer=_infer_conv_grad,
    category="conv",
    private=True,
)
class ConvTransposeGradient(_ConvTBase):
    """Gradients of ConvTranspose: (dfilter, dbias, dX); dbias absent when no_bias=1."""

    def setup(self) -> None:
        super().setup()
        self.no_bias = bool(self.args.no_bias)
        nout = len(self.outputs)
        if self.no_bias and nout == 3:
            raise self.arg_error("with no_bias=1 there is no bias gradient: give 1 or 2 outputs (dfilter, dX)")
        self.i_db = None if self.no_bias else 1
        self.i_dx = (1 if self.no_bias else 2) if nout > (1 if self.no_bias else 2) else None

    def _prepare(self, x, w, dy) -> None:
        where, names = self.describe(), self.input_names
        dt = _typed(where, names, [x, w, dy])
        geo, n, c, m, out, full = self._geometry(x, w)
        yshape = join_layout(n, m, out, self.order)
        if dy.shape != yshape:
            raise ShapeError(f"{where}: gradient '{names[2]}' must have shape {yshape}, got {dy.shape}")
        self._key = (x.shape, w.shape, dy.shape, dt)
        o, r = self.order, len(out)
        kp, p = math.prod(geo.kernel), math.prod(geo.out)
        padded = any(geo.head) or any(geo.tail)
        self._full = np.zeros(join_layout(n, m, full, o), dt) if padded else None
        if padded:
            self._full_in = self._full[index(o, tuple(slice(h, h + s) for h, s in zip(geo.head, out)))]
        self._wgeo = geo._replace(head=(0,) * r, tail=(0,) * r)
        if o == "NCHW":
            self._col = np.empty((m, *geo.kernel, n, *geo.out), dt)
            self._axes = (1, *range(2, 2 + r), 0, *range(2 + r, 2 + 2 * r))
            self._xT = np.empty((c, n, p), dt)
            col3 = self._col.reshape(m * kp, n, p)
            self._dw = lambda x, dw: np.matmul(
                self._xT.reshape(c, n * p), col3.reshape(m * kp, n * p).T, out=dw.reshape(c, m * kp)
            )
            self._dx = lambda w, dx: np.matmul(w.reshape(c, m * kp), col3.transpose(1, 0, 2), out=dx.reshape(n, c, p))
            self._db_axes = (0, *range(2, 2 + r))
        else:
            self._col = np.empty((n * p, kp * m), dt)
            self._axes = None
            self._dw = lambda x, dw: np.matmul(x.reshape(n * p, c).T, self._col, out=dw.reshape(c, kp * m))
            self._dx = lambda w, dx: np.matmul(self._col, w.reshape(c, kp * m).T, out=dx.reshape(n * p, c))
            self._db_axes = tuple(range(0, 1 + r))
        self._n, self._c, self._p = n, c, p

    def run(self) -> None:
        x, w, dy = self.input(0), self.input(1), self.input(2)
        if self._key != (x.shape, w.shape, dy.shape, x.dtype) or w.dtype != x.dtype or dy.dtype != x.dtype:
            self._prepare(x, w, dy)
        if self._full is not None:
            np.copyto(self._full_in, dy)
            src_arr = self._full
        else:
            src_arr = dy
        win = window_view(src_arr, self._wgeo, self.order)
        if self._axes is not None:
            np.copyto(self._col, win.transpose(self._axes))
            np.copyto(self._xT, x.reshape(self._n, self._c, self._p).transpose(1, 0, 2))
        else:
            np.copyto(self._col.reshape(win.shape), win)
        dw = self.output(0, w.shape, w.dtype)
        self._dw(x, dw)
        if self.i_db is not None:
            m = w.shape[1] if self.order == "NCHW" else w.shape[-1]
            db = self.output(self.i_db, (m,), w.dtype)
            np.sum(dy, axis=self._db_axes, out=db)
        if self.i_dx is not None:
            dx = self.output(self.i_dx, x.shape, x.dtype)
            self._dx(w, dx)


def _infer_convt_grad(args, ins):
    x, w = ins[0], ins[1]
    outs = [w]
    if not args.no_bias:
        order = args.order
        m = None if w.shape is None else (w.shape[1] if order == "NCHW" else w.shape[-1])
        outs.append(TensorSpec((m,) if m is not None else None, w.dtype))
    if args.num_outputs > len(outs):
        outs.append(x)
    return outs


ConvTransposeGradient.schema.infer = _infer_convt_grad


@gradient("ConvTranspose")
def _convt_grad(g):
    if len(g.def_.input) == 3:
        return [g.op("ConvTransposeGradient", [g.I(0), g.I(1), g.GO(0)], [g.GI(1), g.GI(2), g.GI(0)])]
    return [g.op("ConvTransposeGradient", [g.I(0), g.I(1), g.GO(0)], [g.GI(1), g.GI(0)], no_bias=1)]
