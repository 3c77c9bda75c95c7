"""framework.proto.io on numeric fields: values survive a file bit for bit; UTF-8 is checked on
string fields only, wherever they are nested."""

from __future__ import annotations

import numpy as np
import pytest

from framework.errors import ProtoParseError
from framework.proto import parse_bytes, read_net, write_binary
from framework.proto.framework_pb2 import NetDef

# float32 bit patterns: quiet NaN with payload, negative NaN, -0.0, smallest and largest denormal,
# smallest normal, +-inf, largest finite
FLOAT_BITS = np.array(
    [0x7FC00001, 0xFFC12345, 0x80000000, 0x00000001, 0x007FFFFF, 0x00800000, 0x7F800000, 0xFF800000, 0x7F7FFFFF],
    dtype="<u4",
)
INT_EXTREMES = [-(2**63), 2**63 - 1, -1, 0, 2**53 + 1]


def _net_with_values() -> NetDef:
    net = NetDef(name="init")
    op = net.op.add(type="GivenTensorFill", output=["w"])
    arg = op.arg.add(name="values")
    arg.floats.extend(FLOAT_BITS.view(np.float32))
    op = net.op.add(type="GivenTensorInt64Fill", output=["i"])
    op.arg.add(name="values").ints.extend(INT_EXTREMES)
    return net


def test_floats_and_ints_round_trip_bit_for_bit(tmp_path):
    path = tmp_path / "init.pb"
    write_binary(_net_with_values(), path)
    net = read_net(path)
    floats = np.array(net.op[0].arg[0].floats, dtype=np.float32).view("<u4")
    np.testing.assert_array_equal(floats, FLOAT_BITS)
    assert list(net.op[1].arg[0].ints) == INT_EXTREMES


def test_packed_floats_are_read_as_written():
    # a packed encoding (wire type 2) of Argument.floats (field 5) holding a signaling NaN: parsers must accept it
    payload = np.array([0x7F800001, 0x3F800000], dtype="<u4").tobytes()
    arg = b"\n\x06values" + b"\x2a" + bytes([len(payload)]) + payload
    op = b"\x12\x01w" + b"\x22\x0fGivenTensorFill" + b"\x2a" + bytes([len(arg)]) + arg
    net = parse_bytes(b"\x12" + bytes([len(op)]) + op, NetDef)
    assert net.op[0].type == "GivenTensorFill"
    bits = np.array(net.op[0].arg[0].floats, dtype=np.float32).view("<u4")
    np.testing.assert_array_equal(bits, [0x7F800001, 0x3F800000])


def _bad_name_bytes(where: str) -> bytes:
    net = NetDef(name="n")
    net.op.add(type="Relu", input=["X"], output=["Y"])
    op = net.op.add(type="GivenTensorFill", output=["w"])
    op.arg.add(name="values").floats.extend([1.0] * 1000)
    op.arg.add(name="marker")
    if where == "op":
        net.op[1].output[0] = "\u00e9\u00e9"
    else:
        net.op[1].arg[1].name = "\u00e9\u00e9"
    data = net.SerializeToString()
    good = "\u00e9\u00e9".encode()
    assert data.count(good) == 1
    return data.replace(good, b"\xff\xfe\xfd\xfc")


@pytest.mark.parametrize(("where", "path"), [("op", r"op\[1\]\.output\[0\]"), ("arg", r"op\[1\]\.arg\[1\]\.name")])
def test_non_utf8_string_fields_are_named_wherever_nested(where, path):
    with pytest.raises(ProtoParseError, match=rf"field {path} of the binary NetDef is not valid UTF-8"):
        parse_bytes(_bad_name_bytes(where), NetDef)


def test_bytes_fields_may_hold_any_bytes():
    net = NetDef(name="n")
    net.op.add(type="GivenTensorStringFill", output=["s"]).arg.add(name="values").strings.extend([b"\xff\x00\xfe"])
    back = parse_bytes(net.SerializeToString(), NetDef)
    assert list(back.op[0].arg[0].strings) == [b"\xff\x00\xfe"]
