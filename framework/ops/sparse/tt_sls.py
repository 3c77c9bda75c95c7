"""``TTSparseLengthsSum`` and its gradient (Caffe2's ``tt_sls_op``): SparseLengthsSum over an embedding table
stored as three tensor-train cores.

The table has ``prod(factor_i)`` rows of ``emb_size = prod(factor_j)`` columns. Core k is float
``[factor_i[k], ranks[k], factor_j[k], ranks[k + 1]]`` (ranks[0] = ranks[3] = 1). Row ``idx`` is split into
digits ``(i0, i1, i2)`` of the mixed radix ``factor_i`` (i0 most significant) and rebuilt by two chained
products:

- ``core0_output[n] = core0[i0]`` as ``[n0, r1]``;
- ``core1_output[n] = (core0_output[n] @ core1[i1] as [r1, n1 * r2])`` as ``[n0 * n1, r2]``;
- ``row = (core1_output[n] @ core2[i2] as [r2, n2])`` flattened to ``[emb_size]``.

Cores are float32 as in Caffe2 (float64 is accepted too, for float64 gradient checks); the float outputs
have the cores' type. Outputs: ``Y`` ``[len(lengths), emb_size]`` (row sums per segment), ``core0_output``
``[N, n0, r1]``, ``core1_output`` ``[N, n0 * n1, r2]`` and ``indices`` (int64 ``[N, 3]``, the digits), which the
gradient op reuses.
``TTSparseLengthsSumGradient(core0, core1, core2, lengths, core0_output, core1_output, indices, dY)`` gives
the three cores' gradients (zero on rows no index used). Departure: Caffe2's later schema lists a fifth
output (core2_output) that no consumer reads; the op here has the four outputs its 2020 Python tests use.
"""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError
from framework.ops.gradient import gradient, no_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import INT, INTS, REQUIRED, Arg, TensorSpec
from framework.ops.sparse.gather import int_input
from framework.ops.sparse.lengths import lengths_of

F32 = np.dtype(np.float32)


def _cores(op: Operator) -> list[np.ndarray]:
    cores = [op.input(k) for k in range(3)]
    for k, c in enumerate(cores):
        if c.ndim != 4 or c.dtype.kind != "f" or c.dtype != cores[0].dtype:
            raise ShapeError(f"{op.describe()}: core{k} '{op.input_names[k]}' must be float [v, r, n, r'] (all "
                             f"cores of one type), got {c.dtype} {list(c.shape)}")  # fmt: skip
    if cores[0].shape[1] != 1 or cores[2].shape[3] != 1:
        raise ShapeError(f"{op.describe()}: the outer ranks must be 1, got {cores[0].shape[1]} and {cores[2].shape[3]}")
    if cores[0].shape[3] != cores[1].shape[1] or cores[1].shape[3] != cores[2].shape[1]:
        raise ShapeError(
            f"{op.describe()}: core ranks do not chain: {[list(c.shape) for c in cores]} (core k's last dim must be "
            "core k+1's second)"
        )
    return cores


def _check_lengths(op: Operator, lengths: np.ndarray, n: int) -> None:
    if int(lengths.sum()) != n:
        raise ShapeError(f"{op.describe()}: lengths sum to {int(lengths.sum())}, but there are {n} indices")


