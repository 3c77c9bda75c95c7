"""ONNXMeanVarianceNormalization and ONNXBatchNormTraining against per-channel loops."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.ops.testing import assert_reference_checks, run_op_on


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 999), n=st.integers(1, 3), c=st.integers(1, 3), hw=st.integers(1, 3))
def test_mvn_and_bn_training_match_loops(seed, n, c, hw):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c, hw, hw + 1)).astype(np.float32)

    def ref_stats(x):
        mean, var = np.zeros(c), np.zeros(c)
        for ch in range(c):
            vals = x[:, ch].astype(np.float64).reshape(-1)
            mean[ch] = sum(vals) / len(vals)
            var[ch] = sum((v - mean[ch]) ** 2 for v in vals) / len(vals)
        return mean, var

    def ref_mvn(x):
        mean, var = ref_stats(x)
        return (x - mean.reshape(1, c, 1, 1)) / (np.sqrt(var).reshape(1, c, 1, 1) + 1e-9)

    assert_reference_checks(CreateOperator("ONNXMeanVarianceNormalization", ["x"], ["y"]), [x], ref_mvn, atol=1e-3)
    s, b, rm, rv = (rng.standard_normal(c).astype(np.float32) for _ in range(4))
    rv = np.abs(rv)

    def ref_bn(x, s, b, rm, rv):
        mean, var = ref_stats(x)
        sh = (1, c, 1, 1)
        y = s.reshape(sh) * (x - mean.reshape(sh)) / np.sqrt(var.reshape(sh) + 1e-3) + b.reshape(sh)
        return [y, rm * 0.8 + mean * 0.2, rv * 0.8 + var * 0.2]

    op = CreateOperator(
        "ONNXBatchNormTraining", ["x", "s", "b", "m", "v"], ["y", "m2", "v2"], epsilon=1e-3, momentum=0.8
    )
    assert_reference_checks(op, [x, s, b, rm, rv], ref_bn, threshold=1e-4)


def test_norm_errors_name_the_blob():
    x = np.ones((2, 3, 2), np.float32)
    with pytest.raises(FrameworkError, match="'m'"):
        run_op_on(
            CreateOperator("ONNXBatchNormTraining", ["x", "s", "b", "m", "v"], ["y"]),
            [x, np.ones(3, np.float32), np.ones(3, np.float32), np.ones(2, np.float32), np.ones(3, np.float32)],
        )
    with pytest.raises(FrameworkError, match="axes"):
        run_op_on(CreateOperator("ONNXMeanVarianceNormalization", ["x"], ["y"], axes=[0, 5]), [x])
