"""ScaledDotProductAttention: softmax(scale Q K^T + mask) V over all heads at once.

This framework's op (Caffe2 has none): what the inference pass (framework/net/fuse_transformer.py) puts
in place of an exported attention chain ``BatchMatMul -> Mul|Div -> Add(mask) -> Softmax ->
BatchMatMul``. Q is (..., Sq, D), K is (..., Sk, D) (or (..., D, Sk) with ``transposed_k=1``, as exporters
transpose it before the product), V is (..., Sk, Dv); leading dimensions broadcast as numpy's matmul.
The optional mask is added to the scores and must broadcast to their shape. The softmax runs as Caffe2's
Softmax at ``axis`` (the scores coerced to 2-D there; -1, the default, is the keys axis). Y is
(..., Sq, Dv). The scale multiplies Q (one pass over the smaller operand); 0 means 1 / sqrt(D). Scores
live in a scratch buffer reused across runs: softmax, mask and scale in place, no intermediates kept; a
float32 softmax is one compiled pass over the rows (``activation_jit.softmax_rows``).
"""

from __future__ import annotations

import math

import numpy as np

from framework.errors import ShapeError
from framework.kernels import activation_jit
from framework.ops.gradient import gradient
from framework.ops.nn.softmax import _softmax_rows
from framework.ops.operator import Operator
from framework.ops.pointwise import float_input, scratch
from framework.ops.registry import register_op
from framework.ops.schema import FLOAT, INT, UNKNOWN, Arg, Cost, TensorSpec


def _dims(q_shape: tuple, k_shape: tuple, v_shape: tuple, transposed_k: bool, where: str) -> tuple:
    """(scores shape, Y shape, D) of Q, K, V shapes; ShapeError naming ``where`` on a mismatch."""
    if min(len(q_shape), len(k_shape), len(v_shape)) < 2:
        raise ShapeError(f"{where}: Q {list(q_shape)}, K {list(k_shape)} and V {list(v_shape)} must be at least 2-D")
    sq, d = q_shape[-2:]
    kd, sk = k_shape[-2:] if transposed_k else k_shape[-2:][::-1]
    if kd != d or v_shape[-2] != sk:
        raise ShapeError(
            f"{where}: Q {list(q_shape)}, K {list(k_shape)}{' (transposed)' if transposed_k else ''} and V "
            f"{list(v_shape)} disagree: expected K's head size {d} and V's key count {sk}"
        )
    try:
        lead = np.broadcast_shapes(q_shape[:-2], k_shape[:-2], v_shape[:-2])
    except ValueError:
        raise ShapeError(
            f"{where}: the leading dimensions of Q {list(q_shape)}, K {list(k_shape)} and V {list(v_shape)} "
            "do not broadcast"
        ) from None
    return (*lead, sq, sk), (*lead, sq, v_shape[-1]), d


def _broadcasts_to(shape: tuple, target: tuple) -> bool:
    try:
        return np.broadcast_shapes(shape, target) == tuple(target)
    except ValueError:
        return False


def _infer(args, ins):
    q, k, v = ins[:3]
    if not (q.known and k.known and v.known):
        return [UNKNOWN]
    _, y, _ = _dims(
        tuple(q.shape), tuple(k.shape), tuple(v.shape), bool(args.transposed_k), "ScaledDotProductAttention"
    )
    return [TensorSpec(y, q.dtype)]


def _cost(args, ins, outs):
    q, k, v = ins[:3]
    if not (q.known and k.known and v.known):
        return Cost()
    s, y, d = _dims(
        tuple(q.shape), tuple(k.shape), tuple(v.shape), bool(args.transposed_k), "ScaledDotProductAttention"
    )
    n = math.prod(s)
    return Cost(flops=2.0 * n * d + 2.0 * n * y[-1] + 5.0 * n)


