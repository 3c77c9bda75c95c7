"""Locally connected layers: LC, LC1D, LC2D, LC3D (a convolution whose filter differs at every
output position) and their gradient ops LC*Gradient(X, filter, dY) -> (dfilter, dbias, dX).

Filter layouts as Caffe2: NCHW (*out, M, C, *kernel), bias (*out, M); NHWC (2-D only)
(out_h, out_w, M, kernel_h, kernel_w, C). Sizes and padding follow Conv's rules.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from framework.errors import ShapeError
from framework.ops.gradient import gradient
from framework.ops.nn.conv import forward_schema, gradient_schema
from framework.ops.nn.conv_args import (
    ConvPoolOp,
    conv_pool_args,
    index,
    join_layout,
    kernel_slices,
    parse_conv_pool,
    resolve,
    split_layout,
    window_view,
)
from framework.ops.pointwise import float_input
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, UNKNOWN, Arg, TensorSpec

_ARGS = conv_pool_args() + [
    Arg("no_bias", BOOL, False, "gradient ops: no bias gradient output"),
    Arg("no_gradient_to_input", BOOL, False, "the gradient maker asks for no dX"),
]
_TYPES = ("LC", "LC1D", "LC2D", "LC3D")


def _kernel_of(w_shape: tuple, r: int, order: str) -> tuple:
    return tuple(w_shape[r + 2 :]) if order == "NCHW" else tuple(w_shape[r + 1 : 2 * r + 1])


def _infer(args: Any, ins: list) -> list:
    x, w = ins[0], ins[1]
    if x.shape is None or w.shape is None:
        return [UNKNOWN]
    spec = parse_conv_pool(args, "LC", "LC", need_kernel=False)
    n, _, spatial = split_layout(x.shape, spec.order)
    r = len(spatial)
    geo = resolve(spec, spatial, "LC", kernel=_kernel_of(tuple(w.shape), r, spec.order))
    return [TensorSpec(join_layout(n, w.shape[r], geo.out, spec.order), x.dtype)]


class _LCBase(ConvPoolOp):
    need_kernel = False

    def setup(self) -> None:
        super().setup()
        if self.spec.group != 1:
            raise self.arg_error(
                f"only group=1 is supported (Caffe2's column buffers are sized for one group), got {self.spec.group}"
            )

    def _plan(self, x: np.ndarray, w: np.ndarray) -> tuple:
        """(geometry, N, C, M, P, K) after checking X and the filter against each other."""
        if x.ndim < 3:
            raise ShapeError(
                f"{self.describe()}: X '{self.input_names[0]}' needs a batch, a channel and spatial dims, "
                f"got {list(x.shape)}"
            )
        n, c, spatial = split_layout(x.shape, self.order)
        r = len(spatial)
        if self.order == "NHWC" and r != 2:
            raise ShapeError(f"{self.describe()}: NHWC supports 2-D images only (as Caffe2)")
        if w.ndim != x.ndim + r:
            raise ShapeError(
                f"{self.describe()}: filter '{self.input_names[1]}' must have {x.ndim + r} dims, got {list(w.shape)}"
            )
        kernel = _kernel_of(w.shape, r, self.order)
        geo = resolve(self.spec, spatial, self.describe(), kernel=kernel)
        m = w.shape[r]
        cw = w.shape[r + 1] if self.order == "NCHW" else w.shape[-1]
        if tuple(w.shape[:r]) != tuple(geo.out) or cw != c:
            raise ShapeError(
                f"{self.describe()}: filter '{self.input_names[1]}' {list(w.shape)} does not match "
                f"the output size {list(geo.out)} and {c} input channels"
            )
        return geo, n, c, m, math.prod(geo.out), math.prod(kernel) * c

    def _columns(self, x: np.ndarray, geo: Any, n: int, c: int) -> np.ndarray:
        """im2col: (N, K, P) for NCHW (channel-major rows), (N, P, K) for NHWC."""
        buf = np.zeros(join_layout(n, c, geo.buf_spatial, self.order), np.float64)
        buf[index(self.order, geo.interior)] = x
        win = window_view(buf, geo, self.order)
        p = math.prod(geo.out)
        return win.reshape(n, -1, p) if self.order == "NCHW" else win.reshape(n, p, -1)


def _forward(cls_name: str) -> type:
    class LocallyConnected(_LCBase):
        def run(self) -> None:
            x, w = float_input(self, 0), float_input(self, 1)
            geo, n, c, m, p, k = self._plan(x, w)
            b = float_input(self, 2) if len(self.inputs) > 2 else None
            if b is not None and tuple(b.shape) != tuple(geo.out) + (m,):
                raise ShapeError(
                    f"{self.describe()}: bias '{self.input_names[2]}' must be {list(geo.out) + [m]}, "
                    f"got {list(b.shape)}"
                )
            col = self._columns(x, geo, n, c)
            f = w.reshape(p, m, k)
            if self.order == "NCHW":
                y = np.einsum("nkp,pmk->nmp", col, f)
                if b is not None:
                    y += b.reshape(p, m).T
            else:
                y = np.einsum("npk,pmk->npm", col, f)
                if b is not None:
                    y += b.reshape(p, m)
            self.output(0, join_layout(n, m, geo.out, self.order), x.dtype)[...] = y.reshape(
                join_layout(n, m, geo.out, self.order)
            )

    LocallyConnected.__name__ = LocallyConnected.__qualname__ = cls_name
    LocallyConnected.__doc__ = (
        f"{cls_name}: locally connected layer, Y[n, m, p] = sum over (c, k) of filter[p, m, c, k] * "
        "X[n, c, window(p) + k] + bias[p, m]: a convolution with a separate filter at each output "
        "position p. group must be 1."
    )
    return LocallyConnected


def _backward(cls_name: str) -> type:
    class LocallyConnectedGradient(_LCBase):
        def run(self) -> None:
            x, w, dy = float_input(self, 0), float_input(self, 1), float_input(self, 2)
            geo, n, c, m, p, k = self._plan(x, w)
            want = join_layout(n, m, geo.out, self.order)
            if dy.shape != want:
                raise ShapeError(
                    f"{self.describe()}: dY '{self.input_names[2]}' must be {list(want)}, got {list(dy.shape)}"
                )
            no_bias = bool(self.args.no_bias)
            col = self._columns(x, geo, n, c)
            f = w.reshape(p, m, k)
            if self.order == "NCHW":
                g = dy.reshape(n, m, p)
                dw = np.einsum("nmp,nkp->pmk", g, col)
                db = g.sum(axis=0).T
                dcol = np.einsum("pmk,nmp->nkp", f, g)
            else:
                g = dy.reshape(n, p, m)
                dw = np.einsum("npm,npk->pmk", g, col)
                db = g.sum(axis=0)
                dcol = np.einsum("pmk,npm->npk", f, g)
            self.output(0, w.shape, w.dtype)[...] = dw.reshape(w.shape)
            i = 1
            if not no_bias and len(self.outputs) > 1:
                self.output(1, tuple(geo.out) + (m,), w.dtype)[...] = db.reshape(tuple(geo.out) + (m,))
                i = 2
            if len(self.outputs) > i:
                self.output(i, x.shape, x.dtype)[...] = self._col2im(dcol, geo, n, c)

        def _col2im(self, dcol: np.ndarray, geo: Any, n: int, c: int) -> np.ndarray:
            buf = np.zeros(join_layout(n, c, geo.buf_spatial, self.order), np.float64)
            kern, out = geo.kernel, geo.out
            if self.order == "NCHW":
                cols = dcol.reshape(n, c, *kern, *out)
            else:
                cols = dcol.reshape(n, *out, *kern, c)
            r = len(kern)
            for kk, sl in kernel_slices(geo):
                view = buf[index(self.order, sl)]
                part = (
                    cols[(slice(None), slice(None)) + kk]
                    if self.order == "NCHW"
                    else cols[(slice(None),) * (1 + r) + kk]
                )
                view += part
            return buf[index(self.order, geo.interior)]

    LocallyConnectedGradient.__name__ = LocallyConnectedGradient.__qualname__ = cls_name
    LocallyConnectedGradient.__doc__ = f"{cls_name}: (dfilter, dbias unless no_bias, dX if asked)."
    return LocallyConnectedGradient


def _grad_infer(args: Any, ins: list) -> list:
    x, w = ins[0], ins[1]
    outs = [w]
    if not args.no_bias:
        outs.append(UNKNOWN if x.shape is None or w.shape is None else _bias_spec(args, x, w))
    if args.num_outputs > len(outs):
        outs.append(x)
    return outs[: args.num_outputs]


def _bias_spec(args: Any, x: TensorSpec, w: TensorSpec) -> TensorSpec:
    r = len(x.shape) - 2
    return TensorSpec(tuple(w.shape[: r + 1]), w.dtype)


for _t in _TYPES:
    register_op(
        _t,
        **forward_schema(
            _ARGS,
            _infer,
            (
                "N x C x *spatial (NCHW) or N x H x W x C",
                "(*out, M, C, *kernel) or NHWC layout",
                "optional (*out, M)",
                "N x M x *out (NCHW) or N x out_h x out_w x M",
            ),
            input_types="float",
            ranks={0: (3, 5)},
        ),
    )(_forward(_t))
    register_op(_t + "Gradient", **gradient_schema(_ARGS, _grad_infer, input_types="float", ranks={0: (3, 5)}))(
        _backward(_t + "Gradient")
    )


def _lc_grad(g):
    t = g.def_.type + "Gradient"
    dx = not g.arg("no_gradient_to_input", 0)
    ins = [g.I(0), g.I(1), g.GO(0)]
    if len(g.def_.input) == 3:
        return [g.op(t, ins, [g.GI(1), g.GI(2)] + ([g.GI(0)] if dx else []))]
    return [g.op(t, ins, [g.GI(1)] + ([g.GI(0)] if dx else []), no_bias=1)]


for _t in _TYPES:
    gradient(_t)(_lc_grad)
