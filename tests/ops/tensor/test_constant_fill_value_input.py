"""ConstantFill's optional second input (Caffe2 2020): the fill value as a one-element tensor."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.errors import FrameworkError
from framework.memory.workspace import Workspace
from framework.proto.args import make_argument
from framework.proto.framework_pb2 import OperatorDef, TensorProto

_TYPES = [(np.float32, TensorProto.FLOAT), (np.int32, TensorProto.INT32), (np.int64, TensorProto.INT64),
          (np.bool_, TensorProto.BOOL), (np.float64, TensorProto.DOUBLE)]  # fmt: skip


def _fill(ws, inputs, dtype, out="Y"):
    op = OperatorDef(type="ConstantFill", input=inputs, output=[out])
    op.arg.append(make_argument("dtype", dtype))
    ws.run_operator_once(op)
    return ws.fetch_blob(out)


@settings(max_examples=20, deadline=None)
@given(shape=st.lists(st.integers(0, 4), min_size=1, max_size=3), which=st.integers(0, len(_TYPES) - 1),
       raw=st.integers(-5, 5))  # fmt: skip
def test_value_input_fills_the_input_shape(shape, which, raw):
    np_type, enum = _TYPES[which]
    ws = Workspace()
    ws.feed_blob("X", np.zeros(shape, np.float32))
    value = np.array([raw]).astype(np_type)
    ws.feed_blob("V", value)
    y = _fill(ws, ["X", "V"], enum)
    assert y.dtype == np.dtype(np_type) and y.shape == tuple(shape)
    np.testing.assert_array_equal(y, np.full(shape, value[0], dtype=np_type))


@pytest.mark.parametrize("value", [np.array([1, 2], np.float32), np.array([1], np.float64)])
def test_value_input_of_wrong_size_or_type_is_refused_and_leaves_the_output(value):
    ws = Workspace()
    ws.feed_blob("X", np.zeros(3, np.float32))
    ws.feed_blob("V", value)
    ws.feed_blob("Y", np.arange(2, dtype=np.float32))
    with pytest.raises(FrameworkError, match="value input 'V'"):
        _fill(ws, ["X", "V"], TensorProto.FLOAT)
    np.testing.assert_array_equal(ws.fetch_blob("Y"), np.arange(2, dtype=np.float32))
