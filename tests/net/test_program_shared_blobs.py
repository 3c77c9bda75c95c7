"""The compiled fast path stays correct when ops of different shapes share one blob."""

import numpy as np

from framework.core import CreateOperator
from framework.memory.workspace import Workspace
from framework.proto.framework_pb2 import NetDef


def test_blob_reused_with_another_shape_later_in_the_run():
    # "s" first holds relu(x) (shape 2x3), then is overwritten with a larger 4x5 tensor.
    net = NetDef(name="shared", external_input=["x", "z"], external_output=["y", "w"])
    net.op.extend(
        [
            CreateOperator("Relu", ["x"], ["s"]),
            CreateOperator("Relu", ["s"], ["y"]),
            CreateOperator("Relu", ["z"], ["s"]),
            CreateOperator("Relu", ["s"], ["w"]),
        ]
    )
    ws = Workspace()
    x = np.arange(-3, 3, dtype=np.float32).reshape(2, 3)
    z = np.arange(-10, 10, dtype=np.float32).reshape(4, 5)
    ws.feed_blob("x", x)
    ws.feed_blob("z", z)
    n = ws.create_net(net)
    for _ in range(4):
        n.run()
        np.testing.assert_array_equal(ws.fetch_blob("y"), np.maximum(x, 0))
        np.testing.assert_array_equal(ws.fetch_blob("w"), np.maximum(z, 0))


def _conv_chain_net():
    """Conv+Relu (8 -> 16, 3x3) -> Conv (16 -> 8, 1x1) -> Transpose of the channels and columns (no
    compiled form) -> Conv+Relu (9 -> 16) -> Conv (16 -> 4): the memory planner puts b (8 x 9 x 9) and c
    (16 x 9 x 8) in one buffer."""
    net = NetDef(name="convs", external_input=["x", "w1", "b1", "w2", "w3", "w4"], external_output=["y"])
    net.op.extend(
        [
            CreateOperator("ConvFusion", ["x", "w1", "b1"], ["a"], kernel=3, pad=1, fusion_type=1),
            CreateOperator("Conv", ["a", "w2"], ["b"], kernel=1),
            CreateOperator("Transpose", ["b"], ["bt"], axes=[0, 3, 2, 1]),
            CreateOperator("ConvFusion", ["bt", "w3"], ["c"], kernel=3, pad=1, fusion_type=1),
            CreateOperator("Conv", ["c", "w4"], ["y"], kernel=3),
        ]
    )
    return net


def _ref_conv(x, w, b=None, pad=0):
    n, c, h, wd = x.shape
    m, _, k, _ = w.shape
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    oh, ow = h + 2 * pad - k + 1, wd + 2 * pad - k + 1
    y = np.zeros((n, m, oh, ow))
    for a in range(k):
        for bb in range(k):
            y += np.einsum("mc,nchw->nmhw", w[:, :, a, bb], xp[:, :, a : a + oh, bb : bb + ow])
    return y + (b[:, None, None] if b is not None else 0)


