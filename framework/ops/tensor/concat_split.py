"""Concat and Split (Caffe2 semantics: ``axis`` or the channel axis of ``order``,
``add_axis``, Concat's split_info output, Split's ``split`` argument or input), with their
gradients (each is the other's)."""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.errors import GradientError, ShapeError, TypeMismatchError
from framework.ops.gradient import gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, INT, INTS, STRING, Arg, TensorSpec
from framework.ops.validation import expect_axis, expect_kind
from framework.proto.args import make_argument
from framework.proto.framework_pb2 import OperatorDef

_INT32 = np.dtype(np.int32)
_ORDER_AXIS = {"NCHW": 1, "NHWC": 3}


def _axis_from_args(args: Any) -> int:
    if args.has("axis"):
        return args.axis
    order = args.order.upper()
    if order not in _ORDER_AXIS:
        raise ValueError(f"unknown 'order' {args.order!r}; NCHW or NHWC")
    return _ORDER_AXIS[order]


class _AxisOp(Operator):
    """Base of Concat and Split: the axis from ``axis`` or ``order``, checked once."""

    def setup(self) -> None:
        if self.args.has("axis") and self.args.has("order"):
            raise self.arg_error("give either 'axis' or 'order' (the channel axis of 4-D images), not both")
        try:
            self._axis = _axis_from_args(self.args)
        except ValueError as e:
            raise self.arg_error(str(e)) from None
        self.prepare()

    def prepare(self) -> None:
        pass

    def _err(self, msg: str) -> ShapeError:
        return ShapeError(f"{self.describe()}: {msg}")

    def canonical(self, ndim: int, what: str) -> int:
        return expect_axis(self.describe(), self._axis, ndim, of=f"{what} of {ndim} dims")


_AXIS_ARGS = [
    Arg("axis", INT, 1, "the axis; default: the channel axis of 'order'"),
    Arg("order", STRING, "NCHW", "NCHW (axis 1) or NHWC (axis 3); only without 'axis'"),
    Arg("add_axis", BOOL, False, "inputs are stacked on a new axis (Concat) / the axis is removed (Split)"),
]


# -- Concat -----------------------------------------------------------------------------------
def _concat_infer(args: Any, ins: list[TensorSpec]) -> list[TensorSpec]:
    info = TensorSpec((len(ins),), _INT32)
    if not all(s.known for s in ins):
        return [TensorSpec(None, ins[0].dtype), info]
    ndim = len(ins[0].shape) + (1 if args.add_axis else 0)
    a = _axis_from_args(args)
    a = a + ndim if a < 0 else a
    if args.add_axis:
        shape = ins[0].shape[:a] + (len(ins),) + ins[0].shape[a:]
    else:
        extent = args.out_channels or sum(s.shape[a] for s in ins)
        shape = ins[0].shape[:a] + (extent,) + ins[0].shape[a + 1 :]
    return [TensorSpec(tuple(shape), ins[0].dtype), info]


