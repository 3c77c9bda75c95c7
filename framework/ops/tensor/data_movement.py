"""Data movement: Slice, Gather, Cast, Copy, Alias, EnsureDense, StopGradient, Print, with
their gradients. Concat and Split are in ``concat_split``."""

from __future__ import annotations

import sys
from typing import Any

import numpy as np

from framework.errors import ArgumentError, GradientError, ShapeError, TypeMismatchError
from framework.memory.paths import safe_file_name
from framework.memory.typemeta import TypeMeta
from framework.ops.gradient import gradient, no_gradient, should_not_do_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, INT, INTS, Arg, TensorSpec, same_as_input
from framework.ops.validation import expect_axis
from framework.proto.framework_pb2 import TensorProto


def _err(op: Operator, msg: str) -> ShapeError:
    return ShapeError(f"{op.describe()}: {msg}")


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
        np.copyto(dx[tuple(slice(s, e) for s, e in b) + (Ellipsis,)], dy)


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
    return [TensorSpec(_gather_shape(tuple(data.shape), tuple(idx.shape), a, args.match_outer), data.dtype)]


def _gather_shape(data: tuple, idx: tuple, a: int, match_outer: bool) -> tuple:
    """Caffe2's calc_output_shape_vector: DATA[:a] + INDICES (INDICES[a:] with match_outer)
    + DATA[a+1:]; an empty indexed dimension gives DATA's own shape."""
    if 0 <= a < len(data) and data[a] == 0:
        return data
    return data[:a] + (idx[a:] if match_outer else idx) + data[a + 1 :]


@register_op(
    "Gather",
    inputs=2,
    args=[
        Arg("axis", INT, 0, "axis of DATA to index"),
        Arg("wrap_indices", BOOL, None, "negative indices count from the end (default: yes on axis 0 only)"),
        Arg("match_outer", BOOL, False, "INDICES share DATA's dims before axis: gather per outer position"),
    ],
    input_docs=[("DATA", "tensor of rank >= 1"), ("INDICES", "int32/int64 indices into DATA's axis")],
    output_docs=[("OUTPUT", "DATA rows at INDICES: shape DATA[:axis] + INDICES + DATA[axis+1:]")],
    infer=_gather_infer,
    category="shape",
)
class Gather(Operator):
    """Take the entries of DATA's ``axis`` (default 0) listed in INDICES. Out-of-range
    indices are an error; negative ones count from the end when ``wrap_indices`` (Caffe2's
    default: on axis 0 only). With ``match_outer`` (axis >= 1) INDICES has DATA's dims before
    ``axis`` and each outer position b reads its own indices: ``OUT[b, i...] = DATA[b, INDICES[b, i...]]``,
    shape DATA[:axis] + INDICES[axis:] + DATA[axis+1:]. An empty indexed dimension gives an
    empty output shaped as DATA (Caffe2's empty-batch rule). The gradient on axis 0 is sparse:
    (INDICES, dY), a GradientSlice; on other axes it is dense, BatchGatherGradient with the axis."""

    def setup(self) -> None:
        self._key = None  # (DATA shape, INDICES shape, INDICES dtype) the plan below was made for

    def run(self) -> None:
        data, idx = self.input(0), self.input(1)
        key = (data.shape, idx.shape, idx.dtype)
        if key != self._key:
            self._plan = self._make_plan(data, idx)
            self._key = key
        a, n, shape, wrap, match_outer = self._plan
        if n == 0:
            self.output(0, shape, data.dtype)
            return
        if idx.size == 1:  # one index (a slice of DATA, as exporters split a tensor): no reductions
            lo = hi = int(idx.item())
        elif idx.size:
            lo, hi = int(idx.min()), int(idx.max())
        if idx.size:
            low_ok = lo >= -n if wrap else lo >= 0
            if not low_ok or hi >= n:
                raise _err(
                    self,
                    f"INDICES '{self.input_names[1]}' hold values in [{lo}, {hi}], out of DATA's dim {a} "
                    f"of size {n} ('{self.input_names[0]}' {data.shape})",
                )
        out = self.output(0, shape, data.dtype)
        if not out.size:
            return
        if not match_outer:
            np.take(data, idx, axis=a, out=out, mode="wrap")  # bounds checked above
            return
        outer = int(np.prod(data.shape[:a], dtype=np.int64))
        d3 = data.reshape(outer, n, -1)
        i2 = idx.reshape(outer, -1) % n
        o3 = out.reshape(outer, i2.shape[1], d3.shape[2])
        np.copyto(o3, d3[np.arange(outer)[:, None], i2])

    def _make_plan(self, data: np.ndarray, idx: np.ndarray) -> tuple:
        """(axis, DATA's size on it, output shape, wrap negatives, match_outer) for these input shapes;
        the errors of a bad INDICES dtype, DATA rank, axis or match_outer layout."""
        if idx.dtype.kind not in "iu":
            raise TypeMismatchError(
                f"{self.describe()}: INDICES '{self.input_names[1]}' must be integers, got {idx.dtype}"
            )
        if data.ndim < 1:
            raise _err(self, f"DATA '{self.input_names[0]}' must have rank >= 1, got a scalar")
        of = f"DATA '{self.input_names[0]}' {list(data.shape)}"
        a = expect_axis(self.describe(), self.args.axis, data.ndim, of=of, error=ArgumentError)
        match_outer = bool(self.args.match_outer)
        if match_outer and (a < 1 or idx.shape[:a] != data.shape[:a]):
            raise _err(
                self,
                f"match_outer needs axis >= 1 and INDICES '{self.input_names[1]}' {idx.shape} with the dims of "
                f"DATA '{self.input_names[0]}' {data.shape} before axis {a}",
            )
        wrap = (a == 0) if self.args.wrap_indices is None else bool(self.args.wrap_indices)
        shape = _gather_shape(data.shape, idx.shape, a, match_outer)
        return a, data.shape[a], shape, wrap, match_outer


