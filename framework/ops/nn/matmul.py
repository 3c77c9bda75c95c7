"""Matrix products: MatMul (of 2D flattenings, Caffe2's) and BatchMatMul (over leading
dimensions, optionally with numpy broadcasting); their gradients are products of the same type.
"""

from __future__ import annotations

import math

import numpy as np

from framework.errors import GradientError, ShapeError, TypeMismatchError
from framework.ops.gradient import gradient
from framework.ops.nn.axes import canonical_axis
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import INT, Arg, Cost, TensorSpec, nbytes_of

# -- MatMul -----------------------------------------------------------------------------------


class _Product(Operator):
    """Shared run-time checks of MatMul and BatchMatMul: one dtype, and the shapes planned once
    per new pair of input shapes (``plan``: ShapeError on a mismatch)."""

    def setup(self) -> None:
        self._key = None

    def plan(self, a_shape: tuple, b_shape: tuple) -> tuple:
        raise NotImplementedError

    def planned(self, a: np.ndarray, b: np.ndarray) -> tuple:
        key = (a.shape, b.shape, a.dtype, b.dtype)
        if key != self._key:
            if a.dtype != b.dtype:
                raise TypeMismatchError(
                    f"{self.describe()}: A '{self.input_names[0]}' is {a.dtype} but B '{self.input_names[1]}' "
                    f"is {b.dtype}"
                )
            self._plan = self.plan(a.shape, b.shape)
            self._key = key
        return self._plan


def matmul_dims(a_shape: tuple, b_shape: tuple, args, where: str) -> tuple:
    """(M, K, N, A 2D shape, B 2D shape) of MatMul."""
    ax = canonical_axis(args.axis_a, len(a_shape), f"{where}: A {list(a_shape)}")
    bx = canonical_axis(args.axis_b, len(b_shape), f"{where}: B {list(b_shape)}")
    a2 = (math.prod(a_shape[:ax]), math.prod(a_shape[ax:]))
    b2 = (math.prod(b_shape[:bx]), math.prod(b_shape[bx:]))
    m, ka = (a2[1], a2[0]) if args.trans_a else a2
    kb, n = (b2[1], b2[0]) if args.trans_b else b2
    if ka != kb:
        raise ShapeError(
            f"{where}: A {list(a_shape)} as {a2}{' transposed' if args.trans_a else ''} and "
            f"B {list(b_shape)} as {b2}{' transposed' if args.trans_b else ''} do not share K ({ka} vs {kb})"
        )
    return m, ka, n, a2, b2


def _infer_matmul(args, ins):
    a, b = ins[0], ins[1]
    if not (a.known and b.known):
        return [TensorSpec(None, a.dtype)]
    m, _, n, _, _ = matmul_dims(tuple(a.shape), tuple(b.shape), args, "MatMul")
    if len(ins) == 3:  # the gradient form: Y takes input 2's shape
        return [TensorSpec(ins[2].shape, a.dtype)]
    return [TensorSpec((m, n), a.dtype)]


def _cost_matmul(args, ins, outs):
    a, b = ins[0], ins[1]
    if not (a.known and b.known):
        return Cost()
    m, k, n, _, _ = matmul_dims(tuple(a.shape), tuple(b.shape), args, "MatMul")
    item = a.dtype.itemsize if a.dtype is not None else 4
    return Cost(flops=2.0 * m * k * n, bytes_moved=(m * k + k * n + m * n) * item)


@register_op(
    "MatMul",
    inputs=(2, 3),
    input_docs=[
        ("A", "matrix (M, K), flattened to 2D at axis_a"),
        ("B", "matrix (K, N), flattened at axis_b"),
        ("shape_like", "optional (the gradient form): Y is reshaped to this tensor's shape"),
    ],
    output_docs=[("Y", "A B, shape (M, N)")],
    args=[
        Arg("axis_a", INT, 1, "A is flattened to 2D at this axis"),
        Arg("axis_b", INT, 1, "B is flattened to 2D at this axis"),
        Arg("trans_a", INT, 0, "1: transpose A (after flattening)"),
        Arg("trans_b", INT, 0, "1: transpose B (after flattening)"),
    ],
    infer=_infer_matmul,
    cost=_cost_matmul,
    category="linalg",
)
class MatMul(_Product):
    """Matrix product Y = op(A) op(B) of the 2D flattenings of A and B (op = optional transpose).
    With a third input (Caffe2's gradient form) Y is reshaped to that input's shape."""

    def plan(self, a_shape: tuple, b_shape: tuple) -> tuple:
        return matmul_dims(a_shape, b_shape, self.args, self.describe())

    def run(self) -> None:
        a, b = self.input(0), self.input(1)
        m, _, n, a2, b2 = self.planned(a, b)
        shape: tuple = (m, n)
        if len(self.inputs) == 3:
            shape = self.input(2).shape
            if math.prod(shape) != m * n:
                raise ShapeError(
                    f"{self.describe()}: the product is ({m}, {n}) but input 2 '{self.input_names[2]}' has "
                    f"shape {list(shape)} ({math.prod(shape)} elements)"
                )
        av, bv = a.reshape(a2), b.reshape(b2)
        out = self.output(0, shape, a.dtype).reshape(m, n)
        np.matmul(av.T if self.args.trans_a else av, bv.T if self.args.trans_b else bv, out=out)