@register_op(
    "Concat",
    inputs=(1, float("inf")),
    outputs=(1, 2),
    args=[
        *_AXIS_ARGS,
        Arg("split", INTS, [], "optional: each input's extent on the axis, checked (Split's gradient carries it)"),
        Arg("out_channels", INT, 0, "this framework's: Y's extent on the axis; the inputs fill part of it"),
        Arg("out_channel_offset", INT, 0, "this framework's: where on the axis the inputs start (with out_channels)"),
    ],
    input_docs=[("X1, X2, ...", "tensors equal in every dim but the axis")],
    output_docs=[("concat_result", "the inputs joined along axis"), ("split_info", "int32: each input's size")],
    infer=_concat_infer,
    category="shape",
    aliases=("DepthConcat",),  # Caffe2's backward-compatible name, the same op
)
class Concat(_AxisOp):
    """Join the inputs along ``axis`` (or, with ``add_axis``, stack them on a new axis).
    ``split_info`` records each input's extent on the axis (1 with add_axis), for Split.
    A ``split`` argument (Split's gradient copies its forward arguments, as Caffe2's) must
    match the inputs' extents when given.

    This framework's ``out_channels`` / ``out_channel_offset`` (not with add_axis; no gradient): Y
    has out_channels along the axis, the inputs fill [offset, offset + their total) and the rest of
    Y keeps its values (as ConvFusion's arguments of the same names; the inference pass writes a
    DenseNet block's growing concatenation into one buffer with them)."""

    def prepare(self) -> None:
        self._out_c, self._out_off = self.args.out_channels, self.args.out_channel_offset
        if (self._out_c or self._out_off) and (self.args.add_axis or self._out_c <= 0 or self._out_off < 0):
            raise self.arg_error(
                "out_channels/out_channel_offset need out_channels > 0, offset >= 0 and no add_axis, "
                f"got {self._out_c}, {self._out_off}"
            )
        self._n = len(self.inputs)
        self._with_info = len(self.outputs) > 1
        self._cache: tuple | None = None  # (input shapes+dtypes, axis, output shape, split_info)

    def run(self) -> None:
        xs = [self.input(i) for i in range(self._n)]
        key = tuple((x.shape, x.dtype) for x in xs)
        cache = self._cache
        if cache is None or cache[0] != key:
            cache = self._cache = self._plan(xs, key)
        _, a, shape, info = cache
        out = self.output(0, shape, xs[0].dtype)
        if self.args.add_axis:
            np.stack(xs, axis=a, out=out)
        elif self._out_c:
            part = (slice(None),) * a + (slice(self._out_off, self._out_off + int(info.sum())),)
            np.concatenate(xs, axis=a, out=out[part])
        else:
            np.concatenate(xs, axis=a, out=out)
        if self._with_info:
            np.copyto(self.output(1, info.shape, _INT32), info)

    def _plan(self, xs: list, key: tuple) -> tuple:
        x0 = xs[0]
        add = self.args.add_axis
        a = self.canonical(x0.ndim + (1 if add else 0), "the output")
        for i, x in enumerate(xs[1:], 1):
            same = x.ndim == x0.ndim and all(x.shape[k] == x0.shape[k] for k in range(x0.ndim) if add or k != a)
            if not same:
                raise self._err(
                    f"input {i} '{self.input_names[i]}' {x.shape} does not match input 0 "
                    f"'{self.input_names[0]}' {x0.shape} outside axis {a}",
                )
            if x.dtype != x0.dtype:
                raise TypeMismatchError(
                    f"{self.describe()}: input {i} '{self.input_names[i]}' is {x.dtype}, input 0 is {x0.dtype}"
                )
        if add:
            shape = x0.shape[:a] + (len(xs),) + x0.shape[a:]
        else:
            shape = x0.shape[:a] + (sum(x.shape[a] for x in xs),) + x0.shape[a + 1 :]
        info = np.array([1 if add else x.shape[a] for x in xs], dtype=_INT32)
        if self._out_c:
            if self._out_off + int(info.sum()) > self._out_c:
                raise self._err(
                    f"out_channel_offset {self._out_off} + the inputs' {int(info.sum())} exceed out_channels "
                    f"{self._out_c}"
                )
            shape = shape[:a] + (self._out_c,) + shape[a + 1 :]
        if self.args.split and list(self.args.split) != info.tolist():
            raise self._err(f"'split' {list(self.args.split)} does not match the inputs' extents {info.tolist()}")
        return key, a, shape, info


@gradient("Concat")
def _concat_grad(g):
    if not g.has_go(0):
        return []
    if g.arg("out_channels", 0):
        raise GradientError("Concat with out_channels (an inference-pass rewrite) has no gradient")
    if len(g.def_.output) < 2:
        raise GradientError(f"gradient of Concat needs its split_info output (op outputs {list(g.def_.output)})")
    return [g.op("Split", [g.GO(0), g.O(1)], [g.GI(i) for i in range(len(g.def_.input))])]


