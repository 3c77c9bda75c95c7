"""ONNXDeformConv: ONNX's ``DeformConv`` (opset 19), 2-D deformable convolution (v1 and, with a
mask, v2).

Kernel tap (a, b) of output (i, j) samples X at ``(i * stride_h - pad_top + a * dilation_h +
dy, j * stride_w - pad_left + b * dilation_w + dx)``, the offsets (dy, dx) read from ``offset``
``(N, offset_group * kh * kw * 2, oh, ow)`` (per offset group, per tap: y then x), by bilinear
interpolation where each of the four neighbours outside X counts 0 (onnx's reference:
GridSample, align_corners, zero padding); the sample is multiplied by ``mask`` ``(N, offset_group
* kh * kw, oh, ow)`` when given, then by the filter (grouped as Conv) and summed, plus ``B``.
Caffe2's DeformConv clamps interpolation at the last row/column instead, hence this op. Departure:
a 1-pixel-high or -wide X, where the reference divides by zero, samples normally here. No
gradient (an inference op of the ONNX backend).
"""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError
from framework.memory.allocator import check_elements
from framework.ops.gradient import no_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, INT, INTS, UNKNOWN, Arg, TensorSpec


def _infer(args, ins):
    x, w, off = ins[0], ins[1], ins[2]
    if x.shape is None or w.shape is None or off.shape is None or len(off.shape) != 4:
        return [TensorSpec(None, x.dtype) if x is not UNKNOWN else UNKNOWN]
    return [TensorSpec((x.shape[0], w.shape[0], off.shape[2], off.shape[3]), x.dtype)]


