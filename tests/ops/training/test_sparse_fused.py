"""(RowWise)SparseAdagradFusedWithSparseLengths{Sum,WeightedSum,Mean}GradientApprox against a loop: expand the
pooled gradient to the looked-up rows, then Caffe2's Adagrad loop row after row."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.memory.workspace import Workspace
from framework.ops import create_operator

ROWS, COLS = 6, 3
OPS = [(rw, r) for rw in (False, True) for r in ("Sum", "WeightedSum", "Mean")]


def name(rowwise, reducer):
    return f"{'RowWise' if rowwise else ''}SparseAdagradFusedWithSparseLengths{reducer}GradientApprox"


@pytest.mark.parametrize("rowwise, reducer", OPS, ids=[name(*o) for o in OPS])
@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_fused_update_against_a_loop(rowwise, reducer, data):
    lengths = np.array(data.draw(st.lists(st.integers(0, 3), max_size=4)), np.int32)
    n = int(lengths.sum())
    idx = np.array(data.draw(st.lists(st.integers(0, ROWS - 1), min_size=n, max_size=n)), np.int64)
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    p = rng.standard_normal((ROWS, COLS)).astype(np.float32)
    m = (np.abs(rng.standard_normal(ROWS if rowwise else (ROWS, COLS))) + 0.1).astype(np.float32)
    dy = rng.standard_normal((len(lengths), COLS)).astype(np.float32)
    w = rng.standard_normal(n).astype(np.float32)
    lr, eps = -0.1, 1e-5
    ep, em = p.astype(np.float64), m.astype(np.float64)
    aux = np.zeros(n)
    k = 0
    for s, length in enumerate(lengths):
        for _ in range(length):
            g = dy[s].astype(np.float64)
            if reducer == "Mean":
                g = g / length
            if reducer == "WeightedSum":
                aux[k] = float(dy[s] @ p[idx[k]])
                g = g * w[k]
            r = idx[k]
            if rowwise:
                em[r] += np.mean(g * g)
                ep[r] += lr * g / (math.sqrt(em[r]) + eps)
            else:
                em[r] += g * g
                ep[r] += lr * g / (np.sqrt(em[r]) + eps)
            k += 1
    ws = Workspace()
    names = ["p", "m"] + (["w"] if reducer == "WeightedSum" else []) + ["i", "g", "lr", "l"]
    vals = [p, m] + ([w] if reducer == "WeightedSum" else []) + [idx, dy, np.array([lr], np.float32), lengths]
    for nm, v in zip(names, vals):
        ws.feed_blob(nm, v)
    outs = ["p", "m"] + (["aux"] if reducer == "WeightedSum" else [])
    create_operator(CreateOperator(name(rowwise, reducer), names, outs, epsilon=eps), ws).run()
    np.testing.assert_allclose(ws.fetch_blob("p"), ep, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ws.fetch_blob("m"), em, rtol=1e-4, atol=1e-6)
    if reducer == "WeightedSum":
        np.testing.assert_allclose(ws.fetch_blob("aux"), aux, rtol=1e-4, atol=1e-5)


def test_exact_caffe2_names_are_aliases_and_bad_grad_is_named():
    ws = Workspace()
    for nm, v in (
        ("p", np.zeros((4, 2), np.float32)),
        ("m", np.zeros(4, np.float32)),
        ("i", np.array([1, 2])),
        ("g", np.zeros((3, 2), np.float32)),
        ("lr", np.ones(1, np.float32)),
        ("l", np.array([2], np.int32)),
    ):
        ws.feed_blob(nm, v)
    op = CreateOperator(
        "RowWiseSparseAdagradFusedWithSparseLengthsSumGradient", ["p", "m", "i", "g", "lr", "l"], ["p", "m"]
    )
    with pytest.raises(FrameworkError, match="RowWiseSparseAdagradFused.*one row per segment"):
        create_operator(op, ws).run()
    np.testing.assert_array_equal(ws.fetch_blob("p"), 0)


def test_the_family_is_registered_with_caffe2s_exact_names_as_aliases():
    from framework.ops import get_schema

    approx = [
        "SparseAdagradFusedWithSparseLengthsSumGradientApprox",
        "SparseAdagradFusedWithSparseLengthsWeightedSumGradientApprox",
        "SparseAdagradFusedWithSparseLengthsMeanGradientApprox",
        "RowWiseSparseAdagradFusedWithSparseLengthsSumGradientApprox",
        "RowWiseSparseAdagradFusedWithSparseLengthsWeightedSumGradientApprox",
        "RowWiseSparseAdagradFusedWithSparseLengthsMeanGradientApprox",
    ]
    exact = [
        "SparseAdagradFusedWithSparseLengthsSumGradient",
        "SparseAdagradFusedWithSparseLengthsWeightedSumGradient",
        "SparseAdagradFusedWithSparseLengthsMeanGradient",
        "RowWiseSparseAdagradFusedWithSparseLengthsSumGradient",
        "RowWiseSparseAdagradFusedWithSparseLengthsWeightedSumGradient",
        "RowWiseSparseAdagradFusedWithSparseLengthsMeanGradient",
    ]
    for a, e in zip(approx, exact):
        assert get_schema(e).operator_class is get_schema(a).operator_class
