"""``caffe2.python.operator_test.adagrad_test_helper``: the Adagrad reference and the sparse-Adagrad
check that Caffe2's adagrad tests share.

Adagrad step (with ``g = grad + weight_decay * param``): ``mom' = decay * mom + g**2`` (row-wise:
``+ mean(g**2)``), ``lr_eff = lr / (sqrt(mom') + epsilon)``, ``param' = param + lr_eff * g``. The lr
blob holds the already negated learning rate, as Caffe2's LearningRate writes it.
"""

from __future__ import annotations

from functools import partial
from typing import Any, Callable

import numpy as np

from framework import core
from framework.caffe2.python import hypothesis_test_util as hu


def ref_adagrad(
    param_in: np.ndarray,
    mom_in: np.ndarray,
    grad: np.ndarray,
    lr: Any,
    epsilon: float,
    using_fp16: bool = False,
    output_effective_lr: bool = False,
    output_effective_lr_and_update: bool = False,
    decay: float = 1.0,
    row_wise: bool = False,
    weight_decay: float = 0.0,
) -> tuple:
    """One Adagrad step. Returns ``(param, mom)``, plus ``effective_lr`` with ``output_effective_lr``,
    plus the update ``lr_eff * g`` with ``output_effective_lr_and_update``; computed in float32 and
    returned as float16 with ``using_fp16``, else float32."""
    param = np.asarray(param_in).astype(np.float32) if using_fp16 else param_in
    mom = np.asarray(mom_in).astype(np.float32) if using_fp16 else mom_in
    g = grad + weight_decay * param
    mom_out = decay * mom + (np.mean(np.square(g)) if row_wise else np.square(g))
    lr_eff = lr / (np.sqrt(mom_out) + epsilon)
    update = lr_eff * g
    outs = [param + update, mom_out]
    if output_effective_lr_and_update:
        outs += [lr_eff, update]
    elif output_effective_lr:
        outs.append(lr_eff)
    dtype = np.float16 if using_fp16 else np.float32
    return tuple(np.asarray(o).astype(dtype) for o in outs)


def adagrad_sparse_test_helper(
    parent_test: Any,
    inputs: tuple,
    lr: float,
    epsilon: float,
    engine: str,
    ref_adagrad: Callable[..., tuple],
    gc: Any,
    dc: Any,
    row_wise: bool = False,
    weight_decay: float = 0.0,
) -> None:
    """Check SparseAdagrad (RowWiseSparseAdagrad with ``row_wise``) in place on ``param``/``momentum``
    against ``ref_adagrad`` applied row by row, for a random subset of distinct rows of ``grad``.

    ``inputs`` is ``(param, momentum, grad)`` of one leading size; row-wise keeps one moment per row
    (the first element). The momentum is made non-negative, as a sum of squares is."""
    param, momentum, grad = inputs
    if row_wise:
        momentum = momentum.reshape(momentum.shape[0], -1)[:, 0]
    momentum = np.abs(momentum)
    lr_blob = np.array([lr], dtype=np.float32)
    if grad.size == 0:
        indices = np.zeros((0,), dtype=np.int64)
    else:
        rows = grad.shape[0]
        indices = np.random.choice(np.arange(rows), size=np.random.randint(rows), replace=False)
    grad = grad[indices]
    op = core.CreateOperator(
        "RowWiseSparseAdagrad" if row_wise else "SparseAdagrad",
        ["param", "momentum", "indices", "grad", "lr"],
        ["param", "momentum"],
        epsilon=epsilon,
        weight_decay=weight_decay,
        engine=engine,
        device_option=gc,
    )

    def ref_sparse(param, momentum, indices, grad, lr, ref_using_fp16=False):
        step = partial(ref_adagrad, using_fp16=True) if ref_using_fp16 else ref_adagrad
        param_out, momentum_out = np.copy(param), np.copy(momentum)
        for i, row in enumerate(indices):
            p, m = step(param[row], momentum[row], grad[i], lr, epsilon, weight_decay=weight_decay)
            # lr is a 1-element array: a scalar row's results come back with shape (1,)
            param_out[row] = np.reshape(p, np.shape(param_out[row]))
            momentum_out[row] = np.reshape(m, np.shape(momentum_out[row]))
        return param_out, momentum_out

    # half-precision tables are a GPU path of Caffe2's (dense Adagrad only)
    for fp16 in [False] + ([True] if gc == hu.gpu_do and not row_wise else []):
        dtype = np.float16 if fp16 else np.float32
        parent_test.assertReferenceChecks(
            gc, op, [param.astype(dtype), momentum.astype(dtype), indices, grad, lr_blob, fp16], ref_sparse
        )