def _transpose_gradient(g, op_type: str, extra: dict):
    """Caffe2's gradient pattern for MatMul/BatchMatMul: two products of the same type."""
    ta, tb = bool(g.arg("trans_a", 0)), bool(g.arg("trans_b", 0))
    a, b, go = g.I(0), g.I(1), g.GO(0)
    ga, gb = g.GI(0), g.GI(1)
    if ta and tb:  # Y = A'B': dA = B'G', dB = G'A'
        specs = [([b, go], ga, 1, 1), ([go, a], gb, 1, 1)]
    elif ta:  # Y = A'B: dA = B G', dB = A G
        specs = [([b, go], ga, 0, 1), ([a, go], gb, 0, 0)]
    elif tb:  # Y = A B': dA = G B, dB = G' A
        specs = [([go, b], ga, 0, 0), ([go, a], gb, 1, 0)]
    else:  # Y = A B: dA = G B', dB = A' G
        specs = [([go, b], ga, 0, 1), ([a, go], gb, 1, 0)]
    ops = []
    for ins, out, t_a, t_b in specs:
        kwargs = dict(extra)
        if t_a:
            kwargs["trans_a"] = 1
        if t_b:
            kwargs["trans_b"] = 1
        ops.append(g.op(op_type, ins, [out], **kwargs))
    return ops


@gradient("MatMul", copy_arguments=False)
def _matmul_grad(g):
    """Caffe2's GetMatMulGradient: two MatMuls taking the input they differentiate as a third
    (shape) input, with the axis arguments they need. Caffe2 keeps axis_a/axis_b in a C++ bool
    (so an axis above 1 turns into 1 there and breaks); the real axes are passed here."""
    ta, tb = bool(g.arg("trans_a", 0)), bool(g.arg("trans_b", 0))
    ax, bx = int(g.arg("axis_a", 1)), int(g.arg("axis_b", 1))
    a, b, go, ga, gb = g.I(0), g.I(1), g.GO(0), g.GI(0), g.GI(1)
    if ta and tb:  # A'B': dA = B'G', dB = G'A'
        return [
            g.op("MatMul", [b, go, a], [ga], trans_a=1, trans_b=1, axis_a=bx),
            g.op("MatMul", [go, a, b], [gb], trans_a=1, trans_b=1, axis_b=ax),
        ]
    if ta:  # A'B: dA = B G', dB = A G
        return [
            g.op("MatMul", [b, go, a], [ga], trans_b=1, axis_a=bx),
            g.op("MatMul", [a, go, b], [gb], axis_a=ax),
        ]
    if tb:  # A B': dA = G B, dB = G' A
        return [
            g.op("MatMul", [go, b, a], [ga], axis_b=bx),
            g.op("MatMul", [go, a, b], [gb], trans_a=1, axis_b=ax),
        ]
    # A B: dA = G B', dB = A' G
    return [
        g.op("MatMul", [go, b, a], [ga], trans_b=1, axis_b=bx),
        g.op("MatMul", [a, go, b], [gb], trans_a=1, axis_a=ax),
    ]


# -- BatchMatMul --------------------------------------------------------------------------------


