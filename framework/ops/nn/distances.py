"""Per-row distances of two same-shaped tensors (Caffe2's distance_op): SquaredL2Distance,
L1Distance (losses) and DotProduct (linalg), with their gradient ops. Row i is X[i] flattened:
dim 0 indexes the rows (a scalar is one row).
"""

from __future__ import annotations

import math

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.ops.gradient import gradient
from framework.ops.nn.axes import infer_per_row, rows_of
from framework.ops.operator import Operator
from framework.ops.pointwise import float_input, scratch
from framework.ops.registry import register_op
from framework.ops.schema import Cost, nbytes_of, pointwise_cost
from framework.ops.validation import expect_kind

# -- distances ---------------------------------------------------------------------------------


def _check_pair(op: Operator) -> tuple[np.ndarray, np.ndarray, int, int]:
    x, y = float_input(op, 0), float_input(op, 1)
    if x.shape != y.shape or x.dtype != y.dtype:
        raise ShapeError(
            f"{op.describe()}: X '{op.input_names[0]}' {x.dtype} {list(x.shape)} and Y '{op.input_names[1]}' "
            f"{y.dtype} {list(y.shape)} must have the same shape and dtype"
        )
    n, d = rows_of(x.shape)
    return x.reshape(n, d), y.reshape(n, d), n, d


def _distance_op(name: str, doc: str, l1: bool):
    @register_op(
        name,
        inputs=2,
        input_docs=[("X", "tensor, rows along dim 0"), ("Y", "tensor shaped as X")],
        output_docs=[("Z", "one distance per row (X.dims[0])")],
        infer=infer_per_row,
        cost=pointwise_cost(3),
        category="loss",
        doc=doc,
    )
    class _Distance(Operator):
        def run(self) -> None:
            x2, y2, n, d = _check_pair(self)
            diff = scratch(self, "_diff", (n, d), x2.dtype)
            np.subtract(x2, y2, out=diff)
            z = self.output(0, (n,), x2.dtype)
            if l1:
                np.abs(diff, out=diff)
                np.sum(diff, axis=1, out=z)
            else:
                np.einsum("ij,ij->i", diff, diff, out=z)
                z *= x2.dtype.type(0.5)

    _Distance.__name__ = name
    return _Distance


SquaredL2Distance = _distance_op("SquaredL2Distance", "Z[i] = 0.5 * ||X[i] - Y[i]||^2 per row.", l1=False)
L1Distance = _distance_op("L1Distance", "Z[i] = sum_j |X[i, j] - Y[i, j]| per row.", l1=True)


def _distance_grad_op(name: str, doc: str, l1: bool):
    @register_op(
        name,
        inputs=3,
        outputs=2,
        input_docs=[("X", "forward X"), ("Y", "forward Y"), ("dDistance", "gradient of Z")],
        output_docs=[("dX", "gradient of X"), ("dY", "gradient of Y")],
        infer=lambda args, ins: [ins[0], ins[1]],
        category="loss",
        private=True,
        doc=doc,
        input_types={2: "numeric"},
    )
    class _DistanceGrad(Operator):
        def run(self) -> None:
            x2, y2, n, d = _check_pair(self)
            dz = self.input(2)
            if dz.shape != (n,):
                raise ShapeError(
                    f"{self.describe()}: dDistance '{self.input_names[2]}' {list(dz.shape)} must have shape [{n}]"
                )
            x = self.input(0)
            dx2 = self.output(0, x.shape, x.dtype).reshape(n, d)
            dy2 = self.output(1, x.shape, x.dtype).reshape(n, d)
            np.subtract(x2, y2, out=dx2)
            if l1:  # subgradient: sign of the difference, 0 within 1e-12 (as Caffe2)
                eps = x2.dtype.type(1e-12)
                np.copyto(dx2, 0, where=np.abs(dx2) <= eps)
                np.sign(dx2, out=dx2)
            dx2 *= dz.reshape(n, 1)
            np.negative(dx2, out=dy2)

    _DistanceGrad.__name__ = name
    return _DistanceGrad


