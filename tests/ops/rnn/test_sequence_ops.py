"""Padding, packing and decoding ops of family rnn against plain-Python references."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.memory.workspace import Workspace
from framework.ops.testing import assert_gradient_checks, assert_reference_checks

lengths_st = st.lists(st.integers(0, 3), min_size=0, max_size=4).map(lambda v: np.array(v, np.int32))


def ref_add_padding(x, lengths, s, e, start=None, end=None):
    block = x.shape[1:]
    start = np.zeros(block, x.dtype) if start is None else start.reshape(block)
    end = start if end is None else end.reshape(block)
    rows, pos = [], 0
    for n in lengths:
        rows += [start] * s + [x[pos + i] for i in range(n)] + [end] * e
        pos += n
    return np.array(rows, x.dtype).reshape((-1, *block))


@settings(max_examples=30, deadline=None)
@given(lengths_st, st.integers(0, 2), st.integers(-1, 2), st.booleans())
def test_add_and_remove_padding(lengths, s, e, with_pads):
    e_eff = s if e < 0 else e
    x = np.arange(int(lengths.sum()) * 2, dtype=np.float32).reshape(-1, 2) + 1
    start, end = np.full(2, -1.0, np.float32), np.full(2, -2.0, np.float32)
    ins, names = [x, lengths], ["x", "l"]
    if with_pads:
        ins, names = ins + [start, end], names + ["ps", "pe"]
    op = CreateOperator("AddPadding", names, ["y", "ly"], padding_width=s, end_padding_width=e)
    padded = ref_add_padding(x, lengths, s, e_eff, *((start, end) if with_pads else ()))
    y, ly = assert_reference_checks(op, ins, lambda *_: [padded, lengths + s + e_eff])
    rm = CreateOperator("RemovePadding", ["y", "ly"], ["z", "lz"], padding_width=s, end_padding_width=e)
    assert_reference_checks(rm, [padded, lengths + s + e_eff], lambda *_: [x, lengths])
    if x.size:
        assert_gradient_checks(op, ins, 0, [0], check_inference=False)
        assert_gradient_checks(rm, [padded, (lengths + s + e_eff).astype(np.int32)], 0, [0], check_inference=False)
    if with_pads and len(lengths):
        assert_gradient_checks(op, ins, 2, [0], check_inference=False)
        assert_gradient_checks(op, ins, 3, [0], check_inference=False)


def test_add_padding_without_lengths_pads_once():
    x = np.ones((3, 2), np.int64)
    assert_reference_checks(
        CreateOperator("AddPadding", ["x"], ["y"], padding_width=1), [x], lambda _: ref_add_padding(x, [3], 1, 1)
    )


def test_gather_padding_sums():
    x = np.arange(12, dtype=np.float32).reshape(6, 2)
    lengths = np.array([4, 2], np.int32)
    start = x[0] + x[4]
    end = x[3] + x[5]
    assert_reference_checks(
        CreateOperator("GatherPadding", ["x", "l"], ["s", "e"], padding_width=1), [x, lengths], lambda *_: [start, end]
    )
    assert_reference_checks(
        CreateOperator("GatherPadding", ["x", "l"], ["s"], padding_width=1), [x, lengths], lambda *_: [start + end]
    )


@pytest.mark.parametrize(
    "op_type, ins, msg",
    [
        ("AddPadding", [np.ones((3, 2), np.float32), np.array([2, 2], np.int32)], "sum to 3"),
        ("RemovePadding", [np.ones((3, 2), np.float32), np.array([1, 2], np.int32)], "shorter"),
        ("AddPadding", [np.ones((3, 2), np.float32), np.array([3], np.int32), np.ones(3, np.float32)], "padding"),
    ],
)
def test_padding_errors(op_type, ins, msg):
    ws = Workspace()
    names = [f"i{k}" for k in range(len(ins))]
    for n, v in zip(names, ins):
        ws.feed_blob(n, v)
    with pytest.raises(FrameworkError, match=msg):
        ws.run_operator_once(CreateOperator(op_type, names, ["o"]))
    assert not ws.has_blob("o")


@settings(max_examples=25, deadline=None)
@given(lengths_st)
def test_pad_empty_samples(lengths):
    total = int(lengths.sum())
    f = np.arange(total * 2, dtype=np.float32).reshape(total, 2) + 1
    rows, pos = [], 0
    for n in lengths:
        if n == 0:
            rows.append(np.zeros(2, np.float32))
        rows += [f[pos + i] for i in range(n)]
        pos += n
    ref = np.array(rows, np.float32).reshape(-1, 2)
    assert_reference_checks(
        CreateOperator("PadEmptySamples", ["l", "f"], ["ol", "of"]),
        [lengths, f],
        lambda *_: [np.maximum(lengths, 1), ref],
        check_inference=False,
    )


@settings(max_examples=25, deadline=None)
@given(lengths_st, st.sampled_from([np.float32, np.int64]))
def test_pack_and_unpack(lengths, dtype):
    total = int(lengths.sum())
    v = (np.arange(total * 3).reshape(total, 3) + 1).astype(dtype)
    rows = int(lengths.max()) if lengths.size else 0
    packed = np.zeros((rows, len(lengths), 3), dtype)
    pos = 0
    for c, n in enumerate(lengths):
        for r in range(n):
            packed[r, c] = v[pos + r]
        pos += n
    # output lengths depend on the values of lengths: inference gives the partial shape only
    assert_reference_checks(
        CreateOperator("PackRNNSequence", ["v", "l"], ["p"]), [v, lengths], lambda *_: packed, check_inference=False
    )
    assert_reference_checks(
        CreateOperator("UnpackRNNSequence", ["p", "l"], ["u"]), [packed, lengths], lambda *_: v, check_inference=False
    )
    if total and dtype == np.float32:
        pack = CreateOperator("PackRNNSequence", ["v", "l"], ["p"])
        assert_gradient_checks(pack, [v, lengths], 0, check_inference=False)
        unpack = CreateOperator("UnpackRNNSequence", ["p", "l"], ["u"])
        assert_gradient_checks(unpack, [packed, lengths], 0, check_inference=False)


def ctc_greedy_ref(x, seq, merge):
    lens, vals = [], []
    for b in range(x.shape[1]):
        prev, out = 0, []
        for t in range(seq[b]):
            k = max(range(x.shape[2]), key=lambda c: (x[t, b, c], -c))
            if k != 0 and (not merge or k != prev):
                out.append(k)
            prev = k
        lens.append(len(out))
        vals += out
    return np.array(lens, np.int32), np.array(vals, np.int32)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 5), st.integers(1, 3), st.integers(1, 4), st.booleans(), st.integers(0, 1000))
def test_ctc_greedy_decoder(t, b, c, merge, seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 3, (t, b, c)).astype(np.float32)  # many ties: first index wins
    seq = rng.integers(0, t + 1, b).astype(np.int32)
    op = CreateOperator("CTCGreedyDecoder", ["x", "s"], ["len", "val"], merge_repeated=merge)
    assert_reference_checks(op, [x, seq], lambda *_: ctc_greedy_ref(x, seq, merge), check_inference=False)
    op2 = CreateOperator("CTCGreedyDecoder", ["x"], ["len", "val"], merge_repeated=merge)
    assert_reference_checks(op2, [x], lambda _: ctc_greedy_ref(x, [t] * b, merge), check_inference=False)


def viterbi_brute(p, tr):
    n, d = p.shape
    best, arg = None, None
    for path in itertools.product(range(d), repeat=n):
        s = sum(p[i, path[i]] for i in range(n)) + sum(tr[path[i - 1], path[i]] for i in range(1, n))
        if best is None or s > best + 1e-6:
            best, arg = s, path
    return np.array(arg, np.int32)


@settings(max_examples=30, deadline=None)
@given(st.integers(1, 4), st.integers(1, 3), st.integers(0, 1000))
def test_viterbi_path_is_the_best_path(n, d, seed):
    rng = np.random.default_rng(seed)
    p = rng.standard_normal((n, d)).astype(np.float32)
    tr = rng.standard_normal((d, d)).astype(np.float32)
    assert_reference_checks(
        CreateOperator("ViterbiPath", ["p", "t"], ["path"]), [p, tr], lambda *_: viterbi_brute(p, tr)
    )


def test_swap_best_path():
    x = np.array([[1.0, 5.0, 3.0], [2.0, 2.0, 0.0]], np.float32)
    path = np.array([2, 1], np.int32)
    ref = np.array([[1.0, 3.0, 5.0], [2.0, 2.0, 0.0]], np.float32)  # row 1: max at 0 (first), swapped with 1
    assert_reference_checks(CreateOperator("SwapBestPath", ["x", "p"], ["y"]), [x, path], lambda *_: ref)
    ws = Workspace()
    ws.feed_blob("x", x)
    ws.feed_blob("p", np.array([3, 0], np.int32))
    with pytest.raises(FrameworkError, match="bestPath"):
        ws.run_operator_once(CreateOperator("SwapBestPath", ["x", "p"], ["y"]))


def _collapse(path):
    out, prev = [], None
    for k in path:
        if k != prev and k != 0:
            out.append(k)
        prev = k
    return tuple(out)


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 4), st.integers(1, 2), st.integers(2, 3), st.integers(0, 1000))
def test_ctc_beam_search_with_a_wide_beam_is_exact(t, b, c, seed):
    rng = np.random.default_rng(seed)
    x = rng.random((t, b, c)).astype(np.float32)
    x /= x.sum(axis=2, keepdims=True)
    lens, vals = [], []
    for j in range(b):
        score = {}
        for path in itertools.product(range(c), repeat=t):
            p = float(np.prod([x[k, j, path[k]] for k in range(t)])) if t else 1.0
            key = _collapse(path)
            score[key] = score.get(key, 0.0) + p
        best = min(score, key=lambda k: (-score[k], k)) if t else ()
        lens.append(len(best))
        vals += list(best)
    op = CreateOperator("CTCBeamSearchDecoder", ["x"], ["len", "val"], beam_width=1000, prune_threshold=0.0)
    assert_reference_checks(
        op, [x], lambda _: [np.array(lens, np.int32), np.array(vals, np.int32)], check_inference=False
    )


@settings(max_examples=20, deadline=None)
@given(st.integers(1, 4), st.integers(1, 2), st.integers(2, 3), st.integers(1, 3), st.integers(0, 1000))
def test_ctc_beam_search_three_outputs_give_the_best_candidates(t, b, c, k, seed):
    """Caffe2 2020's form: num_candidates best prefixes per item, their lengths (0 where there are fewer)
    and probabilities; with a beam wide enough the search is exact."""
    rng = np.random.default_rng(seed)
    x = rng.random((t, b, c)).astype(np.float32)
    x /= x.sum(axis=2, keepdims=True)
    scores = []
    for j in range(b):
        score = {}
        for path in itertools.product(range(c), repeat=t):
            key = _collapse(path)
            score[key] = score.get(key, 0.0) + float(np.prod([x[s, j, path[s]] for s in range(t)]))
        scores.append(score)
    # Caffe2's beam also holds prefixes of probability 0 (ranked last): ask for no more than the possible ones
    k = min([k] + [len(score) for score in scores])
    lens, vals, probs = np.zeros(b * k, np.int32), [], np.zeros(b * k, np.float32)
    for j, score in enumerate(scores):
        ranked = sorted(score, key=lambda key: (-score[key], key))[:k]
        for r, key in enumerate(ranked):
            lens[j * k + r], probs[j * k + r] = len(key), score[key]
            vals += list(key)
    op = CreateOperator(
        "CTCBeamSearchDecoder", ["x"], ["len", "val", "prob"], beam_width=1000, prune_threshold=0.0, num_candidates=k
    )
    assert_reference_checks(
        op, [x], lambda _: [lens, np.array(vals, np.int32), probs], threshold=1e-5, check_inference=False
    )


def test_ctc_beam_search_prunes_and_honours_lengths():
    x = np.array([[[0.1, 0.9, 0.0]], [[0.8, 0.1, 0.1]], [[0.1, 0.1, 0.8]]], np.float32)
    op = CreateOperator("CTCBeamSearchDecoder", ["x", "s"], ["len", "val"], beam_width=2)
    ws = Workspace()
    ws.feed_blob("x", x)
    ws.feed_blob("s", np.array([2], np.int32))
    ws.run_operator_once(op)
    assert ws.fetch_blob("len").tolist() == [1] and ws.fetch_blob("val").tolist() == [1]
