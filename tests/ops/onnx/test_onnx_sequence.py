"""Sequence and optional ops (TensorSequence / OptionalValue blobs) against Python list references."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import ShapeError, TypeMismatchError
from framework.memory.workspace import Workspace
from framework.ops.onnx.values import OptionalValue, TensorSequence, from_blob_value, to_blob_value
from framework.ops.testing import run_op_on


def run(op_type, inputs, n_out=1, **args):
    """Run one op on ``inputs`` (arrays or blob objects); returns its outputs as blob objects."""
    ws = Workspace()
    names = [f"i{k}" for k in range(len(inputs))]
    for n, v in zip(names, inputs):
        if isinstance(v, np.ndarray):
            ws.feed_blob(n, v)
        else:
            ws.create_blob(n).reset(v)
    outs = [f"o{k}" for k in range(n_out)]
    return run_op_on(CreateOperator(op_type, names, outs, **args), [None] * len(names), ws)


def same(got, want):
    assert isinstance(got, TensorSequence) and len(got) == len(want)
    for a, b in zip(got, want):
        assert a.dtype == b.dtype
        np.testing.assert_array_equal(a, b)


@given(data=st.data())
@settings(max_examples=30, deadline=None)
def test_list_operations_match_python_lists(data):
    n = data.draw(st.integers(0, 4))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31 - 1)))
    items = [rng.standard_normal(rng.integers(0, 3, 2)).astype(np.float32) for _ in range(n)]
    seq = TensorSequence(items, np.float32)
    (length,) = run("ONNXSequenceLength", [seq])
    assert length.shape == () and length.dtype == np.int64 and int(length) == n
    x = rng.standard_normal(3).astype(np.float32)
    pos = data.draw(st.integers(-n, n))
    (ins,) = run("ONNXSequenceInsert", [seq, x, np.array(pos, np.int64)])
    ref = list(items)
    ref.insert(pos if pos >= 0 else pos + n, x)
    same(ins, ref)
    (app,) = run("ONNXSequenceInsert", [seq, x])
    same(app, items + [x])
    same(seq, items)  # the input sequence is unchanged: sequences are immutable values
    if n:
        p = data.draw(st.integers(-n, n - 1))
        (at,) = run("ONNXSequenceAt", [seq, np.array([p], np.int32)])
        np.testing.assert_array_equal(at, items[p])
        (er,) = run("ONNXSequenceErase", [seq, np.array(p, np.int64)])
        same(er, items[: p % n] + items[p % n + 1 :])
        (last,) = run("ONNXSequenceErase", [seq])
        same(last, items[:-1])


def test_empty_and_construct_keep_types():
    (e,) = run("ONNXSequenceEmpty", [], dtype=7)
    assert len(e) == 0 and e.dtype == np.int64
    a, b = np.arange(3, dtype=np.int32), np.arange(5, dtype=np.int32)
    (s,) = run("ONNXSequenceConstruct", [a, b])
    same(s, [a, b])
    with pytest.raises(TypeMismatchError, match="ONNXSequenceConstruct"):
        run("ONNXSequenceConstruct", [a, b.astype(np.float32)])
    with pytest.raises(TypeMismatchError, match="ONNXSequenceInsert.*'i1'"):
        run("ONNXSequenceInsert", [e, a])


@given(data=st.data())
@settings(max_examples=30, deadline=None)
def test_split_and_concat_roundtrip(data):
    shape = data.draw(st.lists(st.integers(1, 4), min_size=1, max_size=3))
    x = np.arange(int(np.prod(shape)), dtype=np.float64).reshape(shape)
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    n = shape[axis]
    keep = data.draw(st.integers(0, 1))
    (pieces,) = run("ONNXSplitToSequence", [x], axis=axis, keepdims=keep)
    same(pieces, [np.take(x, [i] if keep else i, axis=axis) for i in range(n)])
    (back,) = run("ONNXConcatFromSequence", [pieces], axis=axis, new_axis=0 if keep else 1)
    np.testing.assert_array_equal(back, x)
    step = data.draw(st.integers(1, n))
    (chunks,) = run("ONNXSplitToSequence", [x, np.array(step, np.int64)], axis=axis)
    same(chunks, np.array_split(x, range(step, n, step), axis=axis))
    cuts = sorted(data.draw(st.lists(st.integers(0, n), max_size=3)))
    lengths = np.diff([0] + cuts + [n]).astype(np.int32)
    (parts,) = run("ONNXSplitToSequence", [x, lengths], axis=axis)
    same(parts, np.split(x, np.cumsum(lengths)[:-1], axis=axis))
    (cat,) = run("ONNXConcatFromSequence", [parts], axis=axis)
    np.testing.assert_array_equal(cat, x)


def test_sequence_errors_name_op_and_blob():
    seq = TensorSequence([np.zeros(2, np.float32)])
    with pytest.raises(ShapeError, match="ONNXSequenceAt.*position 1"):
        run("ONNXSequenceAt", [seq, np.array(1, np.int64)])
    with pytest.raises(TypeMismatchError, match="'i0'.*tensor sequence"):
        run("ONNXSequenceLength", [np.zeros(2)])
    with pytest.raises(ShapeError, match="sum to 4"):
        run("ONNXSplitToSequence", [np.zeros(4), np.array([1, 2], np.int64)])
    with pytest.raises(ShapeError, match="empty"):
        run("ONNXConcatFromSequence", [TensorSequence([], np.float32)], axis=0)
    with pytest.raises(ShapeError, match="differ"):
        run("ONNXConcatFromSequence", [TensorSequence([np.zeros((1, 2)), np.zeros((1, 3))])], axis=0)


def test_optionals():
    x = np.arange(4.0)
    (o,) = run("ONNXOptional", [x])
    assert isinstance(o, OptionalValue)
    np.testing.assert_array_equal(o.value, x)
    (empty,) = run("ONNXOptional", [])
    assert empty.value is None
    for value, has in ((o, True), (empty, False), (x, True), (TensorSequence([x]), True)):
        (h,) = run("ONNXOptionalHasElement", [value])
        assert h.shape == () and h.dtype == np.bool_ and bool(h) is has
    (h,) = run("ONNXOptionalHasElement", [])
    assert not bool(h)
    (g,) = run("ONNXOptionalGetElement", [o])
    np.testing.assert_array_equal(g, x)
    seq = TensorSequence([x])
    (gs,) = run("ONNXOptionalGetElement", [OptionalValue(seq)])
    assert gs is seq
    with pytest.raises(ShapeError, match="ONNXOptionalGetElement.*empty"):
        run("ONNXOptionalGetElement", [empty])
    (c,) = run("ONNXCopyValue", [seq])
    assert c is seq
    (t,) = run("ONNXCopyValue", [x])
    np.testing.assert_array_equal(t, x)


def test_backend_value_conversions():
    assert from_blob_value(to_blob_value(None, "optional")) is None
    s = from_blob_value(to_blob_value([np.ones(2)], "optional"))
    assert isinstance(s, list) and np.array_equal(s[0], np.ones(2))
    assert isinstance(from_blob_value(to_blob_value([], "sequence")), list)
