"""caffe2.python.transformations and nomnigraph_transformations: Caffe2's graph passes, each checked for the
rewrite it makes and, where it changes numbers, against numpy references of the net's meaning."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework import core, workspace
from framework.caffe2.python import nomnigraph as ng
from framework.caffe2.python.nomnigraph_transformations import transpose_network
from framework.caffe2.python.transformations import Transformer, fuseConvBN

T = Transformer()


def _conv1x1(x, w, b=None, order="NCHW"):
    """A 1x1 convolution as a matrix product over channels."""
    if order == "NCHW":
        y = np.einsum("nchw,mc->nmhw", x, w[:, :, 0, 0])
        return y if b is None else y + b[None, :, None, None]
    y = np.einsum("nhwc,mc->nhwm", x, w[:, 0, 0, :])
    return y if b is None else y + b


def _bn(y, s, bias, mean, var, eps, order):
    shape = (1, -1, 1, 1) if order == "NCHW" else (1, 1, 1, -1)
    r = [a.reshape(shape) for a in (s, bias, mean, var)]
    return r[0] * (y - r[2]) / np.sqrt(r[3] + eps) + r[1]


@settings(max_examples=10, deadline=None, derandomize=True)
@given(order=st.sampled_from(["NCHW", "NHWC"]), with_bias=st.booleans(), c=st.integers(1, 4), m=st.integers(1, 4))
def test_fuse_conv_bn_matches_numpy(order, with_bias, c, m):
    workspace.ResetWorkspace()
    rng = np.random.RandomState(c * 10 + m)
    x = rng.randn(2, c, 3, 3) if order == "NCHW" else rng.randn(2, 3, 3, c)
    w = rng.randn(m, c, 1, 1) if order == "NCHW" else rng.randn(m, 1, 1, c)
    b, s, bias, mean = (rng.randn(m) for _ in range(4))
    var = rng.rand(m) + 0.5
    blobs = {"X": x, "w": w, "b": b, "s": s, "bias": bias, "mean": mean, "var": var}
    for name, value in blobs.items():
        workspace.FeedBlob(name, value.astype(np.float32))
    net = core.Net("h36b_fuse")
    net.Conv(["X", "w", "b"] if with_bias else ["X", "w"], ["Y"], kernel=1, order=order)
    net.SpatialBN(["Y", "s", "bias", "mean", "var"], ["Z"], is_test=1, epsilon=1e-3, order=order)
    fuseConvBN(net)
    (op,) = net.Proto().op
    assert op.type == "Conv" and list(op.output) == ["Z"] and len(op.input) == 3
    if not with_bias:
        assert op.input[2] == "_bias"
    workspace.RunNetOnce(net)
    expected = _bn(_conv1x1(x, w, b if with_bias else None, order), s, bias, mean, var, 1e-3, order)
    np.testing.assert_allclose(workspace.FetchBlob("Z"), expected, rtol=1e-4, atol=1e-4)


def test_fuse_conv_bn_leaves_training_bn_and_shared_outputs():
    workspace.ResetWorkspace()
    net = core.Net("h36b_nofuse")
    net.Conv(["X", "w", "b"], ["Y"], kernel=1)
    net.SpatialBN(["Y", "s", "bias", "mean", "var"], ["Z", "rm", "rv", "sm", "sv"], is_test=0)
    net.Conv(["X", "w2", "b2"], ["Y2"], kernel=1)
    net.SpatialBN(["Y2", "s", "bias", "mean", "var"], ["Z2"], is_test=1)
    net.Relu(["Y2"], ["R"])  # Y2 has a second reader: folding would change R
    before = net.Proto().SerializeToString()
    T.FuseConvBN(net)
    assert net.Proto().SerializeToString() == before


def test_add_nnpack_only_where_nnpack_applies():
    net = core.Net("h36b_nnpack")
    net.Conv(["X", "w", "b"], ["A"], kernel=3)
    net.Conv(["X", "w", "b"], ["B"], kernel=3, stride=2)
    net.Conv(["X", "w", "b"], ["C"], kernel_h=1, kernel_w=3)
    net.Conv(["X", "w", "b"], ["D"], kernel=3, order="NHWC")
    net.Conv(["X", "w"], ["E"], kernel=3)
    T.AddNNPACK(net)
    engines = [op.engine for op in net.Proto().op]
    assert engines == ["NNPACK", "", "", "", ""]
    args = {a.name: a.s for a in net.Proto().op[0].arg}
    assert args["convolution_transform_strategy"] == b"PRECOMPUTE"


def test_fuse_nnpack_conv_relu_naming():
    net = core.Net("h36b_pingpong")
    net.Conv(["X", "w", "b"], ["Y"], kernel=3, engine="NNPACK")
    net.Relu(["Y"], ["X"])
    net.Conv(["X", "w", "b"], ["Y"], kernel=3, engine="NNPACK")
    net.Conv(["Y", "w", "b"], ["Q"], kernel=3, engine="NNPACK", stride=2)
    net.Relu(["Q"], ["R"])  # stride 2: NNPACK is not fast there, so no fusion
    T.FuseNNPACKConvRelu(net)
    ops = net.Proto().op
    assert [op.type for op in ops] == ["Conv", "Conv", "Conv", "Relu"]
    assert list(ops[0].output) == ["Y_fusion_fix"] and list(ops[1].input)[0] == "Y_fusion_fix"
    assert [(a.name, a.s) for a in ops[0].arg if a.name == "activation"] == [("activation", b"Relu")]
    assert not [a for a in ops[2].arg if a.name == "activation"]


def test_sink_max_pool_same_numbers():
    workspace.ResetWorkspace()
    x = np.random.RandomState(0).randn(1, 2, 4, 4).astype(np.float32)
    workspace.FeedBlob("X", x)
    net = core.Net("h36b_sink")
    net.MaxPool(["X"], ["P"], kernel=2, stride=2)
    net.Relu(["P"], ["Y"])
    T.SinkMaxPool(net)
    assert [op.type for op in net.Proto().op] == ["Relu", "MaxPool"]
    assert list(net.Proto().op[1].output) == ["Y"]
    workspace.RunNetOnce(net)
    expected = np.maximum(x, 0).reshape(1, 2, 2, 2, 2, 2).max(axis=(3, 5))
    np.testing.assert_array_equal(workspace.FetchBlob("Y"), expected)


def test_dead_code_elim_keeps_net_outputs():
    net = core.Net("h36b_dce")
    net.Relu(["X"], ["A"])
    net.Relu(["A"], ["B"])  # B is read by nothing and not an output: B's op goes, then A's
    net.Sigmoid(["X"], ["S"])
    net.Proto().external_output.append("S")
    T.DeadCodeElim(net)
    assert [op.type for op in net.Proto().op] == ["Sigmoid"]
    with pytest.raises(AttributeError, match="Transformation NoSuchPass not found"):
        T.NoSuchPass(net)


def test_transpose_network_same_numbers():
    workspace.ResetWorkspace()
    rng = np.random.RandomState(3)
    x, w1, w2 = rng.randn(2, 3, 4, 4), rng.randn(5, 3, 1, 1), rng.randn(2, 5, 1, 1)
    b1, b2 = rng.randn(5), rng.randn(2)
    for name, value in {"X": x, "w1": w1, "w2": w2, "b1": b1, "b2": b2}.items():
        workspace.FeedBlob(name, value.astype(np.float32))
    net = core.Net("h36b_transpose")
    net.Conv(["X", "w1", "b1"], ["c1"], kernel=1)
    net.Conv(["c1", "w2", "b2"], ["c2"], kernel=1)
    nn = ng.NNModule(net)
    transpose_network(nn)
    types = [n.name for n in nn.controlFlow]
    # X, w1, w2 go in once each; c1 comes back once (its NHWC form feeds the second conv directly), c2 once
    assert types.count("NCHW2NHWC") == 3 and types.count("NHWC2NCHW") == 2 and types.count("Conv") == 2
    workspace.RunNetOnce(nn.convertToCaffe2Proto(net.Proto()))
    c1 = _conv1x1(x, w1, b1)
    np.testing.assert_allclose(workspace.FetchBlob("c1"), c1, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(workspace.FetchBlob("c2"), _conv1x1(c1, w2, b2), rtol=1e-4, atol=1e-4)


def _conv3x3_valid(x, w, b):
    """A 3x3 valid NCHW convolution by sliding windows."""
    win = np.lib.stride_tricks.sliding_window_view(x, (3, 3), axis=(2, 3))  # n, c, oh, ow, 3, 3
    return np.einsum("ncijkl,mckl->nmij", win, w) + b[None, :, None, None]


def test_fused_nnpack_conv_relu_runs_as_conv_then_relu():
    workspace.ResetWorkspace()
    rng = np.random.RandomState(5)
    x, w, b = rng.randn(2, 2, 6, 6), rng.randn(3, 2, 3, 3), rng.randn(3)
    for name, value in {"X": x, "w": w, "b": b}.items():
        workspace.FeedBlob(name, value.astype(np.float32))
    net = core.Net("h36b_fused_run")
    net.Conv(["X", "w", "b"], ["Y"], kernel=3)
    net.Relu(["Y"], ["Z"])
    T.AddNNPACK(net)
    T.FuseNNPACKConvRelu(net)
    assert [op.type for op in net.Proto().op] == ["Conv"]
    expected = np.maximum(_conv3x3_valid(x, w, b), 0)
    workspace.CreateNet(net)
    for _ in range(3):  # later runs go through the compiled program
        workspace.RunNet(net)
        np.testing.assert_allclose(workspace.FetchBlob("Z"), expected, rtol=1e-4, atol=1e-4)
    bad = core.CreateOperator("Conv", ["X", "w", "b"], ["Q"], kernel=3, activation="Sigmoid")
    with pytest.raises(RuntimeError, match="activation"):
        workspace.RunOperatorOnce(bad)
