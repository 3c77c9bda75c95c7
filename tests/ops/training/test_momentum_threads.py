"""MomentumSGDUpdate split over two intra-op threads (flat ranges; in place, as the optimizer builds it):
the same values as one thread, bit for bit, and Caffe2's values (float64 reference), no per-run allocation."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.proto.framework_pb2 import NetDef
from tests.ops.threaded import assert_same, run_threads
from tests.ops.training.test_momentum_in_place import ref_momentum


def _net(mu: float, nesterov: int, in_place: bool) -> NetDef:
    net = NetDef(name="momentum_threads", external_input=["g", "m", "lr", "p"])
    outs = ["g", "m", "p"] if in_place else ["g2", "m2", "p2"]
    net.op.extend([CreateOperator("MomentumSGDUpdate", ["g", "m", "lr", "p"], outs, momentum=mu, nesterov=nesterov)])
    return net, outs


@settings(max_examples=10, deadline=None)
@given(
    shape=st.lists(st.integers(1, 9), min_size=1, max_size=3),
    nesterov=st.integers(0, 1),
    in_place=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_split_equals_one_thread_and_caffe2(shape, nesterov, in_place, seed):
    rng = np.random.default_rng(seed)
    g, m, p = (rng.standard_normal(shape).astype(np.float32) for _ in range(3))
    feeds = dict(g=g, m=m, lr=np.array([0.1], np.float32), p=p)
    net, outs = _net(0.9, nesterov, in_place)
    results, tasks, allocs = run_threads(net, feeds, outs, runs=2, min_work=1)
    assert (tasks > 0 or g.size == 1) and allocs == 0
    assert_same(results)
    if in_place:  # two runs: the second from the first one's values
        step, nm = ref_momentum(g, m, np.float32(0.1), 0.9, nesterov)
        g, m, p = step.astype(np.float32), nm.astype(np.float32), (p - step).astype(np.float32)
    step, nm = ref_momentum(g, m, np.float32(0.1), 0.9, nesterov)
    got = results[2]
    np.testing.assert_allclose(got[outs[0]], step, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[outs[1]], nm, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[outs[2]], p - step, rtol=1e-5, atol=1e-6)


def test_decoder_sized_update_splits_by_default():
    rng = np.random.default_rng(1)
    g, m, p = (rng.standard_normal((1000, 256)).astype(np.float32) for _ in range(3))
    net, outs = _net(0.9, 1, True)
    results, tasks, allocs = run_threads(net, dict(g=g, m=m, lr=np.array([0.01], np.float32), p=p), outs, runs=3)
    assert tasks > 0 and allocs == 0
    assert_same(results)


@settings(max_examples=10, deadline=None)
@given(n=st.integers(1, 3000), nesterov=st.integers(0, 1), seed=st.integers(0, 2**16))
def test_compiled_in_place_update_equals_numpy_passes(n, nesterov, seed):
    """The one-pass kernel (in place, float32) gives the numpy path's values bit for bit."""
    import pytest

    from framework.kernels import bn_train

    rng = np.random.default_rng(seed)
    feeds = {k: rng.standard_normal(n).astype(np.float32) for k in ("g", "m", "p")}
    feeds["lr"] = np.array([0.03], np.float32)
    net, outs = _net(0.9, nesterov, True)
    compiled, _, _ = run_threads(net, feeds, outs, runs=2, threads=(1,))
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(bn_train, "momentum_update", lambda *a: False)
        numpy_path, _, _ = run_threads(net, feeds, outs, runs=2, threads=(1,))
    assert_same({1: compiled[1], 2: numpy_path[1]})
