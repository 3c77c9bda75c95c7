"""Caffe2's fused embedding-table updates (``adagrad_fused``, ``rowwise_adagrad_fused``): the gradient of
SparseLengths{Sum,WeightedSum,Mean} and the (row-wise) sparse Adagrad step in one op, in place on the table.

``[RowWise]SparseAdagradFusedWithSparseLengths<R>GradientApprox(param, moment, [aux_param,] indices, grad,
lr, lengths) -> (param, moment[, aux_grad])``: ``grad`` is the gradient of the pooled output (one row per
segment of ``lengths``); the row looked up by ``indices[i]`` in segment k gets ``grad[k]`` (Sum),
``grad[k] / lengths[k]`` (Mean) or ``aux_param[i] * grad[k]`` (WeightedSum, which also returns
``aux_grad[i] = grad[k] . param[indices[i]]``), then SparseAdagrad (``moment`` shaped as ``param``) or
RowWiseSparseAdagrad (``moment`` one value per row) updates the rows, repeated rows one after the other.
``lr`` is added (the builders pass a negative rate). Departure: ``aux_grad`` is computed from the table
before this op's update (Caffe2's "Approx" CPU kernel may read a row a repeated index already updated);
the exact Caffe2 names (without ``Approx``) are aliases of the same kernel.
"""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError
from framework.ops.gradient import should_not_do_gradient
from framework.ops.schema import FLOAT, Arg
from framework.ops.sparse.lengths import lengths_of
from framework.ops.training.optimizers import UpdateOp, copy_through, update_op
from framework.ops.training.sparse_optimizers import adagrad_rows, rowwise_adagrad_rows

ARGS = [
    Arg("epsilon", FLOAT, 1e-5, "added to the root of the accumulated squares"),
    Arg("weight_decay", FLOAT, 0.0, "L2 penalty: the step uses grad + weight_decay * param"),
]


class FusedAdagrad(UpdateOp):
    """The shared kernel; ``rowwise`` and ``reducer`` are set per registered op."""

    rowwise = False
    reducer = ""

    def run(self) -> None:
        weighted = self.reducer == "WeightedSum"
        at = 2 + weighted  # indices
        p_in, m_in = self.input(0), self.input(1)
        if p_in.ndim < 1:
            raise ShapeError(f"{self.describe()}: param '{self.input_names[0]}' must have rows, got a scalar")
        if self.rowwise:
            if m_in.size != p_in.shape[0]:
                raise ShapeError(
                    f"{self.describe()}: moment '{self.input_names[1]}' has {m_in.size} values, expected one per row "
                    f"of '{self.input_names[0]}' ({p_in.shape[0]})"
                )
        else:
            self.same_shape(0, 1)
        idx = self.input(at).reshape(-1)
        if idx.dtype.kind not in "iu":
            raise ShapeError(f"{self.describe()}: indices must be integers, got {idx.dtype}")
        if idx.size and (idx.min() < 0 or idx.max() >= p_in.shape[0]):
            raise ShapeError(f"{self.describe()}: indices out of range [0, {p_in.shape[0]}) of '{self.input_names[0]}'")
        dy, lr, lengths = self.input(at + 1), float(self.scalar(at + 2)), lengths_of(self, at + 3)
        if int(lengths.sum()) != idx.size:
            raise ShapeError(f"{self.describe()}: lengths sum to {int(lengths.sum())}, there are {idx.size} indices")
        if dy.shape != (len(lengths), *p_in.shape[1:]):
            raise ShapeError(
                f"{self.describe()}: grad has shape {list(dy.shape)}, expected {[len(lengths), *p_in.shape[1:]]} "
                "(one row per segment)"
            )
        w = None
        if weighted:
            w = self.input(2).reshape(-1)
            if w.size != idx.size:
                raise ShapeError(f"{self.describe()}: aux_param has {w.size} weights for {idx.size} indices")
        seg = np.repeat(np.arange(len(lengths)), lengths)
        g = dy[seg]
        block = (idx.size,) + (1,) * (g.ndim - 1)
        if self.reducer == "Mean":
            g /= lengths[seg].astype(g.dtype).reshape(block)
        if weighted:
            aux = self.output(2, w.shape, w.dtype)
            rows = p_in[idx]
            aux[...] = (g * rows).reshape(idx.size, -1).sum(axis=1) if idx.size else 0
            g *= w.astype(g.dtype).reshape(block)
        p, m = copy_through(self, [(0, 0), (1, 1)])
        kernel = rowwise_adagrad_rows if self.rowwise else adagrad_rows
        kernel(p, m.reshape(-1) if self.rowwise else m, idx, g, lr, self.args.epsilon, self.args.weight_decay)


def _register(rowwise: bool, reducer: str) -> None:
    base = f"{'RowWise' if rowwise else ''}SparseAdagradFusedWithSparseLengths{reducer}Gradient"
    weighted = reducer == "WeightedSum"
    docs = [("param", "embedding table"), ("moment", "one value per row" if rowwise else "param's shape")]
    if weighted:
        docs.append(("aux_param", "the weights of the forward SparseLengthsWeightedSum"))
    docs += [
        ("indices", "rows looked up"),
        ("grad", "gradient of the pooled output, one row per segment"),
        ("lr", "rate (negative from the builders)"),
        ("lengths", "ids per segment"),
    ]
    outs = [("output_param", "updated table"), ("output_moment", "updated moment")]
    if weighted:
        outs.append(("aux_grad", "gradient of aux_param"))
    what = {"Sum": "SparseLengthsSum", "Mean": "SparseLengthsMean", "WeightedSum": "SparseLengthsWeightedSum"}
    cls = type(
        f"{base}Approx",
        (FusedAdagrad,),
        {
            "rowwise": rowwise,
            "reducer": reducer,
            "__doc__": f"The gradient of {what[reducer]} and the {'row-wise ' if rowwise else ''}sparse Adagrad "
            "update in one op, in place on the looked-up rows (see the module doc).",
        },
    )
    update_op(
        f"{base}Approx",
        (0, 1, 2) if weighted else (0, 1),
        inputs=len(docs),
        outputs=len(outs),
        args=ARGS,
        input_docs=docs,
        output_docs=outs,
        enforce_inplace={(0, 0), (1, 1)},
        input_types=["float", "float"] + (["float"] if weighted else []) + ["int", "float", "numeric", "int"],
        aliases=[base],
    )(cls)
    should_not_do_gradient(f"{base}Approx")


for _rowwise in (False, True):
    for _reducer in ("Sum", "WeightedSum", "Mean"):
        _register(_rowwise, _reducer)
