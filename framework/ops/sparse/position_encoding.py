"""``SinusoidPositionEncoding`` (Caffe2's ``sinusoid_position_encoding_op.h``): for POSITIONS [M, K], float
[M, K, embedding_size] with ``amplitude * sin(pos / alpha^(k / embedding_size))`` at even k and the cosine
at odd k. As in Caffe2, row i uses the position of its first column ``POSITIONS[i, 0]`` for all K columns.
Departure: position 0 gives sin 0 / cos 1 (Caffe2's log-space computation gives NaN there). No gradient.
"""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError
from framework.memory.allocator import check_elements
from framework.ops.gradient import no_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import FLOAT, INT, Arg, TensorSpec

F32 = np.dtype(np.float32)


@register_op(
    "SinusoidPositionEncoding",
    args=[
        Arg("embedding_size", INT, 100, "encoding width"),
        Arg("alpha", FLOAT, 10000.0, "wavelength base"),
        Arg("amplitude", FLOAT, 1.0, "scale of the encoding"),
    ],
    input_docs=[("POSITIONS", "int32/int64 [M, K]")],
    output_docs=[("OUTPUT", "float [M, K, embedding_size]")],
    infer=lambda args, ins: [TensorSpec((*ins[0].shape, args.embedding_size) if ins[0].shape else None, F32)],
    category="sparse",
)
class SinusoidPositionEncoding(Operator):
    """Transformer-style sinusoid encodings of positions (see the module doc)."""

    def setup(self) -> None:
        if self.args.embedding_size < 1 or self.args.alpha <= 0:
            raise self.arg_error("embedding_size must be >= 1 and alpha > 0")

    def run(self) -> None:
        pos = self.input(0)
        if pos.ndim != 2 or pos.dtype.kind not in "iu":
            raise ShapeError(
                f"{self.describe()}: POSITIONS should be a 2-D integer tensor, got {pos.dtype} {list(pos.shape)}"
            )
        m, k = pos.shape
        e = self.args.embedding_size
        check_elements((max(m, 1), k, e), 4, f"{self.describe()}: the encodings of embedding_size {e}")
        scale = np.power(np.float32(self.args.alpha), -np.arange(e, dtype=np.float32) / np.float32(e))
        angle = pos[:, :1].astype(np.float32) * scale[None, :]
        angle[:, 1::2] += np.float32(np.pi / 2)
        row = (np.float32(self.args.amplitude) * np.sin(angle)).astype(F32)
        out = self.output(0, (m, k, e), F32)
        out[...] = row[:, None, :]


no_gradient("SinusoidPositionEncoding")
