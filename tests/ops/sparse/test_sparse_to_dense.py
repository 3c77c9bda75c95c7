"""SparseToDense, SparseToDenseMask (+ gradient), BatchSparseToDense / BatchDenseToSparse against loops."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.ops.testing import assert_gradient_checks, assert_reference_checks, run_op_on


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_sparse_to_dense(data):
    idx = np.array(data.draw(st.lists(st.integers(0, 5), max_size=6)), np.int64)
    vals = np.array(
        data.draw(st.lists(st.floats(-3, 3, width=32), min_size=2 * idx.size, max_size=2 * idx.size)), np.float32
    ).reshape(-1, 2)
    mode = data.draw(st.sampled_from(["max", "arg", "like"]))
    first = (int(idx.max()) + 1 if idx.size else 0) + (data.draw(st.integers(0, 2)) if mode != "max" else 0)
    if mode == "arg" and first == 0:
        mode = "max"

    def ref(i, v, *_):
        out = np.zeros((first, 2), np.float64)
        for k, r in enumerate(i):
            out[r] += v[k]
        return out.astype(np.float32)

    ins, vals_in, kw = ["i", "v"], [idx, vals], {}
    if mode == "arg":
        kw["output_first_dim"] = first
    if mode == "like":
        ins.append("like")
        vals_in.append(np.zeros((first, 1), np.float32))
    static = mode != "max"
    assert_reference_checks(
        CreateOperator("SparseToDense", ins, ["y"], **kw), vals_in, ref, atol=1e-5, check_inference=static
    )


def test_sparse_to_dense_gradient_is_a_gather():
    idx = np.array([2, 0, 2], np.int32)
    vals = np.random.default_rng(0).standard_normal((3, 2)).astype(np.float32)
    op = CreateOperator("SparseToDense", ["i", "v", "like"], ["y"])
    assert_gradient_checks(op, [idx, vals, np.zeros((4, 1), np.float32)], 1)


def ref_mask(mask, idx, vals, default, lengths):
    rows = len(lengths) if lengths is not None else 1
    out = np.empty((rows, len(mask), *default.shape), vals.dtype)
    out[...] = default
    present = np.zeros((rows, len(mask)), bool)
    k = 0
    for r in range(rows):
        for _ in range(lengths[r] if lengths is not None else len(idx)):
            if idx[k] in mask:
                out[r, mask.index(idx[k])] = vals[k]
                present[r, mask.index(idx[k])] = True
            k += 1
    if lengths is None:
        return out[0], present[0]
    return out, present


@settings(max_examples=40, deadline=None)
@given(st.data())
def test_sparse_to_dense_mask(data):
    mask = data.draw(st.lists(st.integers(0, 8), min_size=1, max_size=4, unique=True))
    lengths = data.draw(st.none() | st.lists(st.integers(0, 3), max_size=3))
    n = sum(lengths) if lengths is not None else data.draw(st.integers(0, 5))
    idx = np.array(data.draw(st.lists(st.integers(0, 9), min_size=n, max_size=n)), np.int32)
    vals = np.arange(n * 2, dtype=np.float32).reshape(n, 2) + 1
    default = np.array([-1.0, -2.0], np.float32)
    ins, values = ["i", "v", "d"], [idx, vals, default]
    if lengths is not None:
        ins.append("l")
        values.append(np.array(lengths, np.int32))
    lens = np.array(lengths) if lengths is not None else None
    op = CreateOperator("SparseToDenseMask", ins, ["y", "p"], mask=mask, return_presence_mask=True)
    assert_reference_checks(op, values, lambda *_: ref_mask(mask, list(idx), vals, default, lens))


def test_sparse_to_dense_mask_gradient_goes_to_the_value_that_won():
    op = CreateOperator("SparseToDenseMask", ["i", "v", "d", "l"], ["y"], mask=[7, 3])
    idx = np.array([3, 7, 3, 5, 7], np.int64)
    vals = np.random.default_rng(0).standard_normal((5, 2)).astype(np.float32)
    assert_gradient_checks(op, [idx, vals, np.zeros(2, np.float32), np.array([3, 2], np.int32)], 1)


@st.composite
def batch_cases(draw):
    lengths = draw(st.lists(st.integers(0, 3), max_size=4))
    cols = draw(st.integers(3, 5))
    idx = [c for n in lengths for c in draw(st.permutations(range(cols)))[:n]]  # no repeats inside a row
    return np.array(lengths, np.int64), np.array(idx, np.int64), cols


@settings(max_examples=40, deadline=None)
@given(batch_cases())
def test_batch_sparse_to_dense_and_back(case):
    lengths, idx, cols = case
    vals = np.arange(idx.size, dtype=np.float32) + 0.5
    dense = np.full((len(lengths), cols), 7.0, np.float32)
    k = 0
    for i, n in enumerate(lengths):
        for _ in range(n):
            dense[i, idx[k]] = vals[k]
            k += 1
    op = CreateOperator("BatchSparseToDense", ["l", "i", "v"], ["y"], dense_last_dim=cols, default_value=7.0)
    assert_reference_checks(op, [lengths, idx, vals], lambda *_: dense)
    op = CreateOperator("BatchDenseToSparse", ["l", "i", "d"], ["v"])
    assert_reference_checks(op, [lengths, idx, dense], lambda *_: vals)


def test_batch_sparse_dense_gradients():
    lengths, idx = np.array([2, 0, 1], np.int64), np.array([1, 3, 0], np.int64)
    vals = np.array([0.5, -1.0, 2.0], np.float32)
    dense = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    assert_gradient_checks(
        CreateOperator("BatchSparseToDense", ["l", "i", "v"], ["y"], dense_last_dim=4), [lengths, idx, vals], 2
    )
    assert_gradient_checks(CreateOperator("BatchDenseToSparse", ["l", "i", "d"], ["y"]), [lengths, idx, dense], 2)


@pytest.mark.parametrize(
    "op_type, inputs, kw, message",
    [
        ("SparseToDense", [np.array([0, 4]), np.ones((2, 1), np.float32)], {"output_first_dim": 3}, "index 4"),
        ("SparseToDense", [np.array([0]), np.ones((2, 1), np.float32)], {}, "one per index"),
        (
            "SparseToDenseMask",
            [np.array([1]), np.ones((1, 2), np.float32), np.zeros(3, np.float32)],
            {"mask": [1]},
            "DEFAULT-shaped",
        ),
        (
            "BatchSparseToDense",
            [np.array([1], np.int64), np.array([5], np.int64), np.ones(1, np.float32)],
            {"dense_last_dim": 3},
            "index 5",
        ),
        ("BatchDenseToSparse", [np.array([1], np.int64), np.array([0], np.int64), np.ones(3, np.float32)], {}, "2-D"),
    ],
)
def test_bad_input_is_a_named_error(op_type, inputs, kw, message):
    names = [f"in{i}" for i in range(len(inputs))]
    with pytest.raises(FrameworkError, match=f"{op_type}.*{message}"):
        run_op_on(CreateOperator(op_type, names, ["o"], **kw), inputs)


def test_empty_mask_is_an_argument_error():
    with pytest.raises(FrameworkError, match="mask"):
        run_op_on(
            CreateOperator("SparseToDenseMask", ["i", "v", "d"], ["o"], mask=[]),
            [np.zeros(0, np.int64), np.zeros(0, np.float32), np.zeros((), np.float32)],
        )
