"""String ops and small tensor utilities against Python/numpy references; gradients of RowMul,
PrependDim, CopyRowsToTensor, AliasWithName, CopyOnDeviceLike; errors naming op and blob."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.memory.workspace import Workspace
from framework.ops import get_gradient_for_op
from framework.ops.testing import arrays, assert_gradient_checks, assert_reference_checks, shapes

texts = st.lists(st.binary(max_size=6) | st.text("abc", max_size=4).map(str.encode), max_size=6)


def strs(xs):
    a = np.empty(len(xs), dtype=object)
    a[:] = xs
    return a


@settings(max_examples=30, deadline=None)
@given(xs=texts, n=st.integers(0, 5), p=st.text("abc", max_size=3).map(str.encode))
def test_string_elementwise_ops(xs, n, p):
    x = strs(xs)
    assert_reference_checks(
        CreateOperator("StringPrefix", ["x"], ["y"], length=n), [x], lambda x: strs([s[:n] for s in xs])
    )
    assert_reference_checks(
        CreateOperator("StringSuffix", ["x"], ["y"], length=n),
        [x],
        lambda x: strs([s[-n:] if 0 < n < len(s) else (s if n >= len(s) else b"") for s in xs]),
    )
    assert_reference_checks(
        CreateOperator("StringStartsWith", ["x"], ["y"], prefix=p),
        [x],
        lambda x: np.array([s[: len(p)] == p for s in xs], bool),
    )
    assert_reference_checks(
        CreateOperator("StringEndsWith", ["x"], ["y"], suffix=p),
        [x],
        lambda x: np.array([len(s) >= len(p) and s[len(s) - len(p) :] == p for s in xs], bool),
    )


def test_string_join():
    x = np.array([[1.5, 2.0], [3.25, -4.0]], np.float32)
    assert_reference_checks(CreateOperator("StringJoin", ["x"], ["y"]), [x], lambda x: strs([b"1.5,2,", b"3.25,-4,"]))
    assert_reference_checks(
        CreateOperator("StringJoin", ["x"], ["y"], axis=1, delimiter="|"), [x], lambda x: strs([b"1.5|3.25|", b"2|-4|"])
    )
    ints = np.array([7, 8, 9], np.int64)
    assert_reference_checks(CreateOperator("StringJoin", ["x"], ["y"]), [ints], lambda x: strs([b"7,", b"8,", b"9,"]))
    assert_reference_checks(
        CreateOperator("StringJoin", ["x"], ["y"]), [np.array([True, False])], lambda x: strs([b"1,", b"0,"])
    )
    assert_reference_checks(
        CreateOperator("StringJoin", ["x"], ["y"], delimiter=" "), [strs([b"a", b"b"])], lambda x: strs([b"a ", b"b "])
    )
    ws = Workspace()
    ws.feed_blob("e", np.zeros((0,), np.float32))
    with pytest.raises(FrameworkError, match="StringJoin.*non-empty"):
        ws.run_operator_once(CreateOperator("StringJoin", ["e"], ["y"]))
    ws.feed_blob("v", np.zeros(3, np.float32))
    with pytest.raises(FrameworkError, match="axis 1 needs a 2-D"):
        ws.run_operator_once(CreateOperator("StringJoin", ["v"], ["y"], axis=1))
    ws.feed_blob("f", np.zeros(3, np.float32))
    with pytest.raises(FrameworkError, match=r"StringPrefix.*'f'.*string tensor"):
        ws.run_operator_once(CreateOperator("StringPrefix", ["f"], ["y"]))


@settings(max_examples=25, deadline=None)
@given(shape=shapes(1, 3, 1, 3), data=st.data())
def test_numpy_tile_merge_prepend_is_empty(shape, data):
    x = np.arange(int(np.prod(shape)), dtype=np.float32).reshape(shape)
    reps = np.array(data.draw(st.lists(st.integers(0, 3), min_size=len(shape), max_size=len(shape))), np.int64)
    assert_reference_checks(
        CreateOperator("NumpyTile", ["x", "r"], ["y"]), [x, reps], lambda x, r: np.tile(x, r), check_inference=False
    )
    if len(shape) >= 2:
        assert_reference_checks(CreateOperator("MergeDim", ["x"], ["y"]), [x], lambda x: x.reshape(-1, *x.shape[2:]))
    k = data.draw(st.sampled_from([d for d in range(1, shape[0] + 1) if shape[0] % d == 0]))
    op = CreateOperator("PrependDim", ["x"], ["y"], dim_size=k)
    assert_reference_checks(op, [x], lambda x: x.reshape(k, -1, *x.shape[1:]))
    assert_gradient_checks(op, [x.astype(np.float64)], 0)
    assert_reference_checks(CreateOperator("IsEmpty", ["x"], ["y"]), [x], lambda x: np.array(x.size == 0))
    assert_reference_checks(CreateOperator("IsEmpty", ["x"], ["y"]), [x[:0]], lambda x: np.array(True))


def test_shape_op_errors():
    ws = Workspace()
    ws.feed_blob("x", np.zeros((3, 2), np.float32))
    with pytest.raises(FrameworkError, match=r"PrependDim.*divisible by dim_size 2"):
        ws.run_operator_once(CreateOperator("PrependDim", ["x"], ["y"], dim_size=2))
    ws.feed_blob("r", np.array([1], np.int64))
    with pytest.raises(FrameworkError, match=r"NumpyTile.*'r'.*one value per"):
        ws.run_operator_once(CreateOperator("NumpyTile", ["x", "r"], ["y"]))
    ws.feed_blob("v", np.zeros(3, np.float32))
    with pytest.raises(FrameworkError, match="MergeDim.*at least 2"):
        ws.run_operator_once(CreateOperator("MergeDim", ["v"], ["y"]))
    assert not ws.has_blob("y") or ws.get_blob("y").is_empty


@settings(max_examples=25, deadline=None)
@given(shape=shapes(1, 3, 1, 4), data=st.data())
def test_row_mul_reduce_tail_sum_replace_nan_scale_blobs(shape, data):
    mat = data.draw(arrays(shape, np.float64, st.floats(-3, 3)))
    w = data.draw(arrays((shape[0],), np.float64, st.floats(-3, 3)))
    op = CreateOperator("RowMul", ["m", "w"], ["y"])
    assert_reference_checks(op, [mat, w], lambda m, w: m * w.reshape(-1, *([1] * (m.ndim - 1))))
    assert_gradient_checks(op, [mat, w], 0)
    assert_gradient_checks(op, [mat, w], 1)
    assert_reference_checks(
        CreateOperator("ReduceTailSum", ["m"], ["y"]), [mat], lambda m: m.reshape(len(m), -1).sum(1)
    )
    nan = mat.copy()
    nan.reshape(-1)[::2] = np.nan
    assert_reference_checks(
        CreateOperator("ReplaceNaN", ["m"], ["y"], value=7.0), [nan], lambda m: np.where(np.isnan(m), 7.0, m)
    )
    assert_reference_checks(
        CreateOperator("ScaleBlobs", ["a", "b"], ["a2", "b2"], scale=2.5), [mat, w], lambda a, b: [a * 2.5, b * 2.5]
    )


def test_lengths_range_fill_copy_rows_alias_couple_device_like_names():
    lengths = np.array([2, 0, 3], np.int32)
    assert_reference_checks(
        CreateOperator("LengthsRangeFill", ["l"], ["y"]),
        [lengths],
        lambda l: np.concatenate([np.arange(n) for n in l]).astype(np.int32),
        check_inference=False,  # the length is data-dependent: inferred as (None,)
    )
    ws = Workspace()
    ws.feed_blob("l", np.array([1, -1], np.int32))
    with pytest.raises(FrameworkError, match="lengths must be >= 0"):
        ws.run_operator_once(CreateOperator("LengthsRangeFill", ["l"], ["y"]))
    x = np.arange(6, dtype=np.float64).reshape(3, 2)
    op = CreateOperator("CopyRowsToTensor", ["x", "i", "r"], ["x"])

    def ref(x, i, r):
        out = x.copy()
        out[i] = r
        return out

    assert_reference_checks(op, [x, np.array([1], np.int64), np.array([9.0, 0.0])], ref, check_no_realloc=False)
    grads, _ = get_gradient_for_op(op, ["x_grad"])
    assert [g.type for g in grads] == ["CopyRowsToTensorGradient"]
    ws.feed_blob("g", np.ones((3, 2)))
    ws.run_operator_once(grads[0].__class__(type="CopyRowsToTensorGradient", input=["g"], output=["gi"]))
    np.testing.assert_array_equal(ws.fetch_blob("gi"), np.ones((3, 2)))
    ws.feed_blob("x", x)
    ws.feed_blob("i", np.array([5], np.int64))
    ws.feed_blob("r", np.zeros(2))
    with pytest.raises(FrameworkError, match=r"CopyRowsToTensor.*indices must be integers in \[0, 3\)"):
        ws.run_operator_once(op)
    np.testing.assert_array_equal(ws.fetch_blob("x"), x)
    a = CreateOperator("AliasWithName", ["x"], ["xa"], name="foo")
    ws.run_operator_once(a)
    ws.get_blob("x")._obj.data()[0, 0] = 42
    assert ws.fetch_blob("xa")[0, 0] == 42  # shares storage
    assert_gradient_checks(CreateOperator("AliasWithName", ["x"], ["y"], name="n"), [x], 0)
    assert_gradient_checks(CreateOperator("CopyOnDeviceLike", ["x", "d"], ["y"]), [x, np.zeros(1)], 0)
    ws.run_operator_once(CreateOperator("DataCouple", ["x", "l"], ["x", "l"]))
    ws.run_operator_once(CreateOperator("GetAllBlobNames", [], ["names"]))
    names = ws.fetch_blob("names").tolist()
    assert names == sorted(names) and b"x" in names and b"names" in names
    child = Workspace(parent=ws)
    child.feed_blob("mine", np.zeros(1))
    child.run_operator_once(CreateOperator("GetAllBlobNames", [], ["n2"], include_shared=False))
    assert child.fetch_blob("n2").tolist() == [b"mine", b"n2"]
