"""ONNXRMSNormalization against a row loop."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.ops.testing import assert_reference_checks, run_op_on


@settings(max_examples=30, deadline=None)
@given(shape=st.lists(st.integers(1, 4), min_size=1, max_size=4), data=st.data(), eps=st.sampled_from([1e-5, 0.1]))
def test_rms_norm_matches_loop(shape, data, eps):
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    a = axis % len(shape)
    k = data.draw(st.integers(0, len(shape) - a))
    scale_shape = tuple(shape[len(shape) - k :]) if k else ()
    rng = np.random.default_rng(len(shape) * 7 + a)
    x = rng.standard_normal(shape).astype(np.float32)
    s = rng.standard_normal(scale_shape).astype(np.float32)

    def ref(x, s):
        rows = x.reshape(int(np.prod(shape[:a], dtype=int)), -1).astype(np.float64)
        out = np.empty_like(rows)
        for i, r in enumerate(rows):
            out[i] = r / np.sqrt(np.mean(r * r) + eps)
        return out.reshape(shape) * s

    op = CreateOperator("ONNXRMSNormalization", ["x", "s"], ["y"], axis=axis, epsilon=eps)
    assert_reference_checks(op, [x, s], ref, threshold=1e-4)


def test_rms_norm_bad_scale_and_empty():
    x = np.ones((2, 3), np.float32)
    with pytest.raises(FrameworkError, match="scale 's'"):
        run_op_on(CreateOperator("ONNXRMSNormalization", ["x", "s"], ["y"]), [x, np.ones(2, np.float32)])
    (y,) = run_op_on(CreateOperator("ONNXRMSNormalization", ["x", "s"], ["y"]), [x[:0], np.ones(3, np.float32)])
    assert y.shape == (0, 3)
