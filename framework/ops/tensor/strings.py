"""String tensor ops (Caffe2's string_ops.cc): StringPrefix, StringSuffix, StringStartsWith,
StringEndsWith and StringJoin. Strings are bytes (Caffe2's std::string); prefixes and suffixes
count bytes, as Caffe2 does."""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.ops.gradient import should_not_do_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import INT, STRING, Arg, TensorSpec

_OBJ = np.dtype(object)
_BOOL = np.dtype(np.bool_)


def _strings(op: Operator) -> np.ndarray:
    x = op.input(0)
    if x.dtype != _OBJ:
        raise TypeMismatchError(
            f"{op.describe()}: input 0 ('{op.input_names[0]}') must be a string tensor, got {x.dtype}"
        )
    return x


def _as_bytes(v: object) -> bytes:
    return v if isinstance(v, bytes) else str(v).encode("utf-8")


def _elementwise(type_name: str, doc: str, arg: Arg, out_dtype: np.dtype, fn):
    @register_op(
        type_name,
        doc=doc,
        args=[arg],
        input_docs=[("strings", "string tensor")],
        output_docs=[("output", "same shape")],
        infer=lambda args, ins: [TensorSpec(ins[0].shape if ins else None, out_dtype)],
        category="string",
    )
    class _StringOp(Operator):
        def setup(self) -> None:
            value = getattr(self.args, arg.name)
            if arg.kind == INT and value < 0:
                raise self.arg_error(f"{arg.name} must be >= 0, got {value}")
            self._param = _as_bytes(value) if arg.kind == STRING else value

        def run(self) -> None:
            x = _strings(self)
            out = self.output(0, x.shape, out_dtype)
            flat = out.reshape(-1)
            for i, v in enumerate(x.reshape(-1).tolist()):
                flat[i] = fn(_as_bytes(v), self._param)

    _StringOp.__name__ = _StringOp.__qualname__ = type_name
    return _StringOp


_elementwise(
    "StringPrefix",
    "The first ``length`` bytes of each string (shorter strings unchanged).",
    Arg("length", INT, 3, "maximum prefix size in bytes"),
    _OBJ,
    lambda s, n: s[:n],
)
_elementwise(
    "StringSuffix",
    "The last ``length`` bytes of each string (shorter strings unchanged).",
    Arg("length", INT, 3, "maximum suffix size in bytes"),
    _OBJ,
    lambda s, n: s[len(s) - n :] if n < len(s) else s,
)
_elementwise(
    "StringStartsWith",
    "Whether each string starts with ``prefix``.",
    Arg("prefix", STRING, "", "the prefix"),
    _BOOL,
    lambda s, p: s.startswith(p),
)
_elementwise(
    "StringEndsWith",
    "Whether each string ends with ``suffix``.",
    Arg("suffix", STRING, "", "the suffix"),
    _BOOL,
    lambda s, p: s.endswith(p),
)


def _format(v: object, kind: str) -> bytes:
    """One element as C++'s ``ostream <<`` writes it (floats: 6 significant digits, bools 0/1)."""
    if kind == "O":
        return _as_bytes(v)
    if kind == "b":
        return b"1" if v else b"0"
    if kind == "f":
        return f"{v:g}".encode()
    return str(int(v)).encode()


@register_op(
    "StringJoin",
    args=[
        Arg("delimiter", STRING, ",", "written after every element"),
        Arg("axis", INT, 0, "0: join rows, 1: columns"),
    ],
    input_docs=[("input", "non-empty 1-D or 2-D tensor (float, double, int32, int64, string or bool)")],
    output_docs=[("strings", "1-D strings: one per row (axis 0) or column (axis 1)")],
    infer=lambda args, ins: [
        TensorSpec(
            (ins[0].shape[args.axis],) if ins and ins[0].shape is not None and len(ins[0].shape) > args.axis else None,
            _OBJ,
        )
    ],
    category="string",
)
class StringJoin(Operator):
    """Join the elements of each row (``axis`` 0) or column (1) into a string, each element
    followed by ``delimiter`` (a trailing one too, as Caffe2's ostream_iterator)."""

    def setup(self) -> None:
        if self.args.axis not in (0, 1):
            raise self.arg_error(f"axis must be 0 or 1, got {self.args.axis}")
        self._delim = _as_bytes(self.args.delimiter)

    def run(self) -> None:
        x = self.input(0)
        if x.size == 0 or x.ndim > 2 or x.ndim == 0:
            raise ShapeError(f"{self.describe()}: input must be a non-empty 1-D or 2-D tensor, got {list(x.shape)}")
        if x.dtype.kind not in "Oifb" or x.dtype.itemsize not in (1, 4, 8):
            raise TypeMismatchError(f"{self.describe()}: cannot join {x.dtype} elements")
        if self.args.axis == 1 and x.ndim < 2:
            raise ShapeError(f"{self.describe()}: axis 1 needs a 2-D input, got {list(x.shape)}")
        m = x.reshape(x.shape[0], -1)
        if self.args.axis == 1:
            m = m.T
        kind, d = x.dtype.kind, self._delim
        rows = [b"".join(_format(v, kind) + d for v in row) for row in m.tolist()]
        out = self.output(0, (len(rows),), _OBJ)
        out[:] = rows


should_not_do_gradient("StringPrefix", "StringSuffix", "StringStartsWith", "StringEndsWith", "StringJoin")