@register_op(
    "ONNXDeformConv",
    inputs=(3, 5),
    args=[
        Arg("has_bias", BOOL, False, "a bias input B (M,) follows offset"),
        Arg("has_mask", BOOL, False, "a mask input comes last"),
        Arg("strides", INTS, [], "(stride_h, stride_w), default 1"),
        Arg("pads", INTS, [], "(top, left, bottom, right), default 0"),
        Arg("dilations", INTS, [], "(dilation_h, dilation_w), default 1"),
        Arg("group", INT, 1, "filter groups", low=1),
        Arg("offset_group", INT, 1, "channel groups sharing one set of offsets", low=1),
    ],
    input_docs=[
        ("X", "(N, C, H, W)"),
        ("W", "(M, C / group, kh, kw)"),
        ("offset", "(N, offset_group * kh * kw * 2, oh, ow)"),
        ("B", "optional (M,)"),
        ("mask", "optional (N, offset_group * kh * kw, oh, ow)"),
    ],
    output_docs=[("Y", "(N, M, oh, ow)")],
    infer=_infer,
    category="onnx",
    input_types="float",
    same_type=[(0, 1, 2, 3, 4)],
    ranks={0: 4, 1: 4, 2: 4},
)
class ONNXDeformConv(Operator):
    """Deformable 2-D convolution with zero-padded bilinear sampling (ONNX DeformConv)."""

    def setup(self) -> None:
        want = 3 + int(bool(self.args.has_bias)) + int(bool(self.args.has_mask))
        if len(self.inputs) != want:
            raise self.arg_error(f"has {len(self.inputs)} inputs; has_bias/has_mask call for {want}")

    def _geometry(self, x, w, off) -> tuple:
        where = self.describe()
        n, c, h, wd = x.shape
        m, cpg, kh, kw = w.shape
        g, og = int(self.args.group), int(self.args.offset_group)
        st = list(self.args.strides) or [1, 1]
        pads = list(self.args.pads) or [0, 0, 0, 0]
        dil = list(self.args.dilations) or [1, 1]
        if len(st) != 2 or len(pads) != 4 or len(dil) != 2 or min(st + dil) < 1:
            raise ShapeError(f"{where}: strides/pads/dilations do not fit 2 spatial dims")
        if c != cpg * g or m % g or c % og:
            raise ShapeError(
                f"{where}: X '{self.input_names[0]}' {x.shape} and W '{self.input_names[1]}' "
                f"{w.shape} do not fit group {g} / offset_group {og}"
            )
        oh = (h + pads[0] + pads[2] - ((kh - 1) * dil[0] + 1)) // st[0] + 1
        ow = (wd + pads[1] + pads[3] - ((kw - 1) * dil[1] + 1)) // st[1] + 1
        if off.shape != (n, og * kh * kw * 2, oh, ow):
            raise ShapeError(
                f"{where}: offset '{self.input_names[2]}' has shape {off.shape}, expected "
                f"{(n, og * kh * kw * 2, oh, ow)}"
            )
        return n, c, h, wd, m, cpg, kh, kw, g, og, st, pads, dil, oh, ow

    def run(self) -> None:
        x, w, off = self.input(0), self.input(1), self.input(2)
        n, c, h, wd, m, cpg, kh, kw, g, og, st, pads, dil, oh, ow = self._geometry(x, w, off)
        i = 3
        bias = mask = None
        if self.args.has_bias:
            bias, i = self.input(3), 4
            if bias.shape != (m,):
                raise ShapeError(
                    f"{self.describe()}: B '{self.input_names[3]}' has shape {bias.shape}, expected ({m},)"
                )
        if self.args.has_mask:
            mask = self.input(i)
            if mask.shape != (n, og * kh * kw, oh, ow):
                raise ShapeError(
                    f"{self.describe()}: mask '{self.input_names[i]}' has shape {mask.shape}, "
                    f"expected {(n, og * kh * kw, oh, ow)}"
                )
        check_elements((n, c, kh, kw, oh, ow, 4), 8, "deformable sampling")
        o = off.reshape(n, og, kh, kw, 2, oh, ow).astype(np.float64)
        base_h = (np.arange(oh) * st[0] - pads[0])[None, :] + (np.arange(kh) * dil[0])[:, None]  # (kh, oh)
        base_w = (np.arange(ow) * st[1] - pads[1])[None, :] + (np.arange(kw) * dil[1])[:, None]  # (kw, ow)
        ph = base_h[None, None, :, None, :, None] + o[:, :, :, :, 0]
        pw = base_w[None, None, None, :, None, :] + o[:, :, :, :, 1]
        cg = c // og
        ph, pw = np.repeat(ph, cg, axis=1), np.repeat(pw, cg, axis=1)  # (n, c, kh, kw, oh, ow)
        h0, w0 = np.floor(ph), np.floor(pw)
        flat = x.reshape(n, c, h * wd).astype(np.float64)
        cols = np.zeros(ph.shape)
        for dy in (0, 1):
            for dx in (0, 1):
                yy, xx = h0 + dy, w0 + dx
                wt = (1 - np.abs(ph - yy)) * (1 - np.abs(pw - xx))
                inside = (yy >= 0) & (yy < h) & (xx >= 0) & (xx < wd)
                lin = (np.clip(yy, 0, h - 1) * wd + np.clip(xx, 0, wd - 1)).astype(np.int64)
                vals = np.take_along_axis(flat, lin.reshape(n, c, -1), axis=2).reshape(ph.shape)
                cols += np.where(inside, wt * vals, 0.0)
        if mask is not None:
            cols *= np.repeat(mask.reshape(n, og, kh, kw, oh, ow), cg, axis=1)
        y = np.empty((n, m, oh, ow))
        mpg = m // g
        for k in range(g):
            y[:, k * mpg : (k + 1) * mpg] = np.einsum(
                "ncabij,mcab->nmij", cols[:, k * cpg : (k + 1) * cpg], w[k * mpg : (k + 1) * mpg].astype(np.float64)
            )
        if bias is not None:
            y += bias.reshape(1, m, 1, 1)
        self.output(0, (n, m, oh, ow), x.dtype)[...] = y


no_gradient("ONNXDeformConv")
