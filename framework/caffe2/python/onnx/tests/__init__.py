"""``caffe2.python.onnx.tests``: the test helpers Caffe2's ONNX tests import (``test_utils``)."""
