"""Int8TensorCPU (feed/fetch, errors, Caffe2's serialization) and Int8Quantize / Int8Dequantize /
Int8GivenTensorFill / Int8GivenIntTensorFill against element-by-element references of Caffe2's
int8_quantize_op.h / int8_dequantize_op.h / int8_given_tensor_fill_op.h."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework import workspace
from framework.core import CreateOperator
from framework.errors import ArgumentError, FrameworkError, SerializationError, TypeMismatchError
from framework.memory.blob import Blob
from framework.memory.int8_tensor import Int8TensorCPU
from framework.memory.serialize import deserialize_blob, serialize_blob_to_string
from framework.memory.workspace import Workspace
from framework.proto.framework_pb2 import BlobProto, TensorProto
from tests.ops.quantized.int8_helpers import check_int8, q8, run

f32 = np.float32


def ref_quantize(x, scale, zp):
    """QuantizeUint8, one element at a time: zp + nearbyint(float32(x / scale)) (ties to even), clamped."""
    out = np.empty(x.shape, np.uint8)
    for idx, v in np.ndenumerate(x):
        r = round(float(f32(v) / f32(scale)))  # Python's round: ties to even
        out[idx] = min(max(zp + r, 0), 255)
    return out


def ref_dequantize(q, scale, zp):
    out = np.empty(q.shape, np.float32)
    for idx, v in np.ndenumerate(q):
        out[idx] = f32(int(v) - zp) * f32(scale)
    return out


shapes = st.lists(st.integers(0, 5), min_size=0, max_size=4).map(tuple)


@settings(max_examples=30, deadline=None)
@given(
    shape=shapes,
    scale=st.floats(0.001953125, 8.0, width=32),
    zp=st.integers(0, 255),
    seed=st.integers(0, 2**16),
)
def test_quantize_matches_caffe2_rounding(shape, scale, zp, seed):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal(shape) * 200 * scale).astype(f32)
    if x.size:  # exact ties: (k + 0.5) * scale
        x.reshape(-1)[0] = f32(2.5) * f32(scale)
    op = CreateOperator("Int8Quantize", ["X"], ["Y"], Y_scale=scale, Y_zero_point=zp)
    check_int8(op, [x], [(ref_quantize(x, scale, zp), scale, zp)])


def test_quantize_ties_round_to_even_and_clamp():
    x = np.array([0.5, 1.5, 2.5, -0.5, -1.5, 1000.0, -1000.0, np.nan, np.inf, -np.inf], f32)
    op = CreateOperator("Int8Quantize", ["X"], ["Y"], Y_scale=1.0, Y_zero_point=100)
    expected = [100, 102, 102, 100, 98, 255, 0, 0, 255, 0]
    check_int8(op, [x], [(np.array(expected, np.uint8), 1.0, 100)])


@settings(max_examples=30, deadline=None)
@given(shape=shapes, scale=st.floats(0.001953125, 8.0, width=32), zp=st.integers(0, 255), seed=st.integers(0, 2**16))
def test_dequantize(shape, scale, zp, seed):
    codes = np.random.default_rng(seed).integers(0, 256, shape).astype(np.uint8)
    op = CreateOperator("Int8Dequantize", ["X"], ["Y"])
    check_int8(op, [q8(codes, scale, zp)], [ref_dequantize(codes, scale, zp)])


@settings(max_examples=20, deadline=None)
@given(shape=shapes, zp=st.integers(0, 255), seed=st.integers(0, 2**16))
def test_given_tensor_fill(shape, zp, seed):
    codes = np.random.default_rng(seed).integers(0, 256, shape).astype(np.uint8)
    op = CreateOperator(
        "Int8GivenTensorFill", [], ["Y"], values=codes.tobytes(), shape=list(shape), Y_scale=0.25, Y_zero_point=zp
    )
    check_int8(op, [], [(codes, 0.25, zp)])


@settings(max_examples=20, deadline=None)
@given(shape=shapes, seed=st.integers(0, 2**16))
def test_given_int_tensor_fill(shape, seed):
    values = np.random.default_rng(seed).integers(-(2**31), 2**31, shape).astype(np.int32)
    op = CreateOperator(
        "Int8GivenIntTensorFill", [], ["B"], values=values.reshape(-1).tolist(), shape=list(shape), Y_scale=1e-4
    )
    check_int8(op, [], [(values, 1e-4, 0)])


def test_fill_errors_name_the_op():
    ws = Workspace()
    ws.feed_blob("X", np.ones(2, f32))
    with pytest.raises(ArgumentError, match="Int8GivenTensorFill.*holds 4 elements, values has 3"):
        ws.run_operator_once(CreateOperator("Int8GivenTensorFill", [], ["Y"], values=b"abc", shape=[2, 2]))
    with pytest.raises(ArgumentError, match="Int8GivenIntTensorFill.*int32"):
        ws.run_operator_once(CreateOperator("Int8GivenIntTensorFill", [], ["Y"], values=[2**31], shape=[1]))
    with pytest.raises(ArgumentError, match="Y_scale must be a positive"):
        ws.run_operator_once(CreateOperator("Int8Quantize", ["X"], ["Y"], Y_scale=0.0))
    with pytest.raises(ArgumentError, match="Y_zero_point"):
        ws.run_operator_once(CreateOperator("Int8Quantize", ["X"], ["Y"], Y_zero_point=256))
    assert not ws.has_blob("Y") or ws.get_blob("Y").is_empty


def test_plain_tensor_where_int8_is_required_and_vice_versa():
    ws = Workspace()
    ws.feed_blob("X", np.ones((2, 3), f32))
    ws.feed_blob("Q", q8(np.ones((2, 3))))
    ws.feed_blob("Y", np.full((3,), 7.0, f32))
    with pytest.raises(FrameworkError, match=r"Int8Dequantize.*'X'.*holds a Tensor, expected an Int8TensorCPU"):
        ws.run_operator_once(CreateOperator("Int8Dequantize", ["X"], ["Y"]))
    with pytest.raises(FrameworkError, match=r"'Q'.*Int8TensorCPU, expected a Tensor") as err:
        ws.run_operator_once(CreateOperator("Int8Quantize", ["Q"], ["Y"]))
    assert "Int8TensorCPU uint8 [2, 3] (scale 0.009999999776482582, zero_point 127)" in str(err.value)
    ws.feed_blob("I", np.ones(3, np.int32))
    with pytest.raises(FrameworkError, match="must be float32"):
        ws.run_operator_once(CreateOperator("Int8Quantize", ["I"], ["Y"]))
    np.testing.assert_array_equal(ws.fetch_blob("Y"), np.full((3,), 7.0, f32))  # untouched


def test_failed_op_keeps_the_old_int8_output():
    ws = Workspace()
    old = q8(np.arange(4), 0.5, 3)
    ws.feed_blob("Y", old)
    ws.feed_blob("X", np.ones(4, np.int64))
    with pytest.raises(FrameworkError):
        ws.run_operator_once(CreateOperator("Int8Quantize", ["X"], ["Y"], Y_scale=2.0))
    kept = ws.get_blob("Y")._obj
    assert kept.scale == 0.5 and kept.zero_point == 3 and kept.numpy().tolist() == [0, 1, 2, 3]


def test_feed_and_fetch_like_caffe2():
    workspace.ResetWorkspace()
    workspace.FeedBlob("q", workspace.Int8Tensor(np.array([[1, 2, 250]], np.uint8), 0.5, 4))
    data, scale, zp = workspace.FetchBlob("q")  # Caffe2's fetcher: a (data, scale, zero_point) tuple
    assert data.tolist() == [[1, 2, 250]] and scale == 0.5 and zp == 4
    t = workspace.FetchInt8Blob("q")
    assert t.data.dtype == np.uint8 and t.scale == 0.5 and t.zero_point == 4
    np.testing.assert_array_equal(workspace.FetchInt8BlobRealVal("q"), [[-1.5, -1.0, 123.0]])
    data[0, 0] = 99  # a copy
    assert workspace.FetchInt8Blob("q").data[0, 0] == 1
    workspace.FeedBlob("x", np.ones(2, f32))
    with pytest.raises(FrameworkError, match="not fetching an Int8Blob"):
        workspace.FetchInt8Blob("x")
    from framework.caffe2 import c_extension as C

    ws_t = C.Workspace.current.fetch_int8_blob("q")  # Caffe2's C.Workspace.fetch_int8_blob
    assert isinstance(ws_t, workspace.Int8Tensor) and ws_t.zero_point == 4
    with pytest.raises(TypeMismatchError, match="uint8"):
        workspace.FeedBlob("bad", workspace.Int8Tensor(np.ones(2, np.float32), 1.0, 0))
    workspace.ResetWorkspace()


@pytest.mark.parametrize("dtype", [np.uint8, np.int32])
def test_serialization_is_caffe2s_qtensor(dtype):
    q = Int8TensorCPU.from_numpy(np.array([[0, 7, 255]], dtype), 0.125, 9)
    data = serialize_blob_to_string(q, "w")
    proto = BlobProto.FromString(data)
    assert proto.type == "Int8TensorCPU" and proto.name == "w"
    qt = proto.qtensor
    assert list(qt.dims) == [1, 3] and qt.precision == 8 and qt.scale == 0.125 and qt.bias == 9
    assert not qt.is_signed and list(qt.data) == [0, 7, 255]
    assert qt.data_type == (TensorProto.UINT8 if dtype == np.uint8 else TensorProto.INT32)
    b = Blob("w")
    deserialize_blob(data, b)
    back = b.get()
    assert isinstance(back, Int8TensorCPU) and back.numpy().dtype == dtype
    assert back.numpy().tolist() == [[0, 7, 255]] and back.scale == 0.125 and back.zero_point == 9


def test_damaged_qtensor_records_are_refused():
    proto = BlobProto(name="w", type="Int8TensorCPU")
    qt = proto.qtensor
    qt.dims.extend([2, 2])
    qt.precision, qt.scale, qt.bias, qt.is_signed = 8, 1.0, 0, False
    qt.data_type = TensorProto.UINT8
    qt.data.extend([1, 2, 3])  # 3 values for 4 elements
    with pytest.raises(SerializationError, match="hold 4 elements"):
        deserialize_blob(proto.SerializeToString(), Blob("w"))
    qt.data.append(300)
    with pytest.raises(SerializationError, match=r"outside \[0, 255\]"):
        deserialize_blob(proto.SerializeToString(), Blob("w"))
    qt.data[3] = 4
    qt.data_type = TensorProto.FLOAT
    with pytest.raises(SerializationError, match="unsupported data type"):
        deserialize_blob(proto.SerializeToString(), Blob("w"))


def test_save_and_load_an_int8_blob(tmp_path):
    ws = Workspace(root_folder=str(tmp_path))
    ws.run_operator_once(
        CreateOperator("Int8GivenTensorFill", [], ["w"], values=bytes([3, 1, 4]), shape=[3], Y_scale=0.5)
    )
    ws.run_operator_once(CreateOperator("Save", ["w"], [], db="ck.minidb", db_type="minidb"))
    ws2 = Workspace(root_folder=str(tmp_path))
    ws2.run_operator_once(CreateOperator("Load", [], ["w"], db="ck.minidb", db_type="minidb"))
    back = ws2.get_blob("w")._obj
    assert back.numpy().tolist() == [3, 1, 4] and back.scale == 0.5


def test_quantize_then_dequantize_round_trip_within_half_a_step():
    x = np.linspace(-1, 1, 101, dtype=f32)
    ws, _, _ = run(CreateOperator("Int8Quantize", ["X"], ["Q"], Y_scale=0.01, Y_zero_point=128), [x])
    ws.run_operator_once(CreateOperator("Int8Dequantize", ["Q"], ["Y"]))
    assert np.max(np.abs(ws.fetch_blob("Y") - x)) <= 0.005 + 1e-6
