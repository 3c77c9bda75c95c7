"""Int8Flatten / Int8Reshape / Int8Transpose / Int8Slice / Int8Concat / Int8ChannelShuffle: codes moved as
numpy references written here move them, quantization kept, Caffe2's parameter checks."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.memory.workspace import Workspace
from tests.ops.quantized.int8_helpers import check_int8, q8, run

S, Z = 0.05, 17  # the inputs' quantization; the ops must keep it
shapes = st.lists(st.integers(0, 4), min_size=1, max_size=4).map(tuple)


def codes(shape, seed):
    return np.random.default_rng(seed).integers(0, 256, shape).astype(np.uint8)


@settings(max_examples=25, deadline=None)
@given(shape=shapes, data=st.data(), seed=st.integers(0, 2**16))
def test_flatten(shape, data, seed):
    axis = data.draw(st.integers(0, len(shape)))
    x = codes(shape, seed)
    outer = int(np.prod(shape[:axis], dtype=np.int64))
    inner = int(np.prod(shape[axis:], dtype=np.int64))
    op = CreateOperator("Int8Flatten", ["X"], ["Y"], axis=axis, Y_scale=S, Y_zero_point=Z)
    check_int8(op, [q8(x, S, Z)], [(x.reshape(outer, inner), S, Z)])


@settings(max_examples=25, deadline=None)
@given(shape=shapes, seed=st.integers(0, 2**16))
def test_reshape(shape, seed):
    x = codes(shape, seed)
    copy_first = len(shape) > 1 and math.prod(shape) > 0
    new = [0, -1] if copy_first else [-1]
    expected = x.reshape(shape[0], -1) if copy_first else x.reshape(-1)
    op = CreateOperator("Int8Reshape", ["X"], ["Y", "old"], shape=new, Y_scale=S, Y_zero_point=Z)
    check_int8(op, [q8(x, S, Z)], [(expected, S, Z), np.array(shape, np.int64)])


def test_reshape_shape_from_input_and_in_place():
    x = codes((2, 6), 1)
    op = CreateOperator("Int8Reshape", ["X", "S"], ["X", "old"], Y_scale=S, Y_zero_point=Z)
    ws, _, outs = run(op, [q8(x, S, Z), np.array([3, 4], np.int32)])
    assert outs[0].numpy().tolist() == x.reshape(3, 4).tolist() and outs[1].tolist() == [2, 6]
    with pytest.raises(FrameworkError, match="does not agree"):
        run(CreateOperator("Int8Reshape", ["X"], ["Y", "o"], shape=[5], Y_scale=S, Y_zero_point=Z), [q8(x, S, Z)])
    with pytest.raises(FrameworkError, match="`shape` is missing"):
        run(CreateOperator("Int8Reshape", ["X"], ["Y", "o"], Y_scale=S, Y_zero_point=Z), [q8(x, S, Z)])


@settings(max_examples=25, deadline=None)
@given(shape=shapes, data=st.data(), seed=st.integers(0, 2**16))
def test_transpose(shape, data, seed):
    axes = data.draw(st.permutations(range(len(shape))))
    x = codes(shape, seed)
    op = CreateOperator("Int8Transpose", ["X"], ["Y"], axes=list(axes), Y_scale=S, Y_zero_point=Z)
    check_int8(op, [q8(x, S, Z)], [(np.transpose(x, axes), S, Z)])
    op = CreateOperator("Int8Transpose", ["X"], ["Y"], Y_scale=S, Y_zero_point=Z)
    check_int8(op, [q8(x, S, Z)], [(x.T, S, Z)])


def ref_slice(x, starts, ends):
    idx = []
    for k, d in enumerate(x.shape):
        if k >= len(starts):
            idx.append(slice(None))
            continue
        s, e = starts[k], ends[k]
        s = d + 1 + s if s < 0 else s
        e = d + 1 + e if e < 0 else e
        idx.append(slice(min(s, d), min(e, d)))
    return x[tuple(idx)]


@settings(max_examples=25, deadline=None)
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=3).map(tuple), data=st.data(), seed=st.integers(0, 2**16))
def test_slice(shape, data, seed):
    x = codes(shape, seed)
    starts = [data.draw(st.integers(0, d - 1)) for d in shape]
    ends = [data.draw(st.sampled_from([-1, d])) for d in shape]
    expected = ref_slice(x, starts, ends)
    op = CreateOperator("Int8Slice", ["X"], ["Y"], starts=starts, ends=ends, Y_scale=S, Y_zero_point=Z)
    check_int8(op, [q8(x, S, Z)], [(expected, S, Z)])
    op = CreateOperator("Int8Slice", ["X", "s", "e"], ["Y"], Y_scale=S, Y_zero_point=Z)
    _, _, outs = run(op, [q8(x, S, Z), np.array(starts, np.int64), np.array(ends, np.int32)])
    np.testing.assert_array_equal(outs[0].numpy(), expected)


def test_slice_dim_start_end_form():
    x = codes((3, 5), 2)
    op = CreateOperator("Int8Slice", ["X"], ["Y"], dim=1, start_idx=1, end_idx=3, Y_scale=S, Y_zero_point=Z)
    check_int8(op, [q8(x, S, Z)], [(x[:, 1:3], S, Z)])


@pytest.mark.parametrize("order,axis,default", [("NHWC", 3, True), ("NCHW", 1, True), ("", 0, True),
                                                ("NHWC", 1, False), ("", 2, False)])  # fmt: skip
def test_concat(order, axis, default):
    parts = [codes((3, 4, 3, 5), k) for k in range(3)]
    sizes = [1, 2, 3]
    parts = [np.take(p, range(n), axis=axis) for p, n in zip(parts, sizes)]
    kw = {} if default else {"axis": axis}
    if order:
        kw["order"] = order
    op = CreateOperator("Int8Concat", ["A", "B", "C"], ["Y", "info"], Y_scale=S, Y_zero_point=Z, **kw)
    expected = np.concatenate(parts, axis=axis)
    check_int8(op, [q8(p, S, Z) for p in parts], [(expected, S, Z), np.array(sizes, np.int32)])


def test_concat_errors():
    a, b = q8(codes((2, 3), 0), S, Z), q8(codes((3, 3), 1), S, Z)
    with pytest.raises(FrameworkError, match="does not match input 0"):
        run(CreateOperator("Int8Concat", ["A", "B"], ["Y"], axis=1, Y_scale=S, Y_zero_point=Z), [a, b])
    with pytest.raises(FrameworkError, match="needs 4-D"):
        run(CreateOperator("Int8Concat", ["A", "B"], ["Y"], order="NHWC", Y_scale=S, Y_zero_point=Z), [a, b])
    with pytest.raises(FrameworkError, match="must equal the input's quantization"):
        run(CreateOperator("Int8Concat", ["A", "B"], ["Y"], Y_scale=S), [a, b])


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(0, 2), h=st.integers(1, 3), w=st.integers(1, 3), g=st.integers(1, 4), k=st.integers(0, 3),
    seed=st.integers(0, 2**16),
)  # fmt: skip
def test_channel_shuffle(n, h, w, g, k, seed):
    x = codes((n, h, w, g * k), seed)
    expected = np.empty_like(x)
    for gi in range(g):  # output channel kk * g + gi reads input channel gi * k + kk
        for kk in range(k):
            expected[..., kk * g + gi] = x[..., gi * k + kk]
    op = CreateOperator("Int8ChannelShuffle", ["X"], ["Y"], group=g, order="NHWC", Y_scale=S, Y_zero_point=Z)
    check_int8(op, [q8(x, S, Z)], [(expected, S, Z)])


def test_channel_shuffle_needs_nhwc_and_divisible_channels():
    ws = Workspace()
    ws.feed_blob("X", q8(codes((1, 2, 2, 6), 0), S, Z))
    with pytest.raises(FrameworkError, match="only supports NHWC"):
        ws.run_operator_once(CreateOperator("Int8ChannelShuffle", ["X"], ["Y"], group=2, Y_scale=S, Y_zero_point=Z))
    with pytest.raises(FrameworkError, match="divisible by 4"):
        ws.run_operator_once(
            CreateOperator("Int8ChannelShuffle", ["X"], ["Y"], group=4, order="NHWC", Y_scale=S, Y_zero_point=Z)
        )
