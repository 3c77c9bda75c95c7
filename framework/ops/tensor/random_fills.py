"""Random fills: UniformFill, UniformIntFill, GaussianFill, XavierFill, MSRAFill, over the
FillerOp base of ``fills`` (output shape from ``shape``, the input, or the input as shape).

Samples come from the op's generator (``Operator.rng``), seeded from
``DeviceOption.random_seed``: the same seed gives the same values. No fill has a gradient.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np

from framework.errors import ShapeError
from framework.ops.gradient import no_gradient
from framework.ops.schema import FLOAT, INT, Arg
from framework.ops.tensor.fills import INPUT_DOC, FixedTypeFill, fixed_fill
from framework.ops.validation import expect_kind
from framework.proto.framework_pb2 import TensorProto

BOUNDS_DOC = [*INPUT_DOC, ("min", "optional scalar lower bound"), ("max", "optional scalar upper bound")]


@fixed_fill(
    "UniformFill",
    extra=[Arg("min", FLOAT, 0.0, "lower bound (inclusive)"), Arg("max", FLOAT, 1.0, "upper bound (exclusive)")],
    inputs={0, 1, 3},
    input_docs=BOUNDS_DOC,
)
class UniformFill(FixedTypeFill):
    """Fill with float samples of U[min, max). With 3 inputs, min and max come from
    inputs 1 and 2 (scalars); if min > max the output's first dimension becomes 0."""

    def prepare_fill(self) -> None:
        a = self.args
        if a.num_inputs == 3:
            if a.has("min") or a.has("max"):
                raise self.arg_error("cannot set both the min/max arguments and the min/max input blobs")
        elif not a.min < a.max:
            raise self.arg_error(f"max value ({a.max}) should be bigger than min value ({a.min})")
        self._lo, self._hi = a.min, a.max

    bound_type: Any = float

    def run(self) -> None:
        shape = self.out_shape()
        lo, hi = self._lo, self._hi
        if self.args.num_inputs == 3:
            lo, hi = self.bound_type(self._bound(1)), self.bound_type(self._bound(2))
            if lo > hi:  # Caffe2: an empty output (its first dim set to 0)
                if not shape:
                    raise ShapeError(
                        f"{self.describe()}: min {lo} > max {hi}, and a 0-d output cannot be emptied (Caffe2 "
                        "sets the first dim to 0)"
                    )
                shape = (0, *shape[1:])
        out = self.output(0, shape, self.out_dtype)
        if out.size:
            self.sample(out, lo, hi)

    def sample(self, out: np.ndarray, lo: Any, hi: Any) -> None:
        self.rng.random(dtype=out.dtype, out=out)
        out *= out.dtype.type(hi - lo)
        out += out.dtype.type(lo)

    def _bound(self, i: int) -> float:
        v = self.input(i)
        expect_kind(self, i, v, "numeric")
        if v.size != 1:
            raise ShapeError(f"{self.describe()}: input {i} ('{self.input_names[i]}') must be a scalar, got {v.shape}")
        return float(v.reshape(-1)[0])


@fixed_fill(
    "UniformIntFill",
    TensorProto.INT32,
    [Arg("min", INT, 0, "lower bound (inclusive)"), Arg("max", INT, 1, "upper bound (inclusive)")],
    inputs={0, 1, 3},
    input_docs=BOUNDS_DOC,
)
class UniformIntFill(UniformFill):
    """Fill with int32 samples uniform on [min, max], both ends included."""

    fixed = TensorProto.INT32
    bound_type = int

    def sample(self, out: np.ndarray, lo: Any, hi: Any) -> None:
        out[...] = self.rng.integers(lo, hi, size=out.shape, dtype=np.int64, endpoint=True)


@fixed_fill(
    "GaussianFill",
    extra=[Arg("mean", FLOAT, 0.0, "mean of the distribution"), Arg("std", FLOAT, 1.0, "standard deviation (> 0)")],
)
class GaussianFill(FixedTypeFill):
    """Fill with float samples of N(mean, std^2)."""

    def prepare_fill(self) -> None:
        if not self.args.std > 0:
            raise self.arg_error(f"standard deviation 'std' should be positive, got {self.args.std}")
        self._mean = np.float32(self.args.mean)
        self._std = np.float32(self.args.std)

    def fill(self, out: np.ndarray) -> None:
        self.rng.standard_normal(dtype=out.dtype, out=out)
        out *= self._std
        out += self._mean


@fixed_fill("XavierFill")
class XavierFill(FixedTypeFill):
    """Fill with U(-s, s), s = sqrt(3 / fan_in), fan_in = size / dim(0) (Caffe2's Xavier)."""

    def fill(self, out: np.ndarray) -> None:
        if out.ndim < 1:
            raise ShapeError(f"{self.describe()}: needs an output with at least 1 dimension, got a scalar")
        scale = math.sqrt(3.0 / (out.size // out.shape[0]))
        self.rng.random(dtype=out.dtype, out=out)
        out *= out.dtype.type(2 * scale)
        out -= out.dtype.type(scale)


@fixed_fill("MSRAFill")
class MSRAFill(FixedTypeFill):
    """Fill with N(0, s^2), s = sqrt(2 / fan_out), fan_out = size / dim(1) (Caffe2's MSRA)."""

    def fill(self, out: np.ndarray) -> None:
        if out.ndim < 2:
            raise ShapeError(f"{self.describe()}: needs an output with at least 2 dimensions, got {out.shape}")
        scale = math.sqrt(2.0 / (out.size // out.shape[1]))
        self.rng.standard_normal(dtype=out.dtype, out=out)
        out *= out.dtype.type(scale)


no_gradient("UniformFill", "UniformIntFill", "GaussianFill", "XavierFill", "MSRAFill")
