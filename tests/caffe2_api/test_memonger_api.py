"""Caffe2's memonger planning API: interference graph, orders, live ranges, greedy and optimal chain
assignments (checked against an independent brute force), optimize_interference and its checks."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework import core, workspace
from framework.caffe2.python import brew, memonger
from framework.caffe2.python.model_helper import ModelHelper
from framework.errors import BlobNotFoundError, FrameworkError

LR = memonger.LiveRange


@pytest.fixture(autouse=True)
def _fresh():
    workspace.ResetWorkspace()
    yield
    workspace.ResetWorkspace()


def _ops(*specs):
    return [core.CreateOperator("Copy", i, o) for i, o in specs]


def test_interference_graph_and_orders():
    ops = _ops(("w0c", "w0"), (["data", "w0"], "h0"), ("w2", "w2"), (["h0", "w2"], "h2"), ("d1", "d2"), ("d2", "d3"))
    g = memonger.compute_interference_graph(ops)
    assert sorted(g.edges()) == [(0, 1), (1, 3), (2, 3), (4, 5)] and g.edges[1, 3]["deps"] == {"h0"}
    assert memonger.topological_sort_traversal(g) == [4, 5, 2, 0, 1, 3]
    assert memonger.topological_sort_traversal_longest_path(g) == [0, 1, 2, 3, 4, 5]
    inplace = memonger.compute_interference_graph(_ops(("b", "b"), ("b", "b"), ("b", "b")))
    assert sorted(inplace.edges()) == [(0, 1), (0, 2), (1, 2)]


def test_ranges_and_greedy_assignment():
    ranges = memonger.compute_ranges(_ops(("a", "b"), ("b", "c"), ("c", "d")), {k: 4 for k in "abcd"})
    assert ranges["a"] == LR(None, 0, 4) and ranges["b"] == LR(0, 1, 4) and ranges["d"] == LR(2, None, 4)
    with pytest.raises(FrameworkError, match="no size"):
        memonger.compute_ranges(_ops(("a", "b")), {"a": 1})
    rs = [("b1", LR(1, 3, 10)), ("b2", LR(3, 4, 1)), ("b3", LR(5, 6, 1)), ("b4", LR(5, 7, 10))]
    greedy = memonger.compute_assignments_greedy(rs, None)
    assert greedy == [[rs[0], rs[3]], [rs[1], rs[2]]] and memonger.get_memory_usage(greedy) == 11
    assert memonger.compute_blob_assignments(greedy) == {"b1": "b4", "b4": "b4", "b2": "b3", "b3": "b3"}
    memonger.verify_assignments(greedy)
    with pytest.raises(FrameworkError, match="overlaps"):
        memonger.verify_assignments([[rs[0], rs[1]]])


def _brute_force_usage(ranges):
    """Least memory usage over every partition of the blobs into chains of non-overlapping ranges."""
    best = float("inf")
    n = len(ranges)
    for labels in itertools.product(range(n), repeat=n):
        chains = {}
        for (_, r), lab in zip(ranges, labels):
            chains.setdefault(lab, []).append(r)
        ok = all(
            all(a.used < b.defined for a, b in zip(c, c[1:]))
            for c in (sorted(c, key=lambda r: r.defined) for c in chains.values())
        )
        if ok:
            best = min(best, sum(max(r.size for r in c) for c in chains.values()))
    return best


@settings(max_examples=10, deadline=None, derandomize=True)
@given(st.lists(st.tuples(st.integers(0, 6), st.integers(1, 3), st.sampled_from([1, 5, 10])), min_size=1, max_size=5))
def test_dp_assignment_is_optimal(specs):
    ranges = sorted(
        [(f"b{i}", LR(d, d + length, size)) for i, (d, length, size) in enumerate(specs)], key=lambda p: p[1].used
    )
    best = memonger.compute_assignments_dp(ranges, [])
    memonger.verify_assignments(best)
    assert sorted(b for c in best for b, _ in c) == sorted(n for n, _ in ranges)
    assert memonger.get_memory_usage(best) == _brute_force_usage(ranges)
    assert memonger.get_memory_usage(best) <= memonger.get_memory_usage(memonger.compute_assignments_greedy(ranges))


def _mlp():
    m = ModelHelper("mlp")
    h = brew.fc(m, "data", "fc1", dim_in=4, dim_out=6)
    h = brew.relu(m, h, "r1")
    h = brew.fc(m, h, "fc2", dim_in=6, dim_out=6)
    h = brew.relu(m, h, "r2")
    h = brew.fc(m, h, "fc3", dim_in=6, dim_out=3)
    m.net.AveragedLoss(m.net.SquaredL2Distance([h, "label"], "dist"), "loss")
    grads = m.AddGradientOperators(["loss"])
    return m, grads


@pytest.mark.parametrize("algo", list(memonger.AssignmentAlgorithm))
def test_optimize_interference_keeps_results_and_shares_blobs(algo):
    m, grads = _mlp()
    static = [o for op in m.param_init_net.Proto().op for o in op.output] + ["data", "label", "loss"]
    static += [str(grads[p]) for p in m.params]
    opt = memonger.optimize_interference(m.Proto(), static, algo=algo)
    assert memonger.verify_graph_equality(m.Proto(), opt.net) and memonger.verify_inplace_blobs(m.Proto(), opt.net)
    count = lambda net: len({b for op in net.op for b in [*op.input, *op.output]})  # noqa: E731
    assert count(opt.net) < count(m.Proto()) and set(opt.blob_assignments) <= {
        b for op in m.Proto().op for b in op.output
    }
    rng = np.random.default_rng(0)
    workspace.FeedBlob("data", rng.standard_normal((5, 4)).astype(np.float32))
    workspace.FeedBlob("label", rng.standard_normal((5, 3)).astype(np.float32))
    workspace.RunNetOnce(m.param_init_net)
    workspace.RunNetOnce(m.net)
    expected = {b: workspace.FetchBlob(b).copy() for b in ["loss", "fc1_w_grad", "fc3_b_grad"]}
    workspace.RunNetOnce(opt.net)
    for b, v in expected.items():
        np.testing.assert_array_equal(workspace.FetchBlob(b), v, err_msg=b)
    stats = memonger.compute_statistics(opt.assignments)
    assert 0 < stats.optimized_nbytes < stats.baseline_nbytes
    sizes = memonger.collect_blob_sizes(m.Proto())
    assert sizes["fc1_w"] == 6 * 4 * 4 and sizes["data"] == 5 * 4 * 4


def test_graph_equality_detects_a_changed_dataflow():
    m, _ = _mlp()
    other = core.Net(m.Proto())
    other.Proto().op[2].input[0] = "data"  # fc2 now reads the input, not relu1's output
    assert not memonger.verify_graph_equality(m.Proto(), other.Proto())
    shorter = core.Net(m.Proto())
    del shorter.Proto().op[-1]
    assert not memonger.verify_graph_equality(m.Proto(), shorter.Proto())


def test_release_blobs_when_used_frees_after_the_last_read():
    m = ModelHelper("frees")
    x = brew.fc(m, "data", "x", dim_in=2, dim_out=2)
    y = brew.fc(m, x, "y", dim_in=2, dim_out=2)
    z = brew.fc(m, x, "z", dim_in=2, dim_out=2)
    u = brew.fc(m, y, "u", dim_in=2, dim_out=2)
    m.net.Alias(["u"], ["u_alias"])
    brew.sum(m, [z, u], "out")
    net = memonger.release_blobs_when_used(m.net.Proto(), {"data"})
    freed, types = [], [op.type for op in net.op]
    for op in net.op:
        if op.type == "Free":
            freed.append(op.input[0])
        else:
            assert not set(op.input) & set(freed) and not set(op.output) & set(freed)
    assert sorted(freed) == ["x", "y", "z"] and types.count("Free") == 3  # u is aliased; out is never read
    z_fc = next(i for i, op in enumerate(net.op) if list(op.output) == ["z"])
    assert list(net.op[z_fc + 1].input) == ["x"] and net.op[z_fc + 1].type == "Free"  # right after x's last read
    workspace.FeedBlob("data", np.ones((1, 2), np.float32))
    workspace.RunNetOnce(m.param_init_net)
    workspace.RunNetOnce(net)
    assert workspace.FetchBlob("out").shape == (1, 2)
    with pytest.raises(BlobNotFoundError, match="holds nothing"):
        workspace.FetchBlob("x")


def test_share_grad_blobs_with_shapes_shares_one_shape_only_and_allocates_nothing_per_run():
    """With blob_shapes, a shared blob only ever holds one shape (here no buffer is made anew per run);
    the parameters' gradients and the loss are as without sharing, bit for bit."""
    from framework.memory.allocator import memory_reporter
    from framework.memory.workspace import Workspace

    m = ModelHelper("deep")
    h = "data"
    for i, (a, b) in enumerate([(4, 6), (6, 6), (6, 6), (6, 6), (6, 3)]):
        h = brew.relu(m, brew.fc(m, h, f"fc{i}", dim_in=a, dim_out=b), f"r{i}")
    m.net.AveragedLoss(m.net.SquaredL2Distance([h, "label"], "dist"), "loss")
    grads = m.AddGradientOperators(["loss"])
    param_grads = [str(grads[p]) for p in m.params]
    rng = np.random.default_rng(2)
    feeds = {"data": rng.standard_normal((5, 4)).astype(np.float32), "label": rng.random((5, 3)).astype(np.float32)}

    init = Workspace()
    init.run_net_once(m.param_init_net)
    feeds.update({str(p): init.fetch_blob(str(p)) for p in m.params})

    def workspace_with_params():
        ws = Workspace()
        for k, v in feeds.items():
            ws.feed_blob(k, v.copy())
        return ws

    ws = workspace_with_params()
    plain = ws.create_net(m.net.Proto())
    plain.run()
    proto = m.net.Proto()
    shapes = {b: ws.fetch_blob(b).shape for op in proto.op for b in op.output}
    shared = memonger.share_grad_blobs(m.net, ["loss"], param_grads, "", blob_shapes=shapes)
    renamed = {b for op in proto.op for b in op.output} - {b for op in shared.op for b in op.output}
    assert renamed and all(b.endswith("_grad") for b in renamed)
    holders = {}  # shared blob -> the shapes of the blobs renamed onto it
    for old_op, new_op in zip(proto.op, shared.op):
        for old, new in zip(old_op.output, new_op.output):
            holders.setdefault(new, set()).add(tuple(shapes[old]))
    assert all(len(s) == 1 for s in holders.values())
    ws2 = workspace_with_params()
    net = ws2.create_net(shared)
    for _ in range(3):
        net.run()
    before = memory_reporter().allocations
    net.run()
    assert memory_reporter().allocations == before
    for b in [*param_grads, "loss"]:
        np.testing.assert_array_equal(ws2.fetch_blob(b), ws.fetch_blob(b), err_msg=b)


