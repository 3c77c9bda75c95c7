"""MatMul and BatchMatMul against numpy references written here."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import GradientError, ShapeError, TypeMismatchError
from framework.memory.workspace import Workspace
from framework.ops import create_operator, get_gradient_for_op
from framework.ops.testing import arrays, assert_gradient_checks, assert_reference_checks, run_op_on

small = st.integers(1, 4)


# -- MatMul -------------------------------------------------------------------------------------


@settings(max_examples=30)
@given(m=small, k=small, n=small, ta=st.booleans(), tb=st.booleans(), data=st.data())
def test_matmul(m, k, n, ta, tb, data):
    a = data.draw(arrays((k, m) if ta else (m, k), np.float32))
    b = data.draw(arrays((n, k) if tb else (k, n), np.float32))
    op = CreateOperator("MatMul", ["A", "B"], ["Y"], trans_a=int(ta), trans_b=int(tb))
    assert_reference_checks(op, [a, b], lambda a, b: (a.T if ta else a) @ (b.T if tb else b))


def test_matmul_axis_flattening():
    rng = np.random.default_rng(5)
    a = rng.standard_normal((2, 3, 4)).astype(np.float32)
    b = rng.standard_normal((4, 2, 5)).astype(np.float32)
    op = CreateOperator("MatMul", ["A", "B"], ["Y"], axis_a=2, axis_b=1)
    out = assert_reference_checks(op, [a, b], lambda a, b: a.reshape(6, 4) @ b.reshape(4, 10))
    assert out[0].shape == (6, 10)


@pytest.mark.parametrize("ta", [0, 1])
@pytest.mark.parametrize("tb", [0, 1])
def test_matmul_gradient(ta, tb):
    rng = np.random.default_rng(6)
    a = rng.standard_normal((3, 2) if ta else (2, 3))
    b = rng.standard_normal((4, 3) if tb else (3, 4))
    op = CreateOperator("MatMul", ["A", "B"], ["Y"], trans_a=ta, trans_b=tb)
    ops, _ = get_gradient_for_op(op, ["Y_grad"])
    assert [g.type for g in ops] == ["MatMul", "MatMul"]
    # Caffe2's maker: the differentiated input is the third (shape) input; only trans/axis args
    assert [g.input[2] for g in ops] == ["A", "B"]
    assert all(a.name in ("trans_a", "trans_b", "axis_a", "axis_b") for g in ops for a in g.arg)
    assert_gradient_checks(op, [a, b], 0)
    assert_gradient_checks(op, [a, b], 1)


@pytest.mark.parametrize("ta", [0, 1])
@pytest.mark.parametrize("tb", [0, 1])
def test_matmul_gradient_non_default_axes(ta, tb):
    """Caffe2 accepts the gradient of MatMul with axis_a/axis_b; dA and dB take A's and B's shapes."""
    rng = np.random.default_rng(7)
    a = rng.standard_normal((2, 3, 2) if not ta else (2, 2, 3))  # axis_a=2: (6, 2) or axis_a=1: (2, 6)
    b = rng.standard_normal((2, 2, 2))
    axis_a = 2 if not ta else 1
    axis_b = 1 if not tb else 2  # B as (2, 4) or, transposed, (4, 2) -> K = 2
    op = CreateOperator("MatMul", ["A", "B"], ["Y"], trans_a=ta, trans_b=tb, axis_a=axis_a, axis_b=axis_b)
    a2 = a.reshape(int(np.prod(a.shape[:axis_a])), -1)
    b2 = b.reshape(int(np.prod(b.shape[:axis_b])), -1)
    assert_reference_checks(op, [a, b], lambda a, b: (a2.T if ta else a2) @ (b2.T if tb else b2))
    assert_gradient_checks(op, [a, b], 0)
    assert_gradient_checks(op, [a, b], 1)


def test_matmul_shape_input():
    rng = np.random.default_rng(8)
    a, b, like = rng.standard_normal((2, 3)), rng.standard_normal((3, 4)), np.zeros((2, 2, 2))
    op = CreateOperator("MatMul", ["A", "B", "L"], ["Y"])
    assert_reference_checks(op, [a, b, like], lambda a, b, like: (a @ b).reshape(2, 2, 2))
    with pytest.raises(ShapeError, match=r"MatMul.*input 2 'L'"):
        run_op_on(op, [a, b, np.zeros(3)])


def test_matmul_errors():
    ws = Workspace()
    ws.feed_blob("A", np.ones((2, 3), np.float32))
    ws.feed_blob("B", np.ones((4, 5), np.float32))
    with pytest.raises(ShapeError, match=r"MatMul.*A \[2, 3\].*B \[4, 5\].*K \(3 vs 4\)"):
        create_operator(CreateOperator("MatMul", ["A", "B"], ["Y"]), ws).run()
    ws.feed_blob("B", np.ones((3, 5), np.float64))
    with pytest.raises(TypeMismatchError, match=r"MatMul.*'B' is float64"):
        create_operator(CreateOperator("MatMul", ["A", "B"], ["Y"]), ws).run()


# -- BatchMatMul -------------------------------------------------------------------------------


def _bmm_ref(ta, tb):
    def reference(a, b):
        at = np.swapaxes(a, -1, -2) if ta and a.ndim >= 2 else a
        bt = np.swapaxes(b, -1, -2) if tb and b.ndim >= 2 else b
        y = np.matmul(at.astype(np.float64), bt.astype(np.float64))
        return np.asarray(y, np.float32).reshape((1,) if a.ndim == 1 and b.ndim == 1 else np.shape(y))

    return reference


@settings(max_examples=30)
@given(
    batch=st.lists(small, min_size=0, max_size=2),
    m=small,
    k=small,
    n=small,
    ta=st.booleans(),
    tb=st.booleans(),
    data=st.data(),
)
def test_batch_matmul(batch, m, k, n, ta, tb, data):
    a = data.draw(arrays(tuple(batch) + ((k, m) if ta else (m, k)), np.float32))
    b = data.draw(arrays(tuple(batch) + ((n, k) if tb else (k, n)), np.float32))
    op = CreateOperator("BatchMatMul", ["A", "B"], ["Y"], trans_a=int(ta), trans_b=int(tb))
    assert_reference_checks(op, [a, b], _bmm_ref(ta, tb))


@pytest.mark.parametrize(
    "a_shape,b_shape",
    [((3,), (3,)), ((3,), (2, 3, 4)), ((2, 1, 2, 3), (3,)), ((1, 2, 3), (4, 3, 5)), ((2, 3), (5, 3, 4))],
)
def test_batch_matmul_broadcast(a_shape, b_shape):
    rng = np.random.default_rng(7)
    a = rng.standard_normal(a_shape).astype(np.float32)
    b = rng.standard_normal(b_shape).astype(np.float32)
    op = CreateOperator("BatchMatMul", ["A", "B"], ["Y"], broadcast=1)
    assert_reference_checks(op, [a, b], _bmm_ref(False, False))


@pytest.mark.parametrize("ta", [0, 1])
@pytest.mark.parametrize("tb", [0, 1])
def test_batch_matmul_gradient(ta, tb):
    rng = np.random.default_rng(8)
    a = rng.standard_normal((2, 3, 2) if ta else (2, 2, 3))
    b = rng.standard_normal((2, 4, 3) if tb else (2, 3, 4))
    op = CreateOperator("BatchMatMul", ["A", "B"], ["Y"], trans_a=ta, trans_b=tb)
    assert_gradient_checks(op, [a, b], 0)
    assert_gradient_checks(op, [a, b], 1)


def test_batch_matmul_errors():
    ws = Workspace()
    ws.feed_blob("A", np.ones((2, 2, 3), np.float32))
    ws.feed_blob("B", np.ones((3, 3, 4), np.float32))
    with pytest.raises(ShapeError, match=r"BatchMatMul.*batch dimensions differ"):
        create_operator(CreateOperator("BatchMatMul", ["A", "B"], ["Y"]), ws).run()
    with pytest.raises(ShapeError, match="do not broadcast"):
        create_operator(CreateOperator("BatchMatMul", ["A", "B"], ["Y"], broadcast=1), ws).run()
    ws.feed_blob("B", np.ones((3, 4), np.float32))
    with pytest.raises(ShapeError, match="same rank"):
        create_operator(CreateOperator("BatchMatMul", ["A", "B"], ["Y"]), ws).run()
    with pytest.raises(GradientError, match="broadcast=1"):
        get_gradient_for_op(CreateOperator("BatchMatMul", ["A", "B"], ["Y"], broadcast=1), ["Y_grad"])
