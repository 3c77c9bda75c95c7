"""Quantile (Caffe2's ``quantile_op``): a value at a given quantile of the elements of any number of
tensors, found by bisection to a multiplicative tolerance (used to pick pruning thresholds).

The bisection is Caffe2's, step for step in the input's own float type (so the value returned is the
one Caffe2 returns, not the exact order statistic): ``target = ceil(numel * quantile)`` in float32,
``lo``/``hi`` the smallest/largest value, then halve ``[lo, hi]`` (``mid = lo + (hi - lo) / 2``)
keeping ``count(v <= lo) < target < count(v <= hi)`` until ``|hi - lo| <= tol * (|hi| + |lo|)`` or a
``mid`` with ``count(v <= mid) == target`` turns up. No gradient.
"""

from __future__ import annotations

import math

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.ops.gradient import should_not_do_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, FLOAT, REQUIRED, Arg, TensorSpec

F32, F64 = np.dtype(np.float32), np.dtype(np.float64)


def _infer(args, ins):
    return [TensorSpec((1,), ins[0].dtype if ins else None)]


def bisect_quantile(vals: np.ndarray, quantile: float, tol: float, where: str) -> np.generic:
    """Caffe2's QuantileOp::DoRunWithType on the (already abs'ed) flat values ``vals`` (float32 or float64)."""
    t = vals.dtype.type
    numel = vals.size
    target = int(math.ceil(np.float32(numel) * np.float32(quantile)))  # int64 * float is float math in C++
    lo, hi = vals.min(), vals.max()
    if target == 0:
        return lo
    if target == numel:
        return hi
    if np.count_nonzero(vals <= lo) >= target:
        return lo
    tol_t = t(np.float32(tol))  # a float argument; widened for double inputs
    while abs(t(hi - lo)) > t(tol_t * t(abs(hi) + abs(lo))):
        mid = t(float(lo) + float(t(hi - lo)) / 2.0)  # (hi - lo) / 2.0 is computed in double, then stored as T
        cnt = np.count_nonzero(vals <= mid)
        if cnt > target:
            if hi == mid:
                raise ShapeError(f"{where}: numeric precision at limit, unable to continue bisect (tol {tol})")
            hi = mid
        elif cnt < target:
            if lo == mid:
                raise ShapeError(f"{where}: numeric precision at limit, unable to continue bisect (tol {tol})")
            lo = mid
        else:
            return mid
    return hi


@register_op(
    "Quantile",
    inputs=(1, float("inf")),
    args=[
        Arg(
            "quantile", FLOAT, REQUIRED, "the quantile, in [0, 1] (Caffe2's default -1 always fails)", low=0.0, high=1.0
        ),
        Arg("abs", BOOL, True, "take |x| of every value first"),
        Arg("tol", FLOAT, 1e-3, "multiplicative tolerance of the value (> 0)"),
    ],
    input_docs=[("X1, X2, ...", "float or double tensors, all of one type")],
    output_docs=[("quantile_value", "shape (1,), the inputs' type: the value at the quantile")],
    input_types=(F32, F64),
    infer=_infer,
    category="quantized",
)
class Quantile(Operator):
    """The value at ``quantile`` of all elements of all inputs (of ``|x|`` with ``abs``, the default),
    found by Caffe2's bisection to the tolerance ``tol``: at least ``ceil(numel * quantile)`` values
    are ``<=`` the result, and the result is within about ``tol`` (relative) of the smallest such
    value. ``quantile`` 0 gives the minimum, 1 the maximum.

    Errors as Caffe2: no elements at all, inputs of different types, a bisection stuck at the float
    precision (tolerance too small). Departure: NaN values are an error here (Caffe2 skips them in
    the range and the counts but not in ``numel``, which makes the result meaningless)."""

    def setup(self) -> None:
        if not self.args.tol > 0:
            raise self.arg_error(f"tolerance 'tol' must be > 0, got {self.args.tol}")

    def run(self) -> None:
        xs = [self.input(i) for i in range(len(self.inputs))]
        for i, x in enumerate(xs[1:], 1):
            if x.dtype != xs[0].dtype:
                raise TypeMismatchError(
                    f"{self.describe()}: all inputs must have one type: '{self.input_names[0]}' is {xs[0].dtype}, "
                    f"input {i} ('{self.input_names[i]}') is {x.dtype}"
                )
        numel = sum(x.size for x in xs)
        if numel == 0:
            raise ShapeError(f"{self.describe()}: the inputs hold no elements (their total must be > 0)")
        vals = np.concatenate([x.reshape(-1) for x in xs])
        if self.args.abs:
            vals = np.abs(vals)
        if np.isnan(vals).any():
            raise ShapeError(f"{self.describe()}: the inputs hold NaN (no quantile)")
        with np.errstate(over="ignore", invalid="ignore"):
            q = bisect_quantile(vals, self.args.quantile, self.args.tol, self.describe())
        self.output(0, (1,), xs[0].dtype)[0] = q


should_not_do_gradient("Quantile")
