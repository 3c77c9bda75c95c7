"""LearningRate's later Caffe2 policies (gate, slope, pieceWarmup, constantThenLinearWarmup,
cyclical, cosine, composite) against formulas written out here from Caffe2's functors."""

import math

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import ArgumentError
from framework.memory.workspace import Workspace
from framework.ops import create_operator
from framework.ops.testing import assert_reference_checks


def _check(it, expected, base_lr=1.0, **kwargs):
    op = CreateOperator("LearningRate", ["it"], ["lr"], base_lr=base_lr, **kwargs)
    (lr,) = assert_reference_checks(
        op, [np.array([it], np.int64)], lambda _: [np.float32(base_lr * expected)], threshold=1e-5, atol=1e-6
    )
    assert lr.shape == () and lr.dtype == np.float32


@given(it=st.integers(0, 400), m1=st.floats(-1, 1), m2=st.floats(-1, 1))
def test_gate(it, m1, m2):
    _check(it, m1 if it < 150 else m2, base_lr=0.3, policy="gate", num_iter=150, multiplier_1=m1, multiplier_2=m2)


def test_gate_defaults_to_one():
    _check(5, 1.0, base_lr=0.5, policy="gate", num_iter=3)


@given(it=st.integers(0, 2000))
def test_slope(it):
    n1, n2, m1, m2 = 300, 900, 1.0, 0.25
    expected = m1 if it < n1 else max(m1 + (it - n1) * (m2 - m1) / (n2 - n1), m2)
    _check(it, expected, base_lr=0.2, policy="slope", num_iter_1=n1, num_iter_2=n2, multiplier_1=m1, multiplier_2=m2)


@given(it=st.integers(0, 100))
def test_piece_warmup(it):
    expected = 0.1 if it < 20 else (0.4 if it < 50 else 0.9)
    _check(it, expected, policy="pieceWarmup", m1=0.1, n1=20, m2=0.4, n2=50, m3=0.9)


@given(it=st.integers(0, 100))
def test_constant_then_linear_warmup(it):
    start, c, n = 0.2, 10, 40
    if it < c:
        expected = start
    elif it < c + n:
        expected = start + (1 - start) * (it - c) / n
    else:
        expected = 1.0
    _check(
        it,
        expected,
        policy="constantThenLinearWarmup",
        start_warmup_multiplier=start,
        constant_warmup_num_iter=c,
        linear_warmup_num_iter=n,
    )


@given(it=st.integers(0, 200))
def test_cyclical(it):
    base_lr, max_lr, stepsize, decay = 0.01, 0.05, 7, 0.8
    # a triangle from 1 up to max/base and back over 2 * stepsize iterations, shrinking by decay
    k = it // (2 * stepsize)
    pos = (it % (2 * stepsize)) / stepsize  # 0..2 within the cycle
    tri = pos if pos <= 1 else 2 - pos
    expected = 1 + (max_lr / base_lr - 1) * tri * decay**k
    _check(it, expected, base_lr=base_lr, policy="cyclical", max_lr=max_lr, stepsize=stepsize, decay=decay)


@given(it=st.integers(0, 300))
def test_cosine_fixed_period(it):
    lo, hi, period, shrink = 0.1, 0.5, 40, 0.9
    restart, t = divmod(it, period)
    s = shrink**restart
    expected = lo * s + 0.5 * (hi - lo) * s * (1 + math.cos(math.pi * t / period))
    _check(it, expected, policy="cosine", min_lr=lo, max_lr=hi, period=period, lr_shrink=shrink)


@pytest.mark.parametrize("it", [0, 5, 9, 10, 29, 30, 69, 70, 149])
def test_cosine_growing_periods(it):
    # periods 10, 20, 40, 80 start at 0, 10, 30, 70
    starts, lengths = [0, 10, 30, 70], [10, 20, 40, 80]
    k = max(i for i, s in enumerate(starts) if s <= it)
    s = 0.5**k
    t = it - starts[k]
    expected = 0.1 * s + 0.5 * (1.0 - 0.1) * s * (1 + math.cos(math.pi * t / lengths[k]))
    _check(it, expected, policy="cosine", min_lr=0.1, max_lr=1.0, period=10, t_mult=2.0, lr_shrink=0.5)


COMPOSITE = dict(
    policy="composite",
    sub_policy_num_iters=[5, 4, 3],
    sub_policy_0_policy="exp",
    sub_policy_0_gamma=0.9,
    sub_policy_0_lr_scale=2.0,
    sub_policy_1_policy="step",
    sub_policy_1_stepsize=2,
    sub_policy_1_gamma=0.5,
    sub_policy_2_policy="fixed",
    sub_policy_2_lr_scale=0.25,
)


@pytest.mark.parametrize("it", range(0, 16))
def test_composite(it):
    # sub-policy spans from iteration 1: exp on 1..5, step on 6..9, fixed from 10 on (the last
    # one continues); each sees the global iteration and has its own lr_scale (default 1)
    if it <= 5:
        expected = 2.0 * 0.9**it
    elif it <= 9:
        expected = 0.5 ** (it // 2)
    else:
        expected = 0.25
    _check(it, expected, base_lr=0.1, **COMPOSITE)


@pytest.mark.parametrize(
    "kwargs,match",
    [
        (dict(policy="composite"), "at least one sub-policy"),
        (dict(policy="composite", sub_policy_num_iters=[3, 0], sub_policy_0_policy="fixed"), "positive"),
        (
            dict(policy="composite", sub_policy_num_iters=[3], sub_policy_0_policy="composite"),
            "cannot have a composite",
        ),
        (dict(policy="composite", sub_policy_num_iters=[3], sub_policy_0_policy="nope"), "unknown.*'nope'"),
        (dict(policy="slope", num_iter_1=10, num_iter_2=10), "0 < num_iter_1 < num_iter_2"),
        (dict(policy="cyclical"), "stepsize > 0"),
    ],
)
def test_policy_argument_errors(kwargs, match):
    with pytest.raises(ArgumentError, match=match):
        create_operator(CreateOperator("LearningRate", ["it"], ["lr"], base_lr=0.1, **kwargs), Workspace())
