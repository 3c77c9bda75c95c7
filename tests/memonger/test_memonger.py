"""Memory planning: bit-identical outputs, protected blobs untouched, real savings."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.caffe2.python import brew
from framework.caffe2.python.model_helper import ModelHelper
from framework.core import CreateOperator
from framework.memory.allocator import memory_reporter
from framework.memory.tensor import Tensor
from framework.memory.workspace import Workspace
from framework.net.memory_planner import optimize_inference_net
from framework.proto.framework_pb2 import NetDef

UNARY = ["Relu", "Sigmoid", "Tanh", "Negative", "Abs"]
BINARY = ["Add", "Mul", "Sub"]


@st.composite
def random_nets(draw):
    """A random DAG of unary/binary elementwise ops over one input, some outputs external."""
    n_ops = draw(st.integers(2, 14))
    net = NetDef(name="random", external_input=["x"])
    live = ["x"]
    for i in range(n_ops):
        out = f"t{i}"
        if draw(st.booleans()) and len(live) > 1:
            a, b = draw(st.sampled_from(live)), draw(st.sampled_from(live))
            net.op.append(CreateOperator(draw(st.sampled_from(BINARY)), [a, b], [out]))
        else:
            a = draw(st.sampled_from(live))
            inplace = draw(st.booleans()) and a != "x"
            net.op.append(CreateOperator(draw(st.sampled_from(UNARY)), [a], [a if inplace else out]))
            if inplace:
                continue
        live.append(out)
    produced = [b for b in live if b != "x"]
    outs = draw(st.lists(st.sampled_from(produced), min_size=1, max_size=3, unique=True))
    net.external_output.extend(outs)
    static = draw(st.lists(st.sampled_from(produced), max_size=2, unique=True))
    return net, static


def run_net(net_def, feeds, runs=3):
    """Run several times: later runs take the compiled fast path, which must agree."""
    ws = Workspace()
    for k, v in feeds.items():
        ws.feed_blob(k, v)
    net = ws.create_net(net_def)
    for _ in range(runs):
        net.run()
    return ws


@settings(max_examples=60)
@given(random_nets(), st.integers(0, 2**31 - 1))
def test_outputs_bit_identical_and_protected_blobs_untouched(net_static, seed):
    net, static = net_static
    x = np.random.default_rng(seed).standard_normal((3, 4)).astype(np.float32)
    opt, report = optimize_inference_net(net, static_blobs=static, shapes={"x": (3, 4)})
    ws_a, ws_b = run_net(net, {"x": x}), run_net(opt, {"x": x})
    for b in list(net.external_output) + static:
        np.testing.assert_array_equal(ws_a.fetch_blob(b), ws_b.fetch_blob(b))
    protected = set(net.external_input) | set(net.external_output) | set(static)
    assert not protected & set(report.renamed)
    names = {n for op in opt.op for n in list(op.input) + list(op.output)}
    assert protected & {n for op in net.op for n in list(op.input) + list(op.output)} <= names
    assert report.after_bytes <= report.before_bytes


def resnet(depth_blocks: int = 10) -> tuple[NetDef, NetDef, list[str]]:
    """A ResNet-style CNN (conv-bn-relu blocks with identity shortcuts), 2 convs per block."""
    m = ModelHelper(name="resnet", init_params=True)
    h = brew.conv(m, "data", "stem", dim_in=3, dim_out=16, kernel=3, pad=1)
    h = brew.relu(m, brew.spatial_bn(m, h, "stem_bn", 16, epsilon=1e-5, is_test=True), "stem_relu")
    for k in range(depth_blocks):
        a = brew.conv(m, h, f"b{k}_c1", dim_in=16, dim_out=16, kernel=3, pad=1)
        a = brew.relu(m, brew.spatial_bn(m, a, f"b{k}_bn1", 16, epsilon=1e-5, is_test=True), f"b{k}_r1")
        a = brew.conv(m, a, f"b{k}_c2", dim_in=16, dim_out=16, kernel=3, pad=1)
        a = brew.spatial_bn(m, a, f"b{k}_bn2", 16, epsilon=1e-5, is_test=True)
        h = brew.relu(m, brew.sum(m, [a, h], f"b{k}_sum"), f"b{k}_out")
    pooled = brew.average_pool(m, h, "pool", global_pooling=True)
    probs = brew.softmax(m, brew.fc(m, pooled, "fc", dim_in=16, dim_out=10), "softmax")
    net = m.net.Proto()
    net.external_output.append(str(probs))
    return m.param_init_net.Proto(), net, [str(p) for p in m.params]


def test_resnet_peak_activation_memory_drops_by_40_percent_with_identical_outputs():
    init, net, _ = resnet(10)  # 1 + 2*10 convs + fc = 22 layers
    for k, op in enumerate(init.op):  # both workspaces get the same weights
        op.device_option.random_seed = k + 1
    shape = (4, 3, 16, 16)
    x = np.random.default_rng(0).standard_normal(shape).astype(np.float32)
    opt, report = optimize_inference_net(net, shapes={"data": shape}, init_net=init)
    assert report.saving >= 0.40, str(report)

    def measured(net_def):
        ws = Workspace()
        ws.run_net_once(init)
        ws.feed_blob("data", x)
        base = memory_reporter().current_bytes
        memory_reporter().reset_peak()
        n = ws.create_net(net_def)
        n.run()
        return ws, memory_reporter().peak_bytes - base

    ws_a, peak_a = measured(net)
    ws_b, peak_b = measured(opt)
    np.testing.assert_array_equal(ws_a.fetch_blob("softmax"), ws_b.fetch_blob("softmax"))
    assert peak_b <= 0.6 * peak_a, (peak_a, peak_b, str(report))


def test_a_shared_blob_keeps_one_buffer_and_a_failed_op_leaves_the_workspace_usable():
    """An op writing a new shape into a blob the planner made reuses its buffer (nothing observable
    lives there to keep aside for a rollback): the blob shared by Relu's (8, 64) and ReduceSum's (8,)
    output settles on one buffer of the larger; a failing op leaves the workspace usable."""
    net = NetDef(name="shapes", external_input=["x", "k"], external_output=["z"])
    net.op.extend(
        [
            CreateOperator("Relu", ["x"], ["a"]),
            CreateOperator("Transpose", ["a"], ["at"]),
            CreateOperator("ReduceSum", ["at"], ["b"], axes=[0], keepdims=0),
            CreateOperator("Softmax", ["b"], ["c"], axis=0),
            CreateOperator("Mul", ["c", "k"], ["z"]),
        ]
    )
    opt, _ = optimize_inference_net(net, shapes={"x": (8, 64), "k": (8,)})
    assert [op.output[0] for op in opt.op[:3]] == ["__m0_shared", "__m1_shared", "__m0_shared"]
    ws = Workspace()
    x = np.random.default_rng(0).standard_normal((8, 64)).astype(np.float32)

    k = np.arange(8, dtype=np.float32)

    def want():
        e = np.exp(np.maximum(x, 0).sum(1) - np.maximum(x, 0).sum(1).max())
        return e / e.sum() * k

    ws.feed_blob("x", x)
    ws.feed_blob("k", k)
    n = ws.create_net(opt)
    n.run()
    rep = memory_reporter()
    before = rep.allocations
    reviewed = []
    view_within = Tensor.view_within

    def counted(self, *args):
        arr = view_within(self, *args)
        reviewed.append(arr is not None)
        return arr

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(Tensor, "view_within", counted)
        n.run()
    # the steady run's ops are compiled closures bound to views of the shared buffers (the program's fast
    # path); any op still run re-views its buffer (Operator.output's fast path)
    assert n.program.compiled_count >= 4 and all(reviewed)
    assert rep.allocations == before
    t = ws.get_blob("__m0_shared")._obj
    assert tuple(t.dims) == (8,) and t._spare is None and t.capacity_nbytes == 8 * 64 * 4
    np.testing.assert_allclose(ws.fetch_blob("z"), want(), rtol=1e-5)
    ws.feed_blob("x", x[:5])  # the shared blob gets (5, 64), then (5,); Mul by k (8,) fails
    with pytest.raises(Exception, match="Mul"):
        n.run()
    ws.feed_blob("x", x)
    n.run()
    np.testing.assert_allclose(ws.fetch_blob("z"), want(), rtol=1e-5)
