"""Typed TensorProto values widened into int32_data (int8, uint8, int16, uint16, float16 bits) that do
not fit their type are a SerializationError naming the tensor, not silently wrapped values."""

from __future__ import annotations

import numpy as np
import pytest

from framework.errors import SerializationError
from framework.memory.tensor_proto import tensor_from_proto
from framework.proto.framework_pb2 import TensorProto

DT = TensorProto.DataType


@pytest.mark.parametrize(
    "dt,values",
    [
        (DT.INT8, [300, -200]),
        (DT.INT8, [-129]),
        (DT.UINT8, [256]),
        (DT.UINT8, [-1]),
        (DT.INT16, [40000]),
        (DT.UINT16, [70000]),
        (DT.FLOAT16, [70000]),
    ],
)
def test_out_of_range_refused(dt, values):
    p = TensorProto(name="w", data_type=dt, dims=[len(values)], int32_data=values)
    with pytest.raises(SerializationError, match="'w'.*outside the range"):
        tensor_from_proto(p)


@pytest.mark.parametrize(
    "dt,values,want",
    [
        (DT.INT8, [127, -128], np.int8),
        (DT.UINT8, [0, 255], np.uint8),
        (DT.INT16, [-32768, 32767], np.int16),
        (DT.UINT16, [0, 65535], np.uint16),
        (DT.BOOL, [0, 1], np.bool_),
    ],
)
def test_in_range_loads(dt, values, want):
    p = TensorProto(name="w", data_type=dt, dims=[len(values)], int32_data=values)
    got = np.asarray(tensor_from_proto(p).data())
    np.testing.assert_array_equal(got, np.array(values).astype(want))
    assert got.dtype == want