def test_share_grad_blobs_and_inference_sharing_keep_results():
    m, grads = _mlp()
    proto = m.Proto()
    param_grads = {str(g) for g in grads.values() if str(g).endswith("_w_grad") or str(g).endswith("_b_grad")}
    shared = memonger.share_grad_blobs(m.net, ["loss"], param_grads, "", share_activations=True)
    count = lambda net: len({b for op in net.op for b in [*op.input, *op.output]})  # noqa: E731
    assert count(shared) < count(proto) and [op.type for op in shared.op] == [op.type for op in proto.op]
    renamed = {b for op in shared.op for b in op.output} ^ {b for op in proto.op for b in op.output}
    assert all(b.endswith("_grad") or b in ("fc1", "r1") for b in renamed - {b for op in shared.op for b in op.output})
    rng = np.random.default_rng(1)
    workspace.FeedBlob("data", rng.standard_normal((3, 4)).astype(np.float32))
    workspace.FeedBlob("label", rng.standard_normal((3, 3)).astype(np.float32))
    workspace.RunNetOnce(m.param_init_net)
    workspace.RunNetOnce(m.net)
    expected = {b: workspace.FetchBlob(b).copy() for b in sorted(param_grads) + ["loss"]}
    workspace.RunNetOnce(shared)
    for b, v in expected.items():
        np.testing.assert_array_equal(workspace.FetchBlob(b), v, err_msg=b)
    fwd = core.Net("fwd")
    h = fwd.Relu("x", "h1")
    h = fwd.Sigmoid(h, "h2")
    h = fwd.Tanh(h, "h3")
    fwd.Scale(h, "y", scale=2.0)
    fwd.AddExternalOutput(core.BlobReference("y"))
    opt = memonger.optimize_inference_for_dag(fwd, ["x"])
    assert count(opt) < count(fwd.Proto()) and list(opt.op[-1].output) == ["y"]
    workspace.FeedBlob("x", np.array([-1.0, 0.5], np.float32))
    workspace.RunNetOnce(opt)
    np.testing.assert_allclose(
        workspace.FetchBlob("y"), 2 * np.tanh(1 / (1 + np.exp(-np.array([0.0, 0.5])))), rtol=1e-6
    )
    with pytest.raises(FrameworkError, match="inference-only"):
        memonger.optimize_inference_for_dag(m.net, ["data"])
