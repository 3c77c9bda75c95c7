"""memonger.optimize_inference_for_dag names its shared blobs as Caffe2's C++ recycling does
(``<namescope>__m<k>_shared``) and the shared net computes the same output."""

import numpy as np

from framework import core, workspace
from framework.caffe2.python import brew, memonger, model_helper


def test_shared_blob_names_and_same_output():
    workspace.ResetWorkspace()
    m = model_helper.ModelHelper(name="h36b_mem")
    with core.NameScope("ns"):
        h = brew.fc(m, "data", "fc1", dim_in=4, dim_out=8)  # scoped: ns/data
        for i in range(2, 6):
            h = brew.relu(m, brew.fc(m, h, f"fc{i}", dim_in=8, dim_out=8), f"relu{i}")
        brew.fc(m, h, "out", dim_in=8, dim_out=3)
    m.net.AddExternalOutput("ns/out")
    optim = memonger.optimize_inference_for_dag(m.net, ["ns/data"], "ns/")
    names = {b for op in optim.op for b in list(op.input) + list(op.output)}
    shared = sorted(b for b in names if b.endswith("_shared"))
    assert shared and all(b.startswith("ns/__m") for b in shared)
    assert len(names) < len({b for op in m.net.Proto().op for b in list(op.input) + list(op.output)})
    workspace.RunNetOnce(m.param_init_net)
    workspace.FeedBlob("ns/data", np.random.RandomState(1).rand(2, 4).astype(np.float32))
    workspace.RunNetOnce(m.net)
    before = workspace.FetchBlob("ns/out")
    workspace.RunNetOnce(optim)
    np.testing.assert_array_equal(workspace.FetchBlob("ns/out"), before)
