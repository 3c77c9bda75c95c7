"""Minimal cases the op fuzzer (tests/adversarial/op_fuzzer.py) found: each op refuses the hostile input
with a FrameworkError raised on purpose (not a raw numpy/Python error wrapped in an OperatorError, not
an allocation of the asked size) and leaves every output as it was."""

from __future__ import annotations

import numpy as np
import pytest

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.memory import set_allocation_limit
from framework.memory.workspace import Workspace
from framework.net.api import run_operator_once
from framework.ops import get_schema
from framework.proto.framework_pb2 import NetDef

F32, I32, I64 = np.float32, np.int32, np.int64


def _f(*shape):
    return (np.random.default_rng(0).random(shape) + 0.25).astype(F32)


_S3 = np.array([b"a", b"b", b"c"], object)
_TFIDF = dict(max_gram_length=1, min_gram_length=1, max_skip_count=0, ngram_counts=[0], pool_int64s=[1, 2])


# Segment-reduction gradients with weights: dDATA (here of the preset output's shape, so written in
# place) used to be written before SCALARS and DATA were checked.
_SEG = np.array([1, 1, 1], I32)
_IDS = np.array([0, 1, 2], I32)
CASES = [
    ("LengthsWeightedSumWithMainInputGradient", [_f(3), _f(3), _SEG, _f(1, 3)], 2, {}),  # SCALARS dY LENGTHS DATA
    ("SortedSegmentWeightedSumWithMainInputGradient", [_f(3), _f(3), _IDS, np.ones((), F32)], 2, {}),
    ("SparseLengthsIndicesInGradientWeightedSumGradient", [np.zeros(0, F32), _f(3), _SEG, _IDS], 1, {}),
    ("SparseUnsortedSegmentWeightedSumGradient", [np.ones((), F32), _f(3), _IDS], 1, {}),
    ("LRNGradient", [_f(3, 2), np.array([[b"a"] * 2] * 3, object), _f(3, 2)], 1, {"size": 1}),
    ("LRNGradient", [_f(3, 2), _f(3, 2), _f(6)], 1, {"size": 1}),
    ("Range", [np.array([np.nan], F32), np.array([3.0], F32), np.array([1.0], F32)], 1, {}),
    ("Range", [np.array([0.0], F32), np.array([np.inf], F32), np.array([1.0], F32)], 1, {}),
    ("Range", [np.array([0], I64), np.array([1 << 40], I64), np.array([1], I64)], 1, {}),
    (
        "RowWiseSparseAdam",  # moment_2 of strings
        [_f(3, 2), _f(3, 2), np.array([b"a"] * 3, object), np.array([0, 2], I64), _f(2, 2), _f(1), np.ones(1, I64)],
        3,
        {},
    ),
    (
        "RowWiseSparseAdam",  # a NaN iteration
        [_f(3, 2), _f(3, 2), _f(3), np.array([0, 2], I64), _f(2, 2), _f(1), np.array([np.nan], F32)],
        3,
        {},
    ),
    ("RowWiseCounter", [np.zeros(3, I64), np.zeros(3), np.array([0, 2], I64), np.array([np.nan])], 2, {}),
    ("Im2Col", [_f(3)], 1, {"kernel": 1}),  # no spatial dims (an IndexError)
    ("BatchGatherGradient", [_f(2, 3), np.array([0, 2], I32), np.array([[b"a"] * 2] * 2, object)], 1, {}),
    ("Col2Im", [_f(1, 2, 4, 4), _f(1, 2, 4, 4)], 1, {"kernel": 1, "pad": 10**12}),
    ("LengthsToShape", [np.array([2**63 - 1], I64)], 1, {}),  # does not fit the int32 shape
    (
        "LengthsPad",
        [np.arange(6, dtype=I64).reshape(3, 2), np.array([2, 1], I32)],
        1,
        {"target_length": 2, "padding_value": float("nan")},
    ),
    ("RecurrentNetworkGradient", [_f(3, 2)], 1, {"outputs_with_grads": [0], "backward_step_net": NetDef(name="b")}),
    ("RoIAlignRotated", [np.zeros((0, 2, 2, 2), F32), np.ones((2, 5), F32)], 1, {}),  # RoIs on image 0 of none
    ("RoIAlignRotated", [_f(3, 2, 2, 2), np.ones((2, 5), F32)], 1, {"pooled_w": 10**12}),
    ("RoIPool", [_f(3, 2, 2, 2), np.zeros((2, 5), F32)], 1, {"is_test": 1, "pooled_w": 10**12}),
    (
        "SparseAdagradFusedWithSparseLengthsSumGradient",  # an integer table (a cast error inside the update)
        [
            np.zeros((3, 2), I64),
            np.zeros((3, 2), I64),
            np.array([0, 2, 1], I64),
            np.ones((2, 2), I64),
            np.ones(1, I64),
            np.array([2, 1], I32),
        ],
        2,
        {},
    ),
    ("Adadelta", [_S3, _f(3), _f(3), _f(3), _f(1)], 3, {}),  # strings in the optimizer state
    ("Storm", [_f(3), _S3, _f(1), _f(3), _f(1)], 3, {}),
    ("CrossEntropyGradient", [_f(3, 2), _f(3, 2), _S3], 1, {}),  # a gradient of strings
    ("DotProductGradient", [_f(3, 2), _f(3, 2), _S3], 2, {}),
    ("SigmoidCrossEntropyWithLogitsGradient", [_S3, _f(3, 2), _f(3, 2)], 1, {}),
    ("LengthsTopK", [_S3, np.array([2, 1], I32)], 2, {"k": 1}),
    (
        "RowWiseSparseAdam",  # a negative beta: (-1) ** 1.5 is complex
        [_f(3, 2), _f(3, 2), _f(3), np.array([0, 2], I64), _f(2, 2), _f(1), np.array([0.5], F32)],
        3,
        {"beta2": -1.0},
    ),
    ("ONNXTfIdfVectorizer", [np.array([1, 2, 3], I64)], 1, {**_TFIDF, "ngram_indexes": [-1, 0]}),
    ("BatchBucketOneHot", [_S3.reshape(3, 1), np.array([1], I64), _f(1)], 1, {}),
    ("BatchOneHot", [_f(3, 1), np.array([1], I64), np.array([b"a"], object)], 1, {}),
    ("Col2Im", [np.zeros(0, F32), _f(1, 2, 4, 4)], 1, {"kernel": 1}),  # no columns for the image
    ("GatherRanges", [_f(3), np.array([[[1, 2**63 - 1]]], I64)], 2, {}),  # offset + length wraps int64
    ("LastNWindowCollector", [_f(3, 2), np.zeros(0, I32), _f(3, 2)], 2, {"num_to_collect": 1}),  # no cursor
    ("MaxPoolGradient", [_f(1, 2, 4, 4).astype(I64), _f(1, 2, 4, 4), _f(1, 2, 4, 4)], 1, {"kernel": 1}),
    ("Mod", [np.ones((3, 2), I32)], 1, {"divisor": 10**12}),  # does not fit int32
    (
        "ONNXLinearAttention",
        [np.zeros((0, 2, 2), F32), _f(3, 2, 2), _f(3, 2, 2)],
        1,
        {"q_num_heads": 1, "kv_num_heads": 1, "update_rule": b"linear"},
    ),
    ("SequenceMask", [_f(3, 2), np.array([1, 1, 0], I64)], 1, {"repeat_from_axis": 0}),
    ("ResizeNearest3D", [_f(1, 2, 2, 2, 2)], 1, {"temporal_scale": float("nan")}),
    ("RoIAlign", [_f(1, 2, 2, 2), _f(2, 4)], 1, {"spatial_scale": float("nan")}),
    ("RoIPool", [_f(1, 2, 2, 2), np.zeros((2, 5), F32)], 1, {"is_test": 1, "spatial_scale": float("nan")}),
    ("RowWiseSparseAdagrad", [_f(3), _S3, np.array([1, 1, 1], I32), _f(3), _f(1)], 2, {}),
    ("ConvGradient", [_f(1, 2, 4, 4), _f(1, 2, 4, 4), _f(1, 1, 1, 1)], 1, {"kernel": 4}),  # no slot for dbias
    # sizes asked for in arguments: refused before allocating
    ("Conv", [_f(1, 2, 4, 4), _f(1, 2, 4, 4), _f(1)], 1, {"kernel": 4, "pad": 2**63 - 1}),
    ("LRN", [_f(1, 3, 2, 2)], 1, {"size": 2**63 - 1}),
    ("LengthsSplit", [np.array([2, 1], I32)], 1, {"n_split": 10**12}),
    ("LengthsTopK", [_f(3), np.array([2, 1], I32)], 2, {"k": 10**12}),
    ("ONNXTfIdfVectorizer", [np.array([1, 2, 3], I64)], 1, {**_TFIDF, "ngram_indexes": [10**12, 0]}),
    ("SpaceToBatch", [_f(2, 2, 2, 2)], 1, {"pad": 10**12}),
    ("WeightedMultiSampling", [_f(3).cumsum()], 1, {"num_samples": 10**12}),
    ("ONNXOneHot", [np.array([0, 2, 1], I64), np.array([0.0, 1.0], F32)], 1, {"depth": 10**12}),
    ("SinusoidPositionEncoding", [np.array([[0, 1], [2, 3]], I64)], 1, {"embedding_size": 10**12}),
]


