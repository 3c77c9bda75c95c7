"""Broadcast-shaped ops: Expand (broadcast X against a shape given as a tensor, numpy rules) and
ElementwiseLinear (Y = X * a + b over the trailing dims from `axis`), with Caffe2's gradient ops
ExpandGradient(dY, X) and ElementwiseLinearGradient(dY, X, a) -> (dX, da, db).
"""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.ops.gradient import gradient
from framework.ops.math.elementwise import check_kind
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import INT, Arg, TensorSpec, pointwise_cost, same_as_input
from framework.ops.validation import expect_axis, expect_same_shape

# -- Expand -------------------------------------------------------------------------------------------


def _expand_shape(op: Operator, x_shape: tuple, dims: list) -> tuple:
    """Caffe2's rule: align right; a shape value of -1 (any value <= 0, as PyTorch's expand) keeps
    X's dim, i.e. counts as 1; each pair of dims must be equal or one of them 1; take the max (except
    that X's empty dim against a 1 stays empty: nothing can fill a larger one)."""
    out = []
    n = max(len(dims), len(x_shape))
    for k in range(1, n + 1):
        a = x_shape[-k] if k <= len(x_shape) else 1
        b = dims[-k] if k <= len(dims) and dims[-k] > 0 else 1
        if not (a == 1 or b == 1 or a == b):
            raise ShapeError(
                f"{op.describe()}: cannot expand '{op.input_names[0]}' of shape {list(x_shape)} to shape "
                f"{list(dims)} (from '{op.input_names[1]}'): dims must be equal or 1"
            )
        out.append(a if b == 1 else max(a, b))  # an empty dim of X stays empty (1 stretches to 0)
    return tuple(reversed(out))


@register_op(
    "Expand",
    inputs=2,
    input_docs=[("X", "tensor to broadcast"), ("shape", "1-D int64 tensor: the target shape")],
    output_docs=[("Y", "X broadcast to broadcast(X.shape, shape)")],
    infer=lambda args, ins: [TensorSpec(None, ins[0].dtype)],
    cost=pointwise_cost(0),
    category="math",
)
class Expand(Operator):
    """Broadcasts X to the shape given by the values of the `shape` tensor, numpy-style: dims
    align on the right, a dim of 1 (in X or in `shape`) stretches, -1 in `shape` keeps X's dim,
    and the output takes the larger of each pair, so `shape` may hold 1 where X is larger (unlike numpy's broadcast_to).
    The output shape depends on tensor values, so shape inference leaves it unknown."""

    def run(self) -> None:
        x, s = self.input(0), self.input(1)
        if x.dtype.kind not in "iuf":
            check_kind(self, 0, x, "iuf")
        if s.dtype.kind not in "iu" or s.ndim != 1:
            raise TypeMismatchError(
                f"{self.describe()}: input 1 ('{self.input_names[1]}') must be a 1-D integer tensor, "
                f"got {s.dtype} {list(s.shape)}"
            )
        shape = _expand_shape(self, x.shape, [int(d) for d in s])
        np.copyto(self.output(0, shape, x.dtype), np.broadcast_to(x, shape))


@register_op(
    "ExpandGradient",
    inputs=2,
    input_docs=[("dY", "gradient of Y"), ("X", "forward input")],
    output_docs=[("dX", "gradient of X: dY summed over the broadcast dims")],
    infer=lambda args, ins: [TensorSpec(ins[1].shape, ins[0].dtype)],
    cost=pointwise_cost(1),
    category="math",
    private=True,
)
class ExpandGradient(Operator):
    """dX = dY summed over the leading dims X lacks and the dims where X has size 1."""

    def run(self) -> None:
        dy, x = self.input(0), self.input(1)
        if dy.dtype.kind not in "iuf":
            check_kind(self, 0, dy, "iuf")
        off = dy.ndim - x.ndim
        if off < 0 or any(a != 1 and a != b for a, b in zip(x.shape, dy.shape[off:])):
            raise ShapeError(
                f"{self.describe()}: dY ('{self.input_names[0]}') of shape {list(dy.shape)} is not a "
                f"broadcast of X ('{self.input_names[1]}') of shape {list(x.shape)}"
            )
        axes = tuple(i for i in range(dy.ndim) if i < off or x.shape[i - off] == 1)
        dx = self.output(0, x.shape, dy.dtype)
        dx[...] = np.sum(dy, axis=axes).reshape(x.shape)


