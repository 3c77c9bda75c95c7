"""optimizer.build_* pick the sparse update for GradientSlice gradients (embedding tables), as Caffe2's
optimizers do: SparseAdagrad / RowWiseSparseAdagrad / SparseAdam / RowWiseSparseAdam / ScatterWeightedSum /
SparseMomentumSGDUpdate, with dense layers on the dense updates; only looked-up rows change."""

import numpy as np
import pytest

from framework.caffe2.python import brew, optimizer
from framework.caffe2.python.model_helper import ModelHelper
from framework.memory.workspace import Workspace


def embedding_model():
    optimizer.reset_optimizer_instance_count()
    m = ModelHelper(name="emb")
    table = m.create_param("table", [50, 4], ("GaussianFill", {"std": 0.1}), tags="WEIGHT")
    pooled = m.net.SparseLengthsSum([table, "ids", "lengths"], "pooled")
    out = brew.fc(m, pooled, "out", dim_in=4, dim_out=1)
    loss = m.net.AveragedLoss([m.net.SumElements([out], "s")], "loss")
    m.AddGradientOperators([loss])
    return m


CASES = [
    (lambda m: optimizer.build_adagrad(m, 0.1), "SparseAdagrad", "Adagrad", (50, 4)),
    (lambda m: optimizer.build_adagrad(m, 0.1, rowWise=True), "RowWiseSparseAdagrad", "Adagrad", (50,)),
    (lambda m: optimizer.build_adam(m, 0.1), "SparseAdam", "Adam", None),
    (lambda m: optimizer.build_adam(m, 0.1, rowWise=True), "RowWiseSparseAdam", "Adam", (50,)),
    (lambda m: optimizer.build_sgd(m, 0.1), "ScatterWeightedSum", "WeightedSum", None),
    (lambda m: optimizer.build_sgd(m, 0.1, momentum=0.9), "SparseMomentumSGDUpdate", "MomentumSGDUpdate", None),
]


@pytest.mark.parametrize("build, sparse_op, dense_op, state_shape", CASES, ids=[c[1] for c in CASES])
def test_builders_choose_the_sparse_update_and_touch_only_looked_up_rows(build, sparse_op, dense_op, state_shape):
    m = embedding_model()
    build(m)
    types = [op.type for op in m.net.Proto().op]
    assert sparse_op in types and dense_op in types
    sparse = next(op for op in m.net.Proto().op if op.type == sparse_op)
    assert "table" in sparse.input and "table" in sparse.output  # in place on the table
    ws = Workspace()
    ws.run_net_once(m.param_init_net.Proto())
    if state_shape is not None:
        state = [o for op in m.param_init_net.Proto().op for o in op.output if o.startswith("table_")]
        assert any(ws.fetch_blob(s).shape == state_shape for s in state)
    ws.feed_blob("ids", np.array([3, 7, 3, 41], np.int64))
    ws.feed_blob("lengths", np.array([2, 2], np.int32))
    before = ws.fetch_blob("table")
    net = ws.create_net(m.net.Proto())
    net.run()
    after = ws.fetch_blob("table")
    touched = np.zeros(50, bool)
    touched[[3, 7, 41]] = True
    assert np.array_equal(after[~touched], before[~touched])
    assert not np.allclose(after[touched], before[touched])
