"""GivenTensor*Fill with bulk values: bit-exact from a serialized init net to the filled blob,
one vectorised conversion, and the same errors for bad values, shapes and types."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import ArgumentError, FrameworkError, ResourceLimitError
from framework.memory.workspace import Workspace
from framework.net.graph import load_net_def
from framework.ops.arguments import numeric_array
from framework.proto.framework_pb2 import Argument, NetDef, TensorProto


def _varint(n: int) -> bytes:
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


def _packed_floats(name: str, bits: np.ndarray) -> Argument:
    """An Argument whose ``floats`` (field 5) hold exactly ``bits`` (packed on the wire: no Python float in between)."""
    payload = np.asarray(bits, dtype="<u4").tobytes()
    return Argument.FromString(Argument(name=name).SerializeToString() + b"\x2a" + _varint(len(payload)) + payload)


def _run_init(ops: list) -> Workspace:
    """Serialize a NetDef of ``ops``, load it back as a file would be, run it in a fresh workspace."""
    data = NetDef(name="init", op=ops).SerializeToString()
    ws = Workspace()
    ws.run_net_once(load_net_def(data))
    return ws


def _fill(op_type: str, output: str, shape: list, values: Argument | list, **kw) -> object:
    if isinstance(values, Argument):
        op = CreateOperator(op_type, [], [output], shape=shape, **kw)
        op.arg.append(values)
        return op
    return CreateOperator(op_type, [], [output], shape=shape, values=values, **kw)


# float32: quiet NaN with payload, signaling NaN, negative NaN, -0.0, denormals, smallest normal, +-inf, max
SPECIAL_F32 = np.array(
    [0x7FC00001, 0x7F800001, 0xFFC12345, 0x80000000, 0x00000001, 0x807FFFFF, 0x00800000, 0x7F800000, 0xFF800000,
     0x7F7FFFFF, 0x3F800000, 0xBF800000],
    dtype=np.uint32,
)  # fmt: skip


def test_float32_values_are_bit_exact():
    ws = _run_init([_fill("GivenTensorFill", "w", [3, 4], _packed_floats("values", SPECIAL_F32))])
    w = ws.fetch_blob("w")
    assert w.dtype == np.float32 and w.shape == (3, 4)
    np.testing.assert_array_equal(w.view(np.uint32).reshape(-1), SPECIAL_F32)


def test_float16_output_rounds_each_value_once():
    # values exactly representable in float16, with their float16 bit patterns written out
    f32 = np.array([2.0**-24, -0.0, 65504.0, np.inf, -(2.0**-14), 1.0, -2.0], dtype=np.float32)
    f16_bits = [0x0001, 0x8000, 0x7BFF, 0x7C00, 0x8400, 0x3C00, 0xC000]
    op = _fill("GivenTensorFill", "h", [7], _packed_floats("values", f32.view(np.uint32)), dtype=TensorProto.FLOAT16)
    h = _run_init([op]).fetch_blob("h")
    assert h.dtype == np.float16
    assert h.view(np.uint16).tolist() == f16_bits


def test_double_fill_holds_the_float32_values_exactly():
    op = _fill("GivenTensorDoubleFill", "d", [12], _packed_floats("values", SPECIAL_F32))
    d = _run_init([op]).fetch_blob("d")
    finite = np.isfinite(SPECIAL_F32.view(np.float32))
    assert d.dtype == np.float64
    np.testing.assert_array_equal(d[finite], [float(v) for v in SPECIAL_F32.view(np.float32)[finite]])
    np.testing.assert_array_equal(np.signbit(d), np.signbit(SPECIAL_F32.view(np.float32)))
    assert np.isnan(d[~np.isfinite(d) & ~np.isinf(d)]).all()


def test_int64_extremes_and_bools():
    ints = [-(2**63), 2**63 - 1, 0, -1, 2**53 + 1]
    ws = _run_init([
        _fill("GivenTensorInt64Fill", "i", [5], ints),
        _fill("GivenTensorIntFill", "j", [2], [-(2**31), 2**31 - 1]),
        _fill("GivenTensorInt16Fill", "k", [2], [-(2**15), 2**15 - 1]),
        _fill("GivenTensorBoolFill", "b", [3], [1, 0, 1]),
    ])  # fmt: skip
    assert ws.fetch_blob("i").tolist() == ints and ws.fetch_blob("i").dtype == np.int64
    assert ws.fetch_blob("j").tolist() == [-(2**31), 2**31 - 1] and ws.fetch_blob("j").dtype == np.int32
    assert ws.fetch_blob("k").tolist() == [-(2**15), 2**15 - 1] and ws.fetch_blob("k").dtype == np.int16
    assert ws.fetch_blob("b").tolist() == [True, False, True]


@settings(max_examples=30, deadline=None)
@given(bits=st.lists(st.integers(0, 2**32 - 1), min_size=0, max_size=64))
def test_any_float32_bit_pattern_survives(bits):
    bits = np.array(bits, dtype=np.uint32)
    w = _run_init([_fill("GivenTensorFill", "w", [len(bits)], _packed_floats("values", bits))]).fetch_blob("w")
    np.testing.assert_array_equal(w.view(np.uint32), bits)


@settings(max_examples=30, deadline=None)
@given(values=st.lists(st.integers(-(2**63), 2**63 - 1), min_size=1, max_size=32))
def test_any_int64_survives(values):
    w = _run_init([_fill("GivenTensorInt64Fill", "w", [len(values)], values)]).fetch_blob("w")
    assert w.tolist() == values


# -- the conversion itself -------------------------------------------------------------------------------------------
def test_numeric_array_types():
    f = Argument(name="v")
    f.floats.extend([1.5, -0.0])
    assert numeric_array("v", "floats", f, "op").dtype == np.float32
    i = Argument(name="v")
    i.ints.extend([2**62 + 1, -3])
    got = numeric_array("v", "floats", i, "op")
    assert got.dtype == np.float64 and got.tolist() == [float(2**62 + 1), -3.0]
    assert numeric_array("v", "ints", i, "op").tolist() == [2**62 + 1, -3]
    whole = Argument(name="v")
    whole.floats.extend([3.0, -4.0, -0.0])
    assert numeric_array("v", "ints", whole, "op").tolist() == [3, -4, 0]
    assert numeric_array("v", "floats", Argument(name="v", f=2.5), "op").tolist() == [2.5]
    assert numeric_array("v", "ints", Argument(name="v"), "op").size == 0


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ([1.0, 2.5], r"must be an integer, got 2\.5"),
        ([1.0, float("nan")], r"must be an integer, got nan"),
        ([float("inf")], r"must be an integer, got inf"),
        ([2.0**63], r"must be an integer within int64, got 9\.223372036854776e\+18"),
    ],
)
def test_int_fill_from_non_whole_floats_is_an_error(values, message):
    with pytest.raises(ArgumentError, match=rf"GivenTensorInt64Fill.*argument 'values' {message}"):
        _run_init([_fill("GivenTensorInt64Fill", "i", [len(values)], values)])


def test_float_fill_from_strings_is_an_error():
    op = CreateOperator("GivenTensorFill", [], ["w"], shape=[1])
    op.arg.add(name="values").strings.append(b"x")
    with pytest.raises(ArgumentError, match=r"argument 'values' must be a number, got b'x'"):
        _run_init([op])


# -- hostile inputs keep their errors ----------------------------------------------------------------------------------
@pytest.mark.parametrize(("op_type", "bad"), [("GivenTensorIntFill", 2**31), ("GivenTensorInt16Fill", -(2**15) - 1)])
def test_ints_outside_the_output_type_are_errors(op_type, bad):
    ws = Workspace()
    ws.feed_blob("i", np.arange(2, dtype=np.int32))
    with pytest.raises(ArgumentError, match=rf"'values' holds {bad}, outside int"):
        ws.run_operator_once(_fill(op_type, "i", [2], [0, bad]))
    assert ws.fetch_blob("i").tolist() == [0, 1]  # untouched


def test_size_that_disagrees_with_shape():
    with pytest.raises(ArgumentError, match=r"shape \[2, 3\] holds 6 elements but 5 values are given"):
        _run_init([_fill("GivenTensorFill", "w", [2, 3], _packed_floats("values", SPECIAL_F32[:5]))])


def test_unknown_type():
    with pytest.raises(FrameworkError, match="'dtype' 999 is not a tensor element type"):
        _run_init([_fill("GivenTensorFill", "w", [1], [1.0], dtype=999)])


def test_memory_limit_applies_before_allocation():
    ws = Workspace()
    ws.feed_blob("shape", np.array([2**31, 2**31], dtype=np.int64))
    op = CreateOperator("GivenTensorFill", ["shape"], ["w"], input_as_shape=1, values=[1.0])
    with pytest.raises(FrameworkError, match=r"exceeds the allocation limit") as info:
        ws.run_operator_once(op)
    assert isinstance(info.value.__cause__, ResourceLimitError)


def test_array_arguments_are_numeric_and_unchecked_by_bounds():
    from framework.ops.schema import Arg

    with pytest.raises(ValueError, match="array=True needs kind floats or ints"):
        Arg("v", "strings", [], array=True)
    with pytest.raises(ValueError, match="checked by the op"):
        Arg("v", "floats", [], low=0.0, array=True)
