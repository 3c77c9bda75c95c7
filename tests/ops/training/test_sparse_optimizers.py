"""Sparse / row-wise optimizer updates against sequential per-index loops written from Caffe2's kernels
(repeated indices, empty index lists), in-place use, untouched rows, and bad input."""

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


@st.composite
def updates(draw):
    n = draw(st.integers(0, 8))
    idx = np.array(draw(st.lists(st.integers(0, ROWS - 1), min_size=n, max_size=n)), np.int64)
    g = np.array(draw(st.lists(st.floats(-2, 2, width=32), min_size=n * COLS, max_size=n * COLS)), np.float32)
    return idx, g.reshape(n, COLS)


def run(op_type, names, values, outputs, **kw):
    ws = Workspace()
    for n, v in zip(names, values):
        ws.feed_blob(n, v)
    create_operator(CreateOperator(op_type, names, outputs, **kw), ws).run()
    return [ws.fetch_blob(o) for o in outputs]


def rng_state(shape, seed, positive=False):
    x = np.random.default_rng(seed).standard_normal(shape).astype(np.float32)
    return np.abs(x) + 0.1 if positive else x


@settings(max_examples=30, deadline=None)
@given(updates(), st.booleans())
def test_sparse_momentum_sgd_update(case, nesterov):
    idx, g = case
    m, p = rng_state((ROWS, COLS), 1), rng_state((ROWS, COLS), 2)
    lr, mu = 0.1, 0.9
    em, ep, eg = m.astype(np.float64), p.astype(np.float64), np.zeros(g.shape)
    for k, r in enumerate(idx):
        old = em[r].copy()
        em[r] = mu * old + lr * g[k]
        eg[k] = (1 + mu) * em[r] - mu * old if nesterov else em[r]
        ep[r] -= eg[k]
    out = run(
        "SparseMomentumSGDUpdate",
        ["g", "m", "lr", "p", "i"],
        [g, m, np.array([lr], np.float32), p, idx],
        ["g", "m", "p"],
        momentum=mu,
        nesterov=int(nesterov),
    )
    for got, want in zip(out, [eg, em, ep]):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@settings(max_examples=30, deadline=None)
@given(updates())
def test_sparse_adadelta(case):
    idx, g = case
    p, h, d = rng_state((ROWS, COLS), 1), rng_state((ROWS, COLS), 2, True), rng_state((ROWS, COLS), 3, True)
    lr, eps, decay = -0.5, 1e-5, 0.9
    ep, eh, ed = (x.astype(np.float64) for x in (p, h, d))
    for k, r in enumerate(idx):
        eh[r] = decay * eh[r] + (1 - decay) * g[k] ** 2
        step = np.sqrt(ed[r] + eps) / np.sqrt(eh[r] + eps) * g[k]
        ep[r] += lr * step
        ed[r] = decay * ed[r] + (1 - decay) * step**2
    out = run(
        "SparseAdadelta",
        ["p", "h", "d", "i", "g", "lr"],
        [p, h, d, idx, g, np.array([lr], np.float32)],
        ["p", "h", "d"],
        decay=decay,
    )
    for got, want in zip(out, [ep, eh, ed]):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@settings(max_examples=30, deadline=None)
@given(updates(), st.booleans())
def test_sparse_ftrl(case, alpha_input):
    idx, g = case
    w, nz = rng_state((ROWS, COLS), 1), rng_state((ROWS, COLS, 2), 2, True)
    alpha, beta, l1, l2 = 0.1, 1.0, 0.01, 0.02
    ew, enz = w.astype(np.float64), nz.astype(np.float64)
    for k, r in enumerate(idx):
        for j in range(COLS):
            n, z, gi = enz[r, j, 0], enz[r, j, 1], float(g[k, j])
            nn = n + gi * gi
            nz_ = z + gi - (math.sqrt(nn) - math.sqrt(n)) / alpha * ew[r, j]
            ew[r, j] = (l1 * np.sign(nz_) - nz_) / ((beta + math.sqrt(nn)) / alpha + l2) if abs(nz_) > l1 else 0.0
            enz[r, j] = [nn, nz_]
    names, values = ["w", "nz", "i", "g"], [w, nz, idx, g]
    kw = {"beta": beta, "lambda1": l1, "lambda2": l2}
    if alpha_input:
        names.append("a")
        values.append(np.array([alpha], np.float32))
    else:
        kw["alpha"] = alpha
    out = run("SparseFtrl", names, values, ["w", "nz"], **kw)
    for got, want in zip(out, [ew, enz]):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@settings(max_examples=30, deadline=None)
