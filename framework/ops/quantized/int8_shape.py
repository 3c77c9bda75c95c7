"""Caffe2's int8 data-movement ops: they move uint8 codes and keep the input's quantization, so ``Y_scale`` and
``Y_zero_point`` must equal the (first) input's, as Caffe2 checks. Int8Flatten, Int8Reshape, Int8Transpose,
Int8Slice, Int8Concat, Int8ChannelShuffle (NHWC).

Caffe2: ``caffe2/operators/quantized/int8_{flatten,reshape,transpose,slice,concat,channel_shuffle}_op.h``; the
shape rules are the float ops' (``reshape_dims``, ``slice_bounds`` here). None has a gradient.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from framework.errors import ShapeError
from framework.ops.gradient import no_gradient
from framework.ops.operator import Operator
from framework.ops.quantized.int8_common import U8, Y_ARGS, int8_input, int8_output, same_params
from framework.ops.registry import register_op
from framework.ops.schema import INT, INTS, STRING, Arg, TensorSpec

_INT64 = np.dtype(np.int64)
_CAT = "quantized"


# The float ops' shape rules, imported on first use: registering these ops loads no tensor family.
def slice_bounds(*args: Any) -> Any:
    from framework.ops.tensor.data_movement import slice_bounds as bounds

    return bounds(*args)


def reshape_dims(*args: Any) -> Any:
    from framework.ops.tensor.shape_ops import reshape_dims as dims

    return dims(*args)


def _err(op: Operator, msg: str) -> ShapeError:
    return ShapeError(f"{op.describe()}: {msg}")


class _Move(Operator):
    """Reads input 0 (an Int8TensorCPU whose quantization Y_scale/Y_zero_point must repeat)."""

    def source(self) -> tuple[Any, np.ndarray]:
        q = int8_input(self, 0)
        same_params(self, q, self.args.Y_scale, self.args.Y_zero_point)
        return q, q.t.array

    def emit(self, q: Any, values: np.ndarray) -> None:
        np.copyto(int8_output(self, 0, values.shape, q.scale, q.zero_point), values)


def _flatten_infer(args, ins):
    x = ins[0]
    if not x.known or len(x.shape) < args.axis:
        return [TensorSpec(None, U8)]
    return [TensorSpec((math.prod(x.shape[: args.axis]), math.prod(x.shape[args.axis :])), U8)]


@register_op(
    "Int8Flatten",
    args=[Arg("axis", INT, 1, "input dims before axis form the outer dim, the rest the inner one", low=0), *Y_ARGS],
    input_docs=[("input", "an Int8TensorCPU of rank >= axis")],
    output_docs=[("output", "2-D Int8TensorCPU (prod(dims[:axis]), prod(dims[axis:]))")],
    infer=_flatten_infer,
    category=_CAT,
)
class Int8Flatten(_Move):
    """Flatten to 2-D at ``axis``: (d0*...*d(axis-1), d(axis)*...*dn), codes and quantization unchanged.
    No gradient."""

    def run(self) -> None:
        q, x = self.source()
        a = self.args.axis
        if x.ndim < a:
            raise _err(self, f"the rank of '{self.input_names[0]}' {list(x.shape)} must be >= axis {a}")
        self.emit(q, x.reshape(math.prod(x.shape[:a]), math.prod(x.shape[a:])))


def _reshape_infer(args, ins):
    x = ins[0]
    old = TensorSpec((len(x.shape),) if x.shape is not None else None, _INT64)
    if args.num_inputs == 2 or not x.known:
        return [TensorSpec(None, U8), old]
    try:
        return [TensorSpec(reshape_dims(x.shape, args.shape), U8), old]
    except ValueError:
        return [TensorSpec(None, U8), old]


@register_op(
    "Int8Reshape",
    inputs=(1, 2),
    outputs=2,
    args=[Arg("shape", INTS, [], "new shape: 0 copies the input dim, one -1 is inferred"), *Y_ARGS],
    allow_inplace={(0, 0)},
    input_docs=[("data", "an Int8TensorCPU"), ("new_shape", "optional 1-D int tensor: the new shape")],
    output_docs=[("reshaped", "the Int8TensorCPU with the new shape"), ("old_shape", "int64 1-D: the input's shape")],
    infer=_reshape_infer,
    category=_CAT,
)
class Int8Reshape(_Move):
    """Reshape as Caffe2's Reshape (``shape`` argument or input 1; 0 copies the input dim, one -1 is inferred),
    keeping codes and quantization; output 1 is the old shape (an int64 Tensor). No gradient."""

    def setup(self) -> None:
        if self.args.num_inputs == 2:
            if self.args.has("shape"):
                raise self.arg_error("new shape is given by input 1; do not pass the argument 'shape' too")
        elif not self.args.has("shape"):
            raise self.arg_error("Argument `shape` is missing.")

    def run(self) -> None:
        q, x = self.source()
        requested = self.args.shape
        if self.args.num_inputs == 2:
            s = self.input(1)
            if s.ndim != 1 or s.dtype not in (np.int32, np.int64):
                raise _err(self, f"new shape '{self.input_names[1]}' must be a 1-D int32/int64 tensor, got {s.dtype}")
            requested = [int(d) for d in s]
        try:
            new = reshape_dims(x.shape, requested)
        except ValueError as e:
            raise _err(self, f"input '{self.input_names[0]}' {list(x.shape)}: {e}") from None
        old = np.array(x.shape, _INT64).reshape(x.ndim)
        np.copyto(self.output(1, old.shape, _INT64), old)
        self.emit(q, x.reshape(new))


def _perm(axes, ndim):
    return tuple(axes) if axes else tuple(range(ndim - 1, -1, -1))


def _transpose_infer(args, ins):
    x = ins[0]
    if x.shape is None or (args.axes and len(args.axes) != len(x.shape)):
        return [TensorSpec(None, U8)]
    return [TensorSpec(tuple(x.shape[a] for a in _perm(args.axes, len(x.shape))), U8)]


@register_op(
    "Int8Transpose",
    args=[Arg("axes", INTS, [], "permutation of the dims; reverses them by default"), *Y_ARGS],
    input_docs=[("X", "an Int8TensorCPU")],
    output_docs=[("Y", "transposed: output dim k is input dim axes[k]")],
    infer=_transpose_infer,
    category=_CAT,
)
class Int8Transpose(_Move):
    """Permute the dimensions (output dim k is input dim ``axes[k]``; default reversed), codes and quantization
    unchanged. No gradient."""

    def setup(self) -> None:
        axes = self.args.axes
        if axes and sorted(axes) != list(range(len(axes))):
            raise self.arg_error(f"'axes' {axes} must be a permutation of 0..{len(axes) - 1}")

    def run(self) -> None:
        q, x = self.source()
        axes = _perm(self.args.axes, x.ndim)
        if len(axes) != x.ndim:
            raise _err(self, f"'axes' {list(axes)} do not match input '{self.input_names[0]}' {list(x.shape)}")
        self.emit(q, x.transpose(axes))


def _slice_spec(args, ndim):
    """(starts, ends) from the arguments: starts/ends, or Caffe2's dim/start_idx/end_idx form."""
    if args.has("dim") and args.has("start_idx") and args.has("end_idx"):
        starts, ends = [0] * ndim, [-1] * ndim
        if not 0 <= args.dim < ndim:
            raise ValueError(f"dim {args.dim} is not a dimension of a rank-{ndim} input")
        starts[args.dim], ends[args.dim] = args.start_idx, args.end_idx
        return starts, ends
    return list(args.starts), list(args.ends)


