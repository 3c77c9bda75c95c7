"""Gather's gradient on an axis other than 0: dense, through BatchGatherGradient with the axis (and
match_outer), as Caffe2; BatchGatherGradient itself against a numpy scatter-add."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import ShapeError
from framework.ops import get_gradient_for_op
from framework.ops.testing import assert_gradient_checks, assert_reference_checks
from tests.ops.helpers import run_fed


def _scatter_ref(data, idx, dy, axis, match_outer):
    out = np.zeros_like(data, dtype=dy.dtype)
    for pos in np.ndindex(*data.shape[:axis]):
        rows = idx[pos] if match_outer else idx
        g = dy[pos]
        for k, row in enumerate(rows.reshape(-1)):
            sub = g.reshape((rows.size,) + data.shape[axis + 1 :])[k]
            out[pos + (row,)] += sub
    return out


@settings(max_examples=20, deadline=None)
@given(data=st.data(), axis=st.integers(1, 2), match_outer=st.booleans())
def test_gather_gradient_on_axis(data, axis, match_outer):
    shape = tuple(data.draw(st.lists(st.integers(1, 3), min_size=axis + 1, max_size=axis + 2)))
    rng = np.random.default_rng(data.draw(st.integers(0, 1000)))
    d = rng.standard_normal(shape)
    n = shape[axis]
    idx_shape = shape[:axis] + (2,) if match_outer else (2, 2)
    idx = rng.integers(0, n, idx_shape).astype(np.int32)  # repeats add up
    op = CreateOperator("Gather", ["D", "I"], ["Y"], axis=axis, match_outer=int(match_outer))
    ops, grads = get_gradient_for_op(op, ["Y_grad"])
    assert [o.type for o in ops] == ["BatchGatherGradient"] and grads[0] == "D_grad"
    args = {a.name: a.i for a in ops[0].arg}
    assert args["axis"] == axis and bool(args.get("match_outer", 0)) == match_outer
    assert_gradient_checks(op, [d, idx], 0)


def test_batch_gather_gradient_scatter_adds():
    d = np.zeros((2, 4, 3))
    idx = np.array([[1, 1], [3, 0]], np.int64)
    dy = np.arange(2 * 2 * 2 * 3, dtype=np.float64).reshape(2, 2, 2, 3)
    op = CreateOperator("BatchGatherGradient", ["D", "I", "dY"], ["dD"])
    assert_reference_checks(op, [d, idx, dy], lambda d, i, g: [_scatter_ref(d, i, g, 1, False)])
    dy2 = np.arange(2 * 2 * 3, dtype=np.float64).reshape(2, 2, 3)
    op = CreateOperator("BatchGatherGradient", ["D", "I", "dY"], ["dD"], axis=1, match_outer=1)
    assert_reference_checks(op, [d, idx, dy2], lambda d, i, g: [_scatter_ref(d, i, g, 1, True)])
    d3 = np.zeros((2, 2, 3))
    dy3 = np.ones((2, 2, 2, 2))
    op = CreateOperator("BatchGatherGradient", ["D", "I", "dY"], ["dD"], axis=2)
    i3 = np.array([[0, 2], [2, 2]], np.int32)
    assert_reference_checks(op, [d3, i3, dy3], lambda d, i, g: [_scatter_ref(d, i, g, 2, False)])


def test_batch_gather_gradient_errors():
    d = np.zeros((2, 4))
    with pytest.raises(ShapeError, match="expected"):
        run_fed(CreateOperator("BatchGatherGradient", ["D", "I", "G"], ["dD"]), {"D": d, "I": np.array([1]), "G": d})
    with pytest.raises(ShapeError, match="match_outer"):
        run_fed(
            CreateOperator("BatchGatherGradient", ["D", "I", "G"], ["dD"], match_outer=1),
            {"D": d, "I": np.array([[1]] * 3), "G": np.zeros((3, 1))},
        )
