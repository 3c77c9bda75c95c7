"""ONNXRotaryEmbedding: ONNX's ``RotaryEmbedding`` (opset 23).

``input`` is ``(B, H, S, D)`` or ``(B, S, H * D)`` (``num_heads`` then gives H). The first
``rotary_embedding_dim`` (0: all D) features of each head are rotated pairwise by the angles whose
cosines and sines are ``cos_cache`` / ``sin_cache``: ``(B, S, dim / 2)`` directly, or ``(max_pos,
dim / 2)`` gathered at ``position_ids`` ``(B, S)``. The pairs are the two halves of the rotated
features, or (``interleaved``) neighbouring features: ``(x1, x2) -> (x1 cos - x2 sin, x1 sin + x2
cos)``; the remaining features pass through. No gradient here (an inference op of the ONNX backend).
"""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError
from framework.ops.gradient import no_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, INT, Arg
from framework.ops.validation import check_indices


@register_op(
    "ONNXRotaryEmbedding",
    inputs=(3, 4),
    args=[
        Arg("interleaved", BOOL, False, "rotate neighbouring pairs (else the two halves)"),
        Arg("rotary_embedding_dim", INT, 0, "features rotated per head (0: all)", low=0),
        Arg("num_heads", INT, 0, "heads of a 3-D input", low=0),
    ],
    input_docs=[
        ("input", "(B, H, S, D) or (B, S, H * D)"),
        ("cos_cache", "(B, S, dim/2), or (max_position, dim/2) with position_ids"),
        ("sin_cache", "cos_cache's shape"),
        ("position_ids", "optional int (B, S)"),
    ],
    output_docs=[("output", "input's shape and dtype")],
    infer=lambda args, ins: [ins[0]],
    category="onnx",
    input_types={0: "float", 1: "float", 2: "float", 3: "index"},
    same_type=[(0, 1, 2)],
    same_shape=[(1, 2)],
    ranks={0: (3, 4)},
)
class ONNXRotaryEmbedding(Operator):
    """Rotary position embedding (RoPE) of ONNX: pairs of features rotated by cached angles."""

    def run(self) -> None:
        x, cos, sin = self.input(0), self.input(1), self.input(2)
        where = self.describe()
        if x.ndim == 4:
            b, h, s, d = x.shape
            xs = x.transpose(0, 2, 1, 3)
        else:
            h = int(self.args.num_heads)
            if h <= 0 or x.shape[2] % h:
                raise ShapeError(f"{where}: a 3-D input needs num_heads dividing {x.shape[2]}, got {h}")
            b, s, d = x.shape[0], x.shape[1], x.shape[2] // h
            xs = x.reshape(b, s, h, d)
        dim = int(self.args.rotary_embedding_dim) or d
        if dim > d or dim % 2:
            raise ShapeError(f"{where}: rotary_embedding_dim {dim} must be even and at most the head size {d}")
        if len(self.inputs) == 4:
            pos = self.input(3)
            if pos.shape != (b, s) or cos.ndim != 2:
                raise ShapeError(
                    f"{where}: position_ids '{self.input_names[3]}' {pos.shape} must be ({b}, {s}) "
                    f"and the caches 2-D, got {cos.shape}"
                )
            check_indices(self, 3, pos, cos.shape[0], "cache rows")
            cos, sin = cos[pos], sin[pos]
        if cos.shape != (b, s, dim // 2):
            raise ShapeError(f"{where}: caches give {cos.shape}, expected ({b}, {s}, {dim // 2})")
        c, sn = cos[:, :, None, :], sin[:, :, None, :]
        rot = xs[..., :dim]
        x1, x2 = (
            (rot[..., 0::2], rot[..., 1::2]) if self.args.interleaved else (rot[..., : dim // 2], rot[..., dim // 2 :])
        )
        real, imag = c * x1 - sn * x2, sn * x1 + c * x2
        out = np.empty_like(xs)
        if self.args.interleaved:
            out[..., 0:dim:2], out[..., 1:dim:2] = real, imag
        else:
            out[..., : dim // 2], out[..., dim // 2 : dim] = real, imag
        out[..., dim:] = xs[..., dim:]
        y = self.output(0, x.shape, x.dtype)
        y[...] = out.transpose(0, 2, 1, 3) if x.ndim == 4 else out.reshape(x.shape)


no_gradient("ONNXRotaryEmbedding")
