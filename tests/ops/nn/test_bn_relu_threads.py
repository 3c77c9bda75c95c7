"""Training-mode SpatialBN, SpatialBNGradient and ReluGradient split over two intra-op threads (per-channel
sums by channels, elementwise passes by images or flat ranges): the same values as one thread, bit for bit,
no per-run allocation; and the values of a float64 reference (tests/ops/nn/test_bn_train.py's)."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.proto.framework_pb2 import NetDef
from tests.ops.nn.test_bn_train import EPS, MOM, _data, reference
from tests.ops.threaded import assert_same, run_threads


def _net(relu_grad_in_place: bool) -> NetDef:
    net = NetDef(name="bn_relu_threads", external_input=["X", "s", "b", "rm", "rv", "dY"])
    dr = "g" if relu_grad_in_place else "dR"
    net.op.extend(
        [
            CreateOperator(
                "SpatialBN", ["X", "s", "b", "rm", "rv"], ["Y", "rm", "rv", "sm", "siv"], epsilon=EPS, momentum=MOM
            ),
            CreateOperator("Relu", ["Y"], ["R"]),
            CreateOperator("Copy", ["dY"], ["g"]),
            CreateOperator("ReluGradient", ["R", "g"], [dr]),
            CreateOperator("SpatialBNGradient", ["X", "s", dr, "sm", "siv"], ["dX", "ds", "db"], epsilon=EPS),
        ]
    )
    return net


OUTS = ["Y", "sm", "siv", "R", "dX", "ds", "db"]


@settings(max_examples=10, deadline=None)
@given(
    shape=st.tuples(st.integers(1, 4), st.integers(1, 6), st.integers(1, 6), st.integers(1, 6)),
    in_place=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_split_equals_one_thread(shape, in_place, seed):
    x, scale, bias, rm, rv, dy = _data(shape, seed)
    feeds = dict(X=x, s=scale, b=bias, rm=rm, rv=rv, dY=dy)
    results, tasks, allocs = run_threads(_net(in_place), feeds, OUTS, runs=2, min_work=1)
    assert allocs == 0
    assert tasks > 0 or (shape[0] == 1 and shape[1] == 1)
    assert_same(results)


def test_values_at_two_threads_match_float64_reference():
    x, scale, bias, rm, rv, dy = _data((8, 16, 32, 32), 5)
    feeds = dict(X=x, s=scale, b=bias, rm=rm, rv=rv, dY=dy)
    results, tasks, _ = run_threads(_net(False), feeds, OUTS, runs=1, threads=(2,))
    assert tasks > 0  # above SPLIT_MIN_WORK: split by default
    (y, _, _, mean, inv), _ = reference(x, scale, bias, rm, rv, dy)
    r = np.maximum(y, 0)
    dr = dy.astype(np.float64) * (r > 0)
    _, (dx, dscale, dbias) = reference(x, scale, bias, rm, rv, dr)
    got = results[2]
    for name, want in (("Y", y), ("sm", mean), ("siv", inv), ("R", r), ("dX", dx), ("ds", dscale), ("db", dbias)):
        tol = 2e-4 * max(1.0, float(np.abs(want).max()))
        np.testing.assert_allclose(got[name], want, rtol=2e-4, atol=tol, err_msg=name)
