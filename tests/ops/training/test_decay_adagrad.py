"""DecayAdagrad against a per-element float64 loop written from Caffe2's formula; in-place use, bias
correction switched off, errors that leave the state untouched; the optimizer builder."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.memory.workspace import Workspace
from framework.ops.testing import assert_reference_checks

F = np.float32


def vec(seed, n, lo=-1.0, hi=1.0):
    return np.random.default_rng(seed).uniform(lo, hi, n).astype(F)


def _reference(beta1, eps, weight_decay, bias_correction_first):
    def ref(w, m1, m2, g, lr, it):
        t = int(it[0]) + 1
        c = 1.0 - beta1**t if bias_correction_first else 1.0
        nw, nm1, nm2 = (np.empty(w.size) for _ in range(3))
        for i in range(w.size):
            nm1[i] = m1[i] * beta1 + g[i] * (1.0 - beta1)
            nm2[i] = m2[i] + g[i] * g[i]
            nw[i] = w[i] + lr[0] * (nm1[i] / c / (math.sqrt(nm2[i]) + eps) + weight_decay * w[i])
        return nw, nm1, nm2

    return ref


@settings(max_examples=25, deadline=None)
@given(
    n=st.integers(1, 12),
    seed=st.integers(0, 2**16),
    beta1=st.floats(0.0, 0.95),
    eps=st.floats(1e-6, 0.5),
    weight_decay=st.sampled_from([0.0, 0.01, 0.3]),
    it=st.integers(0, 20),
    bias_correction_first=st.booleans(),
)
def test_decay_adagrad_matches_reference(n, seed, beta1, eps, weight_decay, it, bias_correction_first):
    w, g, m1 = vec(seed, n), vec(seed + 1, n), vec(seed + 2, n)
    m2 = vec(seed + 3, n, 0.0, 2.0)
    lr, iteration = np.array([-0.05], F), np.array([it], np.int64)
    op = CreateOperator(
        "DecayAdagrad", ["w", "m1", "m2", "g", "lr", "it"], ["w", "m1", "m2"], beta1=beta1, epsilon=eps,
        weight_decay=weight_decay, bias_correction_first=bias_correction_first,
    )  # fmt: skip
    ref = _reference(beta1, eps, weight_decay, bias_correction_first)
    assert_reference_checks(op, [w, m1, m2, g, lr, iteration], ref, threshold=1e-4, check_no_realloc=False)


def test_defaults_are_caffe2s():
    # beta1 0.9, epsilon 1e-5, no weight decay, bias correction on
    w, g = np.array([1.0, 2.0], F), np.array([0.5, -1.0], F)
    zeros = np.zeros(2, F)
    op = CreateOperator("DecayAdagrad", ["w", "m1", "m2", "g", "lr", "it"], ["nw", "nm1", "nm2"])
    ref = _reference(0.9, 1e-5, 0.0, True)
    assert_reference_checks(op, [w, zeros, zeros, g, np.array([-0.1], F), np.array([3], np.int64)], ref)


def _workspace(n=3, grad_size=3):
    ws = Workspace()
    for name, value in {
        "w": np.ones(n, F), "m1": np.zeros(n, F), "m2": np.zeros(n, F), "g": np.ones(grad_size, F),
        "lr": np.array([-0.1], F), "it": np.array([0], np.int64),
    }.items():  # fmt: skip
        ws.feed_blob(name, value)
    return ws


@pytest.mark.parametrize(
    ("grad_size", "kwargs", "message"),
    [(4, {}, "has 4 elements, expected 3"), (3, {"beta1": 1.0}, "bias correction")],
)
def test_errors_leave_the_state_unchanged(grad_size, kwargs, message):
    ws = _workspace(grad_size=grad_size)
    op = CreateOperator("DecayAdagrad", ["w", "m1", "m2", "g", "lr", "it"], ["w", "m1", "m2"], **kwargs)
    with pytest.raises(FrameworkError, match=message):
        ws.run_operator_once(op)
    np.testing.assert_array_equal(ws.fetch_blob("w"), np.ones(3, F))
    np.testing.assert_array_equal(ws.fetch_blob("m1"), np.zeros(3, F))


def test_negative_iteration_is_refused():
    ws = _workspace()
    ws.feed_blob("it", np.array([-2], np.int64))
    op = CreateOperator("DecayAdagrad", ["w", "m1", "m2", "g", "lr", "it"], ["w", "m1", "m2"])
    with pytest.raises(FrameworkError, match="must be >= 0"):
        ws.run_operator_once(op)
