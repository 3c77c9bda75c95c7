"""SquaredL2Distance, L1Distance and DotProduct against float64 numpy references written here."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import ShapeError
from framework.ops.testing import arrays, assert_gradient_checks, assert_reference_checks
from tests.ops.helpers import run_fed

# -- SquaredL2Distance / L1Distance ------------------------------------------------------------


@pytest.mark.parametrize("op_type", ["SquaredL2Distance", "L1Distance"])
@settings(max_examples=15)
@given(dims=st.lists(st.integers(0, 4), min_size=1, max_size=3), data=st.data())
def test_distances(op_type, dims, data):
    x = data.draw(arrays(tuple(dims), np.float32))
    y = data.draw(arrays(tuple(dims), np.float32))

    def reference(x, y):
        n = x.shape[0]
        diff = (x.astype(np.float64) - y).reshape(n, -1) if n else np.zeros((0, 1))
        z = 0.5 * (diff**2).sum(1) if op_type == "SquaredL2Distance" else np.abs(diff).sum(1)
        return z.astype(np.float32)

    assert_reference_checks(CreateOperator(op_type, ["X", "Y"], ["Z"]), [x, y], reference)


@pytest.mark.parametrize("op_type", ["SquaredL2Distance", "L1Distance"])
def test_distance_gradients_and_errors(op_type):
    rng = np.random.default_rng(8)
    x = rng.standard_normal((3, 4))
    y = x + rng.choice([-1, 1], (3, 4)) * rng.uniform(0.1, 1, (3, 4))  # away from L1's kink
    op = CreateOperator(op_type, ["X", "Y"], ["Z"])
    assert_gradient_checks(op, [x, y], 0)
    assert_gradient_checks(op, [x, y], 1)
    with pytest.raises(ShapeError, match=rf"{op_type}.*'X'.*\[2, 3\].*'Y'.*\[3, 2\]"):
        run_fed(op, {"X": np.ones((2, 3), np.float32), "Y": np.ones((3, 2), np.float32)})


def test_l1_gradient_is_zero_at_ties():
    feeds = {"X": np.array([[1.0, 2.0]]), "Y": np.array([[1.0, 3.0]]), "dZ": np.array([2.0])}
    ws, _ = run_fed(CreateOperator("L1DistanceGradient", ["X", "Y", "dZ"], ["dX", "dY"]), feeds)
    np.testing.assert_array_equal(ws.fetch_blob("dX"), [[0.0, -2.0]])
    np.testing.assert_array_equal(ws.fetch_blob("dY"), [[0.0, 2.0]])


# -- DotProduct --------------------------------------------------------------------------------


@settings(max_examples=25)
@given(shape=st.lists(st.integers(0, 4), min_size=1, max_size=3), data=st.data())
def test_dot_product(shape, data):
    x = data.draw(arrays(tuple(shape), np.float32))
    y = data.draw(arrays(tuple(shape), np.float32))

    def reference(x, y):
        n = x.shape[0]
        return (x.astype(np.float64) * y).reshape(n, -1).sum(1).astype(np.float32) if n else np.zeros(0, np.float32)

    assert_reference_checks(CreateOperator("DotProduct", ["X", "Y"], ["Z"]), [x, y], reference)


def test_dot_product_gradient_and_errors():
    rng = np.random.default_rng(9)
    x, y = rng.standard_normal((3, 4)), rng.standard_normal((3, 4))
    op = CreateOperator("DotProduct", ["X", "Y"], ["Z"])
    assert_gradient_checks(op, [x, y], 0)
    assert_gradient_checks(op, [x, y], 1)
    with pytest.raises(ShapeError, match=r"DotProduct.*'X' \[3, 4\].*'Y' \[3, 5\]"):
        run_fed(op, {"X": np.ones((3, 4), np.float32), "Y": np.ones((3, 5), np.float32)})
