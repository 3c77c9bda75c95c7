"""ONNX string ops (ONNX<Op>): StringConcat, StringSplit, StringNormalizer, RegexFullMatch.

String tensors hold UTF-8 bytes (Caffe2's std::string); these ops decode them as UTF-8 text
(bytes that are not UTF-8 are an error naming the op and blob) and write UTF-8 bytes back.
RegexFullMatch compiles the model's pattern with Python's ``re`` (ONNX specifies RE2 syntax;
the common subset agrees) and only matches it: nothing from a model is ever evaluated.
Not differentiable.
"""

from __future__ import annotations

import re
from typing import Any

import numpy as np

from framework.errors import ArgumentError, ShapeError, TypeMismatchError
from framework.memory.allocator import check_elements
from framework.ops.gradient import no_gradient
from framework.ops.onnx.linear_regex import LinearRegex
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import INT, STRING, STRINGS, UNKNOWN, Arg, TensorSpec, pointwise_cost

_OBJ = np.dtype(object)


class _StringOp(Operator):
    def texts(self, i: int) -> np.ndarray:
        """Input ``i`` as an object array of str (UTF-8 decoded)."""
        x = self.input(i)
        out = np.empty(x.shape, object)
        flat, dst = x.reshape(-1), out.reshape(-1)
        for k, v in enumerate(flat):
            try:
                dst[k] = v.decode("utf-8") if isinstance(v, bytes) else str(v)
            except UnicodeDecodeError as e:
                raise TypeMismatchError(
                    f"{self.describe()}: input {i} ('{self.input_names[i]}') element {k} is not UTF-8 text"
                ) from e
        return out

    def write_texts(self, i: int, values: np.ndarray) -> None:
        out = self.output(i, values.shape, _OBJ)
        flat = out.reshape(-1)
        for k, v in enumerate(values.reshape(-1)):
            flat[k] = v.encode("utf-8")


def _strings_like(i: int) -> Any:
    return lambda args, ins: [TensorSpec(ins[i].shape, _OBJ)]


@register_op(
    "ONNXStringConcat",
    inputs=2,
    input_docs=[("X", "strings"), ("Y", "strings (broadcast with X)")],
    output_docs=[("Z", "X[i] + Y[i], broadcast")],
    infer=lambda args, ins: [
        TensorSpec(tuple(np.broadcast_shapes(ins[0].shape, ins[1].shape)), _OBJ)
        if ins[0].shape is not None and ins[1].shape is not None
        else TensorSpec(None, _OBJ)
    ],
    cost=pointwise_cost(1),
    category="onnx",
    input_types="string",
)
class ONNXStringConcat(_StringOp):
    """ONNX StringConcat: Z = X + Y elementwise (string concatenation), numpy broadcasting."""

    def run(self) -> None:
        x, y = self.input(0), self.input(1)
        try:
            shape = np.broadcast_shapes(x.shape, y.shape)
        except ValueError as e:
            raise ShapeError(
                f"{self.describe()}: shapes {list(x.shape)} ('{self.input_names[0]}') and {list(y.shape)} "
                f"('{self.input_names[1]}') do not broadcast"
            ) from e
        check_elements(shape, 8, f"{self.describe()} output")
        a, b = np.broadcast_arrays(self.texts(0), self.texts(1))
        z = np.empty(shape, object)
        for idx in np.ndindex(*shape):
            z[idx] = a[idx] + b[idx]
        self.write_texts(0, z)


def _infer_split(args: Any, ins: list) -> list:
    counts = TensorSpec(ins[0].shape, np.dtype(np.int64))
    return [TensorSpec(None, _OBJ), counts]


@register_op(
    "ONNXStringSplit",
    outputs=2,
    args=[
        Arg("delimiter", STRING, "", "the separator; empty: runs of whitespace (and no empty pieces)"),
        Arg("maxsplit", INT, -1, "at most this many splits per string; -1: no limit"),
    ],
    input_docs=[("X", "strings")],
    output_docs=[("Y", "X's shape + [max pieces]: the pieces, padded with ''"), ("Z", "int64 piece counts, X's shape")],
    infer=_infer_split,
    cost=pointwise_cost(4),
    category="onnx",
    input_types="string",
)
class ONNXStringSplit(_StringOp):
    """ONNX StringSplit: each string split at ``delimiter`` (consecutive delimiters give empty
    pieces) or, when it is empty, at runs of whitespace; at most ``maxsplit`` splits. Y stacks the
    pieces along a new last axis padded with empty strings to the longest; Z counts them."""

    def run(self) -> None:
        x = self.texts(0)
        sep = self.args.delimiter or None
        limit = self.args.maxsplit if self.args.maxsplit >= 0 else -1
        pieces = [s.split(sep, limit) for s in x.reshape(-1)]
        width = max((len(p) for p in pieces), default=0)
        check_elements((*x.shape, width), 8, f"{self.describe()} output")
        y = np.full((len(pieces), width), "", object)
        for k, p in enumerate(pieces):
            y[k, : len(p)] = p
        counts = np.array([len(p) for p in pieces], np.int64).reshape(x.shape)
        self.write_texts(0, y.reshape(*x.shape, width))
        self.output(1, x.shape, np.int64)[...] = counts


