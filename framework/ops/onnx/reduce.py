"""ONNX reductions with no Caffe2 counterpart of the same semantics (ONNX<Op>): ReduceProd,
ReduceLogSum, ReduceLogSumExp, ReduceMax/ReduceMin on every type (bool too) and on empty sets,
ArgMax/ArgMin with ``select_last_index``, Hardmax and LpNormalization along an axis.

Empty reductions give ONNX's identities: Prod 1, LogSum and LogSumExp -inf, Max the type's
lowest value (-inf, the integer minimum, False), Min its highest. Low-precision floats
(float16, bfloat16) compute in float32 and round back. Inference ops: no gradient.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from framework.errors import ArgumentError, ShapeError, TypeMismatchError
from framework.memory.allocator import check_elements
from framework.ops.gradient import no_gradient
from framework.ops.onnx.elementwise import element_kind
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import INT, INTS, UNKNOWN, Arg, TensorSpec, pointwise_cost


def _axes(args: Any, rank: int) -> tuple[int, ...]:
    return tuple(range(rank)) if not args.axes else tuple(sorted({int(a) % max(rank, 1) for a in args.axes}))


def _reduced_shape(shape: tuple, axes: tuple, keep: bool) -> tuple:
    return tuple((1 if i in axes else d) for i, d in enumerate(shape) if keep or i not in axes)


def _extreme(dtype: np.dtype, lowest: bool) -> Any:
    if dtype.kind == "b":
        return not lowest
    if element_kind(dtype) == "float":
        return -np.inf if lowest else np.inf
    info = np.iinfo(dtype)
    return info.min if lowest else info.max


def _logsumexp(x: np.ndarray, axes: tuple) -> np.ndarray:
    if x.size == 0:
        return np.log(np.sum(np.exp(x), axis=axes, keepdims=True))
    m = np.max(np.where(np.isfinite(x), x, -np.inf), axis=axes, keepdims=True)
    m = np.where(np.isfinite(m), m, 0).astype(x.dtype)
    return np.log(np.sum(np.exp(x - m), axis=axes, keepdims=True)) + m


# name: (fn(x, axes) -> reduced with keepdims, accepted kinds, doc)
_REDUCE: dict[str, tuple] = {
    "ReduceProd": (lambda x, ax: np.prod(x, axis=ax, keepdims=True), ("float", "int", "uint"), "the product"),
    "ReduceLogSum": (lambda x, ax: np.log(np.sum(x, axis=ax, keepdims=True)), ("float",), "log of the sum"),
    "ReduceLogSumExp": (_logsumexp, ("float",), "log of the sum of exponentials (max-shifted)"),
    "ReduceMax": (
        lambda x, ax: np.max(x, axis=ax, keepdims=True, initial=_extreme(x.dtype, True)),
        ("float", "int", "uint", "bool"),
        "the maximum",
    ),
    "ReduceMin": (
        lambda x, ax: np.min(x, axis=ax, keepdims=True, initial=_extreme(x.dtype, False)),
        ("float", "int", "uint", "bool"),
        "the minimum",
    ),
}


def _check_kind(op: Operator, x: np.ndarray, kinds: tuple) -> bool:
    """TypeMismatchError unless X's elements are of ``kinds``; True for low-precision floats."""
    kind = element_kind(x.dtype)
    if kind not in kinds:
        raise TypeMismatchError(
            f"{op.describe()}: input 0 ('{op.input_names[0]}') has dtype {x.dtype}, "
            f"expected {' or '.join(kinds)} elements"
        )
    return kind == "float" and (x.dtype.itemsize < 4 or x.dtype.kind != "f")


def _infer_reduce(args: Any, ins: list) -> list:
    if ins[0].shape is None:
        return [TensorSpec(None, ins[0].dtype)]
    shape = tuple(ins[0].shape)
    return [TensorSpec(_reduced_shape(shape, _axes(args, len(shape)), bool(args.keepdims)), ins[0].dtype)]


def _reduce_class(name: str, spec: tuple) -> type:
    fn, kinds, what = spec

    class Op(Operator):
        __doc__ = (
            f"ONNX {name}: {what} of X over ``axes`` (all when empty), keeping them as 1s with "
            f"``keepdims``. Accepts {', '.join(kinds)} elements; empty reductions give ONNX's identity."
        )

        def run(self) -> None:
            x = self.input(0)
            low = _check_kind(self, x, kinds)
            axes = _axes(self.args, x.ndim)
            with np.errstate(all="ignore"):
                y = fn(x.astype(np.float32) if low else x, axes)
            shape = _reduced_shape(x.shape, axes, bool(self.args.keepdims))
            out = self.output(0, shape, x.dtype)
            out[...] = y.reshape(shape)

    Op.__name__ = Op.__qualname__ = f"ONNX{name}"
    return Op


_AXES_ARGS = [
    Arg("axes", INTS, [], "axes to reduce (negative from the end); empty: all"),
    Arg("keepdims", INT, 1, "1: keep the reduced axes as 1s"),
]
for _name, _spec in _REDUCE.items():
    register_op(
        f"ONNX{_name}",
        args=_AXES_ARGS,
        input_docs=[("data", f"input ({', '.join(_spec[1])} elements)")],
        output_docs=[("reduced", "X's type")],
        infer=_infer_reduce,
        cost=pointwise_cost(2),
        category="onnx",
        input_types="any",
    )(_reduce_class(_name, _spec))
    no_gradient(f"ONNX{_name}")


