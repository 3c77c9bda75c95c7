"""SplitByLengths, LengthsSplit, ReversePackedSegs, VariableLengthSequencePadding, BatchPermutation,
LastNWindowCollector, DepthConcat/DepthSplit and the stat puts against numpy/Python references;
gradients where Caffe2 has them."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.memory.workspace import Workspace
from framework.ops import create_operator
from framework.ops.testing import assert_gradient_checks, assert_reference_checks


@settings(max_examples=20, deadline=None)
@given(
    lengths=st.lists(st.integers(0, 3), min_size=1, max_size=6),
    n_out=st.sampled_from([1, 2, 3]),
    seed=st.integers(0, 99),
)
def test_split_by_lengths(lengths, n_out, seed):
    lengths = (lengths * n_out)[: len(lengths) * n_out]
    x = np.random.default_rng(seed).normal(size=(2, sum(lengths), 3))
    per = len(lengths) // n_out
    sizes = [sum(lengths[k * per : (k + 1) * per]) for k in range(n_out)]
    bounds = np.cumsum([0] + sizes)
    outs = [f"y{k}" for k in range(n_out)]
    op = CreateOperator("SplitByLengths", ["x", "l"], outs)  # default axis: NCHW -> 1
    ref = lambda x, l: [x[:, bounds[k] : bounds[k + 1]] for k in range(n_out)]  # noqa: E731
    assert_reference_checks(op, [x, np.array(lengths, np.int32)], ref, check_inference=False)
    assert_gradient_checks(op, [x, np.array(lengths, np.int32)], 0, outputs_with_grads=list(range(n_out)))
    ws = Workspace()
    ws.feed_blob("x", x)
    ws.feed_blob("l", np.array(lengths + [1], np.int32))
    with pytest.raises(FrameworkError, match="SplitByLengths"):
        ws.run_operator_once(CreateOperator("SplitByLengths", ["x", "l"], ["a"]))


def test_split_by_lengths_scaling_and_axis0():
    x = np.arange(12.0).reshape(6, 2)
    op = CreateOperator("SplitByLengths", ["x", "l"], ["a", "b"], axis=0, use_scaling_lengths=True)
    assert_reference_checks(op, [x, np.array([1, 2], np.int32)], lambda x, l: [x[:2], x[2:]], check_inference=False)


@given(lengths=st.lists(st.integers(0, 9), max_size=5), n=st.integers(1, 4), as_input=st.booleans())
def test_lengths_split(lengths, n, as_input):
    def ref(l, *_):
        return np.array([L // n + (1 if i < L % n else 0) for L in lengths for i in range(n)], np.int32).reshape(-1)

    if as_input:
        op = CreateOperator("LengthsSplit", ["l", "n"], ["y"])
        inputs = [np.array(lengths, np.int32), np.array(n, np.int32)]
    else:
        op = CreateOperator("LengthsSplit", ["l"], ["y"], n_split=n)
        inputs = [np.array(lengths, np.int32)]
    assert_reference_checks(op, inputs, ref, check_inference=False)


@settings(max_examples=20, deadline=None)
@given(t=st.integers(1, 5), b=st.integers(1, 4), data=st.data())
def test_reverse_packed_segs_and_padding(t, b, data):
    lengths = np.array(data.draw(st.lists(st.integers(0, t), min_size=b, max_size=b)), np.int32)
    x = np.random.default_rng(t * 10 + b).normal(size=(t, b, 2))

    def rev(x, l):
        out = x.copy()
        for j in range(b):
            out[: l[j], j] = x[: l[j], j][::-1]
        return out

    op = CreateOperator("ReversePackedSegs", ["x", "l"], ["y"])
    assert_reference_checks(op, [x, lengths], rev)
    assert_gradient_checks(op, [x, lengths], 0)

    def pad(x, l):
        out = x.copy()
        for j in range(b):
            out[l[j] :, j] = 0
        return out

    assert_reference_checks(
        CreateOperator("VariableLengthSequencePadding", ["x", "l"], ["x"]), [x, lengths], pad, check_no_realloc=False
    )


@settings(max_examples=20, deadline=None)
@given(n=st.integers(1, 6), seed=st.integers(0, 99))
def test_batch_permutation(n, seed):
    rng = np.random.default_rng(seed)
    x = rng.normal(size=(n, 3))
    idx = rng.permutation(n).astype(np.int32)
    op = CreateOperator("BatchPermutation", ["x", "i"], ["y"])
    assert_reference_checks(op, [x, idx], lambda x, i: x[i])
    assert_gradient_checks(op, [x, idx], 0)
    ws = Workspace()
    ws.feed_blob("x", x)
    ws.feed_blob("i", np.full(n, n, np.int32))
    with pytest.raises(FrameworkError, match="out of range"):
        ws.run_operator_once(op)


@settings(max_examples=20, deadline=None)
@given(batches=st.lists(st.integers(0, 5), min_size=1, max_size=6), k=st.integers(1, 4), with_extras=st.booleans())
def test_last_n_window_collector(batches, k, with_extras):
    ws = Workspace()
    ws.feed_blob("buf", np.zeros((0, 2), np.float32))
    ws.feed_blob("next", np.array(0, np.int32))
    ins, outs = ["buf", "next", "x"], ["buf", "next"]
    if with_extras:
        ws.run_operator_once(CreateOperator("CreateMutex", [], ["m"]))
        ws.feed_blob("visited", np.zeros(1, np.int64))
        ins, outs = ins + ["m", "visited"], outs + ["visited"]
    op = create_operator(CreateOperator("LastNWindowCollector", ins, outs, num_to_collect=k), ws)
    seen = []
    for j, n in enumerate(batches):
        x = np.arange(n * 2, dtype=np.float32).reshape(n, 2) + 100 * j
        ws.feed_blob("x", x)
        op.run()
        seen += list(map(tuple, x))
        buf = ws.fetch_blob("buf")
        if seen:
            assert sorted(map(tuple, buf)) == sorted(seen[-k:])  # the last k rows, in ring order
        if with_extras:
            assert ws.fetch_blob("visited").tolist() == [len(seen)]
    with pytest.raises(FrameworkError, match="num_to_collect"):
        create_operator(CreateOperator("LastNWindowCollector", ["buf", "next", "x"], ["buf", "next"]), ws)


def test_depth_concat_split_are_concat_split():
    a, b = np.ones((2, 1, 3)), np.zeros((2, 2, 3))
    assert_reference_checks(
        CreateOperator("DepthConcat", ["a", "b"], ["y", "info"]),
        [a, b],
        lambda a, b: [np.concatenate([a, b], 1)],
        outputs_to_check=[0],
    )
    assert_reference_checks(
        CreateOperator("DepthSplit", ["y"], ["p", "q"], split=[1, 2]),
        [np.concatenate([a, b], 1)],
        lambda y: [y[:, :1], y[:, 1:]],
    )


def test_stat_puts():
    ws = Workspace()
    puts = {
        kind: create_operator(CreateOperator(f"{kind}Put", ["v"], [], stat_name=kind.lower(), magnitude_expand=10), ws)
        for kind in ("Increment", "Average", "StdDev")  # "IncrementPut", "AveragePut", "StdDevPut"
    }
    values = [1.5, 2.0, -0.3]
    for v in values:
        ws.feed_blob("v", np.array([v], np.float32))
        for op in puts.values():
            op.run()
    ws.run_operator_once(CreateOperator("StatRegistryExport", [], ["k", "val", "ts"]))
    got = dict(zip([k.decode() for k in ws.fetch_blob("k").tolist()], ws.fetch_blob("val").tolist()))
    ints = [int(np.float32(v) * 10) for v in values]
    assert got["increment/stat_value"] == sum(ints)
    assert got["average/stat_value/sum"] == sum(ints) and got["average/stat_value/count"] == 3
    d = [i - ints[0] for i in ints]
    assert got["stddev/stat_value/sumoffset"] == sum(d) and got["stddev/stat_value/sumsqoffset"] == sum(
        x * x for x in d
    )
    ws.feed_blob("e", np.zeros(0, np.float32))
    with pytest.raises(FrameworkError, match="default value must be provided"):
        ws.run_operator_once(CreateOperator("IncrementPut", ["e"], []))
    ws.run_operator_once(CreateOperator("IncrementPut", ["e"], [], default_value=4.0))
    ws.feed_blob("nan", np.array([np.nan], np.float32))
    with pytest.raises(FrameworkError, match="NaN"):
        ws.run_operator_once(CreateOperator("IncrementPut", ["nan"], []))
    ws.run_operator_once(CreateOperator("IncrementPut", ["nan"], [], bound=True, stat_name="b"))