@register_op(
    "TTSparseLengthsSum",
    inputs=5,
    outputs=4,
    args=[
        Arg("factor_i", INTS, REQUIRED, "factorization of the number of rows (one factor per core)"),
        Arg("factor_j", INTS, REQUIRED, "factorization of emb_size (one factor per core)"),
        Arg("ranks", INTS, REQUIRED, "the cores' ranks [1, r1, r2, 1]"),
        Arg("emb_size", INT, REQUIRED, "columns of each embedding row (= product of factor_j)"),
    ],
    input_docs=[
        ("core0", "float [v0, 1, n0, r1]"),
        ("core1", "float [v1, r1, n1, r2]"),
        ("core2", "float [v2, r2, n2, 1]"),
        ("indices", "int32/int64 [N] rows"),
        ("lengths", "int [S] segment lengths summing to N"),
    ],  # fmt: skip
    output_docs=[
        ("OUTPUT", "float [S, emb_size]"),
        ("core0_output", "float [N, n0, r1]"),
        ("core1_output", "float [N, n0 * n1, r2]"),
        ("indices", "int64 [N, 3] the rows' digits"),
    ],  # fmt: skip
    infer=lambda args, ins: [
        TensorSpec((ins[4].shape[0] if ins[4].shape else None, args.emb_size), ins[0].dtype or F32),
        TensorSpec(None, ins[0].dtype or F32),
        TensorSpec(None, ins[0].dtype or F32),
        TensorSpec(None, np.dtype(np.int64)),
    ][: args.num_outputs],
    category="sparse",
)
class TTSparseLengthsSum(Operator):
    """Segment sums of tensor-train embedding rows (module doc)."""

    def setup(self) -> None:
        a = self.args
        if len(a.factor_i) != 3 or len(a.factor_j) != 3 or len(a.ranks) != 4:
            raise self.arg_error("takes three cores: factor_i and factor_j of 3 values, ranks of 4")
        if int(np.prod(a.factor_j)) != a.emb_size:
            raise self.arg_error(f"emb_size {a.emb_size} is not the product of factor_j {list(a.factor_j)}")

    def run(self) -> None:
        a = self.args
        c0, c1, c2 = _cores(self)
        for k, c in enumerate((c0, c1, c2)):
            if c.shape[0] != a.factor_i[k] or c.shape[2] != a.factor_j[k]:
                raise ShapeError(
                    f"{self.describe()}: core{k} is {list(c.shape)}; factor_i[{k}] = {a.factor_i[k]} rows of "
                    f"factor_j[{k}] = {a.factor_j[k]} columns expected"
                )
        idx = int_input(self, 3, 1).astype(np.int64)
        lengths = lengths_of(self, 4)
        _check_lengths(self, lengths, idx.size)
        total = int(np.prod(a.factor_i))
        if idx.size and (idx.min() < 0 or idx.max() >= total):
            raise ShapeError(f"{self.describe()}: an index is outside [0, {total}): {idx.min()}..{idx.max()}")
        f1, f2 = a.factor_i[1], a.factor_i[2]
        digits = np.stack([idx // (f1 * f2), (idx // f2) % f1, idx % f2], axis=1)
        n = idx.size
        n0, n1, n2 = a.factor_j
        r1, r2 = c1.shape[1], c2.shape[1]
        out0 = c0[digits[:, 0]].reshape(n, n0, r1)
        out1 = np.matmul(out0, c1[digits[:, 1]].reshape(n, r1, n1 * r2)).reshape(n, n0 * n1, r2)
        rows = np.matmul(out1, c2[digits[:, 2]].reshape(n, r2, n2)).reshape(n, n0 * n1 * n2)
        y = np.zeros((lengths.size, a.emb_size), c0.dtype)
        np.add.at(y, np.repeat(np.arange(lengths.size), lengths), rows)
        self.output(0, y.shape, c0.dtype)[...] = y
        self.output(1, out0.shape, c0.dtype)[...] = out0
        self.output(2, out1.shape, c0.dtype)[...] = out1
        self.output(3, digits.shape, np.int64)[...] = digits


@register_op(
    "TTSparseLengthsSumGradient",
    inputs=8,
    outputs=3,
    input_docs=[
        ("core0", "the forward's core0"),
        ("core1", "the forward's core1"),
        ("core2", "the forward's core2"),
        ("lengths", "the forward's segment lengths"),
        ("core0_output", "the forward's output 1"),
        ("core1_output", "the forward's output 2"),
        ("indices", "the forward's output 3: int64 [N, 3] digits"),
        ("dY", "gradient of the forward's output 0, [S, emb_size]"),
    ],  # fmt: skip
    output_docs=[("dCore0", "core0's shape"), ("dCore1", "core1's shape"), ("dCore2", "core2's shape")],
    infer=lambda args, ins: [TensorSpec(ins[k].shape, ins[k].dtype or F32) for k in range(3)],
    category="sparse",
    private=True,
)
class TTSparseLengthsSumGradient(Operator):
    """Gradients of the three cores from the forward pass's intermediate products (module doc)."""

    def run(self) -> None:
        c0, c1, c2 = _cores(self)
        lengths = lengths_of(self, 3)
        out0, out1, dy = self.input(4), self.input(5), self.input(7)
        digits = int_input(self, 6, 2).astype(np.int64)
        n = digits.shape[0]
        _check_lengths(self, lengths, n)
        n0, r1 = c0.shape[2], c0.shape[3]
        n1, r2 = c1.shape[2], c1.shape[3]
        n2 = c2.shape[2]
        if (digits.shape[1] != 3 or out0.shape != (n, n0, r1) or out1.shape != (n, n0 * n1, r2)
                or dy.shape != (lengths.size, n0 * n1 * n2)):  # fmt: skip
            raise ShapeError(
                f"{self.describe()}: shapes do not fit the cores: indices {list(digits.shape)}, core0_output "
                f"{list(out0.shape)}, core1_output {list(out1.shape)}, dY {list(dy.shape)}"
            )
        for k, c in enumerate((c0, c1, c2)):
            if n and (digits[:, k].min() < 0 or digits[:, k].max() >= c.shape[0]):
                raise ShapeError(f"{self.describe()}: digit {k} of an index is outside core{k}'s {c.shape[0]} rows")
        d_row = dy[np.repeat(np.arange(lengths.size), lengths)].reshape(n, n0 * n1, n2)
        d2 = np.matmul(out1.transpose(0, 2, 1), d_row)  # [n, r2, n2]
        d_out1 = np.matmul(d_row, c2[digits[:, 2]].reshape(n, r2, n2).transpose(0, 2, 1))  # [n, n0*n1, r2]
        d_out1 = d_out1.reshape(n, n0, n1 * r2)
        d1 = np.matmul(out0.transpose(0, 2, 1), d_out1)  # [n, r1, n1*r2]
        d0 = np.matmul(d_out1, c1[digits[:, 1]].reshape(n, r1, n1 * r2).transpose(0, 2, 1))  # [n, n0, r1]
        grads = []
        for k, (c, part) in enumerate(((c0, d0), (c1, d1), (c2, d2))):
            g = np.zeros(c.shape, c.dtype)
            np.add.at(g, digits[:, k], part.reshape(n, *c.shape[1:]).astype(c.dtype))
            grads.append(g)
        for k, g in enumerate(grads):
            self.output(k, g.shape, g.dtype)[...] = g


@gradient("TTSparseLengthsSum")
def _tt_sls_grad(g):
    return [
        g.op(
            "TTSparseLengthsSumGradient",
            [g.I(0), g.I(1), g.I(2), g.I(4), g.O(1), g.O(2), g.O(3), g.GO(0)],
            [g.GI(0), g.GI(1), g.GI(2)],
        )
    ]


no_gradient("TTSparseLengthsSumGradient")
