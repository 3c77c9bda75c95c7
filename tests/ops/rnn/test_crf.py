"""crf.CRFWithLoss against a brute-force linear-chain CRF (all paths enumerated)."""

import itertools

import numpy as np
import pytest

from framework.caffe2.python import crf
from framework.caffe2.python.model_helper import ModelHelper
from framework.memory.workspace import Workspace


def brute(pred, labels, tr):
    T, C = pred.shape

    def score(path):
        full = [C, *path, C + 1]  # BOS, path, EOS
        return sum(pred[t, path[t]] for t in range(T)) + sum(tr[full[i], full[i + 1]] for i in range(T + 1))

    paths = list(itertools.product(range(C), repeat=T))
    scores = np.array([score(p) for p in paths])
    logz = np.log(np.exp(scores - scores.max()).sum()) + scores.max()
    probs = np.exp(scores - logz)
    d_pred = np.zeros_like(pred)
    d_tr = np.zeros_like(tr)
    for p, w in zip(paths, probs):
        full = [C, *p, C + 1]
        for t in range(T):
            d_pred[t, p[t]] += w
        for i in range(T + 1):
            d_tr[full[i], full[i + 1]] += w
    lab_full = [C, *labels, C + 1]
    for t in range(T):
        d_pred[t, labels[t]] -= 1
    for i in range(T + 1):
        d_tr[lab_full[i], lab_full[i + 1]] -= 1
    best = paths[int(np.argmax(scores))]
    return logz - score(tuple(labels)), d_pred, d_tr, best


@pytest.mark.parametrize("T, C, seed", [(3, 2, 0), (4, 3, 1), (1, 3, 2)])
def test_crf_loss_gradients_and_viterbi_match_brute_force(T, C, seed):
    rng = np.random.default_rng(seed)
    model = ModelHelper(name=f"crf_{T}_{C}")
    pred = rng.standard_normal((T, C)).astype(np.float32)
    labels = rng.integers(0, C, T).astype(np.int32)
    layer = crf.CRFWithLoss(model, C)
    loss = layer.crf_loss("pred", "labels")
    grads = model.AddGradientOperators([loss])
    post = layer.update_predictions("pred")
    ws = Workspace()
    ws.feed_blob("pred", pred)
    ws.feed_blob("labels", labels)
    ws.run_net_once(model.param_init_net)
    ws.run_net_once(model.net)
    tr = ws.fetch_blob(str(layer.transitions)).astype(np.float64)
    want_loss, d_pred, d_tr, best = brute(pred.astype(np.float64), labels, tr)
    np.testing.assert_allclose(float(ws.fetch_blob(str(loss))), want_loss, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(ws.fetch_blob(str(grads["pred"])), d_pred, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(ws.fetch_blob(str(grads[str(layer.transitions)])), d_tr, rtol=1e-4, atol=1e-5)
    new = ws.fetch_blob(str(post))
    assert new.shape == (T, C) and tuple(np.argmax(new, axis=1)) == best
