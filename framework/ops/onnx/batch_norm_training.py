"""ONNXBatchNormTraining: ONNX's ``BatchNormalization`` with ``training_mode`` (opsets 14-15).

X ``(N, C, ...)`` is normalized by its batch mean and biased batch variance over every axis but
1: ``Y = scale * (X - mean) / sqrt(var + epsilon) + B``; the running statistics come out as
``input_mean * momentum + mean * (1 - momentum)`` and ``input_var * momentum + var * (1 -
momentum)`` (ONNX's spec: the biased variance; Caffe2's SpatialBN updates its running variance
with the unbiased one, hence this op). No gradient (an inference-side op of the ONNX backend).
"""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError
from framework.ops.gradient import no_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import FLOAT, Arg, TensorSpec


def _infer(args, ins):
    c = TensorSpec(ins[3].shape, ins[0].dtype)
    return [ins[0], c, c][: args.num_outputs]


@register_op(
    "ONNXBatchNormTraining",
    inputs=5,
    outputs=(1, 3),
    args=[
        Arg("epsilon", FLOAT, 1e-5, "added to the variance"),
        Arg("momentum", FLOAT, 0.9, "weight of the input running statistics"),
    ],
    input_docs=[
        ("X", "(N, C, ...)"),
        ("scale", "(C,)"),
        ("B", "(C,)"),
        ("input_mean", "(C,) running mean"),
        ("input_var", "(C,) running variance"),
    ],
    output_docs=[("Y", "X normalized with the batch statistics"), ("running_mean", "(C,)"), ("running_var", "(C,)")],
    infer=_infer,
    category="onnx",
    input_types="float",
    same_type=[(0, 1, 2, 3, 4)],
    ranks={0: (2, None)},
)
class ONNXBatchNormTraining(Operator):
    """Batch normalization with batch statistics and updated running statistics (ONNX training mode)."""

    def run(self) -> None:
        x = self.input(0)
        c = x.shape[1]
        for i in range(1, 5):
            if self.input(i).shape != (c,):
                raise ShapeError(
                    f"{self.describe()}: '{self.input_names[i]}' has shape {self.input(i).shape}, expected ({c},)"
                )
        if x.size == 0:
            raise ShapeError(f"{self.describe()}: X '{self.input_names[0]}' is empty (no batch statistics)")
        axes = tuple(a for a in range(x.ndim) if a != 1)
        shape = (1, c) + (1,) * (x.ndim - 2)
        mean, var = x.mean(axis=axes), x.var(axis=axes)
        scale, bias = self.input(1).reshape(shape), self.input(2).reshape(shape)
        y = scale * (x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + x.dtype.type(self.args.epsilon)) + bias
        mom = float(self.args.momentum)
        self.output(0, x.shape, x.dtype)[...] = y
        if self.args.num_outputs > 1:
            self.output(1, (c,), x.dtype)[...] = self.input(3) * mom + mean * (1 - mom)
        if self.args.num_outputs > 2:
            self.output(2, (c,), x.dtype)[...] = self.input(4) * mom + var * (1 - mom)


no_gradient("ONNXBatchNormTraining")
