"""``caffe2.python.onnx.bin``: Caffe2's ONNX command-line converters (``conversion``)."""