def _run_refused(op_type, inputs, n_out, args):
    ws = Workspace()
    names = [f"in{k}" for k in range(len(inputs))]
    for name, value in zip(names, inputs):
        ws.feed_blob(name, value)
    outs = [f"out{k}" for k in range(n_out)]
    if op_type in ("RowWiseSparseAdam", "RowWiseCounter", "Adadelta", "Storm") or "Adagrad" in op_type:
        outs[:n_out] = names[:n_out]  # the state is updated in place
    for i, o in get_schema(op_type).enforced_pairs(len(names), n_out):
        outs[o] = names[i]
    for k, name in enumerate(outs):
        if not ws.has_blob(name):
            ws.feed_blob(name, np.full((3,), 7.0 + k, F32))
    before = {name: ws.fetch_blob(name).copy() for name in outs}
    old = set_allocation_limit(256 << 20)
    try:
        with pytest.raises(FrameworkError) as info, np.errstate(all="ignore"):
            run_operator_once(ws, CreateOperator(op_type, names, outs, **args))
    finally:
        set_allocation_limit(old)
    assert getattr(info.value, "cause_is_user_error", True), f"raw error inside: {info.value}"
    assert op_type in str(info.value)
    for name in outs:
        after = ws.fetch_blob(name)
        assert after.dtype == before[name].dtype and after.shape == before[name].shape, name
        assert after.tobytes() == before[name].tobytes(), f"{name} changed by a failed {op_type}"


