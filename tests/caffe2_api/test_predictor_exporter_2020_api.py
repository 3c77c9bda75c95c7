"""caffe2.python.predictor: Caffe2 2020's export fields (global_init_net, trainer_prefix) and ReplaceBlobs."""

import os

import numpy as np
import pytest

from framework import core, workspace
from framework.caffe2.python.predictor import predictor_exporter as pe
from framework.caffe2.python.predictor import predictor_py_utils as pred_utils
from framework.caffe2.python.predictor_constants import predictor_constants as pc
from framework.proto import metanet_pb2


def test_replace_blobs():
    meta = metanet_pb2.MetaNetDef()
    pred_utils.AddBlobs(meta, "k", ["a"])
    pred_utils.AddBlobs(meta, "k", ["b"])
    pred_utils.ReplaceBlobs(meta, "k", ["c", "d"])
    assert list(pred_utils.GetBlobs(meta, "k")) == ["c", "d"]
    with pytest.raises(KeyError):
        pred_utils.ReplaceBlobs(meta, "missing", ["x"])


def test_global_init_net_runs_after_parameters_load(tmp_path):
    workspace.ResetWorkspace()
    w = np.arange(6, dtype=np.float32).reshape(2, 3)
    workspace.FeedBlob("h36b_w", w)
    net = core.Net("h36b_pred")
    net.MatMul(["data", "h36b_w"], ["out"], trans_b=1)
    extra = core.Net("h36b_global")
    extra.ConstantFill([], "h36b_global_blob", shape=[2], value=4.0)
    meta = pe.PredictorExportMeta(
        predict_net=net, parameters=["h36b_w"], inputs=["data"], outputs=["out"],
        shapes={"data": (1, 3), "out": (1, 2)},
        global_init_net=extra, trainer_prefix="tp",
    )  # fmt: skip
    assert meta.train_plan_name().startswith("tp_") and meta.global_init_net is extra
    path = os.path.join(str(tmp_path), "m.minidb")
    pe.save_to_db("minidb", path, meta)
    workspace.ResetWorkspace()
    meta_net_def = pe.load_from_db(path, "minidb")
    workspace.RunNetOnce(pred_utils.GetNet(meta_net_def, pc.GLOBAL_INIT_NET_TYPE))
    np.testing.assert_array_equal(workspace.FetchBlob("h36b_w"), w)
    np.testing.assert_array_equal(workspace.FetchBlob("h36b_global_blob"), [4.0, 4.0])