def _slice_infer(args, ins):
    x = ins[0]
    if args.num_inputs == 3 or not x.known:
        return [TensorSpec(None, U8)]
    try:
        starts, ends = _slice_spec(args, len(x.shape))
        return [TensorSpec(tuple(e - s for s, e in slice_bounds(x.shape, starts, ends)), U8)]
    except ValueError:
        return [TensorSpec(None, U8)]


@register_op(
    "Int8Slice",
    inputs={1, 3},
    args=[
        Arg("starts", INTS, [], "start per dim (or input 1); negative counts from dim + 1"),
        Arg("ends", INTS, [], "end per dim (or input 2); -1 means the end of the dim"),
        Arg("dim", INT, 0, "with start_idx and end_idx: slice this dim only"),
        Arg("start_idx", INT, 0, "start on dim (with dim, end_idx)"),
        Arg("end_idx", INT, -1, "end on dim (with dim, start_idx)"),
        *Y_ARGS,
    ],
    input_docs=[
        ("data", "Int8TensorCPU to slice"),
        ("starts", "optional 1-D int32/int64 tensor: start per dim"),
        ("ends", "optional 1-D int32/int64 tensor: end per dim"),
    ],
    output_docs=[("output", "the sliced Int8TensorCPU")],
    infer=_slice_infer,
    category=_CAT,
)
class Int8Slice(_Move):
    """``data[starts[k]:ends[k]]`` per leading dim as Caffe2's Slice (negative values count from dim + 1, so an
    end of -1 is the end of the dim), from the ``starts``/``ends`` arguments, inputs 1 and 2, or Caffe2's
    ``dim``/``start_idx``/``end_idx`` arguments (one dim). Codes and quantization unchanged. No gradient."""

    def run(self) -> None:
        q, x = self.source()
        try:
            if self.args.num_inputs == 3:
                bounds = []
                for k in (1, 2):
                    v = self.input(k)
                    if v.ndim != 1 or v.dtype not in (np.int32, np.int64):
                        raise ValueError(f"'{self.input_names[k]}' must be a 1-D int32/int64 tensor, got {v.dtype}")
                    bounds.append(v.tolist())
                starts, ends = bounds
            else:
                starts, ends = _slice_spec(self.args, x.ndim)
            b = slice_bounds(x.shape, starts, ends)
        except ValueError as e:
            raise _err(self, f"data '{self.input_names[0]}' {list(x.shape)}: {e}") from None
        self.emit(q, x[tuple(slice(s, e) for s, e in b)])


def _concat_axis(args) -> int:
    if args.has("axis"):
        return args.axis
    return {"NHWC": 3, "NCHW": 1}.get(args.order, 0)


