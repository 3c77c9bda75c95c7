"""Data movement: Concat, Split, Slice, Gather, Cast, Copy, Alias, EnsureDense,
StopGradient, Print, with their gradients (imported by ``shape_ops``)."""

from __future__ import annotations

import os
import sys
from typing import Any

import numpy as np

from framework.errors import GradientError, ShapeError, TypeMismatchError
from framework.memory.typemeta import TypeMeta
from framework.ops.gradient import gradient, no_gradient, should_not_do_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, INT, INTS, STRING, Arg, TensorSpec, same_as_input
from framework.proto.args import make_argument
from framework.proto.framework_pb2 import OperatorDef, TensorProto

_INT32 = np.dtype(np.int32)
_ORDER_AXIS = {"NCHW": 1, "NHWC": 3}


def _err(op: Operator, msg: str) -> ShapeError:
    return ShapeError(f"{op.describe()}: {msg}")


def _axis_from_args(args: Any) -> int:
    if args.has("axis"):
        return args.axis
    order = args.order.upper()
    if order not in _ORDER_AXIS:
        raise ValueError(f"unknown 'order' {args.order!r}; NCHW or NHWC")
    return _ORDER_AXIS[order]


class _AxisOp(Operator):
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

    def canonical(self, ndim: int, what: str) -> int:
        a = self._axis
        if not -ndim <= a < ndim:
            raise _err(self, f"axis {a} is out of range for {what} of {ndim} dims")
        return a + ndim if a < 0 else a


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
        shape = ins[0].shape[:a] + (sum(s.shape[a] for s in ins),) + ins[0].shape[a + 1 :]
    return [TensorSpec(tuple(shape), ins[0].dtype), info]


