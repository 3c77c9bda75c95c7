"""``caffe2.python.onnx``: Caffe2's ONNX modules under Caffe2's names (``backend``, ``frontend``, ``helper``,
``workspace``, ``error``, ``backend_rep``, ``tests.test_utils``). The translation itself is
``framework.onnx`` (export and the ONNX backend on our ops); these modules give it Caffe2's layout.
"""