def test_planned_convs_are_compiled_and_stay_correct():
    """A planned (memongered) net of convs: after the first runs every conv runs as a bound kernel call
    (ConvNCHW.bound through the program's fast path, the shared blobs guarded by their buffers), an
    uncompiled reader of a shared blob a compiled conv wrote sees that conv's view, a filter changed in
    place (its version bumped) is re-packed, and nothing is allocated per run."""
    from framework.memory.allocator import memory_reporter
    from framework.net.memory_planner import optimize_inference_net

    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 8, 9, 9)).astype(np.float32)
    w1, b1 = rng.standard_normal((16, 8, 3, 3)).astype(np.float32), rng.standard_normal(16).astype(np.float32)
    w2, w3 = (
        rng.standard_normal((8, 16, 1, 1)).astype(np.float32),
        rng.standard_normal((16, 9, 3, 3)).astype(np.float32),
    )
    w4 = rng.standard_normal((4, 16, 3, 3)).astype(np.float32)

    def want():
        a = np.maximum(_ref_conv(x, w1, b1, pad=1), 0)
        c = np.maximum(_ref_conv(_ref_conv(a, w2).transpose(0, 3, 2, 1), w3, pad=1), 0)
        return _ref_conv(c, w4)

    opt, _ = optimize_inference_net(_conv_chain_net(), shapes={"x": x.shape})
    assert opt.op[1].output[0] == opt.op[3].output[0]  # b and c: one shared buffer
    ws = Workspace()
    for k, v in (("x", x), ("w1", w1), ("b1", b1), ("w2", w2), ("w3", w3), ("w4", w4)):
        ws.feed_blob(k, v)
    n = ws.create_net(opt)
    for _ in range(4):
        n.run()
        np.testing.assert_allclose(ws.fetch_blob("y"), want(), rtol=1e-4, atol=1e-4)
    assert n.program.fast is not None and n.program.compiled_count == 4  # all but the Transpose
    rep = memory_reporter()
    before = rep.allocations
    n.run()
    assert rep.allocations == before
    w4_tensor = ws.get_blob("w4")._obj
    w4_tensor.mutable_data(np.float32)[:] *= -1  # in place, as an op writing it would
    w4_tensor.version += 1
    w4 = -w4
    n.run()
    np.testing.assert_allclose(ws.fetch_blob("y"), want(), rtol=1e-4, atol=1e-4)


def test_planned_bn_and_pools_are_compiled_and_a_thread_change_recompiles():
    """Test-mode SpatialBN(Relu) (with in_channels), MaxPool and AveragePool in a planned net run as
    compiled closures: equal to numpy's, a BN statistic changed in place is used by the next run, and
    another intra-op thread count drops back to run() and compiles again."""
    import framework
    from framework.net.memory_planner import optimize_inference_net

    rng = np.random.default_rng(1)
    x = rng.standard_normal((2, 6, 8, 8)).astype(np.float32)
    s, b, mu = (rng.standard_normal(4).astype(np.float32) for _ in range(3))
    var = rng.uniform(0.5, 2, 4).astype(np.float32)
    net = NetDef(name="bnpool", external_input=["x", "s", "b", "m", "v"], external_output=["y"])
    net.op.extend(
        [
            CreateOperator("MaxPool", ["x"], ["p"], kernel=3, stride=1, pad=1),
            CreateOperator("SpatialBNRelu", ["p", "s", "b", "m", "v"], ["q"], is_test=1, in_channels=4, keep_nan=1),
            CreateOperator("AveragePool", ["q"], ["y"], kernel=2, stride=2),
        ]
    )

    def want():
        xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)), constant_values=-np.inf)
        p = np.max([xp[:, :, i : i + 8, j : j + 8] for i in range(3) for j in range(3)], axis=0)
        q = (p[:, :4] - mu[:, None, None]) / np.sqrt(var[:, None, None] + 1e-5) * s[:, None, None] + b[:, None, None]
        q = np.maximum(q, 0)
        return q.reshape(2, 4, 4, 2, 4, 2).mean(axis=(3, 5))

    opt, _ = optimize_inference_net(net, shapes={"x": x.shape})
    ws = Workspace()
    for k, val in (("x", x), ("s", s), ("b", b), ("m", mu), ("v", var)):
        ws.feed_blob(k, val)
    n = ws.create_net(opt)
    for _ in range(4):
        n.run()
        np.testing.assert_allclose(ws.fetch_blob("y"), want(), rtol=1e-5, atol=1e-5)
    assert n.program.fast is not None and n.program.compiled_count == 3
    mean_t = ws.get_blob("m")._obj
    mean_t.mutable_data(np.float32)[:] += 1
    mean_t.version += 1
    mu = mu + 1
    n.run()
    np.testing.assert_allclose(ws.fetch_blob("y"), want(), rtol=1e-5, atol=1e-5)
    threads = framework.get_num_threads()
    try:
        framework.set_num_threads(2 if threads == 1 else 1)
        assert n.program.callables() is n.program.slow
        n.run()
        n.run()
        assert n.program.fast is not None
        np.testing.assert_allclose(ws.fetch_blob("y"), want(), rtol=1e-5, atol=1e-5)
    finally:
        framework.set_num_threads(threads)
