"""Argument parsing against the schema (framework.ops.arguments): TensorProto DataType arguments given by
name, as Caffe2's cast::GetCastDataType takes them, in strict shape inference as at run time; string
arguments that are not UTF-8 are a named ArgumentError, unless the argument holds bytes (raw_bytes)."""

import numpy as np
import pytest

from framework.core import CreateOperator
from framework.errors import ArgumentError
from framework.memory.workspace import Workspace
from framework.ops import all_schemas, create_operator, get_schema
from framework.ops.inference import infer_op
from framework.ops.schema import INT, INTS, TensorSpec
from framework.proto.framework_pb2 import TensorProto

NAMED = [(s.type, a.name) for s in all_schemas() for a in s.args.values() if a.dtype_name]
F32_SPEC = TensorSpec((2, 3), np.dtype(np.float32))
# the other arguments some of those ops require
REQUIRED_ARGS = {
    "GivenTensorStringFill": {"shape": [2], "values": [b"a", b"b"]},
    "GivenTensorByteStringToUInt8Fill": {"shape": [2], "values": [b"ab"]},
    "CreateTextFileReader": {"filename": "f.txt", "num_passes": 1},
    "IsMemberOf": {"value": [1, 2]},
    "ImageInput": {"batch_size": 1, "crop": 4, "is_test": 1, "use_gpu_transform": 1},
}


def _specs(op_type):
    n = get_schema(op_type).num_inputs
    for k in range(8):
        try:
            if n(k) if callable(n) else (n[0] <= k <= n[1] if isinstance(n, tuple) else k == n):
                return [F32_SPEC] * k
        except TypeError:
            break
    return [F32_SPEC]


def test_the_type_arguments_take_names():
    got = set(NAMED)
    for expected in [
        ("Cast", "to"),
        ("Cast", "from_type"),
        ("ConstantFill", "dtype"),
        ("GivenTensorFill", "dtype"),
        ("ImageInput", "output_type"),
    ]:
        assert expected in got


@pytest.mark.parametrize("op_type, arg", NAMED, ids=[f"{t}.{a}" for t, a in NAMED])
def test_a_type_name_infers_as_its_number(op_type, arg):
    """Every argument declared dtype_name: its default type given by name (lower case, upper case, bytes)
    infers strictly to what the number gives."""
    spec = get_schema(op_type).args[arg]
    value = spec.default if isinstance(spec.default, int) and spec.default > 0 else TensorProto.INT32
    if spec.kind == INTS:
        value = [TensorProto.FLOAT]
    extra = {k: v for k, v in REQUIRED_ARGS.get(op_type, {"shape": [2]}).items() if k in get_schema(op_type).args}
    ins = _specs(op_type)
    names = [f"x{k}" for k in range(len(ins))]
    n_out = get_schema(op_type).num_outputs
    outs = ["y", "y1"] if not (n_out == 1 or (isinstance(n_out, tuple) and n_out[0] == 1)) else ["y"]

    def infer(v):
        return infer_op(CreateOperator(op_type, names, outs, **{arg: v}, **extra), ins, strict=True)

    by_number = infer(value)
    to_name = (
        (lambda v: TensorProto.DataType.Name(v))
        if spec.kind == INT
        else (lambda v: [TensorProto.DataType.Name(x) for x in v])
    )
    assert spec.kind in (INT, INTS)
    for form in (to_name(value), _lower(to_name(value)), _bytes(to_name(value))):
        assert infer(form) == by_number, form


def _lower(v):
    return [x.lower() for x in v] if isinstance(v, list) else v.lower()


def _bytes(v):
    return [x.encode() for x in v] if isinstance(v, list) else v.encode()


def test_cast_by_name_runs_and_infers_alike():
    x = np.array([1.5, -2.0], np.float64)
    ws = Workspace()
    ws.feed_blob("x", x)
    op = CreateOperator("Cast", ["x"], ["y"], to="int64", from_type=b"double")
    create_operator(op, ws).run()
    y = ws.fetch_blob("y")
    assert y.dtype == np.int64 and y.tolist() == [1, -2]
    (spec,) = infer_op(op, [TensorSpec((2,), np.dtype(np.float64))], strict=True)
    assert spec == TensorSpec((2,), np.dtype(np.int64))


def test_an_unknown_type_name_is_a_named_error():
    op = CreateOperator("ConstantFill", [], ["y"], shape=[2], dtype="complex")
    with pytest.raises(ArgumentError, match=r"op ConstantFill: argument 'dtype' = 'COMPLEX' is not a TensorProto"):
        infer_op(op, [], strict=True)
    with pytest.raises(ArgumentError, match=r"argument 'dtype' = 'COMPLEX'"):
        create_operator(op, Workspace())


@pytest.mark.parametrize(
    "op_type, arg, args",
    [("Assert", "error_msg", {}), ("Cast", "to", {}), ("ConstantFill", "dtype", {"shape": [1]})],
)
def test_a_string_argument_that_is_not_utf8_is_a_named_error(op_type, arg, args):
    op = CreateOperator(
        op_type,
        ["x"] if op_type != "ConstantFill" else [],
        ["y"] if op_type != "Assert" else [],
        **{arg: b"ok\xff\xfebad"},
        **args,
    )
    ws = Workspace()
    ws.feed_blob("x", np.ones(2, np.float32))
    with pytest.raises(ArgumentError, match=rf"op {op_type}: argument '{arg}' is not valid UTF-8 \(byte 2: "):
        create_operator(op, ws)
    assert sorted(ws.blobs()) == ["x"]


def test_a_raw_bytes_argument_keeps_its_bytes():
    """Arg(raw_bytes=True): byte payloads stay bytes (not decoded) at run time and in inference; str is UTF-8."""
    schema = get_schema("GivenTensorByteStringToUInt8Fill")
    assert schema.args["values"].raw_bytes
    payload = b"\xff\x00\x80"
    op = CreateOperator("GivenTensorByteStringToUInt8Fill", [], ["y"], shape=[3], values=[payload])
    (spec,) = infer_op(op, [], strict=True)
    assert spec == TensorSpec((3,), np.dtype(np.uint8))
    ws = Workspace()
    create_operator(op, ws).run()
    assert ws.fetch_blob("y").tobytes() == payload
    op = CreateOperator("GivenTensorByteStringToUInt8Fill", [], ["y"], shape=[2], values=["\u00e9"])
    create_operator(op, ws).run()
    assert ws.fetch_blob("y").tobytes() == "\u00e9".encode()