def batch_matmul_shape(a_shape: tuple, b_shape: tuple, trans_a: bool, trans_b: bool, broadcast: bool, where: str):
    """Output shape of BatchMatMul; ShapeError naming ``where`` on a mismatch."""
    if not broadcast:
        if len(a_shape) < 2 or len(a_shape) != len(b_shape):
            raise ShapeError(
                f"{where}: A {list(a_shape)} and B {list(b_shape)} must have the same rank >= 2 "
                "(set broadcast=1 for numpy matmul broadcasting)"
            )
        if a_shape[:-2] != b_shape[:-2]:
            raise ShapeError(
                f"{where}: batch dimensions differ: A {list(a_shape)} vs B {list(b_shape)} "
                "(set broadcast=1 to broadcast them)"
            )
    a_mk = (1, a_shape[0]) if len(a_shape) == 1 else a_shape[-2:]
    b_kn = (b_shape[0], 1) if len(b_shape) == 1 else b_shape[-2:]
    if len(a_shape) >= 2 and trans_a:
        a_mk = a_mk[::-1]
    if len(b_shape) >= 2 and trans_b:
        b_kn = b_kn[::-1]
    if a_mk[1] != b_kn[0]:
        raise ShapeError(
            f"{where}: A {list(a_shape)} and B {list(b_shape)} (trans_a={int(trans_a)}, trans_b={int(trans_b)}) "
            f"do not share K ({a_mk[1]} vs {b_kn[0]})"
        )
    try:
        batch = np.broadcast_shapes(tuple(a_shape[:-2]), tuple(b_shape[:-2]))
    except ValueError:
        raise ShapeError(
            f"{where}: batch dimensions of A {list(a_shape)} and B {list(b_shape)} do not broadcast"
        ) from None
    out = tuple(batch)
    if len(a_shape) >= 2:
        out += (a_mk[0],)
    if len(b_shape) >= 2:
        out += (b_kn[1],)
    if len(a_shape) == 1 and len(b_shape) == 1:
        out = (1,)
    return out


def _infer_batch_matmul(args, ins):
    a, b = ins[0], ins[1]
    if not (a.known and b.known):
        return [TensorSpec(None, a.dtype)]
    shape = batch_matmul_shape(
        tuple(a.shape), tuple(b.shape), args.trans_a, args.trans_b, args.broadcast, "BatchMatMul"
    )
    return [TensorSpec(shape, a.dtype)]


def _cost_batch_matmul(args, ins, outs):
    a, b = ins[0], ins[1]
    if not (a.known and b.known) or not outs or not outs[0].known:
        return Cost()
    k = a.shape[-2] if len(a.shape) >= 2 and args.trans_a else a.shape[-1]
    return Cost(flops=2.0 * math.prod(outs[0].shape) * k, bytes_moved=nbytes_of(a) + nbytes_of(b) + nbytes_of(outs[0]))


def _swap_last(x: np.ndarray, flag: bool) -> np.ndarray:
    return np.swapaxes(x, -1, -2) if flag and x.ndim >= 2 else x


@register_op(
    "BatchMatMul",
    inputs=2,
    input_docs=[("A", "tensor (..., M, K)"), ("B", "tensor (..., K, N)")],
    output_docs=[("Y", "tensor (..., M, N)")],
    args=[
        Arg("trans_a", INT, 0, "1: transpose the last two dimensions of A"),
        Arg("trans_b", INT, 0, "1: transpose the last two dimensions of B"),
        Arg("broadcast", INT, 0, "1: numpy.matmul broadcasting (1D operands, batch dimensions)"),
    ],
    infer=_infer_batch_matmul,
    cost=_cost_batch_matmul,
    category="linalg",
)
class BatchMatMul(_Product):
    """Batched matrix product Y[i] = op(A[i]) op(B[i]) over the leading dimensions."""

    def plan(self, a_shape: tuple, b_shape: tuple) -> tuple:
        args = self.args
        return batch_matmul_shape(a_shape, b_shape, args.trans_a, args.trans_b, args.broadcast, self.describe())

    def run(self) -> None:
        a, b = self.input(0), self.input(1)
        y = self.output(0, self.planned(a, b), a.dtype)
        if a.ndim == 1 and b.ndim == 1:
            y = y.reshape(())
        a, b = _swap_last(a, self.args.trans_a), _swap_last(b, self.args.trans_b)
        if b.ndim == 2 and a.ndim > 2 and y.flags.c_contiguous:
            # numpy broadcasts a 2-D B over A's leading dimensions as one product per leading index (a
            # GEMV per row where they are strided, as after a transpose): one GEMM over the flattened rows
            np.matmul(a.reshape(-1, a.shape[-1]), b, out=y.reshape(-1, y.shape[-1]))
        else:
            np.matmul(a, b, out=y)


@gradient("BatchMatMul", copy_arguments=False)
def _batch_matmul_grad(g):
    if g.arg("broadcast", 0):
        raise GradientError(f"{g._where()}: the gradient is not supported with broadcast=1 for BatchMatMul")
    return _transpose_gradient(g, "BatchMatMul", {})