@given(updates())
def test_sparse_wngrad_and_storm(case):
    idx, g = case
    p, b, lr = rng_state((ROWS, COLS), 1), np.array([2.0], np.float32), -0.3
    ep, eb = p.astype(np.float64), 2.0
    for k, r in enumerate(idx):
        ep[r] += lr * g[k] / (eb + 1e-5)
    if idx.size:
        eb = eb + float((g.astype(np.float64) ** 2).sum()) / eb
    out = run("SparseWngrad", ["p", "b", "i", "g", "lr"], [p, b, idx, g, np.array([lr], np.float32)], ["p", "b"])
    np.testing.assert_allclose(out[0], ep, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(out[1], [eb], rtol=1e-5)

    m, gs, lr, mom, beta = rng_state((ROWS, COLS), 3), np.array([0.5], np.float32), 0.2, 10.0, 0.1
    ep, em, egs = p.astype(np.float64), m.astype(np.float64), 0.5
    if idx.size:
        egs += float((g.astype(np.float64) ** 2).sum())
        nlr = lr * (beta + egs) ** (-1 / 3)
        a = mom * nlr * nlr
        for k, r in enumerate(idx):
            em[r] = g[k] + (1 - a) * (em[r] - g[k])
            ep[r] += nlr * em[r]
    out = run(
        "SparseStorm", ["p", "m", "s", "g", "i", "lr"], [p, m, gs, g, idx, np.array([lr], np.float32)], ["p", "m", "s"]
    )
    for got, want in zip(out, [ep, em, [egs]]):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@settings(max_examples=30, deadline=None)
@given(updates(), st.integers(0, 5))
def test_rowwise_sparse_adam(case, it):
    idx, g = case
    p, m1, v = rng_state((ROWS, COLS), 1), rng_state((ROWS, COLS), 2), rng_state((ROWS,), 3, True)
    lr, b1, b2, eps = -0.01, 0.9, 0.999, 1e-5
    ep, em, ev = (x.astype(np.float64) for x in (p, m1, v))
    t = it + 1
    corr = math.sqrt(1 - b2**t) / (1 - b1**t)
    for k, r in enumerate(idx):
        ev[r] = ev[r] * b2 + np.mean(g[k].astype(np.float64) ** 2) * (1 - b2)
        em[r] = em[r] * b1 + g[k] * (1 - b1)
        ep[r] += lr * corr * em[r] / (math.sqrt(ev[r]) + eps)
    out = run(
        "RowWiseSparseAdam",
        ["p", "m1", "m2", "i", "g", "lr", "it"],
        [p, m1, v, idx, g, np.array([lr], np.float32), np.array([it], np.int64)],
        ["p", "m1", "m2"],
    )
    for got, want in zip(out, [ep, em, ev]):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


@settings(max_examples=30, deadline=None)
@given(updates(), st.integers(0, 9))
def test_rowwise_counter(case, it):
    idx, _ = case
    prev = np.array([0, 3, 7, 2, 9, 1], np.int64)
    counter = np.linspace(0, 2, ROWS)
    ep, ec = prev.copy(), counter.copy()
    rho = math.log(2) / 4
    for r in idx:
        ec[r] = 1 + math.exp(-max(0, it - ep[r]) * rho) * ec[r]
        ep[r] = max(it, ep[r])
    out = run(
        "RowWiseCounter",
        ["pi", "c", "i", "it"],
        [prev, counter, idx, np.array([it], np.int64)],
        ["pi", "c"],
        counter_halflife=4,
    )
    np.testing.assert_array_equal(out[0], ep)
    np.testing.assert_allclose(out[1], ec, rtol=1e-12)


@settings(max_examples=30, deadline=None)
@given(updates(), st.sampled_from([0.0, 0.1]))
def test_rowwise_and_plain_sparse_adagrad_match_the_sequential_loop(case, wd):
    """The vectorized kernels (cumulative sums over repeated rows) equal Caffe2's row-after-row loop."""
    idx, g = case
    p, h = rng_state((ROWS, COLS), 1), rng_state((ROWS,), 2, True)
    lr, eps = -0.1, 1e-5
    ep, eh = p.astype(np.float64), h.astype(np.float64)
    for k, r in enumerate(idx):
        gk = g[k] + wd * ep[r]
        eh[r] += np.mean(gk**2)
        ep[r] += lr * gk / (math.sqrt(eh[r]) + eps)
    out = run(
        "RowWiseSparseAdagrad",
        ["p", "h", "i", "g", "lr"],
        [p, h, idx, g, np.array([lr], np.float32)],
        ["p", "h"],
        epsilon=eps,
        weight_decay=wd,
    )
    np.testing.assert_allclose(out[0], ep, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(out[1], eh, rtol=1e-5, atol=1e-6)
    h2 = rng_state((ROWS, COLS), 2, True)
    ep, eh = p.astype(np.float64), h2.astype(np.float64)
    for k, r in enumerate(idx):
        gk = g[k] + wd * ep[r]
        eh[r] += gk**2
        ep[r] += lr * gk / (np.sqrt(eh[r]) + eps)
    out = run(
        "SparseAdagrad",
        ["p", "h", "i", "g", "lr"],
        [p, h2, idx, g, np.array([lr], np.float32)],
        ["p", "h"],
        epsilon=eps,
        weight_decay=wd,
    )
    np.testing.assert_allclose(out[0], ep, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(out[1], eh, rtol=1e-5, atol=1e-6)


def test_updates_are_in_place_and_touch_only_the_rows_named():
    ws = Workspace()
    table = np.random.default_rng(0).standard_normal((1000, 4)).astype(np.float32)
    ws.feed_blob("p", table.copy())
    ws.feed_blob("h", np.zeros(1000, np.float32))
    ws.feed_blob("i", np.array([5, 17, 5], np.int64))
    ws.feed_blob("g", np.ones((3, 4), np.float32))
    ws.feed_blob("lr", np.array([-0.1], np.float32))
    op = create_operator(CreateOperator("RowWiseSparseAdagrad", ["p", "h", "i", "g", "lr"], ["p", "h"]), ws)
    before = ws.get_blob("p")._obj._array
    op.run()
    after = ws.fetch_blob("p")
    assert ws.get_blob("p")._obj._array is before  # same buffer: no copy of the table
    untouched = np.ones(1000, bool)
    untouched[[5, 17]] = False
    assert np.array_equal(after[untouched], table[untouched])
    assert not np.array_equal(after[5], table[5])


@pytest.mark.parametrize(
    "op_type, names, values, outputs, message",
    [
        (
            "SparseAdadelta",
            ["p", "h", "d", "i", "g", "lr"],
            [np.zeros((3, 2), np.float32)] * 3 + [np.array([3]), np.zeros((1, 2), np.float32), np.ones(1, np.float32)],
            ["p", "h", "d"],
            "out of range",
        ),
        (
            "SparseFtrl",
            ["w", "nz", "i", "g"],
            [np.zeros((3, 2), np.float32), np.zeros((3, 2), np.float32), np.array([0]), np.zeros((1, 2), np.float32)],
            ["w", "nz"],
            "2 per weight",
        ),
        (
            "RowWiseSparseAdam",
            ["p", "m1", "m2", "i", "g", "lr", "it"],
            [
                np.zeros((3, 2), np.float32),
                np.zeros((3, 2), np.float32),
                np.zeros(2, np.float32),
                np.array([0]),
                np.zeros((1, 2), np.float32),
                np.ones(1, np.float32),
                np.zeros(1, np.int64),
            ],
            ["p", "m1", "m2"],
            "one per row",
        ),
        (
            "SparseStorm",
            ["p", "m", "s", "g", "i", "lr"],
            [np.zeros((3, 2), np.float32)] * 2
            + [np.zeros(1, np.float32), np.zeros((2, 2), np.float32), np.array([0]), np.ones(1, np.float32)],
            ["p", "m", "s"],
            "gradient",
        ),
    ],
)
def test_bad_input_is_a_named_error_and_changes_nothing(op_type, names, values, outputs, message):
    ws = Workspace()
    for n, v in zip(names, values):
        ws.feed_blob(n, v)
    snapshot = {n: ws.fetch_blob(n).copy() for n in names}
    with pytest.raises(FrameworkError, match=f"{op_type}.*{message}"):
        create_operator(CreateOperator(op_type, names, outputs), ws).run()
    for n in names:
        np.testing.assert_array_equal(ws.fetch_blob(n), snapshot[n])
