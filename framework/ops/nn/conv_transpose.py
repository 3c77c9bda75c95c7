"""Transposed convolution: ConvTranspose (the gradient of Conv with respect to its input)
and ConvTransposeGradient, over the same column buffers as ``conv``. Filter layouts as
Caffe2: NCHW (C, M / group, *kernel), NHWC (C, *kernel, M / group).

With group > 1 the filter is expanded once per filter version into the block-diagonal
(C, M, *kernel) filter of the equivalent group=1 op (input group g feeds only output group g),
so the same kernels run; the filter gradient is read back from the diagonal blocks.
"""

from __future__ import annotations

import math

import numpy as np

from framework.errors import ShapeError
from framework.memory.binding import matches, stamp
from framework.ops.gradient import gradient
from framework.ops.nn.conv import ConvOpBase, _conv_like_cost, forward_schema, gradient_schema
from framework.ops.nn.conv_args import (
    CAFFE_LEGACY_POOLING,
    NOTSET,
    Geometry,
    conv_pool_args,
    index,
    join_layout,
    kernel_slices,
    parse_conv_pool,
    resolve,
    split_layout,
    window_view,
)
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, INT, INTS, UNKNOWN, Arg, Cost, TensorSpec

_CT_ARGS = conv_pool_args(dilation=False) + [
    Arg("adj", INT, 0, "extra output size at the tail of every spatial dimension (< stride)"),
    Arg("adjs", INTS, [], "adj per spatial dimension"),
    Arg("adj_h", INT, 0, "adj of the height (2-D, with adj_w)"),
    Arg("adj_w", INT, 0, "adj of the width (2-D, with adj_h)"),
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
        if adj[i] > probe.stride[i] or adj[i] < 0:
            raise ShapeError(f"{where}: adj {adj[i]} must be in [0, stride {probe.stride[i]}]")
        f = (spatial[i] - 1) * probe.stride[i] + kernel[i] + adj[i]
        if f - heads[i] - tails[i] < 1:
            raise ShapeError(f"{where}: pads ({heads[i]}, {tails[i]}) leave no output in spatial dim {i}")
        full.append(f)
        out.append(f - heads[i] - tails[i])
    # Geometry of the im2col/col2im stage over the full (uncropped) output.
    geo = Geometry(tuple(out), tuple(kernel), probe.stride, (1,) * r, heads, tails, tuple(spatial))
    return geo, n, c, m, tuple(out), tuple(full)


def convt_adjs(has, get):
    """The output adjustment as Caffe2 reads it: ``adjs`` (one per spatial dim), else ``adj`` (every dim),
    else ``adj_h`` and ``adj_w`` together (2-D), else 0. ``has(name)`` / ``get(name)`` read the arguments."""
    if has("adjs"):
        return tuple(get("adjs"))
    if not has("adj") and has("adj_h") and has("adj_w"):
        return (get("adj_h"), get("adj_w"))
    return get("adj")


def _ct_adjs(args):
    return convt_adjs(args.has, lambda name: getattr(args, name))


def _infer_convt(args, ins):
    x, w = ins[0], ins[1]
    if x.shape is None or w.shape is None:
        return [UNKNOWN]
    spec = parse_conv_pool(args, "ConvTranspose", "ConvTranspose", need_kernel=False)
    _, n, _, m, out, _ = convt_geometry(spec, _ct_adjs(args), x.shape, w.shape, "ConvTranspose")
    return [TensorSpec(join_layout(n, m * max(spec.group, 1), out, spec.order), x.dtype)]


def _cost_convt(args, ins, outs):
    """FLOPs = 2 * |X| * M * prod(kernel) (+ |Y| with a bias): every input element is scattered
    through every output channel and kernel tap."""
    x, w = ins[0], ins[1]
    if not (x.known and w.known):
        return Cost()
    y = outs[0] if outs and outs[0].known else _infer_convt(args, ins)[0]
    m_kernel = math.prod(w.shape[1:])  # M * prod(kernel) in both layouts
    return _conv_like_cost(x, w, ins[2] if len(ins) > 2 else None, y.shape, math.prod(x.shape) * m_kernel)


class _ConvTBase(ConvOpBase):
    need_kernel = False

    def check_args(self) -> None:
        if self.spec.group < 1:
            raise self.arg_error(f"group must be >= 1, got {self.spec.group}")
        self.adjs = _ct_adjs(self.args)
        self._wkey = None

    def _geometry(self, x, w):
        return convt_geometry(self.spec, self.adjs, x.shape, w.shape, self.describe(), self.input_names)

    def _group_blocks(self, w):
        """(channel axis of the filter's outputs, C / group, M / group) after checking the groups."""
        g = self.spec.group
        c = w.shape[0]
        if c % g:
            raise ShapeError(
                f"{self.describe()}: filter '{self.input_names[1]}' has {c} input channels, not a multiple of group {g}"
            )
        return (1 if self.order == "NCHW" else w.ndim - 1), c // g, w.shape[1 if self.order == "NCHW" else -1]

    def _expanded(self, w):
        """The block-diagonal group=1 filter of a grouped one (cached per filter version)."""
        key = (w.shape, w.dtype)
        wt = self.input_tensor(1)
        if self._wkey is None or self._wkey[0] != key or not matches(self._wkey[1], wt):
            ax, cg, mg = self._group_blocks(w)
            shape = list(w.shape)
            shape[ax] = mg * self.spec.group
            full = np.zeros(shape, w.dtype)
            for k in range(self.spec.group):
                sl = [slice(k * cg, (k + 1) * cg)] + [slice(None)] * (w.ndim - 1)
                sl[ax] = slice(k * mg, (k + 1) * mg)
                full[tuple(sl)] = w[k * cg : (k + 1) * cg]
            self._wfull, self._wkey = full, (key, stamp(wt))
        return self._wfull

    def _diagonal(self, dw_full, out):
        """The grouped filter's gradient: the diagonal blocks of the expanded filter's one."""
        ax, cg, mg = self._group_blocks(out)
        for k in range(self.spec.group):
            sl = [slice(k * cg, (k + 1) * cg)] + [slice(None)] * (out.ndim - 1)
            sl[ax] = slice(k * mg, (k + 1) * mg)
            out[k * cg : (k + 1) * cg] = dw_full[tuple(sl)]

    def forward_inputs(self) -> tuple:
        if self.spec.group == 1:
            return super().forward_inputs()
        x, w = self.input(0), self.input(1)
        self._dtype([x, w])
        w = self._expanded(w)
        b = self.input(2) if len(self.inputs) == 3 else None
        if self._key != (x.shape, w.shape, x.dtype, b is not None):
            self._prepare(x, w, b)
        return x, w, b

    def gradient_inputs(self) -> tuple:
        if self.spec.group == 1:
            return super().gradient_inputs()
        x, w, dy = self.input(0), self.input(1), self.input(2)
        self._dtype([x, w, dy])
        w = self._expanded(w)
        if self._key != (x.shape, w.shape, dy.shape, x.dtype):
            self._prepare(x, w, dy)
        return x, w, dy


@register_op(
    "ConvTranspose",
    **forward_schema(
        _CT_ARGS,
        _infer_convt,
        ("input", "NCHW (C, M / group, *kernel); NHWC (C, *kernel, M / group)", "optional (M,)", "output"),
        cost=lambda args, ins, outs: _cost_convt(args, ins, outs),
    ),
)
class ConvTranspose(_ConvTBase):
    """Transposed convolution (the gradient of Conv with respect to its input), Caffe2's
    ConvTranspose: out = (in - 1) * stride + kernel + adj - pad_head - pad_tail. With `group`
    G the C input channels and the M = G * filter-channels outputs split into G groups, input
    group g feeding output group g only."""

    def _prepare(self, x, w, b) -> None:
        dt = self._dtype([x, w, b])
        geo, n, c, m, out, full = self._geometry(x, w)
        self._check_shape("bias", b, (m,))
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
        x, w, b = self.forward_inputs()
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


def _infer_convt_grad(args, ins):
    x, w = ins[0], ins[1]
    outs = [w]
    if not args.no_bias:
        order = args.order
        m = None if w.shape is None else (w.shape[1] if order == "NCHW" else w.shape[-1]) * max(args.group, 1)
        outs.append(TensorSpec((m,) if m is not None else None, w.dtype))
    if args.num_outputs > len(outs):
        outs.append(x)
    return outs


@register_op("ConvTransposeGradient", **gradient_schema(_CT_ARGS, _infer_convt_grad))
class ConvTransposeGradient(_ConvTBase):
    """Gradients of ConvTranspose: (dfilter, dbias, dX); dbias absent when no_bias=1."""

    is_gradient = True

    def _prepare(self, x, w, dy) -> None:
        dt = self._dtype([x, w, dy])
        geo, n, c, m, out, full = self._geometry(x, w)
        self._check_shape("gradient", dy, join_layout(n, m, out, self.order))
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
        x, w, dy = self.gradient_inputs()
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
        if self.spec.group == 1:
            dw = self.output(0, w.shape, w.dtype)
            self._dw(x, dw)
        else:
            dw_full = np.empty(w.shape, w.dtype)
            self._dw(x, dw_full)
            grouped = self.input(1)
            self._diagonal(dw_full, self.output(0, grouped.shape, grouped.dtype))
        if self.i_db is not None:
            m = w.shape[1] if self.order == "NCHW" else w.shape[-1]
            db = self.output(self.i_db, (m,), w.dtype)
            np.sum(dy, axis=self._db_axes, out=db)
        if self.i_dx is not None:
            dx = self.output(self.i_dx, x.shape, x.dtype)
            self._dx(w, dx)


@gradient("ConvTranspose")
def _convt_grad(g):
    if len(g.def_.input) == 3:
        return [g.op("ConvTransposeGradient", [g.I(0), g.I(1), g.GO(0)], [g.GI(1), g.GI(2), g.GI(0)])]
    return [g.op("ConvTransposeGradient", [g.I(0), g.I(1), g.GO(0)], [g.GI(1), g.GI(0)], no_bias=1)]
