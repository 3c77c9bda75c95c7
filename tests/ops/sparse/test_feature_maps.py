"""Merge*FeatureTensors against example-by-example loops, Caffe2's documented example, gradients by central
differences (the merged values are a permutation of the inputs' values)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.ops import get_gradient_for_op
from framework.ops.testing import assert_gradient_checks, assert_reference_checks, run_op_on

LAYOUTS = ["SingleScalar", "SingleList", "SingleMap", "MultiScalar", "MultiList", "MultiMap"]
OPS = {
    "MergeSingleScalarFeatureTensors": "SingleScalar",
    "MergeSingleListFeatureTensors": "SingleList",
    "MergeSingleMapFeatureTensors": "SingleMap",
    "MergeMultiScalarFeatureTensors": "MultiScalar",
    "MergeMultiListFeatureTensors": "MultiList",
    "MergeMultiMapFeatureTensors": "MultiMap",
}


def make_input(layout, n, draw, k):
    """(tensors, per-example list of (key, [value keys], [values]))."""
    rng = np.random.default_rng(draw(st.integers(0, 10**6)))
    per_example = []
    tensors = {}
    if layout.startswith("Single"):
        pres = np.array([draw(st.booleans()) for _ in range(n)], bool)
        if layout == "SingleScalar":
            vals = rng.standard_normal(n).astype(np.float32)
            tensors = {"values": vals, "presence": pres}
            per_example = [[(100 + k, [], [vals[e]])] if pres[e] else [] for e in range(n)]
        else:
            lengths = np.array([draw(st.integers(0, 2)) for _ in range(n)], np.int32)
            m = int(lengths[pres].sum())
            vals = rng.standard_normal(m).astype(np.float32)
            vkeys = rng.integers(0, 50, m).astype(np.int64)
            off = 0
            for e in range(n):
                if pres[e]:
                    sl = slice(off, off + lengths[e])
                    per_example.append([(100 + k, list(vkeys[sl]), list(vals[sl]))])
                    off += lengths[e]
                else:
                    per_example.append([])
            tensors = {"lengths": lengths, "keys": vkeys, "values": vals, "presence": pres}
            if layout == "SingleList":
                del tensors["keys"]
        return tensors, per_example
    lengths = np.array([draw(st.integers(0, 2)) for _ in range(n)], np.int32)
    nk = int(lengths.sum())
    keys = rng.integers(0, 9, nk).astype(np.int64)
    if layout == "MultiScalar":
        vals = rng.standard_normal(nk).astype(np.float32)
        off = 0
        for e in range(n):
            per_example.append([(keys[j], [], [vals[j]]) for j in range(off, off + lengths[e])])
            off += lengths[e]
        return {"lengths": lengths, "keys": keys, "values": vals}, per_example
    vl = np.array([draw(st.integers(0, 2)) for _ in range(nk)], np.int32)
    m = int(vl.sum())
    vals = rng.standard_normal(m).astype(np.float32)
    vkeys = rng.integers(0, 50, m).astype(np.int64)
    starts = np.cumsum(vl) - vl
    off = 0
    for e in range(n):
        feats = []
        for j in range(off, off + lengths[e]):
            sl = slice(starts[j], starts[j] + vl[j])
            feats.append((keys[j], list(vkeys[sl]), list(vals[sl])))
        per_example.append(feats)
        off += lengths[e]
    tensors = {"lengths": lengths, "keys": keys, "values_lengths": vl, "values_keys": vkeys, "values_values": vals}
    if layout == "MultiList":
        del tensors["values_keys"]
    return tensors, per_example


ORDER = {
    "SingleScalar": ["values", "presence"],
    "SingleList": ["lengths", "values", "presence"],
    "SingleMap": ["lengths", "keys", "values", "presence"],
    "MultiScalar": ["lengths", "keys", "values"],
    "MultiList": ["lengths", "keys", "values_lengths", "values_values"],
    "MultiMap": ["lengths", "keys", "values_lengths", "values_keys", "values_values"],
}


@pytest.mark.parametrize("op_type", list(OPS))
@settings(max_examples=15, deadline=None)
@given(data=st.data())
def test_merge_against_loops(op_type, data):
    layout = OPS[op_type]
    n = data.draw(st.integers(0, 4))
    inputs = [make_input(layout, n, data.draw, k) for k in range(data.draw(st.integers(1, 3)))]
    names, values = [], []
    for k, (t, _) in enumerate(inputs):
        for r in ORDER[layout]:
            names.append(f"in{k}_{r}")
            values.append(t[r])
    lengths, keys, vlens, vkeys, vals = [], [], [], [], []
    for e in range(n):
        feats = [f for _, per in inputs for f in per[e]]
        lengths.append(len(feats))
        for key, vk, vv in feats:
            keys.append(key)
            vlens.append(len(vv))
            vkeys += vk
            vals += vv
    expected = [np.array(lengths, np.int32), np.array(keys, np.int64)]
    if layout.endswith("List") or layout.endswith("Map"):
        expected.append(np.array(vlens, np.int32))
    if layout.endswith("Map"):
        expected.append(np.array(vkeys, np.int64))
    expected.append(np.array(vals, np.float32))
    kw = {"feature_ids": [100 + k for k in range(len(inputs))]} if layout.startswith("Single") else {}
    op = CreateOperator(op_type, names, [f"out{i}" for i in range(len(expected))], **kw)
    assert_reference_checks(op, values, lambda *_: expected, check_inference=False)
    # the gradient of each input's values by central differences
    value_pos = ORDER[layout].index("values" if "values" in ORDER[layout] else "values_values")
    for k in range(len(inputs)):
        if values[len(ORDER[layout]) * k + value_pos].size:
            assert_gradient_checks(
                op,
                values,
                len(ORDER[layout]) * k + value_pos,
                outputs_with_grads=[len(expected) - 1],
                check_inference=False,
            )


def test_caffe2_example_and_dense_merge():
    # MergeSingleScalarFeatureTensors doc example shape: 3 examples, 2 features
    out = run_op_on(
        CreateOperator(
            "MergeSingleScalarFeatureTensors", ["v1", "p1", "v2", "p2"], ["l", "k", "v"], feature_ids=[1, 2]
        ),
        [
            np.array([11.1, 0.0, 13.1], np.float32),
            np.array([True, False, True]),
            np.array([21.1, 22.1, 0.0], np.float32),
            np.array([True, True, False]),
        ],
    )
    np.testing.assert_array_equal(out[0], [2, 1, 1])
    np.testing.assert_array_equal(out[1], [1, 2, 2, 1])
    np.testing.assert_allclose(out[2], [11.1, 21.1, 22.1, 13.1])
    dense = np.array([[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]], np.float32)
    pres = np.array([[True, False, True], [False, True, True]])
    out = run_op_on(
        CreateOperator("MergeDenseFeatureTensors", ["d", "p"], ["l", "k", "v"], feature_ids=[7, 8, 9]), [dense, pres]
    )
    np.testing.assert_array_equal(out[0], [2, 2])
    np.testing.assert_array_equal(out[1], [7, 9, 8, 9])
    np.testing.assert_array_equal(out[2], [1.0, 3.0, 5.0, 6.0])


def test_gradient_makers_follow_caffe2():
    op = CreateOperator(
        "MergeSingleMapFeatureTensors", [f"x{i}" for i in range(8)], [f"y{i}" for i in range(5)], feature_ids=[1, 2]
    )
    ops, g = get_gradient_for_op(op, [None, None, None, None, "dv"])
    assert [(o.type, list(o.input), list(o.output)) for o in ops] == [
        ("MergeSingleMapFeatureTensorsGradient", ["x0", "x3", "x4", "x7", "dv"], ["x2_grad", "x6_grad"])
    ]
    op = CreateOperator("MergeMultiListFeatureTensors", [f"x{i}" for i in range(4)], [f"y{i}" for i in range(4)])
    ops, _ = get_gradient_for_op(op, [None, None, None, "dv"])
    assert [(o.type, list(o.input), list(o.output)) for o in ops] == [
        ("MergeMultiListFeatureTensorsGradient", ["x0", "x2", "dv"], ["x3_grad"])
    ]


@pytest.mark.parametrize(
    "values, fill",
    [
        (np.array([b"a", b"bc", b"d"], object), b""),
        (np.array([1.5, -2.0, 3.0], np.float32), 0.0),
        (np.array([True, True, False], bool), False),
    ],
)
def test_single_scalar_gradient_fills_absent_examples_with_the_default_value(values, fill):
    """Caffe2 writes T() for an example whose feature is absent: b"" for strings, 0 or False otherwise."""
    p0, p1 = np.array([True, False, True]), np.array([False, True, True])
    # the merged values, example by example, input by input: ex0 (in0), ex1 (in1), ex2 (in0, in1)
    op = CreateOperator("MergeSingleScalarFeatureTensorsGradient", ["p0", "p1", "dv"], ["d0", "d1"])

    def ref(p0, p1, dv):
        return [np.array([dv[0], fill, dv[2]], values.dtype), np.array([fill, dv[1], dv[3]], values.dtype)]

    dv = np.concatenate([values, values[:1]])
    d0, d1 = assert_reference_checks(op, [p0, p1, dv], ref, check_inference=False)
    assert [type(v) for v in d0] == [type(v) for v in ref(p0, p1, dv)[0]]
