"""DeformConv (deformable convolution v1, NCHW) and DeformConvGradient(X, offset, filter, dY) ->
(doffset, dfilter, dbias, dX) with Caffe2's gradient wiring.

Caffe2 registers DeformConv's kernels for CUDA only; this is the same computation on the CPU:
each kernel tap (i, j) of output (h, w) samples X at (h * stride - pad + i * dilation + dh,
w * stride - pad + j * dilation + dw), the offsets (dh, dw) read from channels 2k and 2k + 1 of
the tap's deformable group in `offset`; a sample outside [0, H) x [0, W) is 0, and bilinear
interpolation clamps at the last row and column (as the CUDA kernel). The offset gradient is
the exact derivative of that sampling (0 in the clamped last-row/column band).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.errors import ShapeError
from framework.ops.gradient import gradient
from framework.ops.nn.conv_args import ConvPoolOp, conv_pool_args, parse_conv_pool, resolve
from framework.ops.pointwise import float_input
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, INT, UNKNOWN, Arg, TensorSpec

_ARGS = conv_pool_args() + [
    Arg("deformable_group", INT, 1, "channel groups sharing one set of offsets"),
    Arg("no_bias", BOOL, False, "gradient op: no bias gradient output"),
    Arg("no_gradient_to_input", BOOL, False, "the gradient maker asks for no dX"),
]


def _infer(args: Any, ins: list) -> list:
    x, w = ins[0], ins[2]
    if x.shape is None or w.shape is None or len(x.shape) != 4:
        return [UNKNOWN]
    spec = parse_conv_pool(args, "DeformConv", "DeformConv", need_kernel=False)
    geo = resolve(spec, tuple(x.shape[2:]), "DeformConv", kernel=tuple(w.shape[2:]))
    return [TensorSpec((x.shape[0], w.shape[0], *geo.out), x.dtype)]


class _DeformBase(ConvPoolOp):
    need_kernel = False

    def setup(self) -> None:
        super().setup()
        if self.order != "NCHW" or self.args.deformable_group < 1:
            raise self.arg_error("DeformConv runs NCHW only with deformable_group >= 1")

    def _plan(self, x: np.ndarray, off: np.ndarray, w: np.ndarray) -> tuple:
        if x.ndim != 4 or w.ndim != 4:
            raise ShapeError(
                f"{self.describe()}: X and filter must be 4-D (NCHW), got {list(x.shape)}, {list(w.shape)}"
            )
        n, c, hgt, wid = x.shape
        if hgt == 0 or wid == 0:
            raise ShapeError(f"{self.describe()}: X '{self.input_names[0]}' has an empty image {list(x.shape)}")
        g, dg = self.spec.group, self.args.deformable_group
        m = w.shape[0]
        if c % g or m % g or w.shape[1] * g != c or c % dg:
            raise ShapeError(
                f"{self.describe()}: filter '{self.input_names[2]}' {list(w.shape)} does not fit {c} "
                f"channels with group {g} and deformable_group {dg}"
            )
        geo = resolve(self.spec, (hgt, wid), self.describe(), kernel=tuple(w.shape[2:]))
        kk = w.shape[2] * w.shape[3]
        want = (n, 2 * dg * kk, *geo.out)
        if off.shape != want:
            raise ShapeError(
                f"{self.describe()}: offset '{self.input_names[1]}' must be {list(want)}, got {list(off.shape)}"
            )
        return geo, n, c, m, kk

    def _samples(self, off: np.ndarray, geo: Any, kh: int, kw: int, hgt: int, wid: int) -> dict:
        """Sampling positions, validity, corners and weights: arrays (N, dg, K, Ho, Wo)."""
        n, dg = off.shape[0], self.args.deformable_group
        ho, wo = geo.out
        o = off.reshape(n, dg, kh * kw, 2, ho, wo).astype(np.float64)
        ki, kj = np.divmod(np.arange(kh * kw), kw)
        base_h = (np.arange(ho) * geo.stride[0] - geo.head[0])[None, :, None]
        base_w = (np.arange(wo) * geo.stride[1] - geo.head[1])[None, None, :]
        ph = base_h + (ki * geo.dilation[0])[:, None, None] + o[:, :, :, 0]
        pw = base_w + (kj * geo.dilation[1])[:, None, None] + o[:, :, :, 1]
        valid = (ph >= 0) & (pw >= 0) & (ph < hgt) & (pw < wid)
        hl, wl = np.floor(ph).astype(np.int64), np.floor(pw).astype(np.int64)
        hclamp, wclamp = hl >= hgt - 1, wl >= wid - 1
        hl, wl = np.where(hclamp, hgt - 1, hl), np.where(wclamp, wid - 1, wl)
        hh, wh = np.where(hclamp, hgt - 1, hl + 1), np.where(wclamp, wid - 1, wl + 1)
        lh = np.where(hclamp, 0.0, ph - hl)
        lw = np.where(wclamp, 0.0, pw - wl)
        hl, wl, hh, wh = (np.clip(a, 0, max(d - 1, 0)) for a, d in ((hl, hgt), (wl, wid), (hh, hgt), (wh, wid)))
        return dict(valid=valid, hl=hl, wl=wl, hh=hh, wh=wh, lh=lh, lw=lw, hclamp=hclamp, wclamp=wclamp)

    def _columns(self, x: np.ndarray, s: dict) -> np.ndarray:
        """(N, C, K, Ho, Wo) sampled values."""
        n, c = x.shape[:2]
        dg = self.args.deformable_group
        cg = c // dg
        xd = x.astype(np.float64)
        cols = np.zeros((n, c) + s["valid"].shape[2:])
        for b in range(n):
            for g in range(dg):
                img = xd[b, g * cg : (g + 1) * cg]
                v = lambda hi, wi, img=img, b=b, g=g: img[:, s[hi][b, g], s[wi][b, g]]  # noqa: E731
                lh, lw = s["lh"][b, g], s["lw"][b, g]
                val = (
                    (1 - lh) * (1 - lw) * v("hl", "wl")
                    + (1 - lh) * lw * v("hl", "wh")
                    + lh * (1 - lw) * v("hh", "wl")
                    + lh * lw * v("hh", "wh")
                )
                cols[b, g * cg : (g + 1) * cg] = val * s["valid"][b, g]
        return cols


@register_op(
    "DeformConv",
    inputs=(3, 4),
    args=_ARGS,
    input_docs=[
        ("X", "N x C x H x W"),
        ("offset", "N x (2 * deformable_group * kH * kW) x H' x W'"),
        ("filter", "M x C / group x kH x kW"),
        ("bias", "optional (M,)"),
    ],
    output_docs=[("Y", "N x M x H' x W' (Conv's output size)")],
    infer=_infer,
    category="conv",
)
class DeformConv(_DeformBase):
    """Deformable convolution: Conv whose taps sample X at offset positions (module doc)."""

    def run(self) -> None:
        x, off, w = float_input(self, 0), float_input(self, 1), float_input(self, 2)
        geo, n, c, m, kk = self._plan(x, off, w)
        b = float_input(self, 3) if len(self.inputs) > 3 else None
        if b is not None and b.shape != (m,):
            raise ShapeError(f"{self.describe()}: bias '{self.input_names[3]}' must be ({m},), got {list(b.shape)}")
        s = self._samples(off, geo, w.shape[2], w.shape[3], x.shape[2], x.shape[3])
        cols = self._columns(x, s).reshape(n, c * kk, -1)
        g = self.spec.group
        cg, mg = c // g, m // g
        y = np.empty((n, m, cols.shape[2]))
        for k in range(g):
            wk = w[k * mg : (k + 1) * mg].reshape(mg, cg * kk)
            y[:, k * mg : (k + 1) * mg] = np.einsum("mk,nkp->nmp", wk, cols[:, k * cg * kk : (k + 1) * cg * kk])
        if b is not None:
            y += b[None, :, None]
        self.output(0, (n, m, *geo.out), x.dtype)[...] = y.reshape(n, m, *geo.out)


@register_op(
    "DeformConvGradient",
    inputs=4,
    outputs=(2, 4),
    args=_ARGS,
    input_docs=[
        ("X", "forward input"),
        ("offset", "forward offsets"),
        ("filter", "forward filter"),
        ("dY", "gradient of Y"),
    ],
    output_docs=[
        ("doffset", "gradient of offset"),
        ("dfilter", "gradient of filter"),
        ("dbias", "gradient of bias (unless no_bias)"),
        ("dX", "gradient of X (if asked)"),
    ],
    infer=lambda args, ins: (
        [ins[1], ins[2]]
        + ([TensorSpec(None if ins[2].shape is None else (ins[2].shape[0],), ins[2].dtype)] if not args.no_bias else [])
        + [ins[0]]
    )[: args.num_outputs],
    category="conv",
    private=True,
)
class DeformConvGradient(_DeformBase):
    """(doffset, dfilter, dbias, dX): the sampling's exact derivatives (module doc)."""

    def run(self) -> None:
        x, off, w, dy = (float_input(self, i) for i in range(4))
        geo, n, c, m, kk = self._plan(x, off, w)
        if dy.shape != (n, m, *geo.out):
            raise ShapeError(
                f"{self.describe()}: dY '{self.input_names[3]}' must be {[n, m, *geo.out]}, got {list(dy.shape)}"
            )
        hgt, wid = x.shape[2:]
        s = self._samples(off, geo, w.shape[2], w.shape[3], hgt, wid)
        cols = self._columns(x, s).reshape(n, c * kk, -1)
        g = self.spec.group
        cg, mg = c // g, m // g
        gy = dy.reshape(n, m, -1).astype(np.float64)
        dw = np.empty(w.shape)
        dcol = np.empty(cols.shape)
        for k in range(g):
            sl_c, sl_m = slice(k * cg * kk, (k + 1) * cg * kk), slice(k * mg, (k + 1) * mg)
            wk = w[sl_m].reshape(mg, cg * kk)
            dw[sl_m] = np.einsum("nmp,nkp->mk", gy[:, sl_m], cols[:, sl_c]).reshape(w[sl_m].shape)
            dcol[:, sl_c] = np.einsum("mk,nmp->nkp", wk, gy[:, sl_m])
        dcol = dcol.reshape((n, c) + s["valid"].shape[2:])
        dx, doff = self._backsample(x, s, dcol)
        outs = [doff.reshape(off.shape), dw]
        if not self.args.no_bias:
            outs.append(gy.sum(axis=(0, 2)))
        outs.append(dx)
        for i in range(len(self.outputs)):
            self.output(i, outs[i].shape, x.dtype)[...] = outs[i]

    def _backsample(self, x: np.ndarray, s: dict, dcol: np.ndarray) -> tuple:
        n, c, hgt, wid = x.shape
        dg = self.args.deformable_group
        cg = c // dg
        xd = x.astype(np.float64)
        dx = np.zeros(x.shape)
        doff = np.zeros((n, dg) + s["valid"].shape[2:] + (2,))
        for b in range(n):
            for g in range(dg):
                img = xd[b, g * cg : (g + 1) * cg]
                d = dcol[b, g * cg : (g + 1) * cg] * s["valid"][b, g]
                lh, lw = s["lh"][b, g], s["lw"][b, g]
                corners = (
                    ("hl", "wl", (1 - lh) * (1 - lw)),
                    ("hl", "wh", (1 - lh) * lw),
                    ("hh", "wl", lh * (1 - lw)),
                    ("hh", "wh", lh * lw),
                )
                flat = dx[b, g * cg : (g + 1) * cg].reshape(cg, -1)
                for hi, wi, wt in corners:
                    idx = (s[hi][b, g] * wid + s[wi][b, g]).reshape(-1)
                    contrib = (d * wt).reshape(cg, -1)
                    for ch in range(cg):
                        np.add.at(flat[ch], idx, contrib[ch])
                v = {
                    key: img[:, s[key[0]][b, g], s[key[1]][b, g]]
                    for key in (("hl", "wl"), ("hl", "wh"), ("hh", "wl"), ("hh", "wh"))
                }
                dvdh = (1 - lw) * (v[("hh", "wl")] - v[("hl", "wl")]) + lw * (v[("hh", "wh")] - v[("hl", "wh")])
                dvdw = (1 - lh) * (v[("hl", "wh")] - v[("hl", "wl")]) + lh * (v[("hh", "wh")] - v[("hh", "wl")])
                dvdh = np.where(s["hclamp"][b, g], 0.0, dvdh)
                dvdw = np.where(s["wclamp"][b, g], 0.0, dvdw)
                doff[b, g, ..., 0] = (d * dvdh).sum(axis=0)
                doff[b, g, ..., 1] = (d * dvdw).sum(axis=0)
        return dx, np.moveaxis(doff, -1, 3)


@gradient("DeformConv")
def _deform_conv_grad(g):
    dx = not g.arg("no_gradient_to_input", 0)
    ins = [g.I(0), g.I(1), g.I(2), g.GO(0)]
    if len(g.def_.input) == 4:
        return [g.op("DeformConvGradient", ins, [g.GI(1), g.GI(2), g.GI(3)] + ([g.GI(0)] if dx else []))]
    return [g.op("DeformConvGradient", ins, [g.GI(1), g.GI(2)] + ([g.GI(0)] if dx else []), no_bias=1)]
