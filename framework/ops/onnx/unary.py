"""ONNX unary ops with no Caffe2 counterpart of the same semantics (ONNX<Op>): Round (half to
even), IsInf/IsNaN, BitwiseNot, Acosh/Asinh/Atanh, Shrink, Celu, HardSwish, Mish, Swish(alpha).

Low-precision floats (float16, bfloat16 and the other ml_dtypes floats) compute in float32 and
round back to their type, as ONNX specifies for them. Inference ops: no gradient (the backend
maps float32 nodes that have a Caffe2 op with a gradient onto that op).
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from framework.errors import TypeMismatchError
from framework.ops.gradient import no_gradient
from framework.ops.onnx.elementwise import NUMBER, element_kind
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import FLOAT, INT, Arg, TensorSpec, pointwise_cost

FLOAT_ONLY = ("float",)
INTEGER = ("int", "uint")


def _softplus(x: np.ndarray) -> np.ndarray:
    return np.logaddexp(0.0, x).astype(x.dtype)


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return (1.0 / (1.0 + np.exp(-x))).astype(x.dtype)


def _shrink(x: np.ndarray, a: Any) -> np.ndarray:
    lambd, bias = float(a.lambd), float(a.bias)  # compared and added as floats, then X's type
    return np.where(x < -lambd, x + bias, np.where(x > lambd, x - bias, 0))


def _celu(x: np.ndarray, a: Any) -> np.ndarray:
    alpha = x.dtype.type(a.alpha)
    return np.maximum(x.dtype.type(0), x) + np.minimum(x.dtype.type(0), alpha * (np.exp(x / alpha) - 1))


# name: (fn(x, args), accepted element kinds, bool output, args, doc)
_UNARY: dict[str, tuple] = {
    "Round": (lambda x, a: np.round(x), FLOAT_ONLY, False, [], "Y = X rounded to the nearest integer, halves to even."),
    "IsNaN": (lambda x, a: np.isnan(x), FLOAT_ONLY, True, [], "Y = X is NaN, as bool."),
    "IsInf": (
        lambda x, a: np.isinf(x) & (((x > 0) & bool(a.detect_positive)) | ((x < 0) & bool(a.detect_negative))),
        FLOAT_ONLY,
        True,
        [
            Arg("detect_negative", INT, 1, "1: -inf counts"),
            Arg("detect_positive", INT, 1, "1: +inf counts"),
        ],
        "Y = X is an infinity (of the signs selected), as bool.",
    ),
    "BitwiseNot": (lambda x, a: np.invert(x), INTEGER, False, [], "Y = ~X, bitwise, integers."),
    "Acosh": (lambda x, a: np.arccosh(x), FLOAT_ONLY, False, [], "Y = acosh(X) (NaN below 1)."),
    "Asinh": (lambda x, a: np.arcsinh(x), FLOAT_ONLY, False, [], "Y = asinh(X)."),
    "Atanh": (lambda x, a: np.arctanh(x), FLOAT_ONLY, False, [], "Y = atanh(X) (NaN outside [-1, 1])."),
    "Shrink": (
        _shrink,
        NUMBER,
        False,
        [
            Arg("bias", FLOAT, 0.0, "added/subtracted outside the band"),
            Arg("lambd", FLOAT, 0.5, "half-width of the band"),
        ],
        "Y = X - bias where X > lambd, X + bias where X < -lambd, else 0 (numbers of any type).",
    ),
    "Celu": (
        _celu,
        FLOAT_ONLY,
        False,
        [Arg("alpha", FLOAT, 1.0, "the alpha of max(0, x) + min(0, alpha * (exp(x / alpha) - 1))")],
        "Y = max(0, X) + min(0, alpha * (exp(X / alpha) - 1)).",
    ),
    "HardSwish": (
        lambda x, a: x * np.clip(x / x.dtype.type(6) + x.dtype.type(0.5), 0, 1),
        FLOAT_ONLY,
        False,
        [],
        "Y = X * max(0, min(1, X / 6 + 1/2)).",
    ),
    "Mish": (lambda x, a: x * np.tanh(_softplus(x)), FLOAT_ONLY, False, [], "Y = X * tanh(log(1 + exp(X)))."),
    "Swish": (
        lambda x, a: x * _sigmoid(x.dtype.type(a.alpha) * x),
        FLOAT_ONLY,
        False,
        [Arg("alpha", FLOAT, 1.0, "the alpha of X * sigmoid(alpha * X)")],
        "Y = X * sigmoid(alpha * X).",
    ),
}


def _infer(is_bool: bool) -> Callable:
    return lambda args, ins: [TensorSpec(ins[0].shape, np.dtype(bool) if is_bool else ins[0].dtype)]


def _unary_class(name: str, spec: tuple) -> type:
    fn, kinds, is_bool, _, doc = spec

    class Op(Operator):
        __doc__ = f"ONNX {name}: {doc} Accepts {', '.join(kinds)} elements."

        def run(self) -> None:
            x = self.input(0)
            if element_kind(x.dtype) not in kinds:
                raise TypeMismatchError(
                    f"{self.describe()}: input 0 ('{self.input_names[0]}') has dtype {x.dtype}, "
                    f"expected {' or '.join(kinds)} elements"
                )
            low = element_kind(x.dtype) == "float" and (x.dtype.itemsize < 4 or x.dtype.kind != "f")
            with np.errstate(all="ignore"):
                y = fn(x.astype(np.float32) if low else x, self.args)
            out = self.output(0, x.shape, np.dtype(bool) if is_bool else x.dtype)
            out[...] = y.astype(out.dtype) if low and not is_bool else y

    Op.__name__ = Op.__qualname__ = f"ONNX{name}"
    return Op


for _name, _spec in _UNARY.items():
    register_op(
        f"ONNX{_name}",
        args=_spec[3],
        input_docs=[("X", f"input ({', '.join(_spec[1])} elements)")],
        output_docs=[("Y", "bool, X's shape" if _spec[2] else "X's shape and type")],
        infer=_infer(_spec[2]),
        cost=pointwise_cost(4),
        category="onnx",
        input_types="any",
    )(_unary_class(_name, _spec))
    no_gradient(f"ONNX{_name}")