SquaredL2DistanceGradient = _distance_grad_op(
    "SquaredL2DistanceGradient", "dX = (X - Y) * dZ, dY = -dX (per row).", l1=False
)
L1DistanceGradient = _distance_grad_op(
    "L1DistanceGradient", "dX = sign(X - Y) * dZ (0 where |X - Y| <= 1e-12), dY = -dX.", l1=True
)


@gradient("SquaredL2Distance")
def _sql2_grad(g):
    return [g.op("SquaredL2DistanceGradient", [g.I(0), g.I(1), g.GO(0)], [g.GI(0), g.GI(1)])]


@gradient("L1Distance")
def _l1_grad(g):
    return [g.op("L1DistanceGradient", [g.I(0), g.I(1), g.GO(0)], [g.GI(0), g.GI(1)])]


# -- DotProduct ---------------------------------------------------------------------------------


class _PairwiseRows(Operator):
    """Shared checks of ops over two same-shaped inputs reduced per row (dim 0)."""

    def pair(self) -> tuple[np.ndarray, np.ndarray, int, int]:
        x, y = self.input(0), self.input(1)
        if x.shape != y.shape:
            raise ShapeError(
                f"{self.describe()}: X '{self.input_names[0]}' {list(x.shape)} and Y '{self.input_names[1]}' "
                f"{list(y.shape)} must have the same shape"
            )
        if x.dtype != y.dtype or x.dtype.kind != "f":
            raise TypeMismatchError(
                f"{self.describe()}: X '{self.input_names[0]}' ({x.dtype}) and Y '{self.input_names[1]}' "
                f"({y.dtype}) must hold floats of one dtype"
            )
        n, d = rows_of(x.shape)
        return x.reshape(n, d), y.reshape(n, d), n, d

    def row_grad(self, i: int, n: int) -> np.ndarray:
        g = self.input(i)
        expect_kind(self, i, g, "float")
        if g.shape != (n,):
            raise ShapeError(
                f"{self.describe()}: gradient '{self.input_names[i]}' has shape {list(g.shape)}, expected [{n}]"
            )
        return g.reshape(n, 1)


@register_op(
    "DotProduct",
    inputs=2,
    input_docs=[("X", "1D or 2D tensor"), ("Y", "tensor shaped as X")],
    output_docs=[("Z", "per-row dot products, shape (X.dims[0],)")],
    infer=infer_per_row,
    cost=lambda args, ins, outs: Cost(flops=2.0 * math.prod(ins[0].shape or ()), bytes_moved=2 * nbytes_of(ins[0])),
    category="linalg",
)
class DotProduct(_PairwiseRows):
    """Z[i] = sum_j X[i, j] * Y[i, j] over the rows (dim 0) of two same-shaped tensors; 1D inputs give X * Y."""

    def run(self) -> None:
        x2, y2, n, _ = self.pair()
        np.einsum("ij,ij->i", x2, y2, out=self.output(0, (n,), x2.dtype))


@register_op(
    "DotProductGradient",
    inputs=3,
    outputs=2,
    input_docs=[("X", "forward X"), ("Y", "forward Y"), ("dZ", "gradient of Z")],
    output_docs=[("dX", "dZ * Y"), ("dY", "dZ * X")],
    infer=lambda args, ins: [ins[0], ins[1]],
    category="linalg",
    private=True,
)
class DotProductGradient(_PairwiseRows):
    """dX[i] = dZ[i] * Y[i], dY[i] = dZ[i] * X[i]."""

    def run(self) -> None:
        x2, y2, n, d = self.pair()
        dz = self.row_grad(2, n)
        x, y = self.input(0), self.input(1)
        np.multiply(y2, dz, out=self.output(0, x.shape, x.dtype).reshape(n, d))
        np.multiply(x2, dz, out=self.output(1, y.shape, y.dtype).reshape(n, d))


@gradient("DotProduct")
def _dot_grad(g):
    return [g.op("DotProductGradient", [g.I(0), g.I(1), g.GO(0)], [g.GI(0), g.GI(1)])]
