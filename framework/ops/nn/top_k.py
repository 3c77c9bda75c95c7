"""Top-k selection: TopK (fixed k along an axis, optional flattened indices) and FlexibleTopK
(a k per row), with Caffe2's gradient ops TopKGradient(dValues, indices, X) and
FlexibleTopKGradient(X, k, dValues, indices). Ties: the lower index comes first."""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.memory.allocator import check_elements
from framework.ops.gradient import gradient
from framework.ops.operator import Operator
from framework.ops.pointwise import float_input
from framework.ops.registry import register_op
from framework.ops.schema import INT, REQUIRED, Arg, TensorSpec
from framework.ops.validation import expect_in_range

_I64 = np.dtype(np.int64)
_ARGS = [
    Arg("k", INT, REQUIRED, "number of elements to keep (>= 1; positions past the axis size hold 0 and index -1)"),
    Arg("axis", INT, -1, "the axis searched (-1: the last)"),
]


def _axis(op: Operator, ndim: int) -> int:
    a = op.args.axis if op.args.axis != -1 else ndim - 1  # Caffe2's TopK: -1 is the last axis, no other negative
    return expect_in_range(op.describe(), "axis", a, 0, ndim, of=f"a {ndim}-D input")


def _topk_infer(args: Any, ins: list) -> list:
    x = ins[0]
    if x.shape is None or not x.shape:
        return [TensorSpec(None, x.dtype), TensorSpec(None, _I64), TensorSpec(None, _I64)][: args.num_outputs]
    a = args.axis if args.axis != -1 else len(x.shape) - 1
    shape = list(x.shape)
    shape[a] = args.k
    out = [TensorSpec(tuple(shape), x.dtype), TensorSpec(tuple(shape), _I64)]
    if args.num_outputs > 2:
        out.append(TensorSpec((int(np.prod(shape)),), _I64))
    return out


def ranked(x: np.ndarray, axis: int) -> np.ndarray:
    """Indices sorting ``x`` along ``axis`` from largest to smallest, ties by lower index."""
    return np.argsort(-x, axis=axis, kind="stable")


@register_op(
    "TopK",
    outputs=(2, 3),
    args=_ARGS,
    input_docs=[("X", "float tensor")],
    output_docs=[
        ("Values", "the k largest values along `axis`, largest first"),
        ("Indices", "int64: their positions along `axis`"),
        ("Flattened_indices", "optional int64: their positions in the flattened X"),
    ],
    infer=_topk_infer,
    category="math",
)
class TopK(Operator):
    """The k largest elements along `axis` (descending; equal values by lower index). When k
    exceeds the axis size, the extra positions hold value 0 and index -1 (as Caffe2)."""

    def setup(self) -> None:
        if self.args.k < 1:
            raise self.arg_error(f"'k' must be >= 1, got {self.args.k}")

    def run(self) -> None:
        x = float_input(self, 0)
        if x.ndim == 0:
            raise ShapeError(f"{self.describe()}: X ('{self.input_names[0]}') must have at least 1 dim")
        a, k = _axis(self, x.ndim), self.args.k
        n = x.shape[a]
        m = min(k, n)
        idx = np.take(ranked(x, a), np.arange(m), axis=a)
        shape = list(x.shape)
        shape[a] = k
        check_elements(shape, x.dtype.itemsize + 8, f"the outputs of {self.describe()}")
        vals = np.zeros(shape, x.dtype)
        inds = np.full(shape, -1, np.int64)
        sl = [slice(None)] * x.ndim
        sl[a] = slice(0, m)
        vals[tuple(sl)] = np.take_along_axis(x, idx, axis=a)
        inds[tuple(sl)] = idx
        self.output(0, tuple(shape), x.dtype)[...] = vals
        self.output(1, tuple(shape), _I64)[...] = inds
        if len(self.outputs) > 2:
            nxt = int(np.prod(x.shape[a + 1 :], dtype=np.int64))
            pre = np.arange(int(np.prod(x.shape[:a], dtype=np.int64))).reshape(x.shape[:a] + (1,) * (x.ndim - a))
            post = np.arange(nxt).reshape((1,) * (a + 1) + x.shape[a + 1 :])
            flat = np.where(inds >= 0, pre * n * nxt + inds * nxt + post, -1)
            self.output(2, (flat.size,), _I64)[...] = flat.reshape(-1)


