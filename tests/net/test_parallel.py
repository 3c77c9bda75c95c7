"""Intra-op threads (framework/runtime/parallel.py) and the Predictor's batch split over them
(framework/predictor/batch_split.py): same results as one thread, nothing allocated per run."""

from __future__ import annotations

import threading

import numpy as np
import pytest

import framework
from framework.core import CreateOperator
from framework.memory.allocator import memory_reporter
from framework.memory.workspace import Workspace
from framework.predictor.predictor import Predictor
from framework.proto.framework_pb2 import NetDef
from framework.runtime.parallel import get_num_threads, run_parallel, set_num_threads, split


@pytest.fixture
def two_threads():
    old = get_num_threads()
    set_num_threads(2)
    yield
    set_num_threads(old)


def test_split_ranges():
    assert split(5, 2) == [(0, 3), (3, 5)]
    assert split(1, 4) == [(0, 1)]
    assert split(6, 3) == [(0, 2), (2, 4), (4, 6)]


def test_set_num_threads_checks_and_reports():
    with pytest.raises(ValueError, match="at least 1"):
        set_num_threads(0)
    old = get_num_threads()
    framework.set_num_threads(3)
    assert framework.get_num_threads() == 3
    set_num_threads(old)


def test_a_thread_count_set_again_gets_its_pool_back(two_threads):
    """Kernels bind per-thread scratch and replayed calls to their workers: 2 -> 1 -> 2 threads runs the
    second task on the same pool thread as before."""

    def worker():
        seen = []
        run_parallel([lambda: None, lambda: seen.append(threading.get_ident())])
        return seen[0]

    first = worker()
    set_num_threads(1)
    set_num_threads(2)
    assert worker() == first


def test_run_parallel_uses_the_pool_never_nests_and_propagates_errors(two_threads):
    seen, inner = [], []

    def task():
        seen.append(threading.current_thread().name)
        inner.append(get_num_threads())
        run_parallel([lambda: None, lambda: None])  # nested: runs serially, no deadlock

    run_parallel([task, task])
    assert len(seen) == 2 and any(n.startswith("framework-op") for n in seen)
    assert inner == [1, 1]

    def bad():
        raise KeyError("boom")

    with pytest.raises(KeyError, match="boom"):
        run_parallel([lambda: None, bad])


def _conv_net(extra=None, fc_out=5):
    rng = np.random.default_rng(0)
    init = NetDef(name="init")
    params = {
        "w": rng.standard_normal((8, 3, 3, 3)).astype(np.float32),
        "b": rng.standard_normal(8).astype(np.float32),
        "w2": rng.standard_normal((fc_out, 8 * 4 * 4)).astype(np.float32),
        "b2": rng.standard_normal(fc_out).astype(np.float32),
    }
    for k, v in params.items():
        init.op.append(CreateOperator("GivenTensorFill", [], [k], shape=list(v.shape), values=v.ravel().tolist()))
    net = NetDef(name="p")
    net.op.extend(
        [
            CreateOperator("Conv", ["x", "w", "b"], ["c"], kernel=3, pad=1),
            CreateOperator("Relu", ["c"], ["c"]),
            CreateOperator("MaxPool", ["c"], ["p"], kernel=2, stride=2),
            CreateOperator("FC", ["p", "w2", "b2"], ["f"]),
            *(extra or []),
            CreateOperator("Softmax", ["f"], ["y"]),
        ]
    )
    net.external_input.extend(["x", *params])
    net.external_output.append("y")
    return init, net


@pytest.mark.parametrize("splittable", [True, False])
def test_predictor_splits_the_batch_over_threads(two_threads, splittable):
    extra = None
    if not splittable:  # Transpose is not on the per-image list: the net runs unsplit
        extra = [CreateOperator("Transpose", ["f"], ["ft"], axes=[0, 1]), CreateOperator("Relu", ["ft"], ["f"])]
    init, net = _conv_net(extra)
    x = np.random.default_rng(1).standard_normal((5, 3, 8, 8)).astype(np.float32)
    set_num_threads(1)
    (want,) = Predictor(init, net).run({"x": x})
    set_num_threads(2)
    pred = Predictor(init, net)
    (got,) = pred.run({"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert bool(pred._split._copies) == splittable
    pred.run({"x": x})
    n0 = memory_reporter().allocations
    pred.run_net()
    assert memory_reporter().allocations == n0
    np.testing.assert_allclose(pred.workspace.fetch_blob("y"), want, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize(
    "name", ["resnet50", "squeezenet1_1", "resnet20_cifar", "shufflenet_v2", "densenet121", "alexnet"]
)
def test_every_real_model_splits_its_batch_after_the_optimization_pass(name):
    """The ops the inference pass fuses (SpatialBNRelu, ConcatChannelShuffle, ConvFusion) are per-image:
    every benchmark model's optimized net still runs one copy per thread at batch > 1 (a fused op left off
    the list had DenseNet-121 and ShuffleNet V2 run unsplit, 1.1-1.5x instead of 1.7-1.9x on 2 threads)."""
    from bench.real_models.nets import build
    from framework.net.optimize import optimize_inference
    from framework.predictor.batch_split import splittable

    model = build(name, 2)
    ws = Workspace()
    for k, v in model.weights.items():
        ws.feed_blob(k, v)
    opt = optimize_inference(model.predict_net, ws, outputs=[model.output_name], share_buffers=False)
    assert splittable(opt, [model.input_name]), sorted({op.type for op in opt.op})


@pytest.mark.parametrize("batch", [1, 5])
def test_large_fc_weights_split_their_features_and_the_batch_split_stops_before_them(two_threads, monkeypatch, batch):
    """An FC with a weight of at least fc.SPLIT_MIN_BYTES (lowered here) splits its output features over
    the threads; at batch > 1 the copies run only the ops before it, their results are gathered and the
    rest of the net runs once on the whole batch (a declared output only the head writes gathered too).
    Same results as one thread, nothing allocated per steady run."""
    from framework.ops.nn import fc

    monkeypatch.setattr(fc, "SPLIT_MIN_BYTES", 1024)
    init, net = _conv_net([CreateOperator("Relu", ["f"], ["f"])], fc_out=80)
    net.external_output.append("p")
    x = np.random.default_rng(2).standard_normal((batch, 3, 8, 8)).astype(np.float32)
    set_num_threads(1)
    want = Predictor(init, net).run({"x": x})
    set_num_threads(2)
    pred = Predictor(init, net)
    got = pred.run({"x": x})
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    split = pred._split
    assert split._tail is not None and [op.type for op in split._tail.net_def.op][0] == "FC"
    assert bool(split._copies) == (batch > 1)
    if batch > 1:
        assert "p" in split._gather and all(op.type != "FC" for op in split._head.op)
    fc_op = next(op for op in (split._tail if batch > 1 else pred.net).ops if op.type == "FC")
    assert fc_op._parts() is not None
    pred.run({"x": x})
    n0 = memory_reporter().allocations
    pred.run_net()
    assert memory_reporter().allocations == n0
    np.testing.assert_allclose(pred.workspace.fetch_blob("y"), want[0], rtol=1e-5, atol=1e-6)