@register_op(
    "Concat",
    inputs=(1, float("inf")),
    outputs=(1, 2),
    args=_AXIS_ARGS,
    input_docs=[("X1, X2, ...", "tensors equal in every dim but the axis")],
    output_docs=[("concat_result", "the inputs joined along axis"), ("split_info", "int32: each input's size")],
    infer=_concat_infer,
    category="shape",
)
class Concat(_AxisOp):
    """Join the inputs along ``axis`` (or, with ``add_axis``, stack them on a new axis).
    ``split_info`` records each input's extent on the axis (1 with add_axis), for Split."""

    def prepare(self) -> None:
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
                raise _err(
                    self,
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
        return key, a, shape, info


@gradient("Concat")
def _concat_grad(g):
    if not g.has_go(0):
        return []
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
)
class Split(_AxisOp):
    """Split the input along ``axis`` into parts of sizes ``split`` (argument or input 1;
    default: equal parts). With ``add_axis`` every part has size 1 and the axis is dropped."""

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
            sizes = [int(s) for s in self.input(1).reshape(-1)]
            if len(sizes) != n:
                raise _err(self, f"split input '{self.input_names[1]}' has {len(sizes)} sizes for {n} outputs")
        elif self.args.split:
            sizes = self.args.split
        else:
            if dim % n:
                raise _err(self, f"input '{self.input_names[0]}' dim {a} ({dim}) is not divisible into {n} outputs")
            sizes = [dim // n] * n
        if sum(sizes) != dim or any(s < 0 for s in sizes):
            raise _err(self, f"split sizes {list(sizes)} do not add up to dim {a} of input {x.shape}")
        if self.args.add_axis and any(s != 1 for s in sizes):
            raise _err(self, f"with add_axis every split size must be 1, got {list(sizes)}")
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
    ops.append(g.op("Concat", grads, [g.GI(0), f"_{g.GI(0)}_dims"], split=None))
    return ops


# -- Slice ----------------------------------------------------------------------------------------
def slice_bounds(shape: tuple, starts: list, ends: list) -> list[tuple[int, int]]:
    """Caffe2's Slice rule per dim: negative s/e count from dim + 1 (so -1 means the end); clamped."""
    if len(starts) != len(ends):
        raise ValueError(f"starts {starts} and ends {ends} differ in length")
    if len(starts) > len(shape):
        raise ValueError(f"starts {starts} have more entries than the data has dims {shape}")
    out = []
    for k, d in enumerate(shape):
        if k >= len(starts):
            out.append((0, d))
            continue
        if d == 0:
            out.append((0, 0))
            continue
        s, e = int(starts[k]), int(ends[k])
        s = d + 1 + s if s < 0 else s
        e = d + 1 + e if e < 0 else e
        s, e = min(s, d), min(e, d)
        if s < 0 or e < 0 or e < s:
            raise ValueError(f"dim {k} of size {d}: start {starts[k]} / end {ends[k]} give an empty or reversed range")
        out.append((s, e))
    return out


class _SliceBase(Operator):
    def bounds(self, shape: tuple) -> list[tuple[int, int]]:
        if self.args.num_inputs >= 3 + self._extra:
            starts = self.input(1).reshape(-1).tolist()
            ends = self.input(2).reshape(-1).tolist()
        else:
            starts, ends = self.args.starts, self.args.ends
        try:
            return slice_bounds(shape, starts, ends)
        except ValueError as e:
            raise _err(self, f"data '{self.input_names[0]}' {shape}: {e}") from None


def _slice_infer(args: Any, ins: list[TensorSpec]) -> list[TensorSpec]:
    x = ins[0]
    if args.num_inputs == 3 or not x.known:
        return [TensorSpec(None, x.dtype)]
    return [TensorSpec(tuple(e - s for s, e in slice_bounds(x.shape, args.starts, args.ends)), x.dtype)]


_SLICE_ARGS = [
    Arg("starts", INTS, [], "start per dim (or input 1); negative counts from dim + 1"),
    Arg("ends", INTS, [], "end per dim (or input 2); -1 means the end of the dim"),
]


@register_op(
    "Slice",
    inputs={1, 3},
    args=_SLICE_ARGS,
    input_docs=[("data", "tensor"), ("starts", "optional int 1-D"), ("ends", "optional int 1-D")],
    output_docs=[("output", "data[starts:ends]")],
    infer=_slice_infer,
    category="shape",
)
class Slice(_SliceBase):
    """Slice ``data[starts[k]:ends[k]]`` on the leading dims (the rest are kept whole).
    Negative values count from dim + 1, so an end of -1 means the end of the dim."""

    _extra = 0

    def run(self) -> None:
        x = self.input(0)
        b = self.bounds(x.shape)
        part = x[tuple(slice(s, e) for s, e in b)]
        np.copyto(self.output(0, part.shape, x.dtype), part)


@register_op(
    "SliceGradient",
    inputs={2, 4},
    args=_SLICE_ARGS,
    input_docs=[
        ("data", "Slice's input"),
        ("starts", "optional (4-input form): Slice's starts input"),
        ("ends", "optional (4-input form): Slice's ends input"),
        ("dY", "gradient of the slice (the last input: index 1 or 3)"),
    ],
    output_docs=[("dX", "zeros shaped as data, dY in the sliced window")],
    infer=lambda args, ins: [TensorSpec(ins[0].shape, ins[-1].dtype)],
    category="shape",
    private=True,
)
class SliceGradient(_SliceBase):
    """dX = zeros like data with dY written into the sliced window."""

    _extra = 1

    def run(self) -> None:
        x, dy = self.input(0), self.input(len(self.inputs) - 1)
        b = self.bounds(x.shape)
        window = tuple(e - s for s, e in b)
        if dy.shape != window:
            raise _err(self, f"dY {dy.shape} does not match the slice window {window}")
        dx = self.output(0, x.shape, dy.dtype)
        dx.fill(0)
        np.copyto(dx[tuple(slice(s, e) for s, e in b)], dy)


@gradient("Slice")
def _slice_grad(g):
    ins = [g.I(0), g.I(1), g.I(2), g.GO(0)] if len(g.def_.input) == 3 else [g.I(0), g.GO(0)]
    return [g.op("SliceGradient", ins, [g.GI(0)])]


# -- Gather --------------------------------------------------------------------------------------------
def _gather_infer(args: Any, ins: list[TensorSpec]) -> list[TensorSpec]:
    data, idx = ins[0], ins[1]
    if data.shape is None or idx.shape is None:
        return [TensorSpec(None, data.dtype)]
    a = args.axis + len(data.shape) if args.axis < 0 else args.axis
    return [TensorSpec(tuple(data.shape[:a]) + tuple(idx.shape) + tuple(data.shape[a + 1 :]), data.dtype)]


@register_op(
    "Gather",
    inputs=2,
    args=[
        Arg("axis", INT, 0, "axis of DATA to index"),
        Arg("wrap_indices", BOOL, False, "negative indices count from the end"),
    ],
    input_docs=[("DATA", "tensor of rank >= 1"), ("INDICES", "int32/int64 indices into DATA's axis")],
    output_docs=[("OUTPUT", "DATA rows at INDICES: shape DATA[:axis] + INDICES + DATA[axis+1:]")],
    infer=_gather_infer,
    category="shape",
)
class Gather(Operator):
    """Take the entries of DATA's ``axis`` (default 0) listed in INDICES. Out-of-range
    indices are an error. The gradient is sparse: (INDICES, dY), a GradientSlice."""

    def run(self) -> None:
        data, idx = self.input(0), self.input(1)
        if idx.dtype.kind not in "iu":
            raise TypeMismatchError(
                f"{self.describe()}: INDICES '{self.input_names[1]}' must be integers, got {idx.dtype}"
            )
        if data.ndim < 1:
            raise _err(self, f"DATA '{self.input_names[0]}' must have rank >= 1, got a scalar")
        a = self.args.axis + data.ndim if self.args.axis < 0 else self.args.axis
        n = data.shape[a]
        if idx.size:
            lo, hi = int(idx.min()), int(idx.max())
            low_ok = lo >= -n if self.args.wrap_indices else lo >= 0
            if not low_ok or hi >= n:
                raise _err(
                    self,
                    f"INDICES '{self.input_names[1]}' hold values in [{lo}, {hi}], out of DATA's dim {a} "
                    f"of size {n} ('{self.input_names[0]}' {data.shape})",
                )
        shape = data.shape[:a] + idx.shape + data.shape[a + 1 :]
        out = self.output(0, shape, data.dtype)
        if out.size:
            np.take(data, idx, axis=a, out=out, mode="wrap")  # bounds checked above


@gradient("Gather")
def _gather_grad(g):
    if g.arg("axis", 0) != 0:
        raise GradientError("gradient of Gather: only axis 0 has a (sparse) gradient")
    g.set_sparse(0, g.I(1), g.GO(0))
    return []


# -- Cast ---------------------------------------------------------------------------------------------
def cast_data_type(value: Any) -> int:
    """A DataType from an int or a name ("FLOAT", "float", "int64"...), as Caffe2's GetCastDataType."""
    if isinstance(value, (bytes, str)):
        name = value.decode() if isinstance(value, bytes) else value
        try:
            return TensorProto.DataType.Value(name.upper())
        except ValueError:
            raise ValueError(f"unknown data type name {name!r}") from None
    return int(value)


def _cast_infer(args: Any, ins: list[TensorSpec]) -> list[TensorSpec]:
    return [TensorSpec(ins[0].shape, TypeMeta.from_proto(cast_data_type(args.to)).dtype)]


@register_op(
    "Cast",
    args=[
        Arg("to", INT, 1, "TensorProto DataType to cast to (an int, or its name as a string); FLOAT by default"),
        Arg("from_type", INT, None, "the input's DataType; needed for the gradient"),
    ],
    input_docs=[("input", "tensor")],
    output_docs=[("output", "input converted to 'to'")],
    allow_inplace={(0, 0)},
    infer=_cast_infer,
    category="shape",
)
class Cast(Operator):
    """Convert the elements to the type ``to`` (a TensorProto DataType)."""

    def __init__(self, op_def: Any, ws: Any, index: int | None = None) -> None:
        # Caffe2 accepts type names for 'to' / 'from_type'; turn them into ints before parsing.
        if any(a.name in ("to", "from_type") and a.HasField("s") for a in op_def.arg):
            fixed = OperatorDef()
            fixed.CopyFrom(op_def)
            for a in fixed.arg:
                if a.name in ("to", "from_type") and a.HasField("s"):
                    a.i = cast_data_type(a.s)
            op_def = fixed
        super().__init__(op_def, ws, index)

    def setup(self) -> None:
        try:
            self._dtype = TypeMeta.from_proto(self.args.to).dtype
        except Exception as e:
            raise self.arg_error(f"'to' {self.args.to} is not a tensor element type: {e}") from None

    def run(self) -> None:
        x = self.input(0)
        if self.inputs[0] is self.outputs[0]:
            if x.dtype == self._dtype:
                return
            x = x.copy()
        out = self.output(0, x.shape, self._dtype)
        if self._dtype.kind == "O" and x.dtype.kind != "O":
            out.reshape(-1)[:] = [str(v).encode() for v in x.reshape(-1).tolist()]
        else:
            np.copyto(out, x, casting="unsafe")


@gradient("Cast", copy_arguments=False)
def _cast_grad(g):
    if g.arg("from_type") is None:
        raise GradientError("argument 'from_type' of type int or string is required to get the gradient of Cast")
    return [
        g.op("Cast", [g.GO(0)], [g.GI(0)], to=cast_data_type(g.arg("from_type")), from_type=cast_data_type(g.arg("to")))
    ]


# -- Copy, Alias, EnsureDense, StopGradient -------------------------------------------------------------
@register_op(
    "Copy",
    input_docs=[("input", "tensor")],
    output_docs=[("output", "a copy in a separate buffer")],
    infer=same_as_input(0),
    aliases=("CopyCPUToGPU", "CopyGPUToCPU", "EnsureCPUOutput", "CopyFromCPUInput"),
    category="shape",
)
class Copy(Operator):
    """Copy the input into the output's own buffer. The device copies (CopyCPUToGPU,
    CopyGPUToCPU, EnsureCPUOutput) are the same copy here: everything runs on the CPU."""

    def run(self) -> None:
        x = self.input(0)
        if self.inputs[0] is not self.outputs[0]:
            np.copyto(self.output(0, x.shape, x.dtype), x)


@gradient("Copy")
def _copy_grad(g):
    return [g.op("Copy", [g.GO(0)], [g.GI(0)])]


@register_op(
    "Alias",
    input_docs=[("input", "tensor")],
    output_docs=[("output", "a tensor sharing the input's storage")],
    infer=same_as_input(0),
    category="shape",
)
class Alias(Operator):
    """Make the output share the input's storage (no copy): writes to one show in the other."""

    def run(self) -> None:
        src = self.input_tensor(0)
        if self.inputs[0] is self.outputs[0]:
            return
        out = self.output_tensor(0)
        if out.storage is not src.storage or out.dims != src.dims:
            out.resize(src.dims)
            out.share_data(src)


class _Identity(Operator):
    def run(self) -> None:
        if self.inputs[0] is not self.outputs[0]:
            x = self.input(0)
            np.copyto(self.output(0, x.shape, x.dtype), x)


register_op(
    "EnsureDense",
    doc="Identity for dense tensors (Caffe2 uses it to turn sparse gradients dense); copies unless in place.",
    input_docs=[("input", "tensor")],
    output_docs=[("output", "the same values")],
    allow_inplace={(0, 0)},
    infer=same_as_input(0),
    category="shape",
)(type("EnsureDense", (_Identity,), {}))
register_op(
    "StopGradient",
    doc="Identity in the forward pass; no gradient flows back through it.",
    input_docs=[("input", "tensor")],
    output_docs=[("output", "the same values")],
    allow_inplace={(0, 0)},
    infer=same_as_input(0),
    category="shape",
)(type("StopGradient", (_Identity,), {}))


@gradient("Alias")
def _alias_grad(g):
    g.set_dense(0, g.GO(0))
    return []


@gradient("EnsureDense")
def _ensure_dense_grad(g):
    go = g.g_output[0]
    if isinstance(go, tuple):
        g.set_sparse(0, go[0], go[1])
    else:
        g.set_dense(0, g.GO(0))
    return []


no_gradient("StopGradient")


# -- Print --------------------------------------------------------------------------------------------
@register_op(
    "Print",
    outputs=0,
    args=[
        Arg("to_file", BOOL, False, "append to '<blob>.log' in the workspace root folder instead of stdout"),
        Arg("limit", INT, 0, "print at most this many elements (0: up to 1000)"),
        Arg("every_n", INT, 1, "print only every n-th run"),
    ],
    input_docs=[("tensor", "the tensor (or string blob) to print")],
    output_docs=[],
    infer=lambda args, ins: [],
    category="utility",
)
class Print(Operator):
    """Print a blob's type, dims and values (``Tensor X of type float. Dims: (2,3,): 1, 2, ...``)."""

    def setup(self) -> None:
        if self.args.every_n < 1:
            raise self.arg_error(f"'every_n' must be >= 1, got {self.args.every_n}")
        self._count = 0
        self._limit = self.args.limit if self.args.limit > 0 else 1000
        self._path = None
        if self.args.to_file:
            self._path = os.path.join(self.workspace.root_folder, self.input_names[0] + ".log")

    def run(self) -> None:
        self._count += 1
        if (self._count - 1) % self.args.every_n:
            return
        obj = self.inputs[0]._obj
        name = self.input_names[0]
        if isinstance(obj, (bytes, str)):
            line = f"{name}: {obj!r}"
        else:
            x = self.input(0)
            meta = TypeMeta.of(x.dtype).name
            dims = "".join(f"{d}," for d in x.shape)
            vals = x.reshape(-1)[: self._limit]
            body = ",".join(v.decode(errors="replace") if isinstance(v, bytes) else str(v) for v in vals.tolist())
            line = f"Tensor {name} of type {meta}. Dims: ({dims}): {body}"
        if self._path is None:
            sys.stdout.write(line + "\n")
            sys.stdout.flush()
        else:
            with open(self._path, "a", encoding="utf-8") as f:
                f.write(line + "\n")


should_not_do_gradient("Print")