@gradient("Expand")
def _expand_grad(g):
    return [g.op("ExpandGradient", [g.GO(0), g.I(0)], [g.GI(0)])]


# -- ElementwiseLinear --------------------------------------------------------------------------------

_AXIS = [Arg("axis", INT, 1, "X is viewed as N x D with N the product of the dims before `axis`")]


def _nd(op: Operator, x: np.ndarray) -> tuple[int, int]:
    axis = expect_axis(op.describe(), op.args.axis, x.ndim, of=f"X ('{op.input_names[0]}') of shape {list(x.shape)}")
    d = int(np.prod(x.shape[axis:], dtype=np.int64))
    n = int(np.prod(x.shape[:axis], dtype=np.int64))
    return n, d


def _vector(op: Operator, i: int, d: int) -> np.ndarray:
    v = op.input(i)
    if v.dtype.kind != "f":
        check_kind(op, i, v, "f")
    if v.shape != (d,):
        raise ShapeError(
            f"{op.describe()}: input {i} ('{op.input_names[i]}') must have shape [{d}], got {list(v.shape)}"
        )
    return v


@register_op(
    "ElementwiseLinear",
    inputs=3,
    args=_AXIS,
    input_docs=[("X", "float tensor, viewed as N x D"), ("a", "scales, shape [D]"), ("b", "biases, shape [D]")],
    output_docs=[("Y", "X * a + b, shaped as X")],
    infer=same_as_input(0),
    cost=pointwise_cost(2),
    category="math",
)
class ElementwiseLinear(Operator):
    """Y[n, d] = X[n, d] * a[d] + b[d], with X viewed as N x D at `axis`."""

    def run(self) -> None:
        x = self.input(0)
        if x.dtype.kind != "f":
            check_kind(self, 0, x, "f")
        n, d = _nd(self, x)
        a, b = _vector(self, 1, d), _vector(self, 2, d)
        y = self.output(0, x.shape, x.dtype)
        y2 = y.reshape(n, d)
        np.multiply(x.reshape(n, d), a, out=y2)
        np.add(y2, b, out=y2)


@register_op(
    "ElementwiseLinearGradient",
    inputs=3,
    outputs=3,
    args=_AXIS,
    input_docs=[("dY", "gradient of Y"), ("X", "forward input"), ("a", "forward scales")],
    output_docs=[("dX", "dY * a"), ("da", "sum over N of dY * X"), ("db", "sum over N of dY")],
    infer=lambda args, ins: [TensorSpec(ins[1].shape, ins[1].dtype), ins[2], ins[2]],
    cost=pointwise_cost(4),
    category="math",
    private=True,
)
class ElementwiseLinearGradient(Operator):
    """dX = dY * a; da = sum_n dY * X; db = sum_n dY."""

    def run(self) -> None:
        dy, x = self.input(0), self.input(1)
        for i, arr in ((0, dy), (1, x)):
            if arr.dtype.kind != "f":
                check_kind(self, i, arr, "f")
        expect_same_shape(self, 1, x, 0, dy)
        n, d = _nd(self, x)
        a = _vector(self, 2, d)
        dy2, x2 = dy.reshape(n, d), x.reshape(n, d)
        da_val = np.sum(dy2 * x2, axis=0)
        db_val = np.sum(dy2, axis=0)
        np.multiply(dy2, a, out=self.output(0, x.shape, x.dtype).reshape(n, d))
        self.output(1, (d,), a.dtype)[...] = da_val
        self.output(2, (d,), a.dtype)[...] = db_val


@gradient("ElementwiseLinear")
def _elementwise_linear_grad(g):
    return [g.op("ElementwiseLinearGradient", [g.GO(0), g.I(0), g.I(1)], [g.GI(0), g.GI(1), g.GI(2)])]
