"""Segment reductions: every [Sparse]<Layout><Reducer> op against a loop-by-loop numpy reference, gradients
(dense and sparse) against central differences, Caffe2's gradient op names, and bad input."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.ops import GradientSlice, get_gradient_for_op
from framework.ops.testing import assert_gradient_checks, assert_reference_checks

LAYOUTS = ("Lengths", "SortedSegment", "UnsortedSegment")
REDUCERS = ("Sum", "Mean", "WeightedSum")
OPS = [(s, lay, r) for s in (False, True) for lay in LAYOUTS for r in REDUCERS]

# Every op of the family, by name (the forward ops and Caffe2's gradient ops they emit)
FORWARD_TYPES = [
    "LengthsMean",
    "LengthsSum",
    "LengthsWeightedSum",
    "SortedSegmentMean",
    "SortedSegmentSum",
    "SortedSegmentWeightedSum",
    "SparseLengthsMean",
    "SparseLengthsSum",
    "SparseLengthsWeightedSum",
    "SparseSortedSegmentMean",
    "SparseSortedSegmentSum",
    "SparseSortedSegmentWeightedSum",
    "SparseUnsortedSegmentMean",
    "SparseUnsortedSegmentSum",
    "SparseUnsortedSegmentWeightedSum",
    "UnsortedSegmentMean",
    "UnsortedSegmentSum",
    "UnsortedSegmentWeightedSum",
]
GRADIENT_TYPES = [
    "LengthsIndicesInGradientMeanGradient",
    "LengthsIndicesInGradientSumGradient",
    "LengthsWeightedSumGradient",
    "LengthsWeightedSumWithMainInputGradient",
    "SortedSegmentMeanGradient",
    "SortedSegmentSumGradient",
    "SortedSegmentWeightedSumGradient",
    "SortedSegmentWeightedSumWithMainInputGradient",
    "SparseLengthsIndicesInGradientMeanGradient",
    "SparseLengthsIndicesInGradientSumGradient",
    "SparseLengthsIndicesInGradientWeightedSumGradient",
    "SparseLengthsIndicesInGradientWeightedSumWithMainInputGradient",
    "SparseSortedSegmentMeanGradient",
    "SparseSortedSegmentSumGradient",
    "SparseSortedSegmentWeightedSumGradient",
    "SparseSortedSegmentWeightedSumWithMainInputGradient",
    "SparseUnsortedSegmentMeanGradient",
    "SparseUnsortedSegmentSumGradient",
    "SparseUnsortedSegmentWeightedSumGradient",
    "SparseUnsortedSegmentWeightedSumWithMainInputGradient",
    "UnsortedSegmentMeanGradient",
    "UnsortedSegmentSumGradient",
    "UnsortedSegmentWeightedSumGradient",
    "UnsortedSegmentWeightedSumWithMainInputGradient",
]


def reference(layout, reducer, data, rows_idx, seg_input, weights, num_segments=-1):
    """Loop over segments: which rows belong to segment k, then sum / mean / weighted sum of them."""
    rows = [data[i] for i in rows_idx]
    if layout == "Lengths":
        seg = [k for k, n in enumerate(seg_input) for _ in range(n)]
        k_count = len(seg_input)
    else:
        seg = list(seg_input)
        k_count = (max(seg) + 1 if seg else 0) if num_segments < 0 else num_segments
    out = np.zeros((k_count, *data.shape[1:]), np.float64)
    for k in range(k_count):
        members = [j for j, s in enumerate(seg) if s == k]
        acc = np.zeros(data.shape[1:], np.float64)
        for j in members:
            acc += rows[j] * (weights[j] if weights is not None else 1.0)
        if reducer == "Mean" and members:
            acc /= len(members)
        out[k] = acc
    return out.astype(data.dtype)


@st.composite
def cases(draw, sparse, layout, reducer):
    trailing = tuple(draw(st.lists(st.integers(1, 3), min_size=0, max_size=2)))
    n_data = draw(st.integers(1 if sparse else 0, 6))
    n_rows = draw(st.integers(0, 7)) if sparse else n_data
    data = draw(
        st.lists(
            st.floats(-4, 4, width=32),
            min_size=n_data * int(np.prod(trailing, dtype=int)),
            max_size=n_data * int(np.prod(trailing, dtype=int)),
        )
    )
    data = np.array(data, np.float32).reshape((n_data, *trailing))
    idx = np.array(draw(st.lists(st.integers(0, max(n_data - 1, 0)), min_size=n_rows, max_size=n_rows)), np.int64)
    if layout == "Lengths":
        k = draw(st.integers(0, 4)) if n_rows == 0 else draw(st.integers(1, 4))
        cuts = sorted(draw(st.lists(st.integers(0, n_rows), min_size=max(k - 1, 0), max_size=max(k - 1, 0))))
        bounds = [0, *cuts, n_rows] if k else [0]
        seg = np.array([b - a for a, b in zip(bounds, bounds[1:])], np.int32) if k else np.zeros(0, np.int32)
        if k == 0 and n_rows:
            seg = np.array([n_rows], np.int32)
    else:
        seg = np.array(draw(st.lists(st.integers(0, 4), min_size=n_rows, max_size=n_rows)), np.int32)
        if layout == "SortedSegment":
            seg = np.sort(seg)
    weights = np.array(draw(st.lists(st.floats(-2, 2, width=32), min_size=n_rows, max_size=n_rows)), np.float32)
    return data, idx, seg, weights


def build(sparse, layout, reducer, data, idx, seg, weights, **kw):
    name = f"{'Sparse' if sparse else ''}{layout}{reducer}"
    names, values = ["data"], [data]
    if reducer == "WeightedSum":
        names.append("w")
        values.append(weights)
    if sparse:
        names.append("idx")
        values.append(idx)
    names.append("seg")
    values.append(seg)
    return CreateOperator(name, names, ["out"], **kw), values


@pytest.mark.parametrize("sparse, layout, reducer", OPS, ids=lambda v: str(v))
@settings(max_examples=25)
@given(data=st.data())
def test_forward_against_numpy(sparse, layout, reducer, data):
    x, idx, seg, w = data.draw(cases(sparse, layout, reducer))
    num = -1
    if layout == "UnsortedSegment" and data.draw(st.booleans()):
        num = (int(seg.max()) + 1 if seg.size else 0) + data.draw(st.integers(0, 2))
    kw = {"num_segments": num} if layout == "UnsortedSegment" else {}
    op, inputs = build(sparse, layout, reducer, x, idx, seg, w, **kw)
    rows = idx if sparse else np.arange(len(x))
    weights = w if reducer == "WeightedSum" else None
    # K is known from shapes for Lengths (len(LENGTHS)) and with num_segments; else the ids decide it
    static = layout == "Lengths" or num >= 0
    expected = reference(layout, reducer, x, rows, seg, weights, num)
    assert_reference_checks(op, inputs, lambda *_: expected, threshold=1e-4, atol=1e-4, check_inference=static)


@pytest.mark.parametrize("sparse, layout, reducer", OPS, ids=lambda v: str(v))
def test_gradients_against_central_differences(sparse, layout, reducer):
    rng = np.random.default_rng(3)
    x = rng.standard_normal((5, 2)).astype(np.float32)
    idx = np.array([4, 0, 4, 2, 1, 4], np.int64)  # a repeated row: its sparse values add up
    n = len(idx) if sparse else len(x)
    seg = {
        "Lengths": np.array([2, 0, n - 2], np.int32),
        "SortedSegment": np.sort(rng.integers(0, 3, n)).astype(np.int32),
        "UnsortedSegment": rng.integers(0, 4, n).astype(np.int32),
    }[layout]
    w = rng.standard_normal(n).astype(np.float32)
    op, inputs = build(sparse, layout, reducer, x, idx, seg, w, grad_on_weights=1 if reducer == "WeightedSum" else 0)
    if reducer != "WeightedSum":
        op.ClearField("arg")
    assert_gradient_checks(op, inputs, 0, threshold=1e-3)
    if reducer == "WeightedSum":
        assert_gradient_checks(op, inputs, 1, threshold=1e-3)


def test_gradient_makers_use_caffe2s_ops_and_sparse_slices():
    def grad(op_type, inputs, **kw):
        ops, g = get_gradient_for_op(CreateOperator(op_type, inputs, ["y"], **kw), ["y_grad"])
        return [(o.type, list(o.input), list(o.output)) for o in ops], g

    ops, g = grad("SparseLengthsSum", ["d", "i", "l"])
    assert ops == [("SparseLengthsIndicesInGradientSumGradient", ["y_grad", "l", "i"], ["d_grad_values"])]
    assert g[0] == GradientSlice("i", "d_grad_values")
    ops, g = grad("SparseLengthsWeightedSum", ["d", "w", "i", "l"], grad_on_weights=1)
    assert ops == [
        (
            "SparseLengthsIndicesInGradientWeightedSumWithMainInputGradient",
            ["w", "y_grad", "l", "d", "i"],
            ["d_grad_values", "w_grad"],
        )
    ]
    ops, _ = grad("SparseLengthsWeightedSum", ["d", "w", "i", "l"])
    assert ops == [("SparseLengthsIndicesInGradientWeightedSumGradient", ["w", "y_grad", "l", "i"], ["d_grad_values"])]
    ops, _ = grad("LengthsMean", ["d", "l"])
    assert ops == [("LengthsIndicesInGradientMeanGradient", ["y_grad", "l", "d"], ["d_grad"])]
    ops, g = grad("SparseUnsortedSegmentSum", ["d", "i", "s"])
    assert ops == [("SparseUnsortedSegmentSumGradient", ["y_grad", "s"], ["d_grad_values"])]
    ops, _ = grad("SortedSegmentWeightedSum", ["d", "w", "s"])
    assert ops == [("SortedSegmentWeightedSumGradient", ["w", "y_grad", "s"], ["d_grad"])]


def test_an_embedding_update_touches_only_the_rows_looked_up():
    """SparseLengthsSum + its sparse gradient + ScatterWeightedSum-style update: untouched rows stay bit-equal."""
    from framework import core, workspace

    workspace.ResetWorkspace()
    table = np.random.default_rng(0).standard_normal((1000, 4)).astype(np.float32)
    workspace.FeedBlob("emb", table)
    workspace.FeedBlob("ids", np.array([3, 7, 3, 999], np.int64))
    workspace.FeedBlob("lens", np.array([2, 2], np.int32))
    net = core.Net("rec")
    pooled = net.SparseLengthsSum(["emb", "ids", "lens"], "pooled")
    loss = net.AveragedLoss(net.SumElements(pooled, "s"), "loss")
    grads = net.AddGradientOperators([loss])
    assert isinstance(grads["emb"], GradientSlice)
    workspace.RunNetOnce(net)
    values = workspace.FetchBlob(str(grads["emb"].values))
    assert values.shape == (4, 4)
    updated = table.copy()
    np.subtract.at(updated, [3, 7, 3, 999], 0.1 * values)
    touched = np.zeros(1000, bool)
    touched[[3, 7, 999]] = True
    assert np.array_equal(updated[~touched], table[~touched])


@pytest.mark.parametrize(
    "op_type, inputs, message",
    [
        ("LengthsSum", [np.ones((3, 2), np.float32), np.array([1, 1], np.int32)], "sum to 2, but there are 3 rows"),
        (
            "SparseLengthsSum",
            [np.ones((3, 2), np.float32), np.array([0, 3], np.int64), np.array([2], np.int32)],
            "index 3",
        ),
        ("SortedSegmentSum", [np.ones((3, 2), np.float32), np.array([0, 2, 1], np.int32)], "sorted"),
        ("UnsortedSegmentSum", [np.ones((2, 2), np.float32), np.array([0, -1], np.int32)], "negative"),
        (
            "LengthsWeightedSum",
            [np.ones((2, 2), np.float32), np.ones(3, np.float32), np.array([2], np.int32)],
            "SCALARS",
        ),
        ("LengthsMean", [np.ones((2, 2), np.float32), np.array([1.0, 1.0], np.float32)], "integer"),
    ],
)
def test_bad_input_is_a_named_error(op_type, inputs, message):
    from framework.memory.workspace import Workspace
    from framework.net.api import run_operator_once

    ws = Workspace()
    names = [f"in{i}" for i in range(len(inputs))]
    for n, v in zip(names, inputs):
        ws.feed_blob(n, v)
    with pytest.raises(FrameworkError, match=message):
        run_operator_once(ws, CreateOperator(op_type, names, ["out"]))
    assert not ws.has_blob("out")


def test_the_family_is_complete_and_each_op_emits_a_listed_gradient_op():
    from framework.ops import all_schemas

    names = {s.type for s in all_schemas() if s.operator_class.__module__.endswith("segment_reductions")}
    assert names == set(FORWARD_TYPES) | set(GRADIENT_TYPES) | {"LengthsSumGradient", "SparseLengthsSumGradient"}
    emitted = set()
    for op_type in FORWARD_TYPES:
        n_in = 2 + ("WeightedSum" in op_type) + op_type.startswith("Sparse")
        for on_weights in (0, 1) if "WeightedSum" in op_type else (0,):
            kw = {"grad_on_weights": on_weights} if on_weights else {}
            ops, _ = get_gradient_for_op(CreateOperator(op_type, [f"x{i}" for i in range(n_in)], ["y"], **kw), ["g"])
            emitted |= {o.type for o in ops}
    assert emitted == set(GRADIENT_TYPES)


@pytest.mark.parametrize("sparse", [False, True])
@pytest.mark.parametrize("reducer", REDUCERS)
@settings(max_examples=10, deadline=None)
@given(k=st.integers(1, 4), length=st.integers(1, 4), data=st.data())
def test_equal_lengths_fast_path_against_numpy(sparse, reducer, k, length, data):
    """Every segment of one length (the recommendation-batch case) takes a reshape + sum path."""
    rng = np.random.default_rng(data.draw(st.integers(0, 100)))
    n = k * length
    x = rng.standard_normal((n + 3 if sparse else n, 2)).astype(np.float32)
    idx = rng.integers(0, len(x), n).astype(np.int64)
    seg = np.full(k, length, np.int32)
    w = rng.standard_normal(n).astype(np.float32)
    op, inputs = build(sparse, "Lengths", reducer, x, idx, seg, w)
    expected = reference(
        "Lengths", reducer, x, idx if sparse else np.arange(n), seg, w if reducer == "WeightedSum" else None
    )
    assert_reference_checks(op, inputs, lambda *_: expected, threshold=1e-4, atol=1e-4)


@pytest.mark.parametrize("reducer", ["Sum", "WeightedSum", "Mean"])
@pytest.mark.parametrize("lengths", [[2, 2, 2], [3, 0, 2, 1]])
def test_sparse_lengths_reductions_of_float16_give_float32(reducer, lengths):
    """Caffe2's lengths_reducer_ops take float or float16 DATA and always write float32 (summing in float)."""
    rng = np.random.default_rng(len(lengths))
    data = (rng.standard_normal((5, 3)) * 100).astype(np.float16)
    lengths = np.array(lengths, np.int32)
    idx = rng.integers(0, 5, int(lengths.sum())).astype(np.int64)
    w = rng.standard_normal(idx.size).astype(np.float32)
    inputs = [data, w, idx, lengths] if reducer == "WeightedSum" else [data, idx, lengths]
    names = ["D", "W", "I", "L"] if reducer == "WeightedSum" else ["D", "I", "L"]

    def ref(*args):
        out = np.zeros((len(lengths), 3), np.float32)
        pos = 0
        for k, n in enumerate(lengths):
            for j in range(pos, pos + n):
                row = data[idx[j]].astype(np.float32)
                out[k] += row * w[j] if reducer == "WeightedSum" else row
            if reducer == "Mean" and n:
                out[k] /= n
            pos += n
        return out

    (y,) = assert_reference_checks(CreateOperator(f"SparseLengths{reducer}", names, ["Y"]), inputs, ref)
    assert y.dtype == np.float32


@pytest.mark.parametrize("op_type", ["LengthsSumGradient", "SparseLengthsSumGradient"])
@given(lengths=st.lists(st.integers(0, 3), min_size=1, max_size=4), d=st.integers(1, 3))
@settings(max_examples=15, deadline=None)
def test_legacy_sum_gradient_repeats_rows(op_type, lengths, d):
    """Caffe2's legacy (dY, LENGTHS) Sum gradients: row k of dY once per row of segment k."""
    lengths = np.array(lengths, np.int32)
    dy = np.arange(len(lengths) * d, dtype=np.float32).reshape(len(lengths), d) + 1

    def ref(dy, lengths):
        return np.array([dy[k] for k, n in enumerate(lengths) for _ in range(n)], np.float32).reshape(-1, d)

    # the rows depend on LENGTHS' values: inference leaves the shape unknown
    assert_reference_checks(CreateOperator(op_type, ["dY", "L"], ["dX"]), [dy, lengths], ref, check_inference=False)