@register_op(
    "ScaledDotProductAttention",
    inputs={3, 4},
    outputs=1,
    input_docs=[
        ("Q", "queries (..., Sq, D)"),
        ("K", "keys (..., Sk, D), or (..., D, Sk) with transposed_k"),
        ("V", "values (..., Sk, Dv)"),
        ("mask", "optional, added to the scores (broadcast to (..., Sq, Sk))"),
    ],
    output_docs=[("Y", "(..., Sq, Dv)")],
    args=[
        Arg("scale", FLOAT, 0.0, "multiplies Q K^T; 0: 1 / sqrt(D)"),
        Arg("transposed_k", INT, 0, "1: K is given as (..., D, Sk)"),
        Arg("axis", INT, -1, "the scores are coerced to 2-D at this axis for the softmax (Caffe2's Softmax)"),
    ],
    infer=_infer,
    cost=_cost,
    category="nn",
    input_types="float",
    same_type=[(0, 1, 2, 3)],
)
class ScaledDotProductAttention(Operator):
    """Y = softmax(scale Q K^T + mask) V, all heads in two batched GEMMs and one in-place softmax."""

    def setup(self) -> None:
        self._key = None

    def run(self) -> None:
        q, k, v = float_input(self, 0), self.input(1), self.input(2)
        mask = self.input(3) if len(self.inputs) == 4 else None
        key = (q.shape, k.shape, v.shape, q.dtype, None if mask is None else mask.shape)
        if key != self._key:
            self._plan(q, k, v, mask)
            self._key = key
        qs = scratch(self, "_q", q.shape, q.dtype)
        scores = scratch(self, "_scores", self._scores_shape, q.dtype)
        y = self.output(0, self._y_shape, q.dtype)
        np.multiply(q, self._scale, out=qs)
        np.matmul(qs, k if self.args.transposed_k else np.swapaxes(k, -1, -2), out=scores)
        if mask is not None:
            np.add(scores, mask, out=scores)
        n, d = self._rows
        rows = scores.reshape(n, d)
        if not activation_jit.softmax_rows(rows):
            _softmax_rows(rows, rows, scratch(self, "_row", (n, 1), q.dtype), False)
        np.matmul(scores, v, out=y)

    def _plan(self, q, k, v, mask) -> None:
        where = self.describe()
        if k.dtype != q.dtype or v.dtype != q.dtype or (mask is not None and mask.dtype != q.dtype):
            names = ", ".join(f"'{n}' {a.dtype}" for n, a in zip(self.input_names, (q, k, v, mask)) if a is not None)
            raise ShapeError(f"{where}: Q, K, V and mask must have one dtype; got {names}")
        s, y, d = _dims(q.shape, k.shape, v.shape, bool(self.args.transposed_k), where)
        if mask is not None and not _broadcasts_to(mask.shape, s):
            raise ShapeError(
                f"{where}: mask '{self.input_names[3]}' {list(mask.shape)} does not broadcast to the scores {list(s)}"
            )
        axis = self.args.axis + len(s) if self.args.axis < 0 else self.args.axis
        if not 0 <= axis < len(s):
            raise self.arg_error(f"axis {self.args.axis} out of range for the {len(s)}-d scores")
        self._scores_shape, self._y_shape = tuple(s), tuple(y)
        self._rows = (math.prod(s[:axis]), math.prod(s[axis:]))
        self._scale = q.dtype.type(self.args.scale or 1.0 / math.sqrt(d))


def _reduce_to(g: np.ndarray, shape: tuple) -> np.ndarray:
    """``g`` summed over the leading axes an operand of ``shape`` was broadcast along."""
    extra = g.ndim - len(shape)
    axes = tuple(range(extra)) + tuple(
        extra + i for i, n in enumerate(shape[:-2]) if n == 1 and g.shape[extra + i] != 1
    )
    return g.sum(axis=axes).reshape(shape) if axes else g


@register_op(
    "ScaledDotProductAttentionGradient",
    inputs={4, 5},
    outputs=3,
    input_docs=[
        ("Q", "forward queries"),
        ("K", "forward keys"),
        ("V", "forward values"),
        ("mask", "optional forward mask"),
        ("dY", "gradient of Y"),
    ],
    output_docs=[("dQ", "gradient of Q"), ("dK", "gradient of K, in K's layout"), ("dV", "gradient of V")],
    args=[
        Arg("scale", FLOAT, 0.0, "as the forward op"),
        Arg("transposed_k", INT, 0, "as the forward op"),
        Arg("axis", INT, -1, "as the forward op"),
    ],
    infer=lambda args, ins: list(ins[:3]),
    category="nn",
    private=True,
    input_types="float",
)
class ScaledDotProductAttentionGradient(ScaledDotProductAttention):
    """With S = scale Q K^T + mask, P = softmax(S) (rows at ``axis``), Y = P V: dV = P^T dY, dP = dY V^T,
    dS = P (dP - rowsum(dP P)), dQ = scale dS K, dK = scale dS^T Q (summed over broadcast axes). The mask
    is taken as a constant (no gradient)."""

    def run(self) -> None:
        q, k, v = float_input(self, 0), self.input(1), self.input(2)
        mask = self.input(3) if len(self.inputs) == 5 else None
        dy = self.input(len(self.inputs) - 1)
        self._plan(q, k, v, mask)
        if dy.shape != self._y_shape:
            raise ShapeError(f"{self.describe()}: dY {list(dy.shape)} does not match Y {list(self._y_shape)}")
        kt = k if self.args.transposed_k else np.swapaxes(k, -1, -2)
        p = np.matmul(q * self._scale, kt)
        if mask is not None:
            p += mask
        n, d = self._rows
        rows = p.reshape(n, d)
        _softmax_rows(rows, rows, np.empty((n, 1), q.dtype), False)
        dp = np.matmul(dy, np.swapaxes(v, -1, -2))
        dp2, p2 = dp.reshape(n, d), p.reshape(n, d)
        ds = (p2 * (dp2 - (dp2 * p2).sum(axis=1, keepdims=True))).reshape(p.shape)
        ds *= self._scale
        dq = np.matmul(ds, np.swapaxes(kt, -1, -2))
        dkt = np.matmul(np.swapaxes(q, -1, -2), ds)
        dv = np.matmul(np.swapaxes(p, -1, -2), dy)
        self.output(0, q.shape, q.dtype)[...] = _reduce_to(dq, q.shape)
        dk = dkt if self.args.transposed_k else np.swapaxes(dkt, -1, -2)
        self.output(1, k.shape, q.dtype)[...] = _reduce_to(dk, k.shape)
        self.output(2, v.shape, q.dtype)[...] = _reduce_to(dv, v.shape)


@gradient("ScaledDotProductAttention")
def _attention_grad(g):
    ins = list(g.def_.input) + [g.GO(0)]
    return [g.op("ScaledDotProductAttentionGradient", ins, [g.GI(0), g.GI(1), g.GI(2)])]
