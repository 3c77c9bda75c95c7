"""``caffe2.proto.caffe2_legacy_pb2`` resolves through the hook and its LegacyPadding values drive ops."""

import numpy as np

import framework.caffe2 as hook


def test_legacy_padding_enum_through_hook():
    hook.install()
    try:
        from caffe2.proto import caffe2_legacy_pb2
        from caffe2.python import core, workspace

        assert (caffe2_legacy_pb2.NOTSET, caffe2_legacy_pb2.VALID, caffe2_legacy_pb2.SAME) == (0, 1, 2)
        assert caffe2_legacy_pb2.LegacyPadding.Name(3) == "CAFFE_LEGACY_POOLING"
        workspace.FeedBlob("h36c_x", np.ones((1, 1, 5, 5), np.float32))
        op = core.CreateOperator(
            "MaxPool", ["h36c_x"], ["h36c_y"], kernel=2, stride=2, legacy_pad=caffe2_legacy_pb2.SAME
        )
        workspace.RunOperatorOnce(op)
        assert workspace.FetchBlob("h36c_y").shape == (1, 1, 3, 3)  # SAME: ceil(5 / 2)
    finally:
        hook.uninstall()
