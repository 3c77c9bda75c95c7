"""framework.proto.io: auto-detection of binary vs text, errors naming file/line/column, cuda_gpu_id."""

from __future__ import annotations

import os

import pytest
from google.protobuf.unknown_fields import UnknownFieldSet
from hypothesis import given
from hypothesis import strategies as st

from framework.errors import ProtoParseError
from framework.proto import parse_bytes, parse_text, read_net, read_proto, write_binary, write_text
from framework.proto.framework_pb2 import Argument, BlobProto, NetDef, OperatorDef, TensorProto
from framework.proto.io import normalize_text


def _net():
    net = NetDef(name="n", type="dag", external_input=["X"], external_output=["Y"])
    op = net.op.add(type="Relu", input=["X"], output=["Y"], name="r")
    op.device_option.device_type = 1
    op.device_option.device_id = 2
    return net


def test_binary_file_is_read_as_binary(tmp_path):
    p = tmp_path / "net.pb"
    write_binary(_net(), p)
    assert read_net(p) == _net()
    assert read_net(str(p)) == _net()  # str paths too


def test_text_file_is_read_as_text(tmp_path):
    p = tmp_path / "net.pbtxt"
    write_text(_net(), p)
    assert read_net(p) == _net()


def test_empty_file_is_an_empty_message(tmp_path):
    p = tmp_path / "empty.pb"
    p.write_bytes(b"")
    assert read_net(p) == NetDef()


@pytest.mark.parametrize("spelling", ["cuda_gpu_id", "device_id"])
def test_both_device_id_spellings(spelling):
    text = f'op {{ type: "Relu" device_option {{ device_type: 1 {spelling}: 5 }} }} device_option {{ {spelling} : 2 }}'
    net = parse_text(text, NetDef)
    assert net.op[0].device_option.device_id == 5
    assert net.device_option.device_id == 2


def test_cuda_gpu_id_only_rewritten_as_field_name():
    text = '# cuda_gpu_id: 1 in a comment\nname: "cuda_gpu_id: 3"\narg { name: "cuda_gpu_id" s: \'cuda_gpu_id:\' }\n'
    assert normalize_text(text) == text
    net = parse_text(text, NetDef)
    assert net.name == "cuda_gpu_id: 3"
    assert net.arg[0].name == "cuda_gpu_id" and net.arg[0].s == b"cuda_gpu_id:"
    # a field-name occurrence keeps columns (same length rewrite)
    assert len(normalize_text("cuda_gpu_id: 1")) == len("cuda_gpu_id: 1")


def test_cuda_gpu_id_outside_device_option_is_still_an_error():
    with pytest.raises(ProtoParseError, match=r"<string>:1:\d+: .*device_id"):
        parse_text("cuda_gpu_id: 1", NetDef)


def test_text_error_names_file_line_and_column(tmp_path):
    p = tmp_path / "bad.pbtxt"
    p.write_text('name: "n"\nop {\n  type: "Relu"\n  inptu: "X"\n}\n')
    with pytest.raises(ProtoParseError) as info:
        read_net(p)
    msg = str(info.value)
    assert msg.startswith(f"{p}:4:3: ")
    assert "inptu" in msg
    assert info.value.line == 4 and info.value.column == 3 and info.value.source == str(p)


def test_column_is_true_after_a_legacy_field_name():
    with pytest.raises(ProtoParseError) as info:
        parse_text("device_option { cuda_gpu_id: 1 bogus: 2 }", NetDef, source="x.pbtxt")
    assert str(info.value).startswith("x.pbtxt:1:32: ")


def test_unterminated_text_names_line():
    with pytest.raises(ProtoParseError, match=r"^f\.pbtxt:3:\d+: "):
        parse_bytes(b'name: "n"\nop {\n  type: ', NetDef, source="f.pbtxt")


def test_garbage_binary_is_an_error_naming_the_file(tmp_path):
    p = tmp_path / "garbage.pb"
    p.write_bytes(bytes([0xFF, 0xFE, 0x00, 0x81, 0x92, 0xA3]))
    with pytest.raises(ProtoParseError, match="garbage.pb: neither a binary nor a text NetDef"):
        read_net(p)


def test_bytes_that_decode_to_unknown_fields_only_are_refused(tmp_path):
    # b"\x08\x01" is field 1 as a varint: NetDef.name is a string, so it decodes only as an unknown field.
    p = tmp_path / "u.pb"
    p.write_bytes(b"\x08\x01\x10\x02")
    with pytest.raises(ProtoParseError, match="only unknown fields"):
        read_net(p)


def test_text_that_also_decodes_as_binary_with_unknown_fields_is_read_as_text():
    # These bytes are also a binary NetDef: num_workers=125 plus unknown fields. Text wins.
    text = b'arg { name: "hello" }'
    as_binary = NetDef()
    as_binary.ParseFromString(text)
    assert as_binary.num_workers == 125 and len(UnknownFieldSet(as_binary)) > 0
    net = parse_bytes(text, NetDef)
    assert net == NetDef(arg=[Argument(name="hello")])


def test_whitespace_only_is_an_empty_text_message():
    # b"  " is also the binary NetDef num_workers=32; an all-whitespace file is read as empty text.
    assert parse_bytes(b"  \n\t ", NetDef) == NetDef()


def test_missing_file_names_the_file(tmp_path):
    with pytest.raises(ProtoParseError, match="nope.pb: cannot read NetDef file"):
        read_net(tmp_path / "nope.pb")


def test_not_utf8_text_error():
    with pytest.raises(ProtoParseError, match="not UTF-8"):
        parse_text(b"\xff\xfe", NetDef, source="s")


def test_writes_are_atomic_and_leave_no_temp_files(tmp_path):
    p = tmp_path / "net.pb"
    write_binary(_net(), p)
    write_text(_net(), tmp_path / "net.pbtxt")
    assert sorted(os.listdir(tmp_path)) == ["net.pb", "net.pbtxt"]


_names = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=8)


@given(
    name=_names,
    inputs=st.lists(_names, max_size=3),
    ints=st.lists(st.integers(-(2**63), 2**63 - 1), max_size=4),
    f=st.floats(width=32, allow_nan=False),
    device_id=st.integers(0, 2**31 - 1),
)
def test_round_trip_both_formats(tmp_path_factory, name, inputs, ints, f, device_id):
    net = NetDef(name=name)
    op = net.op.add(type="T", input=inputs, output=["y"])
    op.arg.add(name="i", ints=ints)
    op.arg.add(name="f", f=f)
    op.device_option.device_id = device_id
    d = tmp_path_factory.mktemp("rt")
    write_binary(net, d / "a.pb")
    write_text(net, d / "a.pbtxt")
    assert read_net(d / "a.pb") == net
    assert read_net(d / "a.pbtxt") == net
    legacy = (d / "a.pbtxt").read_text().replace("device_id:", "cuda_gpu_id:")
    assert parse_text(legacy, NetDef) == net


@pytest.mark.parametrize("cls", [OperatorDef, TensorProto, BlobProto])
def test_read_proto_any_message(tmp_path, cls):
    msg = cls(name="x")
    write_binary(msg, tmp_path / "m.pb")
    assert read_proto(tmp_path / "m.pb", cls) == msg
