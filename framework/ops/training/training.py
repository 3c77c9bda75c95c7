"""Training utilities: Iter (the iteration counter) and LearningRate (the
learning-rate schedule), as Caffe2's sgd ops. Neither has a gradient.

LearningRate policies (``lr = base_lr * f(iter)``), Caffe2's functors:

===============  ==============================================================
fixed            1
step             gamma ** floor(iter / stepsize)
exp              gamma ** iter
inv              (1 + gamma * iter) ** -power
poly             (1 - iter / max_iter) ** power
linearWarmup     start_multiplier + (1 - start_multiplier) * iter / num_iter
                 while iter < num_iter, then 1
constantWarmup   multiplier while iter < num_iter, then 1
alter            1 during active periods, 0 during inactive ones
                 (period active_period + inactive_period; active_first)
hill             linearWarmup for num_iter iterations, then
                 max(end_multiplier, inv(iter - num_iter))
===============  ==============================================================
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.ops.gradient import no_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, FLOAT, INT, REQUIRED, STRING, Arg, TensorSpec

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
    creates the counter (shape [1]) at 0 the first time it runs, then adds one."""

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
        if arr.dtype != _INT64:
            raise TypeMismatchError(f"{self.describe()}: counter '{name}' must be int64, got {arr.dtype}")
        if arr.size != 1:
            raise ShapeError(f"{self.describe()}: counter '{name}' must hold one element, got shape {arr.shape}")
        self._arr = arr
        self._counter = arr.reshape(-1)
        return self._counter


POLICIES = ("fixed", "step", "exp", "inv", "poly", "linearWarmup", "constantWarmup", "alter", "hill")


def lr_functor(policy: str, a: Any) -> Callable[[int], float]:
    """f(iter) of a LearningRate policy from parsed arguments ``a`` (floats as float32, as Caffe2)."""
    f32 = np.float32
    if policy == "fixed":
        return lambda it: 1.0
    if policy == "step":
        if a.stepsize <= 0:
            raise ValueError(f"policy 'step' needs stepsize > 0, got {a.stepsize}")
        gamma, stepsize = f32(a.gamma), a.stepsize
        return lambda it: gamma ** f32(it // stepsize)
    if policy == "exp":
        gamma = f32(a.gamma)
        return lambda it: gamma ** f32(it)
    if policy == "inv":
        gamma, power = f32(a.gamma), f32(a.power)
        return lambda it: (f32(1) + gamma * f32(it)) ** -power
    if policy == "poly":
        power, max_iter = f32(a.power), f32(a.max_iter)
        return lambda it: (f32(1) - f32(it) / max_iter) ** power
    if policy == "linearWarmup":
        return _linear_warmup(f32(a.start_multiplier), a.num_iter)
    if policy == "constantWarmup":
        mult, num_iter = f32(a.multiplier), a.num_iter
        return lambda it: mult if it < num_iter else 1.0
    if policy == "alter":
        active, inactive, first = a.active_period, a.inactive_period, a.active_first
        if active < 0 or inactive < 0 or active + inactive == 0:
            raise ValueError(f"policy 'alter' needs active_period and inactive_period >= 0, got {active}, {inactive}")

        def alter(it: int) -> float:
            in_first = it % (active + inactive) < (active if first else inactive)
            return float(in_first == first)

        return alter
    if policy == "hill":
        warm = _linear_warmup(f32(a.start_multiplier), a.num_iter)
        gamma, power, end, num_iter = f32(a.gamma), f32(a.power), f32(a.end_multiplier), a.num_iter
        return lambda it: warm(it) if it < num_iter else max(end, (f32(1) + gamma * f32(it - num_iter)) ** -power)
    raise ValueError(f"unknown learning rate policy '{policy}'; one of {', '.join(POLICIES)}")


def _linear_warmup(start: np.float32, num_iter: int) -> Callable[[int], float]:
    def warm(it: int) -> float:
        if it >= num_iter:
            return 1.0
        return start + (np.float32(1) - start) * np.float32(it) / np.float32(num_iter)

    return warm


@register_op(
    "LearningRate",
    args=[
        Arg("base_lr", FLOAT, REQUIRED, "base learning rate (SGD uses a negative one)"),
        Arg("policy", STRING, REQUIRED, "one of " + ", ".join(POLICIES)),
        Arg("stepsize", INT, 0, "step: iterations per step"),
        Arg("gamma", FLOAT, 0.0, "step/exp/inv/hill: decay factor"),
        Arg("power", FLOAT, 0.0, "inv/poly/hill: exponent"),
        Arg("max_iter", INT, -1, "poly: the iteration where the rate reaches 0"),
        Arg("num_iter", INT, 0, "linearWarmup/constantWarmup/hill: warm-up iterations"),
        Arg("start_multiplier", FLOAT, 0.0, "linearWarmup/hill: multiplier at iteration 0"),
        Arg("multiplier", FLOAT, 0.5, "constantWarmup: multiplier during warm-up"),
        Arg("active_first", BOOL, True, "alter: start with an active period"),
        Arg("active_period", INT, -1, "alter: length of active periods"),
        Arg("inactive_period", INT, -1, "alter: length of inactive periods"),
        Arg("end_multiplier", FLOAT, 0.0, "hill: lower bound of the multiplier"),
    ],
    input_docs=[("iter", "int64 iteration counter (one element)")],
    output_docs=[("lr", "float scalar learning rate = base_lr * f(iter)")],
    infer=lambda args, ins: [TensorSpec((), _F32)],
    category="training",
)
class LearningRate(Operator):
    """Learning rate at the current iteration: ``base_lr * f(iter)`` with f given by
    ``policy`` (see the module doc for the formulas). Output: float32 scalar."""

    def setup(self) -> None:
        try:
            self._f = lr_functor(self.args.policy, self.args)
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
