"""Training utilities: Iter (the iteration counter) and LearningRate (the
learning-rate schedule), as Caffe2's sgd ops. Neither has a gradient.

LearningRate's policies are in ``lr_policies``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.ops.gradient import no_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import FLOAT, REQUIRED, STRING, Arg, TensorSpec
from framework.ops.training.lr_policies import POLICIES, POLICY_ARGS, lr_functor

_INT64 = np.dtype(np.int64)
_F32 = np.dtype(np.float32)
_INT64_MAX = np.iinfo(np.int64).max


def _iter_infer(args: Any, ins: list[TensorSpec]) -> list[TensorSpec]:
    shape = ins[0].shape if ins and ins[0].shape is not None else (1,)
    return [TensorSpec(tuple(shape), _INT64)]


@register_op(
    "Iter",
    inputs=(0, 1),
    input_docs=[("iter", "int64 counter holding one element (optional: legacy form without input)")],
    output_docs=[("iter", "the same blob, incremented by one")],
    enforce_inplace={(0, 0)},
    infer=_iter_infer,
    category="training",
)
class Iter(Operator):
    """Add one to an int64 counter in place. The legacy form without input
    creates the counter (shape [1]) at 0 the first time it runs, then adds one. A one-element counter of
    another integer type becomes int64 with its value (Caffe2 re-types it too, leaving the value undefined)."""

    def setup(self) -> None:
        self._arr: np.ndarray | None = None
        self._counter: np.ndarray | None = None
        self._legacy = self.args.num_inputs == 0

    def run(self) -> None:
        t = self.output_tensor(0)
        counter = self._counter
        if counter is None or t.array is not self._arr:
            counter = self._bind(t)
        value = counter[0]
        if value < 0:
            raise ShapeError(f"{self.describe()}: previous iteration number {value} is negative")
        if value == _INT64_MAX:
            raise ShapeError(f"{self.describe()}: the iteration counter would overflow")
        counter[0] = value + 1
        t.version += 1

    def _bind(self, t: Any) -> np.ndarray:
        name = self.output_names[0]
        if not t.is_allocated:
            if not self._legacy:
                raise ShapeError(f"{self.describe()}: counter '{name}' has no data; initialise it (int64, shape [1])")
            t.resize((1,))
            t.mutable_data(_INT64)[...] = 0
        arr = t.data()
        if arr.dtype != _INT64 and arr.dtype.kind in "iu" and arr.size == 1:
            # Caffe2 takes the counter with mutable_data<int64_t>(), which re-types a counter made with another
            # integer type (its value is then undefined there); here it becomes int64 keeping its value
            value = int(arr.reshape(-1)[0])
            shape = arr.shape
            t.resize(shape)
            arr = t.mutable_data(_INT64)
            arr[...] = value
        if arr.dtype != _INT64:
            raise TypeMismatchError(f"{self.describe()}: counter '{name}' must be int64, got {arr.dtype}")
        if arr.size != 1:
            raise ShapeError(f"{self.describe()}: counter '{name}' must hold one element, got shape {arr.shape}")
        self._arr = arr
        self._counter = arr.reshape(-1)
        return self._counter


@register_op(
    "LearningRate",
    args=[
        Arg("base_lr", FLOAT, REQUIRED, "base learning rate (SGD uses a negative one)"),
        Arg("policy", STRING, REQUIRED, "one of " + ", ".join(POLICIES)),
        *POLICY_ARGS,
    ],
    input_docs=[("iter", "int64 iteration counter (one element)")],
    output_docs=[("lr", "float scalar learning rate = base_lr * f(iter)")],
    infer=lambda args, ins: [TensorSpec((), _F32)],
    category="training",
)
class LearningRate(Operator):
    """Learning rate at the current iteration: ``base_lr * f(iter)`` with f given by
    ``policy`` (see ``lr_policies`` for the formulas). Output: a 0-d float32 scalar, the shape
    Caffe2's kernel writes in both trees (it resizes the output to no dims).

    Shape inference says ``()`` too. Departure: Caffe2 2020's schema infers a copy of the input's
    shape (``[1]`` for the usual one-element counter), which disagrees with its own kernel (its
    test helper only logs that mismatch); ours agrees with what runs, since an inferred shape
    must equal the real one here. Caffe2 2018 infers nothing."""

    def setup(self) -> None:
        try:
            self._f = lr_functor(self.args.policy, self.args, self.args.base_lr, self.describe())
        except ValueError as e:
            raise self.arg_error(str(e)) from None
        self._base = np.float32(self.args.base_lr)

    def run(self) -> None:
        it = self.input(0)
        if it.size != 1 or it.dtype.kind not in "iu":
            raise ShapeError(
                f"{self.describe()}: input '{self.input_names[0]}' must be an integer counter with one element, "
                f"got {it.dtype} {it.shape}"
            )
        lr = self.output(0, (), _F32)
        lr[...] = self._base * np.float32(self._f(int(it.reshape(-1)[0])))


no_gradient("Iter", "LearningRate")
