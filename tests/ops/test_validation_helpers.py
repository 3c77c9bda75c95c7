"""The run-time helpers of framework.ops.validation that ops call with arrays in hand (expect_rank,
expect_same_shape, normalize_axis): each failure is a ShapeError naming the op and the blobs; hypothesis
compares normalize_axis with the definition written out."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from framework.errors import ShapeError
from framework.ops.validation import expect_rank, expect_same_shape, normalize_axis


class _Op:
    input_names = ["x0", "x1"]

    def describe(self):
        return "op Fake"


def test_expect_rank_names_the_blob_and_what_it_holds():
    x = np.zeros((2, 3))
    expect_rank(_Op(), 0, x, 2)
    expect_rank(_Op(), 0, x, (1, None))
    with pytest.raises(ShapeError, match=r"op Fake: input 1 \('x1'\) must have rank 4 \(N x C x H x W\), got shape"):
        expect_rank(_Op(), 1, x, 4, "N x C x H x W")
    with pytest.raises(ShapeError, match=r"must have rank 3 to 5, got shape \[2, 3\]"):
        expect_rank(_Op(), 0, x, (3, 5))


def test_expect_same_shape_names_both_blobs():
    a, b = np.zeros((2, 3)), np.zeros((3, 2))
    expect_same_shape(_Op(), 0, a, 1, a.copy())
    with pytest.raises(
        ShapeError, match=r"input 1 \('x1'\) has shape \[3, 2\] but input 0 \('x0'\) has shape \[2, 3\]; they must"
    ):
        expect_same_shape(_Op(), 0, a, 1, b)


@given(st.integers(-8, 8), st.integers(0, 5), st.booleans())
def test_normalize_axis_is_the_python_index_rule(axis, ndim, allow_end):
    rank = ndim + allow_end
    positions = list(range(rank))
    if -rank <= axis < rank:
        assert normalize_axis(_Op(), axis, ndim, allow_end=allow_end) == positions[axis]
    else:
        with pytest.raises(ShapeError, match=rf"op Fake: argument 'axis' = {axis} is out of range for rank {ndim}"):
            normalize_axis(_Op(), axis, ndim, allow_end=allow_end)
