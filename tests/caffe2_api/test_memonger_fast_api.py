"""memonger.optimize_inference_fast: Caffe2's greedy recycling (memonger::optimize_inference_net), checked
against renamings worked out by hand from Caffe2's algorithm."""

import numpy as np

from framework import core, workspace
from framework.caffe2.python import memonger


def chain(n=4, net_type=""):
    net = core.Net("h36b_chain")
    if net_type:
        net.Proto().type = net_type
    names = ["data"] + [f"h{i}" for i in range(n - 1)] + ["out"]
    for a, b in zip(names, names[1:]):
        net.Relu([a], [b])
    return net


def io(net_def):
    return [(list(op.input), list(op.output)) for op in net_def.op]


def test_a_chain_alternates_two_shared_blobs():
    net = chain()
    before = io(net.Proto())
    optim = memonger.optimize_inference_fast(net.Proto(), {"data", "out"})
    # h0 is freed at op 1 (root __m0), h1 at op 2 (root __m1); h2 is first written at op 2, after h0 was
    # freed, and takes h0's blob; a blob freed by an op is not reused by that op's own outputs
    assert io(optim) == [
        (["data"], ["__m0_shared"]),
        (["__m0_shared"], ["__m1_shared"]),
        (["__m1_shared"], ["__m0_shared"]),
        (["__m0_shared"], ["out"]),
    ]
    assert io(net.Proto()) == before  # the input net is left as it was
    x = np.linspace(-1, 1, 6).astype(np.float32)
    workspace.ResetWorkspace()
    workspace.FeedBlob("data", x)
    workspace.RunNetOnce(optim)
    np.testing.assert_array_equal(workspace.FetchBlob("out"), np.maximum(x, 0))


def test_static_blobs_and_unusable_nets_are_left_alone():
    optim = memonger.optimize_inference_fast(chain().Proto(), {"data", "out", "h0", "h1", "h2"})
    assert io(optim) == io(chain().Proto())
    dag = chain(net_type="dag")
    assert io(memonger.optimize_inference_fast(dag.Proto(), {"data", "out"})) == io(dag.Proto())
    once = memonger.optimize_inference_fast(chain().Proto(), {"data", "out"})
    assert io(memonger.optimize_inference_fast(once, {"data", "out"})) == io(once)  # already optimized


def test_a_blob_read_twice_lives_until_its_last_reader():
    net = core.Net("h36b_fork")
    net.Relu(["data"], ["a"])
    net.Relu(["a"], ["b"])
    net.Add(["a", "b"], ["c"])
    net.Relu(["c"], ["out"])
    optim = memonger.optimize_inference_fast(net.Proto(), {"data", "out"})
    # a dies at op 2 (root __m0), b too (root __m1); c is written at op 2 while nothing is free yet, and
    # becomes a root of its own (__m2) when it dies at op 3
    assert io(optim) == [
        (["data"], ["__m0_shared"]),
        (["__m0_shared"], ["__m1_shared"]),
        (["__m0_shared", "__m1_shared"], ["__m2_shared"]),
        (["__m2_shared"], ["out"]),
    ]