# -- Split ---------------------------------------------------------------------------------------
def _split_infer(args: Any, ins: list[TensorSpec]) -> list[TensorSpec]:
    x = ins[0]
    n = args.num_outputs
    if args.num_inputs > 1 or not x.known:
        return [TensorSpec(None, x.dtype)] * n
    a = _axis_from_args(args)
    a = a + len(x.shape) if a < 0 else a
    sizes = args.split or [x.shape[a] // n] * n
    if args.add_axis:
        return [TensorSpec(x.shape[:a] + x.shape[a + 1 :], x.dtype)] * n
    return [TensorSpec(x.shape[:a] + (s,) + x.shape[a + 1 :], x.dtype) for s in sizes]


@register_op(
    "Split",
    inputs=(1, 2),
    outputs=(1, float("inf")),
    args=[*_AXIS_ARGS, Arg("split", INTS, [], "size of each output along the axis (or input 1); default equal")],
    input_docs=[("input", "tensor to split"), ("split", "optional int 1-D tensor of the sizes")],
    output_docs=[("output_0, output_1, ...", "the parts")],
    infer=_split_infer,
    category="shape",
    aliases=("DepthSplit",),  # Caffe2's backward-compatible name, the same op
)
class Split(_AxisOp):
    """Split the input along ``axis`` into parts of sizes ``split`` (argument or input 1;
    default: equal parts). With ``add_axis`` every part has size 1 and the axis is dropped.

    Gradient: Caffe2's, ``Concat(dY_0, dY_1, ...) -> (dX, _dX_dims)`` with the forward
    arguments (axis/order, add_axis, split) copied. Where Caffe2 concatenates only the parts
    that have a gradient (a wrong-sized dX), a ConstantFill of zeros stands for each missing
    part here, so dX is shaped as X; with every part present the two are the same ops."""

    def prepare(self) -> None:
        if self.args.num_inputs == 2 and self.args.split:
            raise self.arg_error("split sizes are given by input 1; do not pass the argument 'split' too")
        if self.args.split and len(self.args.split) != len(self.outputs):
            raise self.arg_error(
                f"'split' {self.args.split} has {len(self.args.split)} sizes for {len(self.outputs)} outputs"
            )

        self._cache: tuple | None = None  # (key, [(index, out shape)])

    def run(self) -> None:
        x = self.input(0)
        key = (x.shape, tuple(self.input(1).reshape(-1).tolist()) if self.args.num_inputs == 2 else None)
        cache = self._cache
        if cache is None or cache[0] != key:
            cache = self._cache = (key, self._plan(x))
        dt = x.dtype
        if self.args.add_axis:  # dropping the size-1 axis is a view
            for k, (index, shape) in enumerate(cache[1]):
                np.copyto(self.output(k, shape, dt), x[index].reshape(shape))
        else:
            for k, (index, shape) in enumerate(cache[1]):
                np.copyto(self.output(k, shape, dt), x[index])

    def _plan(self, x: np.ndarray) -> list:
        a = self.canonical(x.ndim, "the input")
        n = len(self.outputs)
        dim = x.shape[a]
        if self.args.num_inputs == 2:
            expect_kind(self, 1, self.input(1), "int")
            sizes = [int(s) for s in self.input(1).reshape(-1)]
            if len(sizes) != n:
                raise self._err(f"split input '{self.input_names[1]}' has {len(sizes)} sizes for {n} outputs")
        elif self.args.split:
            sizes = self.args.split
        else:
            if dim % n:
                raise self._err(f"input '{self.input_names[0]}' dim {a} ({dim}) is not divisible into {n} outputs")
            sizes = [dim // n] * n
        if sum(sizes) != dim or any(s < 0 for s in sizes):
            raise self._err(f"split sizes {list(sizes)} do not add up to dim {a} of input {x.shape}")
        if self.args.add_axis and any(s != 1 for s in sizes):
            raise self._err(f"with add_axis every split size must be 1, got {list(sizes)}")
        plan = []
        start = 0
        for s in sizes:
            index = (slice(None),) * a + (slice(start, start + s),)
            if self.args.add_axis:
                shape = x.shape[:a] + x.shape[a + 1 :]
            else:
                shape = x.shape[:a] + (s,) + x.shape[a + 1 :]
            plan.append((index, shape))
            start += s
        return plan


@gradient("Split")
def _split_grad(g):
    if not any(g.has_go(i) for i in range(len(g.def_.output))):
        return []
    ops, grads = [], []
    for i, name in enumerate(g.def_.output):
        if g.has_go(i):
            grads.append(g.GO(i))
            continue
        zero = f"_{name}_zero_grad"  # a part without gradient gives (float32) zeros
        fill = OperatorDef(type="ConstantFill", input=[name], output=[zero], is_gradient_op=True)
        fill.device_option.CopyFrom(g.def_.device_option)
        fill.arg.append(make_argument("value", 0.0))
        ops.append(fill)
        grads.append(zero)
    ops.append(g.op("Concat", grads, [g.GI(0), f"_{g.GI(0)}_dims"]))  # Caffe2's: forward args copied
    return ops
