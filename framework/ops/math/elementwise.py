"""The machinery of the elementwise binary ops (``framework.ops.math.arithmetic``: Add, Sub, Mul,
Div, Pow; ``framework.ops.math.logical``: comparisons, And, Or, Xor): the ``Binary`` kernel driver
(dtype checks, broadcasting planned once per input shapes, in-place rules, the compiled ufunc
fast path), ``register_binary``, and the helpers ``check_kind`` and ``bind_ufunc`` that the
unary, n-ary and reduction ops share.

Broadcasting follows Caffe2 (see ``framework.ops.math.broadcast``): with
``broadcast=1`` B is a contiguous sub-shape of A aligned at ``axis``;
otherwise numpy's multidirectional rules apply.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable

import numpy as np

from framework.errors import SchemaError, ShapeError, TypeMismatchError
from framework.ops.math.broadcast import BROADCAST_ARGS, b_view_shape, legacy_axis, numpy_shape, output_shape
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import TensorSpec, pointwise_cost

_KIND_NAMES = {"b": "bool", "i": "integer", "u": "unsigned integer", "f": "floating point"}
_BINARY_IN = [("A", "first operand"), ("B", "second operand; with broadcast=1 a scalar or a sub-shape of A")]
_BINARY_OUT = [("C", "result, shaped as the broadcast of A and B (as A with broadcast=1)")]


def check_kind(op: Operator, i: int, arr: np.ndarray, kinds: str) -> None:
    """TypeMismatchError naming op and blob unless ``arr``'s dtype kind is one of ``kinds``."""
    if arr.dtype.kind not in kinds:
        allowed = ", ".join(_KIND_NAMES[k] for k in kinds)
        raise TypeMismatchError(
            f"{op.describe()}: input {i} ('{op.input_names[i]}') has dtype {arr.dtype}, expected {allowed}"
        )


def bind_ufunc(fn: Callable, *args: Any, out: np.ndarray) -> Callable[[], Any]:
    """A zero-argument callable doing ``fn(*args, out=out)`` (the compiled fast path of an op).

    For a ufunc that takes ``out`` positionally (all but maximum/minimum, where numpy deprecates
    it) the partial holds positional arguments only, so calling it is a C-level call with no
    keyword dict to merge, cheaper per call than ``partial(fn, *args, out=out)``."""
    if isinstance(fn, np.ufunc) and fn.nout == 1 and fn.nin == len(args) and fn not in _NO_POSITIONAL_OUT:
        return partial(fn, *args, out)
    return partial(fn, *args, out=out)


_NO_POSITIONAL_OUT = (np.maximum, np.minimum)


def binary_infer(out_dtype: Any = None):
    def infer(args: Any, ins: list[TensorSpec]) -> list[TensorSpec]:
        a, b = ins[0], ins[1]
        dt = np.dtype(out_dtype) if out_dtype is not None else a.dtype
        if a.shape is None:
            return [TensorSpec(None, dt)]
        if args.broadcast:
            return [TensorSpec(tuple(a.shape), dt)]
        if not a.known or not b.known:
            return [TensorSpec(None, dt)]
        return [TensorSpec(numpy_shape(a.shape, b.shape), dt)]

    return infer


class Binary(Operator):
    """Shared kernel driver: dtype checks, broadcasting (cached per input shapes), in-place rules."""

    ufunc: Any = None
    kinds = "iuf"
    out_dtype: Any = None  # None: A's dtype

    def setup(self) -> None:
        where = self.describe()
        self.legacy = bool(self.args.broadcast)
        self.axis = legacy_axis(self.args, where)
        self.inplace_a = self.input_names[0] == self.output_names[0]
        self.inplace_b = self.input_names[1] == self.output_names[0]
        if self.legacy and self.inplace_b:
            raise SchemaError(
                f"{where}: with broadcast=1 only A may be computed in place (B is '{self.input_names[1]}')"
            )
        self._key: Any = None
        self._plan: Any = None

    def _plan_for(self, a: np.ndarray, b: np.ndarray) -> tuple:
        key = (a.shape, b.shape)
        if key != self._key:
            where = self.describe()
            out_shape = output_shape(self.legacy, a.shape, b.shape, self.axis, where)
            view = b_view_shape(a.shape, b.shape, self.axis, where) if self.legacy else None
            for flag, name, shape in ((self.inplace_a, "A", a.shape), (self.inplace_b, "B", b.shape)):
                if flag and out_shape != shape:
                    raise ShapeError(
                        f"{where}: computing in place on {name} ('{self.output_names[0]}') needs the result "
                        f"shape {list(out_shape)} to equal {name}'s shape {list(shape)}"
                    )
            self._key, self._plan = key, (out_shape, view)
        return self._plan

    def _check_types(self, a: np.ndarray, b: np.ndarray) -> None:
        check_kind(self, 0, a, self.kinds)
        if b.dtype != a.dtype:
            raise TypeMismatchError(
                f"{self.describe()}: inputs must have one dtype: A ('{self.input_names[0]}') is {a.dtype}, "
                f"B ('{self.input_names[1]}') is {b.dtype}"
            )

    def run(self) -> None:
        a = self.input(0)
        b = self.input(1)
        if a.dtype != b.dtype or a.dtype.kind not in self.kinds:
            self._check_types(a, b)
        dt = self.out_dtype or a.dtype
        if a.shape == b.shape:
            self.compute(a, b, self.output(0, a.shape, dt))
            return
        out_shape, view = self._plan_for(a, b)
        if view is not None:
            b = b.reshape(view)
        self.compute(a, b, self.output(0, out_shape, dt))

    def compute(self, a: np.ndarray, b: np.ndarray, out: np.ndarray) -> None:
        self.ufunc(a, b, out=out)

    def compile(self) -> Any:
        """The ufunc bound to the current arrays (the nets' fast path, see framework.net.program)."""
        if type(self).compute is not Binary.compute:
            return None
        a, b = self.input(0), self.input(1)
        out = self.outputs[0].array
        if a.shape != b.shape:
            out_shape, view = self._plan_for(a, b)
            if view is not None:
                b = b.reshape(view)
        return bind_ufunc(self.ufunc, a, b, out=out)


def register_binary(
    name: str,
    doc: str,
    ufunc: Any,
    *,
    kinds: str = "iuf",
    out_dtype: Any = None,
    inplace: Any = ((0, 0), (1, 0)),
    category: str = "math",
    compute: Any = None,
) -> type:
    attrs = {"__doc__": doc, "ufunc": staticmethod(ufunc), "kinds": kinds, "out_dtype": out_dtype}
    if compute is not None:
        attrs["compute"] = compute
    cls = type(name, (Binary,), attrs)
    return register_op(
        name,
        inputs=2,
        args=BROADCAST_ARGS,
        input_docs=_BINARY_IN,
        output_docs=_BINARY_OUT,
        allow_inplace=set(inplace),
        infer=binary_infer(out_dtype),
        cost=pointwise_cost(1),
        category=category,
    )(cls)


# Appended to the doc of every binary op.
BROADCAST_DOC = (
    " With broadcast=1, B may be a scalar or a contiguous sub-shape of A starting at `axis` "
    "(default: suffix matching); otherwise numpy broadcasting applies."
)
