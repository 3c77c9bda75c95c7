"""Broadcasting rules shared by the elementwise ops and their gradients.

Two modes, as in Caffe2:

- legacy (``broadcast=1``): B is a scalar (one element) or a contiguous
  sub-shape of A starting at ``axis`` (default -1: suffix matching; or
  ``axis_str`` looked up in ``order``). Leading and trailing 1s of B are
  ignored. A is viewed as (pre, n, post) and B as (n, 1).
- numpy (default): multidirectional broadcasting.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.errors import ArgumentError, ShapeError
from framework.ops.schema import INT, STRING, Arg
from framework.ops.validation import expect_in_range

BROADCAST_ARGS = [
    Arg("broadcast", INT, 0, "pass 1 to enable Caffe2's legacy broadcasting of B over A"),
    Arg("axis", INT, -1, "legacy broadcast: first axis of A that B aligns with (-1: suffix matching)"),
    Arg("axis_str", STRING, "", "legacy broadcast: the axis as a letter of `order` (e.g. 'C'); excludes `axis`"),
    Arg("order", STRING, "NCHW", "layout that `axis_str` refers to (NCHW or NHWC)"),
]


def legacy_axis(args: Any, where: str) -> int:
    """The broadcast axis from ``axis`` or ``axis_str`` + ``order``; checks they are used correctly."""
    if not args.broadcast:
        if args.has("axis") and args.axis != -1 or args.axis_str:
            raise ArgumentError(f"{where}: do not give axis or axis_str unless broadcast=1")
        return -1
    return named_axis(args, where)


def named_axis(args: Any, where: str) -> int:
    """``axis``, or the position of the letter ``axis_str`` in ``order`` (ArgumentError if both are given)."""
    if args.axis_str:
        if args.has("axis") and args.axis != -1:
            raise ArgumentError(f"{where}: give axis or axis_str, not both")
        if len(args.axis_str) != 1 or args.axis_str not in args.order:
            raise ArgumentError(f"{where}: axis_str must be one letter of order '{args.order}', got '{args.axis_str}'")
        return args.order.index(args.axis_str)
    return args.axis


def legacy_sizes(a_shape: tuple, b_shape: tuple, axis: int, where: str = "") -> tuple[int, int, int]:
    """(pre, n, post) such that A is (pre, n, post) and B is (n,)."""
    na, nb = len(a_shape), len(b_shape)
    if nb > na:
        raise ShapeError(
            f"{where}: with broadcast=1, B {list(b_shape)} must not have more dimensions than A {list(a_shape)}"
        )
    if axis == -1:
        axis = na - nb
    of = f"A {list(a_shape)} and B {list(b_shape)}"
    expect_in_range(where, "broadcast axis", axis, 0, na - nb, inclusive=True, of=of)
    start = 0
    while start < nb and b_shape[start] == 1:
        start += 1
    end = nb - 1
    while end >= start and b_shape[end] == 1:
        end -= 1
    pre = int(np.prod(a_shape[: axis + start], dtype=np.int64))
    n = 1
    for i in range(start, end + 1):
        if a_shape[i + axis] != b_shape[i]:
            raise ShapeError(
                f"{where}: broadcast dimension mismatch: A {list(a_shape)} and B {list(b_shape)} "
                f"at axis {axis} (A dim {i + axis} is {a_shape[i + axis]}, B dim {i} is {b_shape[i]})"
            )
        n *= b_shape[i]
    post = int(np.prod(a_shape[axis + end + 1 :], dtype=np.int64))
    return pre, n, post


def numpy_shape(a_shape: tuple, b_shape: tuple, where: str = "") -> tuple:
    """The multidirectional broadcast of two shapes, or ShapeError."""
    try:
        return tuple(np.broadcast_shapes(tuple(a_shape), tuple(b_shape)))
    except ValueError:
        raise ShapeError(
            f"{where}: shapes A {list(a_shape)} and B {list(b_shape)} do not broadcast "
            "(numpy rules; for Caffe2's legacy broadcasting pass broadcast=1)"
        ) from None


def output_shape(legacy: bool, a_shape: tuple, b_shape: tuple, axis: int, where: str = "") -> tuple:
    if legacy:
        if int(np.prod(b_shape, dtype=np.int64)) != 1:
            legacy_sizes(a_shape, b_shape, axis, where)
        return tuple(a_shape)
    return numpy_shape(a_shape, b_shape, where)


def b_view_shape(a_shape: tuple, b_shape: tuple, axis: int, where: str = "") -> tuple:
    """Legacy mode: the shape to view B with so that numpy broadcasting over A gives Caffe2's result."""
    if int(np.prod(b_shape, dtype=np.int64)) == 1:
        return ()
    pre, n, post = legacy_sizes(a_shape, b_shape, axis, where)
    # A viewed as (pre, n, post) needs B as (n, 1); expressed on A's own dims:
    # keep B's non-1 core and pad with trailing 1s up to A's rank.
    na = len(a_shape)
    if axis == -1:
        axis = na - len(b_shape)
    return tuple(b_shape) + (1,) * (na - axis - len(b_shape))


def reduce_axes(target: tuple, full: tuple) -> tuple[tuple[int, ...], bool]:
    """Axes of ``full`` to sum over so that the result (reshaped) has shape ``target`` (numpy rules)."""
    lead = len(full) - len(target)
    axes = list(range(lead))
    for i, d in enumerate(target):
        if d == 1 and full[lead + i] != 1:
            axes.append(lead + i)
    return tuple(axes), lead > 0 or bool(axes)


def sum_to_shape(x: np.ndarray, target: tuple, out: np.ndarray) -> None:
    """Sum ``x`` (numpy-broadcast from ``target``) down to ``target``, writing into ``out``."""
    if x.shape == tuple(target):
        if out is not x:
            np.copyto(out, x)
        return
    axes, _ = reduce_axes(tuple(target), x.shape)
    reduced = tuple(d for i, d in enumerate(x.shape) if i not in axes)
    np.sum(x, axis=axes, out=out.reshape(reduced))


def legacy_sum_to_shape(x: np.ndarray, b_shape: tuple, axis: int, out: np.ndarray, where: str = "") -> None:
    """Legacy mode: sum ``x`` (shaped like A) down to B's shape, writing into ``out``."""
    if int(np.prod(b_shape, dtype=np.int64)) == 1:
        np.sum(x, out=out.reshape(()))
        return
    pre, n, post = legacy_sizes(x.shape, b_shape, axis, where)
    np.sum(x.reshape(pre, n, post), axis=(0, 2), out=out.reshape(n))