def _concat_infer(args, ins):
    if not ins or any(not x.known for x in ins):
        return [TensorSpec(None, U8), TensorSpec((len(ins),), np.dtype(np.int32))][: args.num_outputs]
    a = _concat_axis(args)
    shape = list(ins[0].shape)
    if not 0 <= a < len(shape):
        return [TensorSpec(None, U8), TensorSpec((len(ins),), np.dtype(np.int32))][: args.num_outputs]
    shape[a] = sum(x.shape[a] for x in ins)
    return [TensorSpec(tuple(shape), U8), TensorSpec((len(ins),), np.dtype(np.int32))][: args.num_outputs]


@register_op(
    "Int8Concat",
    inputs=(1, float("inf")),
    outputs=(1, 2),
    args=[
        Arg("axis", INT, 0, "axis to concatenate on (default: 3 with order NHWC, 1 with NCHW, else 0)"),
        Arg("order", STRING, "", "NHWC or NCHW picks the default axis (and NHWC needs 4-D inputs)"),
        Arg("add_axis", INT, 0, "accepted and ignored, as Caffe2's Int8Concat does"),
        *Y_ARGS,
    ],
    input_docs=[("X", "Int8TensorCPU inputs (one or more), the same shape but on axis")],
    output_docs=[("concat_result", "concatenated Int8TensorCPU"), ("split_info", "int32: each input's size on axis")],
    infer=_concat_infer,
    category=_CAT,
)
class Int8Concat(_Move):
    """Concatenate the inputs' uint8 codes along ``axis``; the result takes the first input's quantization
    (``Y_scale``/``Y_zero_point`` must equal it). As Caffe2, the other inputs' scales and zero points are not
    checked (their codes are copied as they are) and ``add_axis`` is ignored. Departure: the optional
    ``split_info`` output is written (int32 sizes on axis, as the float Concat); Caffe2's op leaves it unset.
    No gradient."""

    def run(self) -> None:
        q, x0 = self.source()
        a = _concat_axis(self.args)
        order = self.args.order
        if order in ("NHWC", "NCHW") and not 0 <= a < 4:
            raise self.arg_error(f"axis {a} must lie in [0, 4) with order {order}")
        if order == "NHWC" and x0.ndim != 4:
            raise _err(self, f"order NHWC needs 4-D inputs, '{self.input_names[0]}' is {list(x0.shape)}")
        if not 0 <= a < x0.ndim:
            raise _err(self, f"axis {a} is not a dimension of '{self.input_names[0]}' {list(x0.shape)}")
        parts = [x0] + [int8_input(self, i).t.array for i in range(1, len(self.inputs))]
        for i, x in enumerate(parts[1:], 1):
            if x.ndim != x0.ndim or any(x.shape[j] != x0.shape[j] for j in range(x0.ndim) if j != a):
                raise _err(
                    self, f"input {i} ('{self.input_names[i]}') {list(x.shape)} does not match input 0 "
                    f"{list(x0.shape)} off axis {a}"
                )  # fmt: skip
        shape = list(x0.shape)
        shape[a] = sum(x.shape[a] for x in parts)
        info = np.array([x.shape[a] for x in parts], np.int32)
        if len(self.outputs) > 1:
            np.copyto(self.output(1, info.shape, np.int32), info)
        np.concatenate(parts, axis=a, out=int8_output(self, 0, shape, q.scale, q.zero_point))


@register_op(
    "Int8ChannelShuffle",
    args=[
        Arg("group", INT, 1, "number of channel groups (divides C)", low=1),
        Arg("order", STRING, "NCHW", "storage order: only NHWC is supported (as Caffe2)"),
        *Y_ARGS,
    ],
    input_docs=[("X", "4-D NHWC Int8TensorCPU")],
    output_docs=[("Y", "channel-shuffled Int8TensorCPU, same shape")],
    infer=lambda args, ins: [TensorSpec(ins[0].shape, U8)],
    category=_CAT,
)
class Int8ChannelShuffle(_Move):
    """ShuffleNet's channel shuffle on NHWC codes (QNNPACK's channel_shuffle_nc_x8): channels viewed as
    (group, C / group) are transposed to (C / group, group). ``order`` must be NHWC (Caffe2 refuses NCHW, its
    default, so nets pass order NHWC). Codes and quantization unchanged. No gradient."""

    def setup(self) -> None:
        if self.args.order != "NHWC":
            raise self.arg_error(f"Int8ChannelShuffleOp only supports NHWC order, got {self.args.order}")

    def run(self) -> None:
        q, x = self.source()
        g = self.args.group
        if x.ndim != 4 or x.shape[3] % g:
            raise _err(self, f"'{self.input_names[0]}' {list(x.shape)} must be 4-D NHWC with C divisible by {g}")
        c = x.shape[3]
        shuffled = x.reshape(*x.shape[:3], g, c // g).swapaxes(3, 4).reshape(x.shape)
        self.emit(q, shuffled)


no_gradient("Int8Flatten", "Int8Reshape", "Int8Transpose", "Int8Slice", "Int8Concat", "Int8ChannelShuffle")
