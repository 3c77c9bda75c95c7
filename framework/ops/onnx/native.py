"""ONNX MatMul, Softmax and LogSoftmax computed in the input's own element type (ONNXMatMul,
ONNXSoftmax, ONNXLogSoftmax): what the backend runs for float16 and integer nodes, which
Caffe2's float32/float64 kernels do not take. numpy's float16 arithmetic is ONNX's reference
arithmetic for these types (MatMul: numpy's matmul rule, 1-D operands included; Softmax:
x - max, exp, divided by the sum, each step in the type). Inference ops: no gradient.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.errors import ArgumentError, ShapeError, TypeMismatchError
from framework.memory.allocator import check_elements
from framework.ops.gradient import no_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import INT, Arg, TensorSpec

_NATIVE = ("f", "i", "u")  # numpy kinds computed natively (ml_dtypes types are not)


def _matmul_shape(a: tuple, b: tuple) -> tuple:
    """numpy's matmul result shape; ValueError when the operands do not fit."""
    if not a or not b:
        raise ValueError("0-d operand")
    a2, b2 = ((1,) + a if len(a) == 1 else a), (b + (1,) if len(b) == 1 else b)
    if a2[-1] != b2[-2]:
        raise ValueError(f"inner dims {a2[-1]} and {b2[-2]} differ")
    batch = np.broadcast_shapes(a2[:-2], b2[:-2])
    out = (*batch, a2[-2], b2[-1])
    if len(a) == 1:
        out = out[:-2] + out[-1:]
    if len(b) == 1:
        out = out[:-1]
    return tuple(out)


def _infer_matmul(args: Any, ins: list) -> list:
    if ins[0].shape is None or ins[1].shape is None:
        return [TensorSpec(None, ins[0].dtype)]
    try:
        return [TensorSpec(_matmul_shape(tuple(ins[0].shape), tuple(ins[1].shape)), ins[0].dtype)]
    except ValueError:
        return [TensorSpec(None, ins[0].dtype)]


def _native(op: Operator, i: int) -> np.ndarray:
    x = op.input(i)
    if x.dtype.kind not in _NATIVE:
        raise TypeMismatchError(
            f"{op.describe()}: input {i} ('{op.input_names[i]}') has dtype {x.dtype}, expected numpy numbers"
        )
    return x


@register_op(
    "ONNXMatMul",
    inputs=2,
    input_docs=[("A", "numbers, rank >= 1"), ("B", "numbers of A's type, rank >= 1")],
    output_docs=[("Y", "numpy.matmul(A, B) in A's type")],
    infer=_infer_matmul,
    category="onnx",
    input_types="any",
    same_type=[(0, 1)],
)
class ONNXMatMul(Operator):
    """ONNX MatMul in the operands' own type (float16, integers...): numpy's matmul rule, batch
    dims broadcast, a 1-D A is a row and a 1-D B a column whose dim is dropped."""

    def run(self) -> None:
        a, b = _native(self, 0), _native(self, 1)
        try:
            shape = _matmul_shape(a.shape, b.shape)
        except ValueError as e:
            raise ShapeError(
                f"{self.describe()}: shapes {list(a.shape)} ('{self.input_names[0]}') and {list(b.shape)} "
                f"('{self.input_names[1]}') do not multiply: {e}"
            ) from e
        check_elements(shape, a.dtype.itemsize, f"{self.describe()} output")
        out = self.output(0, shape, a.dtype)
        out[...] = np.matmul(a, b)


def _same(args: Any, ins: list) -> list:
    return [TensorSpec(ins[0].shape, ins[0].dtype)]


class _SoftmaxBase(Operator):
    log = False

    def run(self) -> None:
        x = _native(self, 0)
        if x.dtype.kind != "f":
            raise TypeMismatchError(
                f"{self.describe()}: input 0 ('{self.input_names[0]}') has dtype {x.dtype}, expected floats"
            )
        if not -max(x.ndim, 1) <= self.args.axis < max(x.ndim, 1):
            raise ArgumentError(
                f"{self.describe()}: axis {self.args.axis} is outside input '{self.input_names[0]}' of rank {x.ndim}"
            )
        out = self.output(0, x.shape, x.dtype)
        if x.size == 0:
            return
        axis = self.args.axis % max(x.ndim, 1)
        with np.errstate(all="ignore"):
            y = np.exp(x - x.max(axis=axis, keepdims=True))
            y /= y.sum(axis=axis, keepdims=True)
            out[...] = np.log(y) if self.log else y


for _name, _log in (("ONNXSoftmax", False), ("ONNXLogSoftmax", True)):
    register_op(
        _name,
        args=[Arg("axis", INT, -1, "the axis normalized (negative from the end)")],
        input_docs=[("input", "floats")],
        output_docs=[("output", "X's shape and type")],
        infer=_same,
        category="onnx",
        input_types="any",
        ranks={0: (1, None)},
    )(
        type(
            _name,
            (_SoftmaxBase,),
            {
                "log": _log,
                "__doc__": f"ONNX {'LogSoftmax' if _log else 'Softmax'} (opset 13) in X's own float type: "
                f"exp(X - max) / sum along ``axis``{', then log' if _log else ''}, each step in the type.",
            },
        )
    )

for _t in ("ONNXMatMul", "ONNXSoftmax", "ONNXLogSoftmax"):
    no_gradient(_t)
