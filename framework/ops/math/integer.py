"""Integer and membership ops: Mod (C++ remainder, optional sign of the divisor), IsMemberOf
(elementwise set membership against an argument list), SumElementsInt (an int32 scalar sum).
None is differentiable.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.errors import TypeMismatchError
from framework.ops.gradient import should_not_do_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, INT, INTS, Arg, TensorSpec, pointwise_cost, same_as_input, scalar_of
from framework.proto.framework_pb2 import TensorProto


@register_op(
    "Mod",
    args=[
        Arg("divisor", INT, 0, "the divisor (must be nonzero; Caffe2 documents >= 1)"),
        Arg("sign_follow_divisor", BOOL, False, "results take the divisor's sign (else the dividend's, as C++ %)"),
    ],
    input_docs=[("X", "int32 or int64 tensor")],
    output_docs=[("Y", "X mod divisor, shaped and typed as X")],
    allow_inplace={(0, 0)},
    infer=same_as_input(0),
    cost=pointwise_cost(1),
    category="math",
)
class Mod(Operator):
    """Elementwise remainder X % divisor with C++ semantics: the result has the sign of the
    dividend (truncated division), or of the divisor with ``sign_follow_divisor`` (Python's %)."""

    def setup(self) -> None:
        if self.args.divisor == 0:
            raise self.arg_error("argument 'divisor' must be nonzero, got 0")

    def run(self) -> None:
        x = self.input(0)
        if x.dtype not in (np.int32, np.int64):
            raise TypeMismatchError(
                f"{self.describe()}: input 0 ('{self.input_names[0]}') has dtype {x.dtype}, expected int32 or int64"
            )
        info = np.iinfo(x.dtype)
        if not info.min <= self.args.divisor <= info.max:
            raise self.arg_error(f"divisor {self.args.divisor} does not fit the input's {x.dtype}")
        out = self.output(0, x.shape, x.dtype)
        d = x.dtype.type(self.args.divisor)
        if self.args.sign_follow_divisor:
            np.mod(x, d, out=out)  # floored: sign of the divisor
        else:
            np.fmod(x, d, out=out)  # truncated: sign of the dividend


_MEMBER_TYPES = {
    TensorProto.INT32: np.dtype(np.int32),
    TensorProto.INT64: np.dtype(np.int64),
    TensorProto.BOOL: np.dtype(bool),
    TensorProto.STRING: np.dtype(object),
}


@register_op(
    "IsMemberOf",
    args=[
        Arg("value", INTS, [], "the set of values to test against (ints, or strings for string tensors)"),
        Arg(
            "dtype",
            INT,
            TensorProto.UNDEFINED,
            "TensorProto type of `value` (default: the input's type)",
            dtype_name=True,
        ),
    ],
    input_docs=[("X", "int32, int64, bool or string tensor")],
    output_docs=[("Y", "bool tensor shaped as X: X is one of `value`")],
    infer=lambda args, ins: [TensorSpec(ins[0].shape, np.dtype(bool))],
    cost=pointwise_cost(1),
    category="logical",
)
class IsMemberOf(Operator):
    """Y[i] = X[i] in set(value), elementwise. String values are compared as bytes."""

    def __init__(self, op_def: Any, ws: Any, index: int | None = None) -> None:
        # `value` may hold ints or strings: take it raw, before argument parsing types it.
        self._raw = [a for a in op_def.arg if a.name == "value"]
        stripped = type(op_def)()
        stripped.CopyFrom(op_def)
        del stripped.arg[:]
        stripped.arg.extend(a for a in op_def.arg if a.name != "value")
        super().__init__(stripped, ws, index)
        self.op_def = op_def

    def setup(self) -> None:
        dt = self.args.dtype
        if dt != TensorProto.UNDEFINED and dt not in _MEMBER_TYPES:
            raise self.arg_error(f"argument 'dtype' must be INT32, INT64, BOOL or STRING, got {dt}")
        self._strings = [bytes(s) for a in self._raw for s in a.strings]
        self._ints = [int(i) for a in self._raw for i in a.ints] + [int(a.i) for a in self._raw if a.HasField("i")]
        self._cache: dict = {}

    def _values(self, dtype: np.dtype) -> np.ndarray:
        v = self._cache.get(dtype)
        if v is None:
            if dtype.kind == "O":
                if self._ints:
                    raise self.arg_error("'value' holds integers but the input holds strings")
                v = np.array(self._strings, dtype=object)
            else:
                if self._strings:
                    raise self.arg_error(f"'value' holds strings but the input holds {dtype}")
                v = np.array(self._ints, dtype=np.int64)
            self._cache[dtype] = v
        return v

    def run(self) -> None:
        x = self.input(0)
        if x.dtype.kind not in "biO" or (x.dtype.kind == "i" and x.dtype not in (np.int32, np.int64)):
            raise TypeMismatchError(
                f"{self.describe()}: input 0 ('{self.input_names[0]}') has dtype {x.dtype}, "
                "expected int32, int64, bool or string"
            )
        dt = self.args.dtype
        if dt != TensorProto.UNDEFINED and _MEMBER_TYPES[dt].kind != x.dtype.kind:
            raise TypeMismatchError(
                f"{self.describe()}: input 0 ('{self.input_names[0]}') has dtype {x.dtype} but dtype={dt} "
                f"declares {_MEMBER_TYPES[dt]}"
            )
        values = self._values(x.dtype)
        out = self.output(0, x.shape, np.dtype(bool))
        if x.dtype.kind == "O":
            members = set(values.tolist())
            flat = out.reshape(-1)
            for i, s in enumerate(x.reshape(-1)):
                flat[i] = (s.encode("utf-8") if isinstance(s, str) else s) in members
        else:
            out[...] = np.isin(x, values)


@register_op(
    "SumElementsInt",
    input_docs=[("X", "int32 tensor")],
    output_docs=[("sum", "int32 scalar (shape []): the sum of X's elements")],
    infer=scalar_of(np.int32),
    cost=pointwise_cost(1),
    category="reduction",
)
class SumElementsInt(Operator):
    """The sum of an int32 tensor's elements, as an int32 scalar (wrapping on overflow, as C++)."""

    def run(self) -> None:
        x = self.input(0)
        if x.dtype != np.int32:
            raise TypeMismatchError(
                f"{self.describe()}: input 0 ('{self.input_names[0]}') has dtype {x.dtype}, expected int32"
            )
        out = self.output(0, (), np.dtype(np.int32))
        out[...] = np.sum(x, dtype=np.int32)


should_not_do_gradient("Mod", "IsMemberOf", "SumElementsInt")