@register_op(
    "TopKGradient",
    inputs=3,
    args=_ARGS,
    input_docs=[("dValues", "gradient of Values"), ("Indices", "forward Indices"), ("X", "forward input")],
    output_docs=[("dX", "dValues scattered back to the selected positions, 0 elsewhere")],
    infer=lambda args, ins: [TensorSpec(ins[2].shape, ins[0].dtype)],
    category="math",
    private=True,
)
class TopKGradient(Operator):
    """dX[..., Indices[..., j], ...] = dValues[..., j, ...]; other entries 0."""

    def run(self) -> None:
        dv, idx, x = float_input(self, 0), self.input(1), self.input(2)
        if idx.dtype.kind not in "iu" or idx.shape != dv.shape or dv.ndim != x.ndim:
            raise ShapeError(
                f"{self.describe()}: Indices ('{self.input_names[1]}') must be integers shaped as dValues "
                f"{list(dv.shape)}, got {idx.dtype} {list(idx.shape)}"
            )
        a = _axis(self, x.ndim)
        if dv.shape[:a] + dv.shape[a + 1 :] != x.shape[:a] + x.shape[a + 1 :]:
            raise ShapeError(
                f"{self.describe()}: dValues {list(dv.shape)} does not match X {list(x.shape)} off axis {a}"
            )
        if idx.size and (idx.max() >= x.shape[a] or idx.min() < -1):
            raise ShapeError(f"{self.describe()}: Indices ('{self.input_names[1]}') outside [-1, {x.shape[a]})")
        dx = np.zeros(x.shape, dv.dtype)
        dxm, dvm, idm = np.moveaxis(dx, a, -1), np.moveaxis(dv, a, -1), np.moveaxis(idx, a, -1)
        ok = idm >= 0
        lead = np.nonzero(ok)
        dxm[lead[:-1] + (idm[ok],)] = dvm[ok]  # dxm is a view of dx
        self.output(0, x.shape, dv.dtype)[...] = dx


@gradient("TopK")
def _top_k_grad(g):
    return [g.op("TopKGradient", [g.GO(0), g.O(1), g.I(0)], [g.GI(0)])]


# -- FlexibleTopK ----------------------------------------------------------------------------------------


def _rows_and_k(op: Operator, x: np.ndarray, ki: int) -> tuple[np.ndarray, np.ndarray]:
    if x.ndim == 0:
        raise ShapeError(f"{op.describe()}: X ('{op.input_names[0]}') must have at least 1 dim")
    k = op.input(ki)
    if k.dtype.kind not in "iu":
        raise TypeMismatchError(f"{op.describe()}: K ('{op.input_names[ki]}') must hold integers, got {k.dtype}")
    x2 = x.reshape(-1, x.shape[-1]) if x.shape[-1] else x.reshape(int(np.prod(x.shape[:-1], dtype=np.int64)), 0)
    kk = k.reshape(-1).astype(np.int64)
    if kk.size != x2.shape[0] or (kk.size and (kk.min() < 1 or kk.max() > x2.shape[1])):
        raise ShapeError(
            f"{op.describe()}: K ('{op.input_names[ki]}') must hold {x2.shape[0]} values in "
            f"[1, {x2.shape[1]}], got {list(k.shape)}"
        )
    return x2, kk


@register_op(
    "FlexibleTopK",
    inputs=2,
    outputs=2,
    input_docs=[
        ("X", "float tensor [a_1, ..., a_n, r]"),
        ("K", "int64 [a_1, ..., a_n, 1]: k of each row, 1 <= k <= r"),
    ],
    output_docs=[
        ("Flatten values", "sum(K) values, row by row, largest first"),
        ("Flatten indices", "int64: their positions in the last dim"),
    ],
    infer=lambda args, ins: [TensorSpec(None, ins[0].dtype), TensorSpec(None, _I64)],
    category="math",
)
class FlexibleTopK(Operator):
    """Row i (over the last dim) keeps its K[i] largest values (ties by lower index), all rows'
    results concatenated."""

    def run(self) -> None:
        x = float_input(self, 0)
        x2, kk = _rows_and_k(self, x, 1)
        order = ranked(x2, 1)
        vals = [x2[i, order[i, : kk[i]]] for i in range(x2.shape[0])]
        inds = [order[i, : kk[i]] for i in range(x2.shape[0])]
        total = int(kk.sum())
        self.output(0, (total,), x.dtype)[...] = np.concatenate(vals) if vals else np.zeros(0)
        self.output(1, (total,), _I64)[...] = np.concatenate(inds) if inds else np.zeros(0)


@register_op(
    "FlexibleTopKGradient",
    inputs=4,
    input_docs=[
        ("X", "forward input"),
        ("K", "forward k"),
        ("dValues", "gradient of values"),
        ("Indices", "forward indices"),
    ],
    output_docs=[("dX", "dValues scattered back to the selected positions")],
    infer=lambda args, ins: [TensorSpec(ins[0].shape, ins[2].dtype)],
    category="math",
    private=True,
)
class FlexibleTopKGradient(Operator):
    """dX[i, Indices[j]] = dValues[j] for row i's slice of the flat outputs."""

    def run(self) -> None:
        x = self.input(0)
        x2, kk = _rows_and_k(self, x, 1)
        dv, idx = float_input(self, 2), self.input(3)
        total = int(kk.sum())
        if dv.size != total or idx.size != total or idx.dtype.kind not in "iu":
            raise ShapeError(f"{self.describe()}: dValues and Indices must hold {total} values")
        if idx.size and (idx.min() < 0 or idx.max() >= x2.shape[1]):
            raise ShapeError(f"{self.describe()}: Indices ('{self.input_names[3]}') outside [0, {x2.shape[1]})")
        dx = np.zeros(x2.shape, dv.dtype)
        rows = np.repeat(np.arange(x2.shape[0]), kk)
        dx[rows, idx.reshape(-1)] = dv.reshape(-1)
        self.output(0, x.shape, dv.dtype)[...] = dx.reshape(x.shape)


@gradient("FlexibleTopK")
def _flexible_top_k_grad(g):
    return [g.op("FlexibleTopKGradient", [g.I(0), g.I(1), g.GO(0), g.O(1)], [g.GI(0)])]
