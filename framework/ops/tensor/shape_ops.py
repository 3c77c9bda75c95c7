"""Shape ops: Reshape, Flatten, FlattenToVec, ResizeLike, ExpandDims, Squeeze,
Transpose, Tile, Shape, Size, with their gradients.

Outputs are separate blobs: ops write into them with ``np.copyto`` from a view
of the input (no intermediate copy). When an op runs in place (output blob ==
input blob) and only the shape changes, the tensor is reshaped without
touching its data. Concat and Split live in ``concat_split``; Slice, Gather,
Cast, Copy and the identity ops in ``data_movement``.
"""

from __future__ import annotations

import math
from typing import Any, Sequence

import numpy as np

from framework.errors import ShapeError
from framework.ops.gradient import gradient, should_not_do_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import INT, INTS, Arg, TensorSpec
from framework.ops.validation import expect_axis, int_scalar

_INT64 = np.dtype(np.int64)


def move_reshaped(op: Operator, i: int, o: int, shape: tuple) -> None:
    """Output ``o`` = input ``i`` with dims ``shape``: a reshape in place, else one copy."""
    if op.inputs[i] is op.outputs[o]:
        t = op.input_tensor(i)
        if t.dims != shape:
            t.reshape(shape)
        t.version += 1
        return
    x = op.input(i)
    np.copyto(op.output(o, shape, x.dtype), x.reshape(shape))


def _shape_error(op: Operator, msg: str) -> ShapeError:
    return ShapeError(f"{op.describe()}: {msg}")


# -- Reshape ------------------------------------------------------------------------------
def reshape_dims(old: Sequence[int], requested: Sequence[int]) -> tuple:
    """Caffe2's Reshape rule: 0 copies the input dim at that position (a 0 past the input's rank stays
    0), one -1 is inferred. A tensor with elements cannot become empty; an empty one keeps its 0s as 0
    (Caffe2 copies dims only for a non-empty input, so Reshape's gradient of a [0] -> [1, 0] reshape
    gives back [0]) and infers -1 as 0. Departure: an empty input reshaped to a non-empty shape is an
    error (Caffe2 does not check it and hands out a tensor over no data)."""
    new = list(requested)
    total = math.prod(old)
    unknown = -1
    for k, d in enumerate(new):
        if d == -1:
            if unknown != -1:
                raise ValueError(f"shape {list(requested)} has more than one missing (-1) dimension")
            unknown = k
        elif d == 0:
            if k < len(old) and total != 0:
                new[k] = old[k]
        elif d < 0:
            raise ValueError(f"shape {list(requested)} has a negative dimension {d}")
    known = math.prod(d for k, d in enumerate(new) if k != unknown)
    if total == 0:
        if unknown >= 0:
            new[unknown] = 0
        elif known != 0:
            raise ValueError(f"shape {list(requested)} does not agree with the empty input {tuple(old)}")
    elif known == 0:
        raise ValueError(f"shape {list(requested)}: cannot reshape a non-empty input {tuple(old)} to zero size")
    elif unknown >= 0:
        if total % known:
            raise ValueError(f"shape {list(requested)} does not agree with the input {tuple(old)} ({total} elements)")
        new[unknown] = total // known
    elif known != total:
        raise ValueError(f"shape {list(requested)} does not agree with the input {tuple(old)} ({total} != {known})")
    return tuple(int(d) for d in new)


def _reshape_infer(args: Any, ins: list[TensorSpec]) -> list[TensorSpec]:
    x = ins[0]
    old = TensorSpec((len(x.shape),) if x.shape is not None else None, _INT64)
    if args.num_inputs == 2 or not x.known:
        return [TensorSpec(None, x.dtype), old]
    return [TensorSpec(reshape_dims(x.shape, args.shape), x.dtype), old]


