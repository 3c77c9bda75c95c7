"""A ``pass_workspace=True`` Python op receives Caffe2's workspace object: ``ws.blobs[name]`` is the Blob
(``fetch``/``feed``), ``name in ws.blobs``, and every other workspace method passes through; the module's
``workspace.blobs[name]`` (the fetched value) works inside the function too. As in Caffe2, ``ws.blobs``
holds existing blobs only (``ws.create_blob`` makes one)."""

import numpy as np

from framework import core, workspace
from framework.caffe2 import c_extension as C


def test_blobs_mapping_in_default_workspace():
    workspace.ResetWorkspace()
    seen = {}

    def f(inputs, outputs, ws):
        seen["fetched"] = ws.blobs["internal"].fetch()
        seen["has"] = ("internal" in ws.blobs, "nope" in ws.blobs)
        seen["module"] = workspace.blobs["internal"]
        seen["names"] = sorted(ws.blobs())
        ws.create_blob("made_here").feed(np.array([7], np.int32))
        outputs[0].feed(inputs[0].data * 2)

    workspace.FeedBlob("internal", np.array([1.0, 2.0], np.float32))
    workspace.RunOperatorOnce(core.CreatePythonOperator(f, ["internal"], ["y"], pass_workspace=True))
    np.testing.assert_array_equal(seen["fetched"], [1.0, 2.0])
    np.testing.assert_array_equal(seen["module"], [1.0, 2.0])
    assert seen["has"] == (True, False) and seen["names"] == ["internal", "y"]
    np.testing.assert_array_equal(workspace.FetchBlob("made_here"), [7])
    np.testing.assert_array_equal(workspace.FetchBlob("y"), [2.0, 4.0])
    workspace.ResetWorkspace()


def test_c_workspace_passed_as_is():
    x = np.arange(3, dtype=np.float32)
    got = []

    def f(inputs, outputs, ws):
        got.append((type(ws), ws.blobs["internal"].fetch()))

    ws = C.Workspace()
    net = core.Net("h36c_pyws")
    net.GivenTensorFill([], ["internal"], values=x, shape=x.shape)
    net.Python(f, pass_workspace=True)([], [])
    ws.run(net)
    assert got[0][0] is C.Workspace
    np.testing.assert_array_equal(got[0][1], x)