def _infer_arg(args: Any, ins: list) -> list:
    if ins[0].shape is None:
        return [TensorSpec(None, np.dtype(np.int64))]
    shape = tuple(ins[0].shape)
    axis = int(args.axis) % max(len(shape), 1)
    return [TensorSpec(_reduced_shape(shape, (axis,), bool(args.keepdims)), np.dtype(np.int64))]


class _ArgExtreme(Operator):
    pick: Callable = np.argmax

    def run(self) -> None:
        x = self.input(0)
        low = _check_kind(self, x, ("float", "int", "uint", "bool"))
        if x.ndim == 0 or not -x.ndim <= self.args.axis < x.ndim:
            raise ArgumentError(
                f"{self.describe()}: axis {self.args.axis} is outside input 0 ('{self.input_names[0]}') "
                f"of rank {x.ndim}"
            )
        axis = self.args.axis % x.ndim
        if x.shape[axis] == 0:
            raise ShapeError(f"{self.describe()}: input '{self.input_names[0]}' is empty along axis {axis}")
        v = x.astype(np.float32) if low else x
        if self.args.select_last_index:
            idx = x.shape[axis] - 1 - self.pick(np.flip(v, axis=axis), axis=axis)
        else:
            idx = self.pick(v, axis=axis)
        shape = _reduced_shape(x.shape, (axis,), bool(self.args.keepdims))
        out = self.output(0, shape, np.int64)
        out[...] = np.asarray(idx).reshape(shape)


for _name, _fn in (("ArgMax", np.argmax), ("ArgMin", np.argmin)):
    _which = "largest" if _name == "ArgMax" else "smallest"
    register_op(
        f"ONNX{_name}",
        args=[
            Arg("axis", INT, 0, "the axis to search (negative from the end)"),
            Arg("keepdims", INT, 1, "1: keep the axis as 1"),
            Arg("select_last_index", INT, 0, "1: the last index of ties, else the first"),
        ],
        input_docs=[("data", "numbers or bools")],
        output_docs=[("reduced", "int64 indices")],
        infer=_infer_arg,
        cost=pointwise_cost(1),
        category="onnx",
        input_types="any",
    )(
        type(
            f"ONNX{_name}",
            (_ArgExtreme,),
            {
                "pick": staticmethod(_fn),
                "__doc__": f"ONNX {_name}: the index of the {_which} element along ``axis`` (int64), "
                "the first among ties or the last with ``select_last_index``.",
            },
        )
    )
    no_gradient(f"ONNX{_name}")


def _same(args: Any, ins: list) -> list:
    return [TensorSpec(ins[0].shape, ins[0].dtype) if ins[0].dtype is not None else UNKNOWN]


class _AlongAxis(Operator):
    def _axis(self, x: np.ndarray) -> int:
        if not -max(x.ndim, 1) <= self.args.axis < max(x.ndim, 1):
            raise ArgumentError(
                f"{self.describe()}: axis {self.args.axis} is outside input 0 ('{self.input_names[0]}') "
                f"of rank {x.ndim}"
            )
        return self.args.axis % max(x.ndim, 1)


@register_op(
    "ONNXHardmax",
    args=[Arg("axis", INT, -1, "the axis of the one-hot (negative from the end)")],
    input_docs=[("input", "floats")],
    output_docs=[("output", "X's shape and type: 1 at the first maximum along axis, else 0")],
    infer=_same,
    cost=pointwise_cost(2),
    category="onnx",
    input_types="any",
    ranks={0: (1, None)},
)
class ONNXHardmax(_AlongAxis):
    """ONNX Hardmax (opset 13): 1 where X holds the first maximum along ``axis``, 0 elsewhere."""

    def run(self) -> None:
        x = self.input(0)
        _check_kind(self, x, ("float",))
        axis = self._axis(x)
        y = np.zeros(x.shape, x.dtype)
        if x.size:
            idx = np.expand_dims(np.argmax(x.astype(np.float32) if x.dtype.itemsize < 4 else x, axis=axis), axis)
            np.put_along_axis(y, idx, 1, axis=axis)
        out = self.output(0, x.shape, x.dtype)
        out[...] = y


@register_op(
    "ONNXLpNormalization",
    args=[Arg("axis", INT, -1, "the axis normalized"), Arg("p", INT, 2, "the norm: 1 or 2", choices=(1, 2))],
    input_docs=[("input", "floats")],
    output_docs=[("output", "X / ||X||_p along axis (0 where the norm is 0)")],
    infer=_same,
    cost=pointwise_cost(4),
    category="onnx",
    input_types="any",
    ranks={0: (1, None)},
)
class ONNXLpNormalization(_AlongAxis):
    """ONNX LpNormalization: X divided by its L1 or L2 norm along ``axis``; where the norm is 0
    the output is 0 (ONNX's 0/0 = 0)."""

    def run(self) -> None:
        x = self.input(0)
        low = _check_kind(self, x, ("float",))
        axis = self._axis(x)
        check_elements(x.shape, 8, f"{self.describe()} scratch")
        v = x.astype(np.float32) if low else x
        with np.errstate(all="ignore"):
            if self.args.p == 1:
                norm = np.sum(np.abs(v), axis=axis, keepdims=True)
            else:
                norm = np.sqrt(np.sum(v * v, axis=axis, keepdims=True))
            y = np.where(norm == 0, 0, v / norm)
        out = self.output(0, x.shape, x.dtype)
        out[...] = y


no_gradient("ONNXHardmax")
no_gradient("ONNXLpNormalization")