@register_op(
    "Reshape",
    inputs=(1, 2),
    outputs=2,
    args=[Arg("shape", INTS, [], "new shape: 0 copies the input dim, one -1 is inferred")],
    input_docs=[("data", "tensor to reshape"), ("new_shape", "optional 1-D int tensor: the new shape")],
    output_docs=[("reshaped", "the data with the new shape"), ("old_shape", "int64 1-D: the input's shape")],
    allow_inplace={(0, 0)},
    infer=_reshape_infer,
    category="shape",
)
class Reshape(Operator):
    """Reshape the input to ``shape`` (argument, or input 1), keeping the data.
    A 0 copies the input dimension at that position; a single -1 is inferred.
    Also outputs the old shape (int64), which the gradient uses."""

    def setup(self) -> None:
        if self.args.num_inputs == 2:
            if self.args.has("shape"):
                raise self.arg_error("new shape is given by input 1; do not pass the argument 'shape' too")
        elif not self.args.has("shape"):
            raise self.arg_error("argument 'shape' is missing")
        elif self.args.shape.count(-1) > 1:
            raise self.arg_error(f"argument 'shape' {self.args.shape} has more than one missing (-1) dimension")
        self._requested = tuple(self.args.shape)
        self._from_input = self.args.num_inputs == 2
        self._cache: tuple | None = None  # (input shape, new shape, old shape as int64 array)

    def run(self) -> None:
        x = self.input(0)
        old = x.shape
        cache = self._cache
        if cache is None or cache[0] != old or self._from_input:
            cache = self._cache = self._plan(old)
        np.copyto(self.output(1, cache[2].shape, _INT64), cache[2])
        move_reshaped(self, 0, 0, cache[1])

    def _plan(self, old: tuple) -> tuple:
        requested = self._requested
        if self._from_input:
            s = self.input(1)
            if s.ndim != 1 or s.dtype.kind not in "iu":
                raise _shape_error(self, f"new shape '{self.input_names[1]}' must be a 1-D int tensor, got {s.shape}")
            requested = tuple(int(d) for d in s)
        try:
            new = reshape_dims(old, requested)
        except ValueError as e:
            raise _shape_error(self, f"input '{self.input_names[0]}' {old}: {e}") from None
        return old, new, np.array(old, dtype=_INT64).reshape(len(old))


@gradient("Reshape", copy_arguments=False)
def _reshape_grad(g):
    return [g.op("Reshape", [g.GO(0), g.O(1)], [g.GI(0), f"_{g.GI(0)}_dims"])]


# -- Flatten, FlattenToVec, ResizeLike ---------------------------------------------------
def _flatten_infer(args: Any, ins: list[TensorSpec]) -> list[TensorSpec]:
    x = ins[0]
    if not x.known:
        return [TensorSpec(None, x.dtype)]
    return [TensorSpec((math.prod(x.shape[: args.axis]), math.prod(x.shape[args.axis :])), x.dtype)]


@register_op(
    "Flatten",
    args=[Arg("axis", INT, 1, "dims before axis form the outer dim, the rest the inner one")],
    input_docs=[("input", "tensor of rank >= axis")],
    output_docs=[("output", "2-D tensor (prod(dims[:axis]), prod(dims[axis:]))")],
    infer=_flatten_infer,
    category="shape",
)
class Flatten(Operator):
    """Flatten to 2-D at ``axis``: (d0*...*d(axis-1), d(axis)*...*dn)."""

    def setup(self) -> None:
        if self.args.axis < 0:
            raise self.arg_error(f"'axis' must be >= 0, got {self.args.axis}")

    def run(self) -> None:
        x = self.input(0)
        a = self.args.axis
        if x.ndim < a:
            raise _shape_error(self, f"the rank of '{self.input_names[0]}' {x.shape} must be >= axis {a}")
        move_reshaped(self, 0, 0, (math.prod(x.shape[:a]), math.prod(x.shape[a:])))


@register_op(
    "FlattenToVec",
    input_docs=[("input", "tensor of rank >= 1")],
    output_docs=[("output", "1-D tensor of all the elements")],
    infer=lambda args, ins: [TensorSpec((math.prod(ins[0].shape),) if ins[0].known else None, ins[0].dtype)],
    category="shape",
)
class FlattenToVec(Operator):
    """Flatten to a 1-D vector."""

    def run(self) -> None:
        x = self.input(0)
        if x.ndim < 1:
            raise _shape_error(self, f"the rank of '{self.input_names[0]}' must be >= 1, got a scalar")
        move_reshaped(self, 0, 0, (x.size,))