@pytest.mark.parametrize("op_type, inputs, n_out, args", CASES, ids=[c[0] for c in CASES])
def test_hostile_inputs_are_refused_and_change_nothing(op_type, inputs, n_out, args):
    _run_refused(op_type, inputs, n_out, args)


def test_onnx_adagrad_with_a_zero_decay_denominator_divides_as_ieee():
    """1 + T * decay_factor = 0: the rate is inf (onnxruntime's float division), not a ZeroDivisionError."""
    ws = Workspace()
    for name, value in [("R", np.array([0.1], F32)), ("T", np.array([1], I64)), ("X", _f(3)), ("G", _f(3))]:
        ws.feed_blob(name, value)
    ws.feed_blob("H", np.ones(3, F32))
    op = CreateOperator("ONNXAdagrad", ["R", "T", "X", "G", "H"], ["X2", "H2"], decay_factor=-1.0)
    with np.errstate(all="ignore"):
        run_operator_once(ws, op)
    assert np.isinf(ws.fetch_blob("X2")).all()


def test_sparse_wngrad_with_a_zero_accumulator_divides_as_ieee():
    """seq_b = 0: b grows to inf (Caffe2's float division), not a ZeroDivisionError."""
    ws = Workspace()
    feeds = [("p", _f(3, 2)), ("b", np.zeros(1, F32)), ("i", np.array([0, 2], I64)), ("g", _f(2, 2)), ("lr", _f(1))]
    for name, value in feeds:
        ws.feed_blob(name, value)
    with np.errstate(all="ignore"):
        run_operator_once(ws, CreateOperator("SparseWngrad", ["p", "b", "i", "g", "lr"], ["p", "b"]))
    assert np.isinf(ws.fetch_blob("b")).all()


def test_reservoir_sampling_refuses_a_visit_count_that_would_overflow():
    ws = Workspace()
    ws.feed_blob("buf", _f(1, 2))
    ws.feed_blob("n", np.array([2**63 - 1], I64))
    ws.feed_blob("x", _f(3, 2))
    run_operator_once(ws, CreateOperator("CreateMutex", [], ["mutex"]))
    before = ws.fetch_blob("buf").copy()
    op = CreateOperator("ReservoirSampling", ["buf", "n", "x", "mutex"], ["buf", "n"], num_to_collect=1)
    with pytest.raises(FrameworkError, match="overflows int64"):
        run_operator_once(ws, op)
    np.testing.assert_array_equal(ws.fetch_blob("buf"), before)
    assert ws.fetch_blob("n")[0] == 2**63 - 1


def test_group_norm_of_an_empty_batch_is_empty():
    """N = 0 used to fail reshaping (-1 cannot be inferred from 0 elements)."""
    ws = Workspace()
    for name, value in [("x", np.zeros((0, 2, 3), F32)), ("gamma", _f(2)), ("beta", _f(2))]:
        ws.feed_blob(name, value)
    run_operator_once(ws, CreateOperator("GroupNorm", ["x", "gamma", "beta"], ["y", "mu", "rsig"], group=1))
    assert ws.fetch_blob("y").shape == (0, 2, 3) and ws.fetch_blob("mu").shape == (0, 1)


def test_range_and_one_hot_still_compute():
    ws = Workspace()
    ws.feed_blob("a", np.array([1], I64))
    ws.feed_blob("b", np.array([7], I64))
    ws.feed_blob("c", np.array([2], I64))
    run_operator_once(ws, CreateOperator("Range", ["a", "b", "c"], ["r"]))
    np.testing.assert_array_equal(ws.fetch_blob("r"), [1, 3, 5])
    ws.feed_blob("i", np.array([0, 2], I64))
    ws.feed_blob("v", np.array([0.0, 5.0], F32))
    run_operator_once(ws, CreateOperator("ONNXOneHot", ["i", "v"], ["h"], depth=3))
    np.testing.assert_array_equal(ws.fetch_blob("h"), [[5, 0, 0], [0, 0, 5]])
