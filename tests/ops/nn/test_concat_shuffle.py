"""ConcatChannelShuffle against Concat -> ChannelShuffle -> Split written here in numpy: the strided
copies (the inputs are the shuffle's groups, parts on multiples of the group) and the gathered path
(anything else), shape inference equal to the outputs, errors naming the input."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import GradientError, ShapeError
from framework.memory.workspace import Workspace
from framework.ops import create_operator, get_gradient_for_op
from framework.ops.testing import assert_reference_checks


def reference(xs, group, sizes):
    cat = np.concatenate(xs, axis=1)
    n, c = cat.shape[:2]
    shuffled = cat.reshape(n, group, c // group, *cat.shape[2:]).swapaxes(1, 2).reshape(cat.shape)
    return np.split(shuffled, np.cumsum(sizes)[:-1], axis=1)


@st.composite
def cases(draw):
    group = draw(st.integers(1, 4))
    if draw(st.booleans()):  # the inputs are the groups (ShuffleNet): strided copies where parts allow
        per = draw(st.integers(1, 5))
        chans = [per] * group
    else:
        chans = draw(st.lists(st.integers(0, 6), min_size=1, max_size=4))
        extra = (-sum(chans)) % group
        chans[-1] += extra
        if sum(chans) == 0:
            chans[-1] = group
    c = sum(chans)
    outs = draw(st.integers(1, 3))
    if draw(st.booleans()) and c % outs == 0:
        sizes, arg = [c // outs] * outs, None
    else:
        cuts = sorted(draw(st.lists(st.integers(0, c), min_size=outs - 1, max_size=outs - 1)))
        sizes = np.diff([0, *cuts, c]).tolist()
        arg = sizes
    n = draw(st.integers(0, 3))
    spatial = draw(st.sampled_from([(), (3,), (2, 5)]))
    return group, chans, sizes, arg, n, spatial


@given(case=cases(), seed=st.integers(0, 2**31 - 1))
@settings(max_examples=60, deadline=None)
def test_concat_channel_shuffle_matches_the_three_ops(case, seed):
    group, chans, sizes, arg, n, spatial = case
    rng = np.random.default_rng(seed)
    xs = [rng.standard_normal((n, k, *spatial)).astype(np.float32) for k in chans]
    names = [f"X{i}" for i in range(len(xs))]
    outs = [f"Y{i}" for i in range(len(sizes))]
    kw = dict(group=group) | (dict(split=arg) if arg is not None else {})
    op = CreateOperator("ConcatChannelShuffle", names, outs, **kw)
    got = assert_reference_checks(op, xs, lambda *a: reference(a, group, sizes), threshold=0, atol=0)
    assert [g.shape[1] for g in got] == sizes


def test_the_strided_path_is_taken_for_shufflenet_units():
    rng = np.random.default_rng(0)
    ws = Workspace()
    a, b = (rng.standard_normal((2, 6, 4, 4)).astype(np.float32) for _ in range(2))
    ws.feed_blob("a", a)
    ws.feed_blob("b", b)
    op = create_operator(CreateOperator("ConcatChannelShuffle", ["a", "b"], ["l", "r"], group=2), ws)
    op.run()
    assert op._copies is not None and len(op._copies) == 4
    want = reference([a, b], 2, [6, 6])
    np.testing.assert_array_equal(ws.fetch_blob("l"), want[0])
    np.testing.assert_array_equal(ws.fetch_blob("r"), want[1])
    np.testing.assert_array_equal(ws.fetch_blob("l")[:, 1::2], b[:, :3])  # shuffled: a0 b0 a1 b1 ...


def test_errors_name_the_input():
    ws = Workspace()
    ws.feed_blob("a", np.zeros((2, 2, 3, 3), np.float32))
    ws.feed_blob("b", np.zeros((2, 2, 3, 4), np.float32))
    op = create_operator(CreateOperator("ConcatChannelShuffle", ["a", "b"], ["y"], group=2), ws)
    with pytest.raises(ShapeError, match="input 1 'b'"):
        op.run()
    ws.feed_blob("b", np.zeros((2, 1, 3, 3), np.float32))
    with pytest.raises(ShapeError, match="not divisible by group 2"):
        op.run()
    ws.feed_blob("b", np.zeros((2, 2, 3, 3), np.float32))
    bad = create_operator(CreateOperator("ConcatChannelShuffle", ["a", "b"], ["y", "z"], group=2, split=[1, 2]), ws)
    with pytest.raises(ShapeError, match="do not split the 4"):
        bad.run()
    with pytest.raises(GradientError):
        get_gradient_for_op(CreateOperator("ConcatChannelShuffle", ["a", "b"], ["y"], group=2), ["dy"])