@register_op(
    "ResizeLike",
    inputs=2,
    input_docs=[("data", "the values"), ("like", "tensor whose shape the output takes")],
    output_docs=[("output", "data with the shape of like (same element count)")],
    allow_inplace={(0, 0)},
    infer=lambda args, ins: [TensorSpec(ins[1].shape, ins[0].dtype)],
    category="shape",
)
class ResizeLike(Operator):
    """Output = input 0's data with input 1's shape (the element counts must match)."""

    def run(self) -> None:
        x, like = self.input(0), self.input(1)
        if x.size != like.size:
            raise _shape_error(
                self, f"'{self.input_names[0]}' {x.shape} and '{self.input_names[1]}' {like.shape} differ in size"
            )
        move_reshaped(self, 0, 0, like.shape)


@gradient("Flatten", copy_arguments=False)
def _flatten_grad(g):
    return [g.op("ResizeLike", [g.GO(0), g.I(0)], [g.GI(0)])]


gradient("FlattenToVec")(_flatten_grad)
gradient("ResizeLike", copy_arguments=False)(_flatten_grad)


# -- ExpandDims / Squeeze -------------------------------------------------------------------
def _expand(shape: tuple, dims: Sequence[int]) -> tuple:
    out = list(shape)
    for d in dims:
        out.insert(d, 1)
    return tuple(out)


def _squeeze(shape: tuple, dims: Sequence[int]) -> tuple:
    drop = set(dims)
    return tuple(d for k, d in enumerate(shape) if k not in drop)


class _DimsOp(Operator):
    def setup(self) -> None:
        dims = sorted(set(self.args.dims))
        if not dims:
            raise self.arg_error("argument 'dims' must be provided")
        if dims[0] < 0:
            raise self.arg_error(f"dimension ids must be non-negative, got {self.args.dims}")
        self._dims = dims


def _dims_infer(fn: Any) -> Any:
    def infer(args: Any, ins: list[TensorSpec]) -> list[TensorSpec]:
        x = ins[0]
        if x.shape is None:
            return [TensorSpec(None, x.dtype)]
        return [TensorSpec(fn(tuple(x.shape), sorted(set(args.dims))), x.dtype)]

    return infer


@register_op(
    "ExpandDims",
    args=[Arg("dims", INTS, [], "positions (in the output) of the new size-1 dims")],
    input_docs=[("data", "input tensor")],
    output_docs=[("expanded", "data with size-1 dims inserted")],
    allow_inplace={(0, 0)},
    infer=_dims_infer(_expand),
    category="shape",
)
class ExpandDims(_DimsOp):
    """Insert size-1 dimensions at the positions ``dims`` (sorted, applied in order)."""

    def run(self) -> None:
        x = self.input(0)
        if x.ndim + len(self._dims) < self._dims[-1] + 1:
            raise _shape_error(
                self,
                f"input '{self.input_names[0]}' {x.shape} needs at least "
                f"{1 + self._dims[-1] - len(self._dims)} dimensions given dims {self._dims}",
            )
        move_reshaped(self, 0, 0, _expand(x.shape, self._dims))


@register_op(
    "Squeeze",
    args=[Arg("dims", INTS, [], "the size-1 dims to remove")],
    input_docs=[("data", "input tensor")],
    output_docs=[("squeezed", "data without the dims")],
    allow_inplace={(0, 0)},
    infer=_dims_infer(_squeeze),
    category="shape",
)
class Squeeze(_DimsOp):
    """Remove the size-1 dimensions listed in ``dims``."""

    def run(self) -> None:
        x = self.input(0)
        if x.ndim <= self._dims[-1]:
            raise _shape_error(
                self, f"input '{self.input_names[0]}' {x.shape} needs at least {self._dims[-1] + 1} dimensions"
            )
        for d in self._dims:
            if x.shape[d] != 1:
                raise _shape_error(
                    self, f"dimension {d} of input '{self.input_names[0]}' {x.shape} must be 1, not {x.shape[d]}"
                )
        move_reshaped(self, 0, 0, _squeeze(x.shape, self._dims))


