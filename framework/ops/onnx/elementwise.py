"""ONNX's broadcasting elementwise ops on every element type (ONNX<Op>): arithmetic, comparison,
bitwise, variadic Max/Min and Where, with numpy (multidirectional) broadcasting.

The ONNX backend maps a node onto Caffe2's Add/EQ/Max... when that op's dtypes and broadcast
rules cover it; these ops take the rest: int8/int16/uint8..uint64 operands, bfloat16 and other
ml_dtypes floats (numpy's ufuncs on them compute in float32 and round back, as ONNX specifies),
bool and string comparisons, broadcasting variadic Max/Min, BitShift and the bitwise ops.
None is differentiable (integer, boolean or type-preserving inference ops; the float cases that
need gradients run on Caffe2's ops).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from framework.errors import ArgumentError, ShapeError, TypeMismatchError
from framework.memory.allocator import check_elements
from framework.ops.gradient import no_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import INT, STRING, UNKNOWN, Arg, TensorSpec, pointwise_cost

# Element kinds an op accepts: "float" (numpy and ml_dtypes floats), "int", "uint", "bool", "string".
NUMBER = ("float", "int", "uint")
ALL = NUMBER + ("bool", "string")


def element_kind(dt: np.dtype) -> str:
    """float / int / uint / bool / string / other for a dtype (ml_dtypes' floats count as float)."""
    if dt.kind == "f":
        return "float"
    if dt.kind in "iub":
        return {"i": "int", "u": "uint", "b": "bool"}[dt.kind]
    if dt.kind == "O":
        return "string"
    if dt.type.__module__.startswith("ml_dtypes"):
        name = dt.name
        if name.startswith(("int", "uint")):
            return "int" if name.startswith("int") else "uint"
        return "float"
    return "other"


def broadcast_infer(out_dtype: Callable[[list], Any]) -> Callable:
    def infer(args: Any, ins: list) -> list:
        dtype = out_dtype(ins)
        if any(s.shape is None for s in ins):
            return [TensorSpec(None, dtype)]
        try:
            shape = np.broadcast_shapes(*[tuple(s.shape) for s in ins])
        except ValueError:
            return [UNKNOWN]
        return [TensorSpec(tuple(shape), dtype)]

    return infer


def _as_input(i: int) -> Callable[[list], Any]:
    return lambda ins: ins[i].dtype


def _bool(ins: list) -> Any:
    return np.dtype(bool)


class ONNXElementwise(Operator):
    """Shared checks and broadcasting for the ONNX elementwise ops (see each op's doc)."""

    kinds: tuple = NUMBER  # accepted element kinds
    same_types = True  # every input (Where: X and Y) has one dtype
    first_typed = 0  # the first input that takes part in the type rules (Where: 1)

    def compute(self, xs: list) -> np.ndarray:  # pragma: no cover - overridden
        raise NotImplementedError

    def out_dtype(self, xs: list) -> np.dtype:
        return xs[self.first_typed].dtype

    def check(self, xs: list) -> None:
        """Value checks beyond types and shapes (e.g. integer division by zero)."""

    def run(self) -> None:
        xs = [self.input(i) for i in range(len(self.input_names))]
        typed = xs[self.first_typed :]
        for i, x in enumerate(typed, self.first_typed):
            if element_kind(x.dtype) not in self.kinds:
                raise TypeMismatchError(
                    f"{self.describe()}: input {i} ('{self.input_names[i]}') has dtype {x.dtype}, "
                    f"expected {' or '.join(self.kinds)} elements"
                )
        if self.same_types and any(x.dtype != typed[0].dtype for x in typed):
            raise TypeMismatchError(
                f"{self.describe()}: inputs have different dtypes ({', '.join(str(x.dtype) for x in typed)}); "
                "ONNX requires one type"
            )
        try:
            shape = np.broadcast_shapes(*[x.shape for x in xs])
        except ValueError as e:
            raise ShapeError(
                f"{self.describe()}: input shapes {', '.join(str(list(x.shape)) for x in xs)} do not broadcast "
                f"({', '.join(self.input_names)})"
            ) from e
        dtype = self.out_dtype(xs)
        check_elements(shape, dtype.itemsize, f"{self.describe()} output")
        self.check(xs)
        with np.errstate(all="ignore"):
            y = self.compute(xs)
        out = self.output(0, shape, dtype)
        out[...] = y


def _int_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """Integer division truncated toward zero (C semantics, as ONNX's Div on integers)."""
    q = np.floor_divide(a, b)
    fix = (np.remainder(a, b) != 0) & ((a < 0) != (b < 0))
    return q + fix.astype(q.dtype)


def _nonzero_divisor(op: ONNXElementwise, xs: list) -> None:
    if element_kind(xs[1].dtype) in ("int", "uint") and not np.all(xs[1]):
        raise ArgumentError(f"{op.describe()}: integer division by zero (divisor '{op.input_names[1]}' holds a 0)")


_BINARY: dict[str, tuple] = {
    # name: (compute(op, a, b), kinds, output dtype rule, doc)
    "Add": (lambda op, a, b: a + b, NUMBER, None, "Y = A + B (integers wrap around)."),
    "Sub": (lambda op, a, b: a - b, NUMBER, None, "Y = A - B (integers wrap around)."),
    "Mul": (lambda op, a, b: a * b, NUMBER, None, "Y = A * B (integers wrap around)."),
    "Div": (
        lambda op, a, b: _int_div(a, b) if element_kind(a.dtype) in ("int", "uint") else a / b,
        NUMBER,
        None,
        "Y = A / B; integers divide truncating toward zero, a zero integer divisor is an error.",
    ),
    "Equal": (lambda op, a, b: a == b, ALL, _bool, "Y = (A == B) as bool; numbers, bools or strings."),
    "Less": (lambda op, a, b: a < b, NUMBER, _bool, "Y = (A < B) as bool."),
    "LessOrEqual": (lambda op, a, b: a <= b, NUMBER, _bool, "Y = (A <= B) as bool."),
    "Greater": (lambda op, a, b: a > b, NUMBER, _bool, "Y = (A > B) as bool."),
    "GreaterOrEqual": (lambda op, a, b: a >= b, NUMBER, _bool, "Y = (A >= B) as bool."),
    "PRelu": (
        lambda op, a, b: np.where(a < 0, a * b, a),
        NUMBER,
        None,
        "Y = A * B where A < 0, else A (B: the slope, broadcast to A).",
    ),
    "BitwiseAnd": (lambda op, a, b: a & b, ("int", "uint"), None, "Y = A & B bitwise, integers."),
    "BitwiseOr": (lambda op, a, b: a | b, ("int", "uint"), None, "Y = A | B bitwise, integers."),
    "BitwiseXor": (lambda op, a, b: a ^ b, ("int", "uint"), None, "Y = A ^ B bitwise, integers."),
}


def _binary_class(name: str, spec: tuple) -> type:
    fn, kinds, rule, doc = spec

    class Op(ONNXElementwise):
        __doc__ = f"ONNX {name}: {doc} Numpy broadcasting; both inputs of one type."

        def out_dtype(self, xs: list) -> np.dtype:
            return np.dtype(bool) if rule is _bool else xs[0].dtype

        def compute(self, xs: list) -> np.ndarray:
            return fn(self, xs[0], xs[1])

        def check(self, xs: list) -> None:
            if name == "Div":
                _nonzero_divisor(self, xs)

    Op.kinds = kinds
    Op.__name__ = Op.__qualname__ = f"ONNX{name}"
    return Op


_IO = dict(input_docs=[("A", "first operand"), ("B", "second operand (broadcast with A)")],
           output_docs=[("Y", "the broadcast result")])  # fmt: skip

for _name, _spec in _BINARY.items():
    register_op(
        f"ONNX{_name}",
        inputs=2,
        infer=broadcast_infer(_spec[2] or _as_input(0)),
        cost=pointwise_cost(1),
        category="onnx",
        input_types="any",
        **_IO,
    )(_binary_class(_name, _spec))
    no_gradient(f"ONNX{_name}")


@register_op(
    "ONNXMod",
    inputs=2,
    args=[Arg("fmod", INT, 0, "1: C fmod (sign of the dividend); 0: the sign of the divisor (integers only)")],
    infer=broadcast_infer(_as_input(0)),
    cost=pointwise_cost(1),
    category="onnx",
    input_types="any",
    **_IO,
)
class ONNXMod(ONNXElementwise):
    """ONNX Mod: the remainder of A / B. ``fmod=0``: the result takes the divisor's sign (Python's
    %, floored); ``fmod=1``: C's fmod, the dividend's sign. A zero integer divisor is an error
    (a zero float divisor gives NaN)."""

    def check(self, xs: list) -> None:
        _nonzero_divisor(self, xs)

    def compute(self, xs: list) -> np.ndarray:
        return np.fmod(xs[0], xs[1]) if self.args.fmod else np.mod(xs[0], xs[1])


@register_op(
    "ONNXPow",
    inputs=2,
    input_docs=[("X", "base"), ("Y", "exponent (any numeric type, broadcast with X)")],
    output_docs=[("Z", "X ** Y with X's type")],
    infer=broadcast_infer(_as_input(0)),
    cost=pointwise_cost(1),
    category="onnx",
    input_types="any",
)
class ONNXPow(ONNXElementwise):
    """ONNX Pow: Z = X ** Y, typed as X (the exponent may have another numeric type; mixed
    int/float operands compute in floating point, then convert to X's type). A negative integer
    exponent of an integer base is an error (no integer result)."""

    same_types = False

    def check(self, xs: list) -> None:
        x, y = xs
        if element_kind(x.dtype) != "float" and element_kind(y.dtype) != "float" and np.any(y < 0):
            raise ArgumentError(
                f"{self.describe()}: integer base '{self.input_names[0]}' with a negative integer exponent"
            )

    def compute(self, xs: list) -> np.ndarray:
        x, y = xs
        if element_kind(x.dtype) == "float" and x.dtype.itemsize < 4:
            return np.power(x.astype(np.float32), y).astype(x.dtype)
        return np.power(x, y).astype(x.dtype)


@register_op(
    "ONNXBitShift",
    inputs=2,
    args=[Arg("direction", STRING, "LEFT", "LEFT or RIGHT", choices=("LEFT", "RIGHT"))],
    input_docs=[("X", "integers"), ("Y", "shift amounts, X's type (broadcast with X)")],
    output_docs=[("Z", "X shifted by Y bits")],
    infer=broadcast_infer(_as_input(0)),
    cost=pointwise_cost(1),
    category="onnx",
    input_types="any",
)
class ONNXBitShift(ONNXElementwise):
    """ONNX BitShift (opset 28 rules): Z = X << Y or X >> Y (``direction``) on integers. Left
    shifts drop the bits shifted out (signed values wrap in two's complement); right shifts of
    signed values are arithmetic (the sign fills in). A shift amount outside [0, width) gives 0,
    or -1 for a right shift of a negative value."""

    kinds = ("int", "uint")

    def compute(self, xs: list) -> np.ndarray:
        x, y = np.broadcast_arrays(*xs)
        bits = x.dtype.itemsize * 8
        out_of_range = (y < 0) | (y >= bits)
        k = np.where(out_of_range, 0, y).astype(np.uint8)
        signed = x.dtype.kind == "i"
        if self.args.direction == "LEFT":
            unsigned = x.view(np.dtype(f"u{x.dtype.itemsize}")) if signed else x
            z = np.left_shift(unsigned, k.astype(unsigned.dtype)).view(x.dtype)
            fill = np.zeros((), x.dtype)
        else:
            z = np.right_shift(x, k.astype(x.dtype))
            fill = np.where(x < 0, x.dtype.type(-1), x.dtype.type(0)) if signed else np.zeros((), x.dtype)
        return np.where(out_of_range, fill, z)


class _Variadic(ONNXElementwise):
    reduce: Any = None

    def compute(self, xs: list) -> np.ndarray:
        y = xs[0]
        for x in xs[1:]:
            y = self.reduce(y, x)
        return y


for _name, _fn in (("Max", np.maximum), ("Min", np.minimum)):
    _cls = type(
        f"ONNX{_name}",
        (_Variadic,),
        {
            "reduce": staticmethod(_fn),
            "__doc__": f"ONNX {_name}: the elementwise {_name.lower()}imum of 1 or more inputs of one numeric "
            "type, with numpy broadcasting; a NaN operand gives NaN.",
        },
    )
    register_op(
        f"ONNX{_name}",
        inputs=(1, float("inf")),
        input_docs=[("data_0", "first operand (more follow, all broadcast together)")],
        output_docs=[("max" if _name == "Max" else "min", "the broadcast result")],
        infer=broadcast_infer(_as_input(0)),
        cost=pointwise_cost(1),
        category="onnx",
        input_types="any",
    )(_cls)
    no_gradient(f"ONNX{_name}")


@register_op(
    "ONNXWhere",
    inputs=3,
    input_docs=[("condition", "bool tensor"), ("X", "taken where condition is true"), ("Y", "taken elsewhere")],
    output_docs=[("output", "the three inputs broadcast together; X's type")],
    infer=broadcast_infer(_as_input(1)),
    cost=pointwise_cost(1),
    category="onnx",
    input_types={0: "bool", "*": "any"},
)
class ONNXWhere(ONNXElementwise):
    """ONNX Where: output = condition ? X : Y elementwise, the three inputs broadcast together
    (numpy rules); X and Y have one type, any type (strings too)."""

    kinds = ALL
    first_typed = 1

    def compute(self, xs: list) -> np.ndarray:
        return np.where(xs[0], xs[1], xs[2])


for _t in ("ONNXMod", "ONNXPow", "ONNXBitShift", "ONNXWhere"):
    no_gradient(_t)
