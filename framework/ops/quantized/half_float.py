"""float16 conversions and fills (Caffe2's ``half_float_ops``): FloatToHalf (``clip``: saturate at +-65504
instead of overflowing to inf), HalfToFloat (each the other's gradient), Float16ConstantFill (``value``,
``shape``) and Float16UniformFill (``shape``, uniform in [``min``, ``max``)).
"""

from __future__ import annotations

import numpy as np

from framework.errors import TypeMismatchError
from framework.memory.allocator import check_elements
from framework.ops.gradient import gradient, no_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, FLOAT, INTS, Arg, TensorSpec

F16, F32 = np.dtype(np.float16), np.dtype(np.float32)
HALF_MAX = np.float32(65504.0)


def _typed(op: Operator, *dtypes: np.dtype) -> np.ndarray:
    x = op.input(0)
    if x.dtype not in dtypes:
        want = " or ".join(str(d) for d in dtypes)
        raise TypeMismatchError(f"{op.describe()}: '{op.input_names[0]}' must be {want}, got {x.dtype}")
    return x


@register_op(
    "FloatToHalf",
    args=[Arg("clip", BOOL, False, "saturate values beyond the float16 range instead of overflowing to inf")],
    input_docs=[("X", "float tensor")],
    output_docs=[("Y", "float16, same shape")],
    infer=lambda args, ins: [TensorSpec(ins[0].shape, F16)],
    category="quantized",
)
class FloatToHalf(Operator):
    """Round float32 to float16 (nearest even)."""

    def run(self) -> None:
        x = _typed(self, F32, np.dtype(np.float64))  # float64 too (gradient checks feed it)
        src = np.clip(x, -HALF_MAX, HALF_MAX) if self.args.clip else x
        with np.errstate(over="ignore"):
            self.output(0, x.shape, F16)[...] = src


@register_op(
    "HalfToFloat",
    input_docs=[("X", "float16 tensor")],
    output_docs=[("Y", "float32, same shape")],
    infer=lambda args, ins: [TensorSpec(ins[0].shape, F32)],
    category="quantized",
)
class HalfToFloat(Operator):
    """Widen float16 to float32 (exact)."""

    def run(self) -> None:
        x = _typed(self, F16)
        self.output(0, x.shape, F32)[...] = x


@gradient("FloatToHalf", copy_arguments=False)
def _f2h_grad(g):
    return [g.op("HalfToFloat", [g.GO(0)], [g.GI(0)])]


@gradient("HalfToFloat")
def _h2f_grad(g):
    return [g.op("FloatToHalf", [g.GO(0)], [g.GI(0)])]


@register_op(
    "Float16ConstantFill",
    inputs=0,
    args=[Arg("value", FLOAT, 0.0, "the fill value"), Arg("shape", INTS, [], "output shape")],
    output_docs=[("Y", "float16 tensor of the value")],
    infer=lambda args, ins: [TensorSpec(tuple(args.shape), F16)],
    category="quantized",
)
class Float16ConstantFill(Operator):
    """A float16 tensor of ``shape`` filled with ``value``."""

    def run(self) -> None:
        self.output(0, tuple(self.args.shape), F16).fill(self.args.value)


@register_op(
    "Float16UniformFill",
    inputs=0,
    args=[
        Arg("shape", INTS, [], "output shape"),
        Arg("min", FLOAT, 0.0, "lower bound"),
        Arg("max", FLOAT, 1.0, "upper bound (> min)"),
    ],
    output_docs=[("Y", "float16 uniform values")],
    infer=lambda args, ins: [TensorSpec(tuple(args.shape), F16)],
    category="quantized",
)
class Float16UniformFill(Operator):
    """float16 values drawn uniformly from [min, max) (float32 draws rounded to float16)."""

    def setup(self) -> None:
        if not -np.inf < self.args.min < self.args.max < np.inf:
            raise self.arg_error(f"max ({self.args.max}) must be bigger than min ({self.args.min})")

    def run(self) -> None:
        shape = tuple(self.args.shape)
        if any(d < 0 for d in shape):
            raise self.arg_error(f"shape {list(shape)} has a negative dimension")
        check_elements(shape, 8, f"output 0 of {self.describe()}")
        draw = self.rng.uniform(self.args.min, self.args.max, shape).astype(np.float32)
        self.output(0, shape, F16)[...] = draw


no_gradient("Float16ConstantFill", "Float16UniformFill")