@gradient("ExpandDims")
def _expand_grad(g):
    return [g.op("Squeeze", [g.GO(0)], [g.GI(0)])]


@gradient("Squeeze")
def _squeeze_grad(g):
    return [g.op("ExpandDims", [g.GO(0)], [g.GI(0)])]


# -- Transpose ----------------------------------------------------------------------------------
def _perm(axes: Sequence[int], ndim: int) -> tuple:
    return tuple(axes) if axes else tuple(range(ndim - 1, -1, -1))


def _transpose_infer(args: Any, ins: list[TensorSpec]) -> list[TensorSpec]:
    x = ins[0]
    if x.shape is None:
        return [TensorSpec(None, x.dtype)]
    return [TensorSpec(tuple(x.shape[a] for a in _perm(args.axes, len(x.shape))), x.dtype)]


@register_op(
    "Transpose",
    args=[Arg("axes", INTS, [], "permutation of the dims; default reverses them")],
    input_docs=[("data", "input tensor")],
    output_docs=[("transposed", "output dim k is input dim axes[k]")],
    infer=_transpose_infer,
    category="shape",
)
class Transpose(Operator):
    """Permute the dimensions: output dim k is input dim ``axes[k]`` (default: reversed)."""

    def setup(self) -> None:
        axes = self.args.axes
        if axes and sorted(axes) != list(range(len(axes))):
            raise self.arg_error(f"'axes' {axes} must be a permutation of 0..{len(axes) - 1}")

    def run(self) -> None:
        x = self.input(0)
        axes = _perm(self.args.axes, x.ndim)
        if len(axes) != x.ndim:
            raise _shape_error(self, f"'axes' {list(axes)} do not match input '{self.input_names[0]}' {x.shape}")
        xt = x.transpose(axes)
        np.copyto(self.output(0, xt.shape, x.dtype), xt)


@gradient("Transpose", copy_arguments=False)
def _transpose_grad(g):
    axes = g.arg("axes")
    inverse = [int(k) for k in np.argsort(axes)] if axes else None
    return [g.op("Transpose", [g.GO(0)], [g.GI(0)], axes=inverse)]


# -- Tile ---------------------------------------------------------------------------------------
def _canon(op: Operator, axis: int, ndim: int, what: str) -> int:
    return expect_axis(op.describe(), axis, ndim, of=f"{what} of {ndim} dims")


def _tile_infer(args: Any, ins: list[TensorSpec]) -> list[TensorSpec]:
    x = ins[0]
    if args.num_inputs > 1 or x.shape is None:
        return [TensorSpec(None, x.dtype)]
    shape = list(x.shape)
    a = args.axis + len(shape) if args.axis < 0 else args.axis
    shape[a] = None if shape[a] is None else shape[a] * args.tiles
    return [TensorSpec(tuple(shape), x.dtype)]


class _TileBase(Operator):
    def tiles_axis(self, ndim: int, start: int) -> tuple[int, int]:
        tiles, axis = self.args.tiles, self.args.axis
        if self.args.num_inputs > start:
            tiles = int_scalar(self, start, "the number of tiles")
            axis = int_scalar(self, start + 1, "the axis")
        if tiles < 0:
            raise _shape_error(self, f"'tiles' must be >= 0, got {tiles}")
        return tiles, _canon(self, axis, ndim, "the input")


_TILE_ARGS = [
    Arg("tiles", INT, 1, "number of copies (or input 1)"),
    Arg("axis", INT, 0, "axis to tile along (or input 2)"),
]


