"""ONNXSqueeze: negative axes resolved at run time."""

import numpy as np
import pytest

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.ops.testing import assert_inferred_shapes, assert_reference_checks, run_op_on


def test_squeeze_negative_axes_and_errors():
    x = np.arange(6, dtype=np.float32).reshape(1, 2, 1, 3, 1)
    op = CreateOperator("ONNXSqueeze", ["x"], ["y"], axes=[-1, 0])
    outs = assert_reference_checks(op, [x], lambda x: x.reshape(2, 1, 3), check_inference=False)
    assert_inferred_shapes(op, [x], outs, require_known=False)
    with pytest.raises(FrameworkError, match="ONNXSqueeze.*'x'"):
        run_op_on(CreateOperator("ONNXSqueeze", ["x"], ["y"], axes=[-2]), [x])  # size 3
