"""Optimizer update ops against numpy references written here."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import GradientError, OperatorError, SchemaError, ShapeError
from framework.memory.workspace import Workspace
from framework.net.backward import GradientRegistry
from framework.ops import create_operator
from framework.ops.testing import assert_reference_checks, run_op_on

SMALL = settings(max_examples=15)


def _arr(rng, shape, lo=-1.0, hi=1.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


shapes = st.lists(st.integers(1, 5), min_size=1, max_size=3).map(tuple)
seeds = st.integers(0, 2**31 - 1)


def _lr(v):
    return np.array([v], dtype=np.float32)


# -- references (independent, element loops where that is clearest) ---------------


def ref_momentum(g, m, lr, momentum, nesterov):
    lr = float(lr[0])
    if not nesterov:
        new = lr * g + momentum * m
        return new, new
    new_m = momentum * m + lr * g
    return (1 + momentum) * new_m - momentum * m, new_m


@SMALL
@given(shape=shapes, seed=seeds, momentum=st.sampled_from([0.0, 0.5, 0.9]), nesterov=st.sampled_from([0, 1]))
def test_momentum_sgd(shape, seed, momentum, nesterov):
    rng = np.random.default_rng(seed)
    g, m, lr = _arr(rng, shape), _arr(rng, shape), _lr(0.1)
    op = CreateOperator("MomentumSGD", ["g", "m", "lr"], ["g2", "m2"], momentum=momentum, nesterov=nesterov)
    assert_reference_checks(op, [g, m, lr], lambda g, m, lr: ref_momentum(g, m, lr, momentum, nesterov))
    inplace = CreateOperator("MomentumSGD", ["g", "m", "lr"], ["g", "m"], momentum=momentum, nesterov=nesterov)
    assert_reference_checks(inplace, [g, m, lr], lambda g, m, lr: ref_momentum(g, m, lr, momentum, nesterov))


@SMALL
@given(shape=shapes, seed=seeds, momentum=st.sampled_from([0.0, 0.9]), nesterov=st.sampled_from([0, 1]))
def test_momentum_sgd_update(shape, seed, momentum, nesterov):
    rng = np.random.default_rng(seed)
    g, m, lr, p = _arr(rng, shape), _arr(rng, shape), _lr(0.05), _arr(rng, shape)

    def ref(g, m, lr, p):
        ng, nm = ref_momentum(g, m, lr, momentum, nesterov)
        return ng, nm, p - ng

    for outs in (["g2", "m2", "p2"], ["g", "m", "p"]):
        op = CreateOperator("MomentumSGDUpdate", ["g", "m", "lr", "p"], outs, momentum=momentum, nesterov=nesterov)
        assert_reference_checks(op, [g, m, lr, p], ref)


def test_momentum_defaults_are_caffe2s():
    g = np.array([1.0, -2.0], np.float32)
    out = run_op_on(CreateOperator("MomentumSGD", ["g", "m", "lr"], ["a", "b"]), [g, np.ones(2, np.float32), _lr(0.5)])
    np.testing.assert_allclose(out[0], 0.5 * g)  # momentum 0.0 by default


@SMALL
@given(shape=shapes, seed=seeds, decay=st.sampled_from([1.0, 0.9]), wd=st.sampled_from([0.0, 0.3]))
def test_adagrad(shape, seed, decay, wd):
    rng = np.random.default_rng(seed)
    p, h, g, lr = _arr(rng, shape), _arr(rng, shape, 0, 1), _arr(rng, shape), _lr(-0.1)

    def ref(p, h, g, lr):  # Caffe2 adagrad_op.h: grad = fma(weight_decay, param, grad)
        gd = g + wd * p
        nh = decay * h + gd * gd
        eff = lr[0] / (np.sqrt(nh) + 1e-5)
        return p + eff * gd, nh, eff, eff * gd

    kw = {} if decay == 1.0 else {"decay": decay}
    if wd:
        kw["weight_decay"] = wd
    for outs in (["p2", "h2"], ["p", "h"], ["p2", "h2", "e"], ["p", "h", "e", "u"]):
        op = CreateOperator("Adagrad", ["p", "h", "g", "lr"], outs, **kw)
        assert_reference_checks(op, [p, h, g, lr], lambda *a, outs=outs: ref(*a)[: len(outs)])


@SMALL
@given(rows=st.integers(1, 6), cols=st.integers(1, 4), n=st.integers(0, 6), seed=seeds, wd=st.sampled_from([0.0, 0.3]))
def test_sparse_adagrad(rows, cols, n, seed, wd):
    rng = np.random.default_rng(seed)
    p, h = _arr(rng, (rows, cols)), _arr(rng, (rows, cols), 0, 1)
    idx = rng.integers(0, rows, size=n).astype(np.int64)
    g, lr = _arr(rng, (n, cols)), _lr(-0.1)

    def ref(p, h, idx, g, lr):
        p, h = p.copy(), h.copy()
        for k, r in enumerate(idx):
            for c in range(cols):
                gi = g[k, c] + wd * p[r, c]
                h[r, c] += gi**2
                p[r, c] += lr[0] * gi / (np.sqrt(h[r, c]) + 1e-5)
        return p, h

    for outs in (["p2", "h2"], ["p", "h"]):
        op = CreateOperator("SparseAdagrad", ["p", "h", "i", "g", "lr"], outs, epsilon=1e-5, weight_decay=wd)
        assert_reference_checks(op, [p, h, idx, g, lr], ref, check_no_realloc=False)


@SMALL
@given(rows=st.integers(1, 6), cols=st.integers(1, 4), n=st.integers(0, 6), seed=seeds, wd=st.sampled_from([0.0, 0.3]))
def test_row_wise_sparse_adagrad(rows, cols, n, seed, wd):
    rng = np.random.default_rng(seed)
    p, h = _arr(rng, (rows, cols)), _arr(rng, (rows,), 0, 1)
    idx = rng.integers(0, rows, size=n).astype(np.int32)
    g, lr = _arr(rng, (n, cols)), _lr(-0.1)

    def ref(p, h, idx, g, lr):
        p, h = p.copy(), h.copy()
        for k, r in enumerate(idx):
            gk = g[k] + wd * p[r]
            h[r] += sum(float(v) ** 2 for v in gk) / cols
            p[r] += lr[0] * gk / (np.sqrt(h[r]) + 1e-5)
        return p, h

    op = CreateOperator("RowWiseSparseAdagrad", ["p", "h", "i", "g", "lr"], ["p", "h"], weight_decay=wd)
    assert_reference_checks(op, [p, h, idx, g, lr], ref, check_no_realloc=False)


def _ref_adam(p, m1, m2, g, lr, it, b1=0.9, b2=0.999, eps=1e-5):
    t = it[0] + 1
    nm1 = b1 * m1 + (1 - b1) * g
    nm2 = b2 * m2 + (1 - b2) * g * g
    effective_grad = np.sqrt(1 - b2**t) / (1 - b1**t) * nm1 / (np.sqrt(nm2) + eps)  # Caffe2's 4th output
    return p + lr[0] * effective_grad, nm1, nm2, effective_grad


@SMALL
@given(shape=shapes, seed=seeds, it=st.integers(0, 50))
def test_adam(shape, seed, it):
    rng = np.random.default_rng(seed)
    p, m1, m2, g = _arr(rng, shape), _arr(rng, shape), _arr(rng, shape, 0, 1), _arr(rng, shape)
    lr, itv = _lr(-0.01), np.array([it], np.int64)
    ins = ["p", "m1", "m2", "g", "lr", "it"]
    assert_reference_checks(
        CreateOperator("Adam", ins, ["p", "m1", "m2"]), [p, m1, m2, g, lr, itv], lambda *a: _ref_adam(*a)[:3]
    )
    assert_reference_checks(
        CreateOperator("Adam", ins, ["q", "n1", "n2", "s"], beta1=0.8, beta2=0.99, epsilon=1e-3),
        [p, m1, m2, g, lr, itv],
        lambda *a: _ref_adam(*a, b1=0.8, b2=0.99, eps=1e-3),
    )


@SMALL
@given(rows=st.integers(1, 5), cols=st.integers(1, 4), seed=seeds)
def test_sparse_adam(rows, cols, seed):
    rng = np.random.default_rng(seed)
    p, m1, m2 = _arr(rng, (rows, cols)), _arr(rng, (rows, cols)), _arr(rng, (rows, cols), 0, 1)
    idx = rng.permutation(rows)[: rng.integers(0, rows + 1)].astype(np.int64)
    g, lr, it = _arr(rng, (idx.size, cols)), _lr(-0.01), np.array([3], np.int64)

    def ref(p, m1, m2, idx, g, lr, it):
        p, m1, m2 = p.copy(), m1.copy(), m2.copy()
        for k, r in enumerate(idx):
            p[r], m1[r], m2[r], _ = _ref_adam(p[r], m1[r], m2[r], g[k], lr, it)
        return p, m1, m2

    op = CreateOperator("SparseAdam", ["p", "m1", "m2", "i", "g", "lr", "it"], ["p", "m1", "m2"])
    assert_reference_checks(op, [p, m1, m2, idx, g, lr, it], ref, check_no_realloc=False)

    def ref4(p, m1, m2, idx, g, lr, it):  # 4th output: each row's effective gradient, without lr
        p, m1, m2, ng = p.copy(), m1.copy(), m2.copy(), np.zeros_like(g)
        for k, r in enumerate(idx):
            p[r], m1[r], m2[r], ng[k] = _ref_adam(p[r], m1[r], m2[r], g[k], lr, it)
        return p, m1, m2, ng

    op = CreateOperator("SparseAdam", ["p", "m1", "m2", "i", "g", "lr", "it"], ["p", "m1", "m2", "s"])
    assert_reference_checks(op, [p, m1, m2, idx, g, lr, it], ref4, check_no_realloc=False)


@SMALL
@given(shape=shapes, seed=seeds, momentum=st.sampled_from([0.0, 0.9]))
def test_rms_prop(shape, seed, momentum):
    rng = np.random.default_rng(seed)
    g, ms, mom, lr = _arr(rng, shape), _arr(rng, shape, 0, 1), _arr(rng, shape), _lr(0.01)

    def ref(g, ms, mom, lr):
        nms = 0.9 * ms + 0.1 * g * g
        nmom = momentum * mom + lr[0] * g / np.sqrt(1e-5 + nms)
        return nmom, nms, nmom

    for outs in (["a", "b", "c"], ["g", "ms", "mom"]):
        op = CreateOperator("RmsProp", ["g", "ms", "mom", "lr"], outs, momentum=momentum)
        assert_reference_checks(op, [g, ms, mom, lr], ref)


@SMALL
@given(rows=st.integers(1, 6), cols=st.integers(1, 3), n=st.integers(0, 6), seed=seeds, w0=st.sampled_from([1.0, 0.5]))
def test_scatter_weighted_sum(rows, cols, n, seed, w0):
    rng = np.random.default_rng(seed)
    x = _arr(rng, (rows, cols))
    idx = rng.integers(0, rows, size=n).astype(np.int64)
    s, w0a, w1a = _arr(rng, (n, cols)), np.array([w0], np.float32), np.array([-0.5], np.float32)

    def ref(x, w0, idx, s, w1):  # Caffe2: scale once per occurrence, then add every slice
        x = x.copy()
        for r in idx:
            x[r] = w0[0] * x[r]
        for k, r in enumerate(idx):
            x[r] = x[r] + w1[0] * s[k]
        return x

    op = CreateOperator("ScatterWeightedSum", ["x", "w0", "i", "s", "w1"], ["x"])
    assert_reference_checks(op, [x, w0a, idx, s, w1a], ref, check_no_realloc=False)


def test_scatter_weighted_sum_must_be_in_place():
    with pytest.raises(SchemaError, match="same blob as input 0"):
        create_operator(CreateOperator("ScatterWeightedSum", ["x", "w0", "i", "s", "w1"], ["y"]), Workspace())


def test_shape_mismatch_names_op_and_blob():
    ws = Workspace()
    ws.feed_blob("g", np.zeros(3, np.float32))
    ws.feed_blob("m", np.zeros(4, np.float32))
    ws.feed_blob("lr", _lr(0.1))
    op = create_operator(CreateOperator("MomentumSGD", ["g", "m", "lr"], ["g", "m"], name="opt"), ws)
    with pytest.raises(ShapeError, match=r"MomentumSGD \"opt\".*\('m'\) has shape \[4\]"):
        op.run()


def test_lr_must_be_one_element():
    ws = Workspace()
    for n, v in (("p", np.zeros(3, np.float32)), ("h", np.zeros(3, np.float32)), ("g", np.zeros(3, np.float32))):
        ws.feed_blob(n, v)
    ws.feed_blob("lr", np.zeros(2, np.float32))
    op = create_operator(CreateOperator("Adagrad", ["p", "h", "g", "lr"], ["p", "h"]), ws)
    with pytest.raises(ShapeError, match="'lr'.*one element"):
        op.run()


def test_sparse_index_out_of_range():
    ws = Workspace()
    ws.feed_blob("p", np.zeros((2, 2), np.float32))
    ws.feed_blob("h", np.zeros((2, 2), np.float32))
    ws.feed_blob("i", np.array([5], np.int64))
    ws.feed_blob("g", np.zeros((1, 2), np.float32))
    ws.feed_blob("lr", _lr(0.1))
    op = create_operator(CreateOperator("SparseAdagrad", ["p", "h", "i", "g", "lr"], ["p", "h"]), ws)
    with pytest.raises(ShapeError, match=r"indices 'i' out of range \[0, 2\)"):
        op.run()


@pytest.mark.parametrize(
    "op_type", ["MomentumSGD", "MomentumSGDUpdate", "Adagrad", "SparseAdagrad", "Adam", "RmsProp", "ScatterWeightedSum"]
)
def test_optimizers_must_not_be_differentiated(op_type):
    from framework.ops import get_schema

    n = get_schema(op_type).num_inputs
    n = n if isinstance(n, int) else 5
    op = CreateOperator(op_type, [f"i{k}" for k in range(n)], ["o0"] if op_type == "ScatterWeightedSum" else [])
    with pytest.raises((GradientError, OperatorError, SchemaError)):
        GradientRegistry.GetGradientForOp(op, [None] * len(op.output))
