"""Regularizers applied to the embedding rows a batch touched (Caffe2's ``sparse_normalize_op``,
``sparse_lp_regularizer_op``), in place on the table; repeated indices apply one after the other.

- ``SparseNormalize(param, indices[, grad]) -> param``: each row's L2 norm becomes ``norm`` (constant
  norm) or, with ``use_max_norm`` (default), rows whose norm (+1e-12) is at least ``norm`` are scaled down
  to it and shorter ones are left alone.
- ``SparseLpRegularizer(param, indices[, grad]) -> param``: ``p=2``: ``row *= 1 - reg_lambda``; ``p=1``:
  soft-threshold each element by ``reg_lambda`` (to 0 inside [-lambda, lambda]). Other p are an error.
"""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError
from framework.ops.gradient import should_not_do_gradient
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, FLOAT, Arg
from framework.ops.training.optimizers import UpdateOp, copy_through, like_inputs
from framework.ops.training.sparse_optimizers import waves
from framework.ops.validation import check_indices


def _rows(op: UpdateOp) -> tuple[np.ndarray, np.ndarray]:
    p, idx = op.input(0), op.input(1).reshape(-1)
    if p.ndim < 1 or p.dtype.kind != "f":
        raise ShapeError(f"{op.describe()}: param '{op.input_names[0]}' must be a float table")
    if idx.dtype.kind not in "iu":
        raise ShapeError(f"{op.describe()}: indices must be integers, got {idx.dtype}")
    check_indices(op, 1, idx, p.shape[0], what=f"rows of '{op.input_names[0]}'")
    return p, idx


@register_op(
    "SparseNormalize",
    inputs=(2, 3),
    args=[
        Arg("use_max_norm", BOOL, True, "only scale rows longer than norm (else every row to norm)"),
        Arg("norm", FLOAT, 1.0, "the L2 norm rows get"),
    ],
    input_docs=[("param", "embedding table"), ("indices", "rows to normalize"), ("grad", "optional, unused")],
    output_docs=[("output_param", "the table, rows normalized")],
    enforce_inplace={(0, 0)},
    infer=like_inputs(0),
    category="sparse",
)
class SparseNormalize(UpdateOp):
    """Scale the rows ``indices`` to L2 norm ``norm`` (with ``use_max_norm``: only rows longer than it)."""

    def setup(self) -> None:
        if self.args.norm <= 0:
            raise self.arg_error(f"norm must be positive, got {self.args.norm}")

    def run(self) -> None:
        _, idx = _rows(self)
        (p,) = copy_through(self, [(0, 0)])
        flat = p.reshape(p.shape[0], int(np.prod(p.shape[1:], dtype=np.int64)))
        for w in waves(idx):
            r = idx[w]
            norm = np.sqrt(np.einsum("ij,ij->i", flat[r], flat[r])) + np.float32(1e-12)
            if self.args.use_max_norm:
                r, norm = r[norm >= self.args.norm], norm[norm >= self.args.norm]
            flat[r] *= (self.args.norm / norm).astype(p.dtype)[:, None]


@register_op(
    "SparseLpRegularizer",
    inputs=(2, 3),
    args=[Arg("p", FLOAT, 2.0, "1 or 2"), Arg("reg_lambda", FLOAT, 1e-5, "regularization strength")],
    input_docs=[("param", "embedding table"), ("indices", "rows to regularize"), ("grad", "optional, unused")],
    output_docs=[("output_param", "the table, rows regularized")],
    enforce_inplace={(0, 0)},
    infer=like_inputs(0),
    category="sparse",
)
class SparseLpRegularizer(UpdateOp):
    """L2 shrinkage (``row *= 1 - lambda``) or L1 soft-thresholding of the rows ``indices``."""

    def setup(self) -> None:
        if self.args.p not in (1.0, 2.0):
            raise self.arg_error(f"only p = 1 and p = 2 are implemented, got {self.args.p}")

    def run(self) -> None:
        _, idx = _rows(self)
        (p,) = copy_through(self, [(0, 0)])
        lam = p.dtype.type(self.args.reg_lambda)
        if self.args.p == 2.0:
            for w in waves(idx):  # a row named c times shrinks c times, in float steps as Caffe2
                p[idx[w]] *= p.dtype.type(1) - lam
            return
        for w in waves(idx):
            r = idx[w]
            x = p[r]
            p[r] = np.where(x < -lam, x + lam, np.where(x > lam, x - lam, 0)).astype(p.dtype)


should_not_do_gradient("SparseNormalize", "SparseLpRegularizer")