@register_op(
    "ONNXStringNormalizer",
    args=[
        Arg("case_change_action", STRING, "NONE", "LOWER, UPPER or NONE", choices=("LOWER", "UPPER", "NONE")),
        Arg("is_case_sensitive", INT, 0, "1: stopwords match case-sensitively"),
        Arg("locale", STRING, "", "accepted, not used (Python's case mapping is locale-independent)"),
        Arg("stopwords", STRINGS, [], "elements equal to one of these are removed"),
    ],
    input_docs=[("X", "strings, shape [C] or [1, C]")],
    output_docs=[("Y", "the kept elements, case-changed: [C'] or [1, C'] ([''] when none is kept)")],
    infer=lambda args, ins: [TensorSpec(None, _OBJ) if ins[0] is not UNKNOWN else UNKNOWN],
    cost=pointwise_cost(4),
    category="onnx",
    input_types="string",
    ranks={0: (1, 2)},
)
class ONNXStringNormalizer(_StringOp):
    """ONNX StringNormalizer: removes the elements equal to a stopword (compared case-insensitively
    unless ``is_case_sensitive``), then lower- or upper-cases the rest (``case_change_action``).
    Input [C] or [1, C]; when every element is removed the output is one empty string."""

    def run(self) -> None:
        x = self.input(0)
        if x.ndim == 2 and x.shape[0] != 1:
            raise ShapeError(
                f"{self.describe()}: input '{self.input_names[0]}' has shape {list(x.shape)}, expected [C] or [1, C]"
            )
        words = [w.decode("utf-8", "replace") if isinstance(w, bytes) else str(w) for w in self.args.stopwords]
        texts = self.texts(0).reshape(-1)
        sensitive = bool(self.args.is_case_sensitive)
        stops = set(words) if sensitive else {w.casefold() for w in words}
        kept = [s for s in texts if (s if sensitive else s.casefold()) not in stops]
        action = self.args.case_change_action
        kept = [s.lower() if action == "LOWER" else s.upper() if action == "UPPER" else s for s in kept] or [""]
        y = np.array(kept, dtype=object)
        self.write_texts(0, y.reshape(1, -1) if x.ndim == 2 else y)


@register_op(
    "ONNXRegexFullMatch",
    args=[Arg("pattern", STRING, "", "the regular expression (RE2 syntax; matched in linear time)")],
    input_docs=[("X", "strings")],
    output_docs=[("Y", "bool, X's shape: the whole string matches")],
    infer=lambda args, ins: [TensorSpec(ins[0].shape, np.dtype(bool))],
    cost=pointwise_cost(8),
    category="onnx",
    input_types="string",
)
class ONNXRegexFullMatch(_StringOp):
    """ONNX RegexFullMatch: Y[i] = the whole of X[i] matches ``pattern``. The pattern is only
    compiled and matched in linear time (``framework.ops.onnx.linear_regex``: no backtracking, so a
    hostile pattern cannot hang the process); a pattern it cannot compile is an argument error."""

    def setup(self) -> None:
        try:
            self._re = LinearRegex(self.args.pattern)
        except (re.error, RecursionError, OverflowError, ValueError) as e:
            raise ArgumentError(f"{self.describe()}: argument 'pattern' is not a valid regular expression: {e}") from e

    def run(self) -> None:
        x = self.texts(0)
        y = np.array([self._re.fullmatch(s) for s in x.reshape(-1)], bool).reshape(x.shape)
        self.output(0, x.shape, bool)[...] = y


for _t in ("ONNXStringConcat", "ONNXStringSplit", "ONNXStringNormalizer", "ONNXRegexFullMatch"):
    no_gradient(_t)