@gradient("Gather")
def _gather_grad(g):
    # Caffe2: axis 0 gives a sparse gradient (INDICES, dY); another axis a dense BatchGatherGradient
    axis = g.arg("axis", 0)
    if axis == 0:
        g.set_sparse(0, g.I(1), g.GO(0))
        return []
    extra = {"match_outer": 1} if g.arg("match_outer", False) else {}
    return [g.op("BatchGatherGradient", [g.I(0), g.I(1), g.GO(0)], [g.GI(0)], axis=axis, **extra)]


# -- Cast ---------------------------------------------------------------------------------------------
def _number(v: Any) -> float | int:
    text = v.decode() if isinstance(v, bytes) else str(v)
    try:
        return int(text)
    except ValueError:
        return float(text)


def cast_data_type(value: Any) -> int:
    """A DataType from an int or a name ("FLOAT", "float", "int64"...), as Caffe2's GetCastDataType."""
    if isinstance(value, (bytes, str)):
        try:
            name = value.decode() if isinstance(value, bytes) else value
            return TensorProto.DataType.Value(name.upper())
        except (ValueError, UnicodeDecodeError):
            raise ArgumentError(f"unknown data type name {value!r}") from None
    return int(value)


def _cast_infer(args: Any, ins: list[TensorSpec]) -> list[TensorSpec]:
    return [TensorSpec(ins[0].shape, TypeMeta.from_proto(cast_data_type(args.to)).dtype)]


@register_op(
    "Cast",
    args=[
        Arg(
            "to",
            INT,
            1,
            "TensorProto DataType to cast to (an int, or its name as a string); FLOAT by default",
            dtype_name=True,
        ),
        Arg("from_type", INT, None, "the input's DataType (or its name); needed for the gradient", dtype_name=True),
    ],
    input_docs=[("input", "tensor")],
    output_docs=[("output", "input converted to 'to'")],
    allow_inplace={(0, 0)},
    infer=_cast_infer,
    category="shape",
)
class Cast(Operator):
    """Convert the elements to the type ``to`` (a TensorProto DataType)."""

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
        elif x.dtype.kind == "O" and self._dtype.kind != "O":
            try:
                np.copyto(out, np.array([_number(v) for v in x.reshape(-1)]).reshape(x.shape), casting="unsafe")
            except (ValueError, TypeError, UnicodeDecodeError, OverflowError):
                raise TypeMismatchError(
                    f"{self.describe()}: input 0 ('{self.input_names[0]}') holds strings that are not numbers"
                ) from None
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


def _identity_op(name: str, doc: str) -> None:
    """Register ``name`` as an identity op (a copy unless in place)."""
    register_op(
        name,
        doc=doc,
        input_docs=[("input", "tensor")],
        output_docs=[("output", "the same values")],
        allow_inplace={(0, 0)},
        infer=same_as_input(0),
        category="shape",
    )(type(name, (_Identity,), {}))


_identity_op(
    "EnsureDense",
    "Identity for dense tensors (Caffe2 uses it to turn sparse gradients dense); copies unless in place.",
)
_identity_op("StopGradient", "Identity in the forward pass; no gradient flows back through it.")
_identity_op(
    "NegateGradient",
    "Identity in the forward pass (a copy unless in place); the gradient flowing back is negated "
    "(dX = -dY, Caffe2's gradient maker emits Negative).",
)


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


@gradient("NegateGradient")
def _negate_gradient_grad(g):
    return [g.op("Negative", [g.GO(0)], [g.GI(0)])]


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
            name = safe_file_name(self.input_names[0], ".log")
            self._path = self.workspace.resolve_write_path(name, False, f"{self.describe()}: to_file")

    def run(self) -> None:
        self._count += 1
        if (self._count - 1) % self.args.every_n:
            return
        obj = self.inputs[0].held
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
