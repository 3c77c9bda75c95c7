"""RowWiseSparseAdam's optional 4th output: each updated row's effective gradient (the step without
lr), against a numpy reference of the row-wise Adam step."""

import math

import numpy as np

from framework.core import CreateOperator
from framework.ops.testing import assert_reference_checks


def test_row_wise_sparse_adam_output_grad():
    rng = np.random.default_rng(2)
    param = rng.standard_normal((5, 3)).astype(np.float32)
    m1 = rng.standard_normal((5, 3)).astype(np.float32)
    m2 = rng.random(5).astype(np.float32)
    idx = np.array([3, 0], np.int64)
    grad = rng.standard_normal((2, 3)).astype(np.float32)
    lr, it = np.array([-0.1], np.float32), np.array([4], np.int64)
    b1, b2, eps = 0.8, 0.95, 1e-3
    op = CreateOperator(
        "RowWiseSparseAdam",
        ["param", "m1", "m2", "idx", "grad", "lr", "iter"],
        ["param", "m1", "m2", "g_out"],
        beta1=b1,
        beta2=b2,
        epsilon=eps,
    )

    def ref(param, m1, m2, idx, grad, lr, it):
        p, a, v, g_out = param.copy(), m1.copy(), m2.copy(), np.zeros_like(grad)
        corr = math.sqrt(1 - b2 ** (it[0] + 1)) / (1 - b1 ** (it[0] + 1))
        for k, r in enumerate(idx):
            v[r] = b2 * v[r] + (1 - b2) * np.mean(grad[k] ** 2)
            a[r] = b1 * a[r] + (1 - b1) * grad[k]
            g_out[k] = corr * a[r] / (np.sqrt(v[r]) + eps)
            p[r] = p[r] + lr[0] * g_out[k]
        return p, a, v, g_out

    assert_reference_checks(op, [param, m1, m2, idx, grad, lr, it], ref)