@register_op(
    "Tile",
    inputs={1, 3},
    args=_TILE_ARGS,
    input_docs=[("data", "input tensor"), ("tiles", "optional int scalar"), ("axis", "optional int scalar")],
    output_docs=[("tiled", "data repeated tiles times along axis")],
    infer=_tile_infer,
    category="shape",
)
class Tile(_TileBase):
    """Repeat the whole input ``tiles`` times along ``axis`` (as np.tile on that axis)."""

    def run(self) -> None:
        x = self.input(0)
        tiles, axis = self.tiles_axis(x.ndim, 1)
        outer, inner = math.prod(x.shape[:axis]), math.prod(x.shape[axis:])
        shape = x.shape[:axis] + (x.shape[axis] * tiles,) + x.shape[axis + 1 :]
        out = self.output(0, shape, x.dtype)
        if out.size:
            np.copyto(out.reshape(outer, tiles, inner), x.reshape(outer, 1, inner))


@register_op(
    "TileGradient",
    inputs={1, 3},
    args=_TILE_ARGS,
    input_docs=[("dY", "gradient of Tile's output"), ("tiles", "optional"), ("axis", "optional")],
    output_docs=[("dX", "dY summed over the tiles")],
    infer=lambda args, ins: [
        TensorSpec(None, ins[0].dtype) if args.num_inputs > 1 or ins[0].shape is None else _untile(args, ins[0])
    ],
    category="shape",
    private=True,
)
class TileGradient(_TileBase):
    """dX = sum of the ``tiles`` blocks of dY along ``axis``."""

    def run(self) -> None:
        dy = self.input(0)
        tiles, axis = self.tiles_axis(dy.ndim, 1)
        if tiles == 0 or dy.shape[axis] % tiles:
            raise _shape_error(self, f"dY {dy.shape} is not {tiles} tiles along axis {axis}")
        n = dy.shape[axis] // tiles
        shape = dy.shape[:axis] + (n,) + dy.shape[axis + 1 :]
        dx = self.output(0, shape, dy.dtype)
        outer, inner = math.prod(dy.shape[:axis]), n * math.prod(dy.shape[axis + 1 :])
        np.sum(dy.reshape(outer, tiles, inner), axis=1, out=dx.reshape(outer, inner))


def _untile(args: Any, spec: TensorSpec) -> TensorSpec:
    shape = list(spec.shape)
    a = args.axis + len(shape) if args.axis < 0 else args.axis
    shape[a] = None if shape[a] is None else shape[a] // max(args.tiles, 1)
    return TensorSpec(tuple(shape), spec.dtype)


@gradient("Tile")
def _tile_grad(g):
    ins = [g.GO(0)] if len(g.def_.input) == 1 else [g.GO(0), g.I(1), g.I(2)]
    return [g.op("TileGradient", ins, [g.GI(0)])]


# -- Shape, Size --------------------------------------------------------------------------------
@register_op(
    "Shape",
    args=[Arg("axes", INTS, [], "optional: only these dims")],
    input_docs=[("data", "any tensor")],
    output_docs=[("shape", "int64 1-D tensor of the dims")],
    infer=lambda args, ins: [
        TensorSpec((len(args.axes) if args.axes else len(ins[0].shape),) if ins[0].shape is not None else None, _INT64)
    ],
    category="shape",
)
class Shape(Operator):
    """The input's dimensions as an int64 1-D tensor (``axes`` selects some)."""

    def run(self) -> None:
        x = self.input(0)
        dims = [x.shape[_canon(self, a, x.ndim, "the input")] for a in self.args.axes] if self.args.axes else x.shape
        out = self.output(0, (len(dims),), _INT64)
        out[...] = dims


@register_op(
    "Size",
    input_docs=[("data", "any tensor")],
    output_docs=[("size", "int64 scalar: the number of elements")],
    infer=lambda args, ins: [TensorSpec((), _INT64)],
    category="shape",
)
class Size(Operator):
    """The input's number of elements as an int64 scalar."""

    def run(self) -> None:
        self.output(0, (), _INT64)[...] = self.input(0).size


should_not_do_gradient("Shape", "Size")
