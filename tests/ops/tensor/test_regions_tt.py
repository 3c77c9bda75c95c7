"""RMACRegions against a hand-worked grid and the region rules; TT against the dense TT-matrix
product (einsum over the cores) for one row, and Caffe2's final transposition for batches."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.memory.workspace import Workspace
from framework.ops import create_operator
from framework.ops.testing import assert_reference_checks


def test_rmac_regions_square_and_wide():
    # square 8x8, 2 scales: scale 1 one 8x8 region, scale 2 a 2x2 grid of 5x5 regions (2*8//3 = 5)
    x = np.zeros((2, 1, 8, 8), np.float32)
    want = [(0, 0, 7, 7), (0, 0, 4, 4), (0, 3, 4, 7), (3, 0, 7, 4), (3, 3, 7, 7)]
    ref = np.array([(b, *r) for b in range(2) for r in want], np.float32)
    assert_reference_checks(
        CreateOperator("RMACRegions", ["x"], ["r"], scales=2), [x], lambda x: ref, check_inference=False
    )
    ws = Workspace()
    ws.feed_blob("w", np.zeros((1, 1, 6, 10), np.float32))
    ws.run_operator_once(CreateOperator("RMACRegions", ["w"], ["r"], scales=3, overlap=0.4))
    r = ws.fetch_blob("r")
    side = r[:, 3] - r[:, 1] + 1
    assert (r[:, 0] == 0).all() and (r[:, 1] >= 0).all() and (r[:, 3] <= 9).all() and (r[:, 4] <= 5).all()
    assert (side == r[:, 4] - r[:, 2] + 1).all() and set(side.tolist()) == {6, 4, 3}  # 2*6//(l+1)
    ws.feed_blob("e", np.zeros((0, 1, 4, 4), np.float32))
    ws.run_operator_once(CreateOperator("RMACRegions", ["e"], ["r"]))
    assert ws.fetch_blob("r").shape == (0, 5)


@settings(max_examples=15, deadline=None)
@given(
    i0=st.integers(1, 3),
    i1=st.integers(1, 3),
    o0=st.integers(1, 3),
    o1=st.integers(1, 3),
    r=st.integers(1, 3),
    batch=st.integers(1, 3),
)
def test_tt_two_cores(i0, i1, o0, o1, r, batch):
    rng = np.random.default_rng(i0 + 3 * i1 + 9 * o0 + 27 * o1 + 81 * r)
    c0 = rng.normal(size=(i0, r, o0)).astype(np.float32)  # rows (i0, r1), cols (r0 = 1, o0)
    c1 = rng.normal(size=(i1, r, o1)).astype(np.float32)  # rows (i1, r2 = 1), cols (r1, o1)
    cores = np.concatenate([c1.reshape(-1), c0.reshape(-1)])  # consumed from the last core
    x = rng.normal(size=(batch, i0 * i1)).astype(np.float32)
    b = rng.normal(size=(o0 * o1,)).astype(np.float32)

    def ref(x, b, cores):
        dense = np.stack([np.einsum("ab,brq,arp->pq", row.reshape(i0, i1), c1, c0).reshape(-1) for row in x])
        if batch > 1:  # Caffe2's final Eigen transposition (see the op doc)
            flat = dense.T.reshape(-1)  # out-major, as the per-core steps leave it
            dense = flat.reshape(batch, -1).T.reshape(batch, -1)
        return dense + b

    op = CreateOperator("TT", ["x", "b", "cores"], ["y"], inp_sizes=[i0, i1], out_sizes=[o0, o1], tt_ranks=[1, r, 1])
    assert_reference_checks(op, [x, b, cores], ref, threshold=1e-4)


def test_tt_errors():
    ws = Workspace()
    with pytest.raises(FrameworkError, match="tt_ranks d \\+ 1"):
        create_operator(CreateOperator("TT", ["x", "b", "c"], ["y"], inp_sizes=[2], out_sizes=[2], tt_ranks=[1]), ws)
    ws.feed_blob("x", np.zeros((2, 4), np.float32))
    ws.feed_blob("b", np.zeros(3, np.float32))
    ws.feed_blob("c", np.zeros(4, np.float32))
    with pytest.raises(FrameworkError, match="TT"):
        ws.run_operator_once(
            CreateOperator("TT", ["x", "b", "c"], ["y"], inp_sizes=[4], out_sizes=[3], tt_ranks=[1, 1])
        )
