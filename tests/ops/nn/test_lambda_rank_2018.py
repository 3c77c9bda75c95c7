"""LambdaRankNdcg in Caffe2 2018's two-input form (no session_lengths: one session, loss [1]) and
its three-input gradient, against a pairwise reference written from 2018's kernel."""

import math

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.memory.workspace import Workspace
from framework.ops import get_gradient_for_op


def _ref(y, r):
    """Pairwise sums over i, j of 2018's kernel: lambda = |(2^r_i - 2^r_j)(d_i - d_j)| with d the
    1/log2(rank + 1) discount of the current ranking; loss = sum lambda * -log sigmoid(s (y_i - y_j)),
    dy_i = -sum lambda * s * sigmoid(-s (y_i - y_j)), s = +1 if r_i > r_j else -1; both / IDCG."""
    n = len(y)
    disc = lambda order: {idx: 1 / math.log2(pos + 2) for pos, idx in enumerate(order)}  # noqa: E731
    d = disc(sorted(range(n), key=lambda i: -y[i]))
    ideal = disc(sorted(range(n), key=lambda i: -r[i]))
    idcg = sum(2 ** r[i] * ideal[i] for i in range(n))
    idcg = 1.0 if idcg < 1e-5 else idcg
    loss, dy = 0.0, np.zeros(n)
    for i in range(n):
        for j in range(n):
            lam = abs((2 ** r[i] - 2 ** r[j]) * (d[i] - d[j]))
            s = 1.0 if r[i] > r[j] else -1.0
            v = s * (y[i] - y[j])
            loss += lam * math.log1p(math.exp(-v)) / idcg
            dy[i] += -lam * s / (1 + math.exp(v)) / idcg
    return loss, dy


@given(
    y=st.lists(st.floats(-3, 3), min_size=1, max_size=12, unique=True).map(lambda v: np.array(v, np.float32)),
    data=st.data(),
)
def test_two_input_form_is_one_session(y, data):
    n = y.size
    r = np.array(data.draw(st.lists(st.integers(0, 4), min_size=n, max_size=n)), np.float32)
    ws = Workspace()
    ws.feed_blob("y", y)
    ws.feed_blob("r", r)
    ws.run_operator_once(CreateOperator("LambdaRankNdcg", ["y", "r"], ["loss", "dy"]))
    ref_loss, ref_dy = _ref(y.astype(np.float64), r.astype(np.float64))
    loss = ws.fetch_blob("loss")
    assert loss.shape == (1,)
    np.testing.assert_allclose(loss[0], ref_loss, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ws.fetch_blob("dy"), ref_dy, rtol=1e-4, atol=1e-5)
    # the gradient maker emits 2018's three-input gradient: dLoss[0] * dy
    grad_ops, _ = get_gradient_for_op(CreateOperator("LambdaRankNdcg", ["y", "r"], ["loss", "dy"]), ["loss_grad", None])
    assert [list(o.input) for o in grad_ops] == [["y", "dy", "loss_grad"]]
    ws.feed_blob("loss_grad", np.array([0.5], np.float32))
    for o in grad_ops:
        ws.run_operator_once(o)
    np.testing.assert_allclose(ws.fetch_blob("y_grad"), 0.5 * ref_dy, rtol=1e-4, atol=1e-5)
