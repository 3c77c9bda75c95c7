"""Iter and LearningRate: counting in place, every LR policy against the formulas
written out independently here, inference, errors, no gradient."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import ArgumentError, FrameworkError, SchemaError
from framework.memory.workspace import Workspace
from framework.ops import create_operator, get_gradient_for_op
from framework.ops.testing import assert_inferred_shapes, assert_reference_checks


# -- Iter ---------------------------------------------------------------------------------
@given(start=st.integers(0, 2**40), runs=st.integers(1, 5))
def test_iter_counts_in_place(start, runs):
    ws = Workspace()
    ws.feed_blob("it", np.array([start], np.int64))
    op = create_operator(CreateOperator("Iter", ["it"], ["it"]), ws)
    for _ in range(runs):
        op.run()
    assert ws.fetch_blob("it").tolist() == [start + runs]
    assert ws.fetch_blob("it").dtype == np.int64


def test_iter_reference_check_and_inference():
    op = CreateOperator("Iter", ["it"], ["it"])
    assert_reference_checks(op, [np.array([4], np.int64)], lambda it: [it + 1])


def test_iter_scalar_counter():
    ws = Workspace()
    ws.feed_blob("it", np.array(9, np.int64))
    create_operator(CreateOperator("Iter", ["it"], ["it"]), ws).run()
    assert ws.fetch_blob("it") == 10


def test_iter_legacy_form_starts_at_zero():
    ws = Workspace()
    op = create_operator(CreateOperator("Iter", [], ["it"]), ws)
    op.run()
    assert ws.fetch_blob("it").tolist() == [1]
    op.run()
    assert ws.fetch_blob("it").tolist() == [2]
    assert_inferred_shapes(CreateOperator("Iter", [], ["it"]), [], [ws.fetch_blob("it")])


def test_iter_follows_a_refed_counter():
    ws = Workspace()
    ws.feed_blob("it", np.array([0], np.int64))
    op = create_operator(CreateOperator("Iter", ["it"], ["it"]), ws)
    op.run()
    ws.get_blob("it").reset()
    ws.feed_blob("it", np.array([100], np.int64))
    op.run()
    assert ws.fetch_blob("it").tolist() == [101]


def test_iter_errors():
    ws = Workspace()
    with pytest.raises(SchemaError, match="Iter.*same blob"):
        create_operator(CreateOperator("Iter", ["a"], ["b"]), ws)
    ws.feed_blob("f", np.array([1.0], np.float32))
    with pytest.raises(FrameworkError, match=r"Iter.*'f' must be int64"):
        create_operator(CreateOperator("Iter", ["f"], ["f"]), ws).run()
    ws.feed_blob("two", np.array([1, 2], np.int64))
    with pytest.raises(FrameworkError, match="'two' must hold one element"):
        create_operator(CreateOperator("Iter", ["two"], ["two"]), ws).run()
    ws.feed_blob("neg", np.array([-1], np.int64))
    with pytest.raises(FrameworkError, match="negative"):
        create_operator(CreateOperator("Iter", ["neg"], ["neg"]), ws).run()


def test_iter_int32_counter_becomes_int64_keeping_its_value():
    # Caffe2's toy_regression_test makes ITER with ConstantFill(dtype=INT32); Caffe2's Iter re-types it
    ws = Workspace()
    ws.feed_blob("i32", np.array([41], np.int32))
    op = create_operator(CreateOperator("Iter", ["i32"], ["i32"]), ws)
    op.run()
    op.run()
    out = ws.fetch_blob("i32")
    assert out.dtype == np.int64 and out.tolist() == [43]


# -- LearningRate ---------------------------------------------------------------------------
def _hill(it, num_iter, start, gamma, power, end):
    if it < num_iter:
        return start + (1 - start) * it / num_iter
    return max(end, (1 + gamma * (it - num_iter)) ** -power)


CASES = [
    ("fixed", {}, lambda it: 1.0),
    ("step", dict(stepsize=7, gamma=0.5), lambda it: 0.5 ** (it // 7)),
    ("exp", dict(gamma=0.99), lambda it: 0.99**it),
    ("inv", dict(gamma=0.01, power=0.75), lambda it: (1 + 0.01 * it) ** -0.75),
    ("poly", dict(power=2.0, max_iter=200), lambda it: (1 - it / 200) ** 2),
    ("linearWarmup", dict(start_multiplier=0.1, num_iter=30), lambda it: 0.1 + 0.9 * it / 30 if it < 30 else 1.0),
    ("constantWarmup", dict(multiplier=0.3, num_iter=30), lambda it: 0.3 if it < 30 else 1.0),
    ("alter", dict(active_first=1, active_period=3, inactive_period=2), lambda it: 1.0 if it % 5 < 3 else 0.0),
    ("alter", dict(active_first=0, active_period=3, inactive_period=2), lambda it: 0.0 if it % 5 < 2 else 1.0),
    (
        "hill",
        dict(num_iter=20, start_multiplier=0.2, gamma=0.1, power=0.5, end_multiplier=0.3),
        lambda it: _hill(it, 20, 0.2, 0.1, 0.5, 0.3),
    ),
]


@pytest.mark.parametrize("policy,kwargs,f", CASES, ids=[f"{c[0]}{i}" for i, c in enumerate(CASES)])
@given(it=st.integers(0, 199), base_lr=st.sampled_from([0.1, -0.05, 1.0]))
def test_learning_rate_policies(policy, kwargs, f, it, base_lr):
    op = CreateOperator("LearningRate", ["it"], ["lr"], base_lr=base_lr, policy=policy, **kwargs)
    (lr,) = assert_reference_checks(
        op, [np.array([it], np.int64)], lambda _: [np.float32(base_lr * f(it))], threshold=1e-5, atol=1e-7
    )
    assert lr.shape == () and lr.dtype == np.float32


def test_learning_rate_follows_iter_in_a_loop():
    ws = Workspace()
    ws.feed_blob("it", np.array([0], np.int64))
    it_op = create_operator(CreateOperator("Iter", ["it"], ["it"]), ws)
    lr_op = create_operator(
        CreateOperator("LearningRate", ["it"], ["lr"], base_lr=-0.1, policy="step", stepsize=2, gamma=0.5), ws
    )
    seen = []
    for _ in range(6):
        it_op.run()
        lr_op.run()
        seen.append(float(ws.fetch_blob("lr")))
    expected = [-0.1 * 0.5 ** (i // 2) for i in range(1, 7)]
    assert np.allclose(seen, expected)
    assert math.isclose(seen[-1], -0.0125, rel_tol=1e-6)


def test_learning_rate_errors():
    ws = Workspace()
    with pytest.raises(ArgumentError, match="LearningRate.*'base_lr' is required"):
        create_operator(CreateOperator("LearningRate", ["it"], ["lr"], policy="fixed"), ws)
    with pytest.raises(ArgumentError, match="'policy' is required"):
        create_operator(CreateOperator("LearningRate", ["it"], ["lr"], base_lr=0.1), ws)
    with pytest.raises(ArgumentError, match=r'LearningRate "lr1".*unknown learning rate policy \'triangle\''):
        create_operator(CreateOperator("LearningRate", ["it"], ["lr"], name="lr1", base_lr=0.1, policy="triangle"), ws)
    with pytest.raises(ArgumentError, match="stepsize"):
        create_operator(CreateOperator("LearningRate", ["it"], ["lr"], base_lr=0.1, policy="step"), ws)
    ws.feed_blob("f", np.array([1.0], np.float32))
    op = create_operator(CreateOperator("LearningRate", ["f"], ["lr"], base_lr=0.1, policy="fixed"), ws)
    with pytest.raises(FrameworkError, match="'f' must be an integer counter"):
        op.run()


@pytest.mark.parametrize("op_type", ["Iter", "LearningRate"])
def test_training_ops_have_no_gradient(op_type):
    op = CreateOperator(op_type, ["it"], ["it" if op_type == "Iter" else "lr"], base_lr=0.1, policy="fixed")
    assert get_gradient_for_op(op, ["g"]) == ([], [None])
