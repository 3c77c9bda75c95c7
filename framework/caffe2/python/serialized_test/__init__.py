"""``caffe2.python.serialized_test``: Caffe2's golden-output operator tests (see serialized_test_util)."""
