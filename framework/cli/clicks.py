"""A synthetic click data set with a planted logistic ground truth (``framework make-db clicks``).

Each example has ``DENSE`` dense features (standard normal) and ``SPARSE`` categorical ids drawn from a
skewed (Zipf-like) distribution over ``VOCAB`` values; the click probability is
``sigmoid(w . dense + sum_f beta_f[id_f] + b)`` with fixed random ``w``, ``beta`` and ``b``, and the label
is a Bernoulli draw of it. The planted probabilities are the best possible scores, so the best AUC on
the test split is known (make-db prints it and writes them to ``test_probabilities.npy``).
Records: ``data`` float32 [DENSE + SPARSE] (ids stored exactly as floats), ``label`` float32 [1].
"""

from __future__ import annotations

import numpy as np

DENSE, SPARSE, VOCAB = 4, 3, 200


def make_clicks(n_examples: int, seed: int = 0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(data float32 [n, DENSE + SPARSE], labels float32 [n, 1], planted click probabilities float64 [n])."""
    truth = np.random.default_rng(12345)  # the planted model is the same for every seed
    w = truth.standard_normal(DENSE) * 0.8
    beta = truth.standard_normal((SPARSE, VOCAB)) * 1.0
    b = -0.3
    rng = np.random.default_rng(seed)
    dense = rng.standard_normal((n_examples, DENSE))
    weights = 1.0 / (np.arange(VOCAB) + 20.0)
    weights /= weights.sum()
    ids = np.stack([rng.choice(VOCAB, n_examples, p=weights) for _ in range(SPARSE)], axis=1)
    z = dense @ w + beta[np.arange(SPARSE), ids].sum(axis=1) + b
    p = 1.0 / (1.0 + np.exp(-z))
    labels = (rng.random(n_examples) < p).astype(np.float32).reshape(-1, 1)
    data = np.concatenate([dense, ids], axis=1).astype(np.float32)
    return data, labels, p


def roc_auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """Area under the ROC curve (ties count one half): the probability a random positive outranks a
    random negative."""
    y = np.asarray(labels).reshape(-1) > 0.5
    s = np.asarray(scores, np.float64).reshape(-1)
    n_pos, n_neg = int(y.sum()), int((~y).sum())
    if n_pos == 0 or n_neg == 0:
        return float("nan")
    order = np.argsort(s, kind="mergesort")
    ranks = np.empty(len(s))
    sorted_s = s[order]
    starts = np.flatnonzero(np.r_[True, sorted_s[1:] != sorted_s[:-1]])
    ends = np.r_[starts[1:], len(s)]
    avg = (starts + ends + 1) / 2.0  # average 1-based rank of each tie group
    ranks[order] = np.repeat(avg, ends - starts)
    return float((ranks[y].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * n_neg))


def evaluate_auc(ws, md, test_db: str, batch: int = 1024) -> float | None:
    """Test-split AUC of a two-class model (probabilities [N, 2], labels 0/1), else None."""
    from framework.cli.data import read_examples

    x, y = read_examples(test_db)[:2]
    labels = np.asarray(y).reshape(-1)
    if not np.isin(labels, (0, 1)).all() or len(x) == 0:
        return None
    data_blob, prob_blob = md.data_dims()
    eval_def = type(md.predict_net)()
    eval_def.CopyFrom(md.predict_net)
    eval_def.name = f"{md.predict_net.name or 'predict'}_auc"
    scores, net = [], None
    for start in range(0, len(x), batch):
        ws.feed_blob(data_blob, x[start : start + batch])
        if net is None:
            net = ws.create_net(eval_def, overwrite=True)
        net.run()
        probs = np.asarray(ws.fetch_blob(prob_blob))
        if probs.ndim != 2 or probs.shape[1] != 2:
            return None
        scores.append(probs[:, 1].copy())
    return roc_auc(labels, np.concatenate(scores))
