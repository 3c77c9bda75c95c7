# A Caffe2-style serialized operator test (caffe2/python/operator_test style: SerializedTestCase,
# serial.given, serial.testWithArgs), run unchanged by tests/caffe2/test_serialized.py.
import caffe2.python.hypothesis_test_util as hu
import caffe2.python.serialized_test.serialized_test_util as serial
import numpy as np
from caffe2.python import core
from hypothesis import settings


class TestSerialized(serial.SerializedTestCase):
    @serial.given(X=hu.tensor(min_dim=1, max_dim=3), **hu.gcs)
    @settings(deadline=None, max_examples=10)
    def test_sigmoid(self, X, gc, dc):
        op = core.CreateOperator("Sigmoid", ["X"], ["Y"])
        self.assertReferenceChecks(gc, op, [X], lambda X: [1.0 / (1.0 + np.exp(-X))])


if __name__ == "__main__":
    serial.testWithArgs()
