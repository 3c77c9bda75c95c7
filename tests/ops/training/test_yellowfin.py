"""YellowFin over several iterations, in place, against a float64 transcription of the paper's
update as Caffe2 orders it (SGD step with the old averages, then statistics, then lr/mu)."""

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


def reference_step(state, g, it, beta=0.999, width=20, eps=1e-6, nesterov=False):
    p, m, lr, mu, win, ga, g2a, s = state
    deb = 1.0 / (1.0 - beta**it)
    m2 = mu * m + lr * g
    p2 = p - (1 + mu) * m2 + mu * m if nesterov else p - m2

    def ma(x, avg):
        new = beta * avg + (1 - beta) * x
        return new, new * deb

    ga2, g_deb = ma(g, ga)
    g2a2, _ = ma(g * g, g2a)
    gn2 = max(float(np.sum(g * g)), eps)
    s = list(s)
    s[1], gn2_deb = ma(gn2, s[1])
    s[0], _ = ma(math.sqrt(gn2), s[0])
    win = list(win)
    win[(it - 1) % width] = math.log(gn2)
    valid = win[: min(width, it)]
    s[2], lo = ma(min(valid), s[2])
    s[3], hi = ma(max(valid), s[3])
    lo, hi = max(math.exp(lo), eps), max(math.exp(hi), eps)
    var = max(gn2_deb - float(np.sum(g_deb * g_deb)), eps)
    s[4], dist = ma(s[0] / s[1], s[4])
    if it > 1:
        ratio = math.sqrt(hi / lo)
        limit = (ratio - 1) / (ratio + 1)
        pp = (dist * lo) ** 2 / (2 * var)
        w3 = (-math.sqrt(pp * pp + 4.0 / 27.0 * pp**3) - pp) / 2
        w = math.copysign(abs(w3) ** (1 / 3), w3 if w3 != 0 else -1)
        root = w - pp / 3 / w + 1
        new_mu = max(root * root, limit * limit)
        new_lr = (1 - math.sqrt(new_mu)) ** 2 / lo
        mu, _ = ma(new_mu, mu)
        lr, _ = ma(new_lr, lr)
    return [p2, m2, lr, mu, win, ga2, g2a2, s]


@settings(max_examples=10, deadline=None)
@given(n=st.integers(1, 6), seed=st.integers(0, 999), nesterov=st.booleans())
def test_yellowfin_matches_reference_over_iterations(n, seed, nesterov):
    rng = np.random.default_rng(seed)
    names = ["p", "m", "lr", "mu", "win", "ga", "g2a", "s"]
    state = [rng.normal(size=n), np.zeros(n), 0.1, 0.0, [0.0] * 20, np.zeros(n), np.zeros(n), [0.0] * 5]
    ws = Workspace()
    feeds = [state[0], state[1], [state[2]], [state[3]], state[4], state[5], state[6], state[7]]
    for name, v in zip(names, feeds):
        ws.feed_blob(name, np.asarray(v, np.float32))
    op = create_operator(CreateOperator("YellowFin", names + ["g", "it"], names, beta=0.9, nesterov=nesterov), ws)
    for it in range(1, 6):
        g = rng.normal(size=n)
        ws.feed_blob("g", g.astype(np.float32))
        ws.feed_blob("it", np.array([it], np.int64))
        op.run()
        state = reference_step(state, g.astype(np.float32).astype(np.float64), it, beta=0.9, nesterov=nesterov)
        for name, want in zip(names, state):
            np.testing.assert_allclose(
                ws.fetch_blob(name).reshape(-1), np.ravel(want), rtol=2e-3, atol=1e-5, err_msg=name
            )


def test_yellowfin_errors():
    ws = Workspace()
    names = ["p", "m", "lr", "mu", "win", "ga", "g2a", "s", "g", "it"]
    for name in names:
        ws.feed_blob(name, np.zeros(3, np.float32))
    with pytest.raises(FrameworkError, match="YellowFin.*need 1 element"):
        ws.run_operator_once(CreateOperator("YellowFin", names, names[:8]))
    with pytest.raises(FrameworkError, match="curv_win_width"):
        create_operator(CreateOperator("YellowFin", names, names[:8], curv_win_width=0), ws)
