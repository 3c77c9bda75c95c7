"""ONNXMatMul (numpy's rank rules at run time) and ONNXSqueeze (negative axes at run time)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.testing import arrays, assert_inferred_shapes, assert_reference_checks, run_op_on


@given(data=st.data())
@settings(max_examples=30, deadline=None)
def test_matmul(data):
    m, k, n = (data.draw(st.integers(1, 3)) for _ in range(3))
    lead_a = data.draw(st.lists(st.integers(1, 2), max_size=2))
    lead_b = [data.draw(st.sampled_from([1, d])) for d in lead_a][data.draw(st.integers(0, len(lead_a))) :]
    a_shape = [k] if data.draw(st.booleans()) else lead_a + [m, k]
    b_shape = [k] if data.draw(st.booleans()) else lead_b + [k, n]
    a, b = data.draw(arrays(a_shape, np.float64)), data.draw(arrays(b_shape, np.float64))

    def ref(a, b):
        a2 = a[None, :] if a.ndim == 1 else a
        b2 = b[:, None] if b.ndim == 1 else b
        y = (a2[..., :, :, None] * b2[..., None, :, :]).sum(axis=-2)  # broadcast stacks, sum over k
        if b.ndim == 1:
            y = y[..., 0]
        if a.ndim == 1:
            y = y[..., 0, :] if b.ndim > 1 else y[..., 0]
        return y

    op = CreateOperator("ONNXMatMul", ["a", "b"], ["y"])
    assert_reference_checks(op, [a, b], ref, threshold=1e-9)


def test_squeeze_negative_axes_and_errors():
    x = np.arange(6, dtype=np.float32).reshape(1, 2, 1, 3, 1)
    op = CreateOperator("ONNXSqueeze", ["x"], ["y"], axes=[-1, 0])
    outs = assert_reference_checks(op, [x], lambda x: x.reshape(2, 1, 3), check_inference=False)
    assert_inferred_shapes(op, [x], outs, require_known=False)
    with pytest.raises(FrameworkError, match="ONNXSqueeze.*'x'"):
        run_op_on(CreateOperator("ONNXSqueeze", ["x"], ["y"], axes=[-2]), [x])  # size 3
    with pytest.raises(FrameworkError, match="ONNXMatMul.*'a'"):
        run_op_on(CreateOperator("ONNXMatMul", ["a", "b"], ["y"]), [np.zeros((2, 3)), np.zeros((2, 3))])
