"""``caffe2.python.operator_test``: the helper modules Caffe2's operator tests import from their own
folder (reference implementations the tests compare ops against), written here from their semantics."""
