"""Optimizer update ops (Caffe2's ``caffe2/sgd``): the base they share. The ops live in
``sgd`` (MomentumSGD, MomentumSGDUpdate, ScatterWeightedSum) and ``adaptive`` (Adagrad,
SparseAdagrad, RowWiseSparseAdagrad, Adam, SparseAdam, RmsProp).

Inputs, outputs, in-place pairs and argument defaults are Caffe2's. The
learning rate is a one-element tensor (the output of ``LearningRate``); its
sign is the caller's business (the optimizer builders pass a negative rate to
the ops that *add* ``lr * step``: Adagrad, Adam, WeightedSum). These ops are
updates, never differentiated (``should_not_do_gradient``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.errors import ShapeError
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import UNKNOWN, TensorSpec
from framework.ops.validation import expect_kind


def like_inputs(*idx: int):
    """Output k is shaped and typed as input ``idx[k]``."""

    def infer(args, ins: list[TensorSpec]) -> list[TensorSpec]:
        return [ins[i] if i < len(ins) else UNKNOWN for i in idx][: args.num_outputs]

    infer.__doc__ = "outputs shaped as inputs " + ", ".join(map(str, idx))
    return infer


class UpdateOp(Operator):
    """Shared checks and scratch buffers of the update ops."""

    def scratch(self, k: int, shape: tuple, dtype: np.dtype) -> np.ndarray:
        """A reusable temporary buffer (allocated once per shape/dtype)."""
        bufs = self.__dict__.setdefault("_scratch", {})
        buf = bufs.get(k)
        if buf is None or buf.shape != shape or buf.dtype != dtype:
            buf = bufs[k] = np.empty(shape, dtype)
        return buf

    def same_shape(self, i: int, j: int) -> None:
        a, b = self.input(i), self.input(j)
        if a.shape != b.shape:
            raise ShapeError(
                f"{self.describe()}: input {j} ('{self.input_names[j]}') has shape {list(b.shape)}, expected "
                f"the shape of input {i} ('{self.input_names[i]}') {list(a.shape)}"
            )

    def scalar(self, i: int) -> np.ndarray:
        """Input ``i`` as a 0-d view; it must hold exactly one element."""
        x = self.input(i)
        expect_kind(self, i, x, "numeric")
        if x.size != 1:
            raise ShapeError(
                f"{self.describe()}: input {i} ('{self.input_names[i]}') must hold one element "
                f"(a learning rate or counter), got shape {list(x.shape)}"
            )
        return x.reshape(())

    def rows(self, param: int, indices: int, grad: int) -> tuple[np.ndarray, np.ndarray]:
        """Indices (flattened) and the gradient as [n, row...], checked against the parameter."""
        p, idx, g = self.input(param), self.input(indices), self.input(grad)
        if p.ndim < 1:
            raise ShapeError(f"{self.describe()}: '{self.input_names[param]}' must have rows, got a scalar")
        expect_kind(self, param, p, "float")
        expect_kind(self, indices, idx, "int")
        expect_kind(self, grad, g, "float")
        idx = idx.reshape(-1)
        if g.size != idx.size * int(np.prod(p.shape[1:], dtype=np.int64)):
            raise ShapeError(
                f"{self.describe()}: gradient '{self.input_names[grad]}' has shape {list(g.shape)}, expected "
                f"{[idx.size] + list(p.shape[1:])} ({idx.size} indices, rows of '{self.input_names[param]}')"
            )
        if idx.size and (idx.min() < 0 or idx.max() >= p.shape[0]):
            raise ShapeError(
                f"{self.describe()}: indices '{self.input_names[indices]}' out of range [0, {p.shape[0]}) "
                f"of '{self.input_names[param]}'"
            )
        return idx, g.reshape((idx.size,) + p.shape[1:])

    def out_like(self, k: int, i: int) -> np.ndarray:
        x = self.input(i)
        return self.output(k, x.shape, x.dtype)


def update_op(name: str, like: tuple[int, ...], **kw: Any) -> Any:
    """register_op for an update op whose outputs are shaped as inputs ``like``. ``snapshot_inplace=False``:
    the op checks every input before it writes anything (so it cannot fail midway) and needs no copy."""
    # an update writes the parameter and its state in place and can fail midway (a bad lr or iteration
    # found while computing): the base restores them (snapshot_inplace), so a failed step changes nothing;
    # that costs a copy of every in-place output per step, which ops validating up front opt out of
    kw.setdefault("snapshot_inplace", True)
    return register_op(name, infer=like_inputs(*like), category="optimizer", **kw)


def copy_through(op: UpdateOp, pairs) -> list[np.ndarray]:
    """Outputs that are not in place start as copies of their inputs (sparse ops touch rows)."""
    outs = []
    for k, i in pairs:
        x = op.input(i)
        y = op.output(k, x.shape, x.dtype)
        if y is not x and not np.shares_memory(y, x):
            np.copyto(y, x)
        outs.append(y)
    return outs
