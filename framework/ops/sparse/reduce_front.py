"""``ReduceFrontWeightedSum(DATA, SCALARS)`` (Caffe2's ``segment_reduction_op.h``, ``AbstractReduceFrontDef``
with the weighted-sum reducer): the first ``num_reduce_dim`` axes of DATA summed, each slice scaled by its
entry of SCALARS (one per slice): ``OUTPUT = sum_i SCALARS[i] * DATA[i, ...]``.

Gradient as Caffe2's maker: ``Shape(DATA) -> _<OUTPUT>_dims`` and
``ReduceFrontWeightedSumGradient(SCALARS, dOUTPUT, _<OUTPUT>_dims) -> dDATA`` (``dDATA[i] = SCALARS[i] *
dOUTPUT``); no gradient for SCALARS.
"""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError
from framework.ops.gradient import gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import INT, UNKNOWN, Arg, TensorSpec

ARGS = [Arg("num_reduce_dim", INT, 1, "leading axes reduced")]


def _split(op: Operator, shape: tuple) -> tuple[int, tuple]:
    k = op.args.num_reduce_dim
    if not 0 <= k <= len(shape):
        raise ShapeError(f"{op.describe()}: num_reduce_dim {k} is outside DATA's {len(shape)} axes")
    return int(np.prod(shape[:k], dtype=np.int64)), tuple(shape[k:])


@register_op(
    "ReduceFrontWeightedSum",
    inputs=2,
    args=ARGS,
    input_docs=[("DATA", "tensor"), ("SCALARS", "one weight per reduced slice")],
    output_docs=[("OUTPUT", "DATA's shape without its first num_reduce_dim axes")],
    infer=lambda args, ins: [
        TensorSpec(ins[0].shape[args.num_reduce_dim :], ins[0].dtype) if ins[0].shape is not None else UNKNOWN
    ],
    category="sparse",
    input_types="numeric",
)
class ReduceFrontWeightedSum(Operator):
    """Weighted sum over the leading axes."""

    def run(self) -> None:
        data, w = self.input(0), self.input(1)
        n, rest = _split(self, data.shape)
        if w.size != n:
            raise ShapeError(f"{self.describe()}: SCALARS has {w.size} weights for {n} slices")
        out = self.output(0, rest, data.dtype)
        flat = data.reshape(n, -1) if n else np.zeros((0, int(np.prod(rest, dtype=np.int64))), data.dtype)
        np.dot(w.reshape(-1).astype(data.dtype), flat, out=out.reshape(-1))


@register_op(
    "ReduceFrontWeightedSumGradient",
    inputs=3,
    args=ARGS,
    input_docs=[("SCALARS", "forward SCALARS"), ("dOUTPUT", "gradient of OUTPUT"), ("DATA_SHAPE", "Shape(DATA)")],
    output_docs=[("dDATA", "gradient of DATA")],
    infer=lambda args, ins: [TensorSpec(None, ins[1].dtype)],
    category="sparse",
    private=True,
    input_types=["numeric", "numeric", "int"],
)
class ReduceFrontWeightedSumGradient(Operator):
    """``dDATA[i] = SCALARS[i] * dOUTPUT``."""

    def run(self) -> None:
        w, dy, shape = self.input(0), self.input(1), tuple(int(v) for v in self.input(2).reshape(-1))
        if any(d < 0 for d in shape):
            raise ShapeError(f"{self.describe()}: DATA_SHAPE {list(shape)} has a negative dimension")
        n, rest = _split(self, shape)
        if w.size != n or dy.shape != rest:
            raise ShapeError(
                f"{self.describe()}: SCALARS {list(w.shape)} / dOUTPUT {list(dy.shape)} do not fit DATA {list(shape)}"
            )
        d = self.output(0, shape, dy.dtype)
        np.multiply.outer(w.reshape(-1).astype(dy.dtype), dy.reshape(-1), out=d.reshape(n, -1))


@gradient("ReduceFrontWeightedSum")
def _grad(g):
    dims = f"_{g.O(0)}_dims"
    return [
        g.op("Shape", [g.I(0)], [dims], num_reduce_dim=None),
        g.op("ReduceFrontWeightedSumGradient", [g.I(1), g.GO(0), dims], [g.GI(0)]),
    ]
