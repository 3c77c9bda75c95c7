"""The sparse gradient path (SparseLengths* -> GradientSlice -> sparse update) agrees with the dense one
(the looked-up rows as a dense tensor -> Lengths* -> dense gradient scattered back -> dense update)."""

import numpy as np
import pytest

from framework import core
from framework.memory.workspace import Workspace
from framework.ops import GradientSlice


def run(net, feeds):
    ws = Workspace()
    for k, v in feeds.items():
        ws.feed_blob(k, v)
    ws.run_net_once(net.Proto())
    return ws


@pytest.mark.parametrize("reducer", ["Sum", "Mean", "WeightedSum"])
def test_sparse_and_dense_gradients_agree(reducer):
    rng = np.random.default_rng(0)
    table = rng.standard_normal((20, 3)).astype(np.float32)
    ids = np.array([4, 9, 4, 0, 19, 9, 4], np.int64)  # repeated ids: their gradients add up
    lengths = np.array([3, 0, 4], np.int32)
    w = rng.standard_normal(ids.size).astype(np.float32)
    feeds = {"emb": table, "ids": ids, "lengths": lengths, "w": w}
    weighted = reducer == "WeightedSum"

    sparse = core.Net("sparse")
    ins = ["emb", "w", "ids", "lengths"] if weighted else ["emb", "ids", "lengths"]
    pooled = getattr(sparse, f"SparseLengths{reducer}")(ins, "pooled")
    loss = sparse.AveragedLoss(sparse.SumSqrElements(pooled, "s"), "loss")
    g_sparse = sparse.AddGradientOperators([loss])["emb"]
    assert isinstance(g_sparse, GradientSlice)
    ws = run(sparse, feeds)
    from_slice = np.zeros_like(table)
    np.add.at(from_slice, ws.fetch_blob(str(g_sparse.indices)), ws.fetch_blob(str(g_sparse.values)))

    dense = core.Net("dense")
    rows = dense.Gather(["emb", "ids"], "rows")
    ins = [rows, "w", "lengths"] if weighted else [rows, "lengths"]
    pooled = getattr(dense, f"Lengths{reducer}")(ins, "pooled")
    loss = dense.AveragedLoss(dense.SumSqrElements(pooled, "s"), "loss")
    g_rows = dense.AddGradientOperators([loss])[str(rows)]
    ws = run(dense, feeds)
    from_dense = np.zeros_like(table)
    np.add.at(from_dense, ids, ws.fetch_blob(str(g_rows)))

    np.testing.assert_allclose(from_slice, from_dense, rtol=1e-5, atol=1e-6)
    assert (from_slice[np.setdiff1d(np.arange(20), ids)] == 0).all()
