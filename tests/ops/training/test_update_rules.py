"""Adadelta, Ftrl, GFtrl, Wngrad, Storm, Lars, LearningRateAdaption, ClipTensorByScaling,
EnsureClipped, WeightScale against per-element float64 loop references written from Caffe2's
formulas; in-place use, shape inference, argument and input errors."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.memory.workspace import Workspace
from framework.ops import create_operator
from framework.ops.testing import assert_reference_checks

F = np.float32


def vec(seed, n, lo=-1.0, hi=1.0):
    return np.random.default_rng(seed).uniform(lo, hi, n).astype(F)


sizes = st.integers(1, 12)
seeds = st.integers(0, 2**16)


@settings(max_examples=25, deadline=None)
@given(n=sizes, seed=seeds, decay=st.floats(0.05, 0.95), eps=st.floats(1e-6, 1e-2))
def test_adadelta(n, seed, decay, eps):
    w, g = vec(seed, n), vec(seed + 1, n)
    h, d = vec(seed + 2, n, 0, 1), vec(seed + 3, n, 0, 1)
    lr = np.array([-0.3], F)

    def ref(w, h, d, g, lr):
        nw, nh, nd = (np.empty(n) for _ in range(3))
        for i in range(n):
            nh[i] = decay * h[i] + (1 - decay) * g[i] ** 2
            u = math.sqrt(d[i] + eps) / math.sqrt(nh[i] + eps) * g[i]
            nw[i] = w[i] + lr[0] * u
            nd[i] = decay * d[i] + (1 - decay) * u * u
        return nw, nh, nd

    op = CreateOperator("Adadelta", ["w", "h", "d", "g", "lr"], ["w", "h", "d"], decay=decay, epsilon=eps)
    assert_reference_checks(op, [w, h, d, g, lr], ref, threshold=1e-4, check_no_realloc=False)


def _ftrl_ref(w, nz, g, alpha, beta, l1, l2, group=None):
    n_old, z_old = nz[0::2].astype(np.float64), nz[1::2].astype(np.float64)
    new_n = n_old + g * g
    new_z = z_old + g - (np.sqrt(new_n) - np.sqrt(n_old)) / alpha * w
    denom = (beta + np.sqrt(new_n)) / alpha + l2
    if group is None:
        new_w = np.array([(l1 * np.sign(z) - z) / dn if abs(z) > l1 else 0.0 for z, dn in zip(new_z, denom)])
    else:
        out_dim = group
        zz, dd = new_z.reshape(out_dim, -1), denom.reshape(out_dim, -1)
        new_w = np.zeros_like(zz)
        for j in range(zz.shape[1]):
            norm = math.sqrt(sum(zz[i, j] ** 2 for i in range(out_dim)))
            if norm > l1 * math.sqrt(out_dim):
                for i in range(out_dim):
                    new_w[i, j] = zz[i, j] * (l1 * math.sqrt(out_dim) / norm - 1) / dd[i, j]
        new_w = new_w.reshape(-1)
    out_nz = np.empty(2 * len(w))
    out_nz[0::2], out_nz[1::2] = new_n, new_z
    return new_w, out_nz


@settings(max_examples=25, deadline=None)
@given(rows=st.integers(1, 4), cols=st.integers(1, 4), seed=seeds, alpha_input=st.booleans())
def test_ftrl_and_gftrl(rows, cols, seed, alpha_input):
    n = rows * cols
    w, g = vec(seed, n).reshape(rows, cols), vec(seed + 1, n).reshape(rows, cols)
    nz = np.abs(vec(seed + 2, 2 * n)) * 0.1
    args = dict(beta=1.0, lambda1=0.01, lambda2=0.02)
    for kind, group in (("Ftrl", None), ("GFtrl", rows)):
        if alpha_input:
            op = CreateOperator(kind, ["w", "nz", "g", "alpha"], ["w", "nz"], **args)
            inputs = [w, nz, g, np.array([0.1], F)]
        else:
            op = CreateOperator(kind, ["w", "nz", "g"], ["w", "nz"], alpha=0.1, **args)
            inputs = [w, nz, g]

        def ref(w, nz, g, *alpha, group=group):
            nw, nnz = _ftrl_ref(w.reshape(-1), nz, g.reshape(-1), 0.1, 1.0, 0.01, 0.02, group)
            return nw.reshape(rows, cols), nnz

        assert_reference_checks(op, inputs, ref, threshold=1e-4, check_no_realloc=False)
    with pytest.raises(FrameworkError, match="both input and argument"):
        create_operator(CreateOperator("Ftrl", ["w", "nz", "g", "a"], ["w", "nz"], alpha=0.1), Workspace())


@settings(max_examples=25, deadline=None)
@given(n=sizes, seed=seeds, n_out=st.integers(2, 4))
def test_wngrad(n, seed, n_out):
    w, g = vec(seed, n), vec(seed + 1, n)
    b, lr = np.array([0.7], F), np.array([0.2], F)
    eps = 1e-5

    def ref(w, b, g, lr):
        eff = lr[0] / (b[0] + eps)
        nw = [w[i] + lr[0] * g[i] / (b[0] + eps) for i in range(n)]
        nb = b[0] + sum(x * x for x in g.astype(np.float64)) / (b[0] + eps)
        return [np.array(nw), np.array([nb]), np.array([eff]), eff * g.astype(np.float64)][:n_out]

    outs = ["w2", "b2", "eff", "upd"][:n_out]
    assert_reference_checks(CreateOperator("Wngrad", ["w", "b", "g", "lr"], outs), [w, b, g, lr], ref)


@settings(max_examples=25, deadline=None)
@given(n=sizes, seed=seeds, momentum=st.floats(0.1, 20), beta=st.floats(0.01, 1))
def test_storm(n, seed, momentum, beta):
    w, m, g = vec(seed, n), vec(seed + 1, n), vec(seed + 2, n)
    s, lr = np.array([0.5], F), np.array([0.1], F)

    def ref(w, m, s, g, lr):
        ns = s[0] + sum(float(x) ** 2 for x in g)
        nlr = lr[0] * (beta + ns) ** (-1.0 / 3.0)
        a = momentum * nlr * nlr
        nm = np.array([g[i] + (1 - a) * (m[i] - g[i]) for i in range(n)])
        return w + nlr * nm, nm, np.array([ns])

    op = CreateOperator("Storm", ["w", "m", "s", "g", "lr"], ["w", "m", "s"], momentum=momentum, beta=beta)
    assert_reference_checks(op, [w, m, s, g, lr], ref, threshold=1e-4, check_no_realloc=False)


@settings(max_examples=25, deadline=None)
@given(n=sizes, seed=seeds, zero=st.booleans())
def test_lars(n, seed, zero):
    x = np.zeros(n, F) if zero else vec(seed, n)
    dx = vec(seed + 1, n)
    wd, trust, lr_max = np.array([0.01], F), np.array([0.5], F), np.array([3.0], F)

    def ref(x, dx, wd, trust, lr_max):
        xn = math.sqrt(sum(float(v) ** 2 for v in x))
        val = 1.0 if xn == 0 else trust[0] / (math.sqrt(sum(float(v) ** 2 for v in dx)) / xn + wd[0] + 0.5)
        return np.array([max(min(val, lr_max[0]), 0.02)])

    assert_reference_checks(CreateOperator("Lars", ["x", "dx", "wd", "t", "m"], ["r"]), [x, dx, wd, trust, lr_max], ref)


@pytest.mark.parametrize("offset", [0.0, 0.5, 3.0])
def test_lars_two_input_form(offset):
    # Caffe2's first Lars (X, dX): 1 / (|dX| / |X| + offset), no weight decay, trust or clipping
    rng = np.random.default_rng(int(offset * 10))
    x, dx = rng.random((3, 4)).astype(F), rng.random((3, 4)).astype(F)

    def ref(x, dx):
        ratio = math.sqrt(sum(float(v) ** 2 for v in dx.flat)) / math.sqrt(sum(float(v) ** 2 for v in x.flat))
        return np.array([1.0 / (ratio + offset)])

    op = CreateOperator("Lars", ["x", "dx"], ["r"], offset=offset)
    assert_reference_checks(op, [x, dx], ref)
    assert_reference_checks(op, [np.zeros((2,), F), dx[0, :2]], lambda x, dx: np.array([1.0]))


@settings(max_examples=25, deadline=None)
@given(n=sizes, seed=seeds, normalized=st.booleans())
def test_learning_rate_adaption(n, seed, normalized):
    g, e = vec(seed, n), vec(seed + 1, n)
    lr = np.array([0.05], F)

    def ref(lr, g, e):
        x = sum(float(a) * float(b) for a, b in zip(g, e))
        if normalized:
            y = max(math.sqrt(sum(float(a) ** 2 for a in g)), 1e-12)
            z = max(math.sqrt(sum(float(b) ** 2 for b in e)), 1e-12)
            return np.array([lr[0] * (1 - 0.01 * x / (y * z))])
        return np.array([lr[0] - 0.01 * x])

    op = CreateOperator("LearningRateAdaption", ["lr", "g", "e"], ["lr"], normalized_lr_adaption=normalized)
    assert_reference_checks(op, [lr, g, e], ref, check_no_realloc=False)


@settings(max_examples=25, deadline=None)
@given(n=sizes, seed=seeds, val=st.floats(0.1, 5), extra=st.sampled_from([None, 0.5, 2.0]))
def test_clip_tensor_by_scaling(n, seed, val, extra):
    x = vec(seed, n)
    inputs = [x, np.array([val], F)] + ([np.array([extra], F)] if extra is not None else [])
    names = ["x", "v", "t"][: len(inputs)]

    def ref(x, v, *t):
        thr = 1.5 * (t[0][0] if t else 1.0)
        return x * (thr / v[0]) if v[0] > thr else x

    assert_reference_checks(CreateOperator("ClipTensorByScaling", names, ["y"], threshold=1.5), inputs, ref)
    with pytest.raises(FrameworkError, match="threshold must be greater than 0"):
        create_operator(CreateOperator("ClipTensorByScaling", ["x", "v"], ["y"]), Workspace())


def test_ensure_clipped_dense_and_sparse():
    x = np.array([[-3.0, 0.5], [2.0, -0.2], [5.0, 1.0]], F)
    assert_reference_checks(
        CreateOperator("EnsureClipped", ["x"], ["y"], min=-1.0, max=1.5), [x], lambda x: np.clip(x, -1.0, 1.5)
    )
    assert_reference_checks(CreateOperator("EnsureClipped", ["x"], ["y"], max=0.0), [x], lambda x: np.minimum(x, 0))
    ws = Workspace()
    ws.feed_blob("p", x)
    ws.feed_blob("i", np.array([2, 0], np.int64))
    ws.feed_blob("g", np.zeros((2, 2), F))
    ws.run_operator_once(CreateOperator("EnsureClipped", ["p", "i", "g"], ["p"], min=-1.0, max=1.5))
    want = x.copy()
    want[[2, 0]] = np.clip(x[[2, 0]], -1.0, 1.5)
    np.testing.assert_array_equal(ws.fetch_blob("p"), want)
    with pytest.raises(FrameworkError, match="in place"):
        create_operator(CreateOperator("EnsureClipped", ["p", "i", "g"], ["q"]), ws)
    ws.feed_blob("i", np.array([3], np.int64))
    ws.feed_blob("g", np.zeros((1, 2), F))
    with pytest.raises(FrameworkError, match="out of range"):
        ws.run_operator_once(CreateOperator("EnsureClipped", ["p", "i", "g"], ["p"], min=0.0))
    np.testing.assert_array_equal(ws.fetch_blob("p"), want)


@given(it=st.integers(0, 30), stepsize=st.integers(1, 7), bound=st.integers(1, 40))
def test_weight_scale(it, stepsize, bound):
    w = np.array([1.0, -2.0, 4.0], F)

    def ref(w, i):
        k = int(i[0]) + 1
        return w if k % stepsize or k >= bound else w * 0.5

    op = CreateOperator("WeightScale", ["w", "it"], ["y"], stepsize=stepsize, upper_bound_iter=bound, scale=0.5)
    assert_reference_checks(op, [w, np.array([it], np.int64)], ref)


def test_update_rule_errors_name_op_and_blob():
    ws = Workspace()
    ws.feed_blob("w", np.zeros(3, F))
    ws.feed_blob("h", np.zeros(2, F))
    ws.feed_blob("lr", np.zeros(1, F))
    with pytest.raises(FrameworkError, match=r"Adadelta.*'h'.*2 elements, expected 3"):
        ws.run_operator_once(CreateOperator("Adadelta", ["w", "h", "w", "w", "lr"], ["w2", "h2", "d2"]))
    with pytest.raises(FrameworkError, match="decay"):
        create_operator(CreateOperator("Adadelta", ["w", "w", "w", "w", "lr"], ["a", "b", "c"], decay=1.0), ws)
    with pytest.raises(FrameworkError, match=r"Ftrl.*'h'.*expected 6"):
        ws.run_operator_once(CreateOperator("Ftrl", ["w", "h", "w"], ["a", "b"]))
    with pytest.raises(FrameworkError, match=r"Storm.*'w'.*one element"):
        ws.run_operator_once(CreateOperator("Storm", ["w", "w", "w", "w", "lr"], ["a", "b", "c"]))
    ws.feed_blob("it", np.zeros(1, np.int32))
    with pytest.raises(FrameworkError, match="int64"):
        ws.run_operator_once(CreateOperator("WeightScale", ["w", "it"], ["y"]))
    assert not ws.has_blob("a") or ws.get_blob("a").is_empty
