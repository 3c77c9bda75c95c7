"""caffe2.python.muji: all-reduce built from Add and Copy ops with GPU device options (run on the CPU here);
every form leaves the sum of the inputs in each reduced blob."""

import numpy as np
import pytest

from framework import core, workspace
from framework.caffe2.python import muji
from framework.proto import caffe2_pb2


def reduce_with(fn, n, affix="_reduced"):
    workspace.ResetWorkspace()
    net = core.Net(f"h36b_muji_{fn.__name__}_{n}")
    names = [f"b{i}" for i in range(n)]
    for i, name in enumerate(names):
        workspace.FeedBlob(name, np.full((2, 3), float(i + 1), np.float32))
    out = fn(net, names, affix, list(range(n)))
    workspace.RunNetOnce(net)
    return net, [workspace.FetchBlob(str(b)) for b in out]


@pytest.mark.parametrize(
    "fn, n",
    [
        (muji.Allreduce2, 2),
        (muji.Allreduce4, 4),
        (muji.Allreduce4Group2, 4),
        (muji.Allreduce8, 8),
        (muji.AllreduceFallback, 3),
        (muji.AllreduceFallback, 5),
    ],
)
def test_every_form_leaves_the_sum_on_each_gpu(fn, n):
    net, reduced = reduce_with(fn, n)
    total = n * (n + 1) / 2
    assert len(reduced) == n
    for r in reduced:
        np.testing.assert_array_equal(r, np.full((2, 3), total, np.float32))
    # ops run on the GPUs named by their device options
    assert {op.device_option.device_type for op in net.Proto().op} == {workspace.GpuDeviceType}
    assert {op.device_option.device_id for op in net.Proto().op} <= set(range(n))


def test_fallback_with_an_empty_affix_reduces_into_the_first_blob():
    _, reduced = reduce_with(muji.AllreduceFallback, 3, affix="")
    np.testing.assert_array_equal(reduced[0], np.full((2, 3), 6.0, np.float32))


def test_allreduce_without_peer_access_falls_back_and_checks_lengths():
    workspace.ResetWorkspace()
    net = core.Net("h36b_muji_any")
    for i in range(2):
        workspace.FeedBlob(f"x{i}", np.array([1.0, 2.0], np.float32))
    out = muji.Allreduce(net, ["x0", "x1"])
    assert [str(b) for b in out] == ["x0_reduced", "x1_reduced"]
    assert "x0_reduced_temp_copy" in {o for op in net.Proto().op for o in op.output}  # the fallback's form
    workspace.RunNetOnce(net)
    np.testing.assert_array_equal(workspace.FetchBlob("x1_reduced"), [2.0, 4.0])
    with pytest.raises(RuntimeError, match="mismatch"):
        muji.Allreduce(net, ["x0", "x1"], gpu_indices=[0])
    assert muji.OnCPU().device_type == caffe2_pb2.CPU and muji.OnGPU(3).device_id == 3
