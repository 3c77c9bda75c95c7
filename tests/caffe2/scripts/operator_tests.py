# A Caffe2-style operator test file, written against caffe2.python as Caffe2's own
# caffe2/python/operator_test/*.py are. It is run unchanged by tests/caffe2/test_caffe2_scripts_unchanged.py
# through `python -m framework.caffe2 operator_tests.py`; nothing here names the framework.
from __future__ import absolute_import, division, print_function, unicode_literals

import unittest

import caffe2.python.hypothesis_test_util as hu
import hypothesis.strategies as st
import numpy as np
from caffe2.proto import caffe2_pb2
from caffe2.python import core, workspace
from hypothesis import given, settings


class TestOperators(hu.HypothesisTestCase):
    @given(X=hu.tensor(), engine=st.sampled_from(["", "CUDNN"]), **hu.gcs)
    @settings(deadline=None, max_examples=10)
    def test_relu(self, X, engine, gc, dc):
        op = core.CreateOperator("Relu", ["X"], ["Y"], engine=engine)
        X[np.abs(X) < 0.02] += 0.04  # away from the kink

        def relu_ref(X):
            return [np.maximum(X, 0.0)]

        self.assertReferenceChecks(gc, op, [X], relu_ref, ensure_outputs_are_inferred=True)
        self.assertDeviceChecks(dc, op, [X], [0])
        self.assertGradientChecks(gc, op, [X], 0, [0])

    @given(n=st.integers(1, 4), k=st.integers(1, 4), m=st.integers(1, 4), **hu.gcs_cpu_only)
    @settings(deadline=None, max_examples=10)
    def test_fc(self, n, k, m, gc, dc):
        X = np.random.rand(n, k).astype(np.float32) - 0.5
        W = np.random.rand(m, k).astype(np.float32) - 0.5
        b = np.random.rand(m).astype(np.float32) - 0.5
        op = core.CreateOperator("FC", ["X", "W", "b"], "Y")

        def fc_ref(X, W, b):
            return (np.dot(X, W.T) + b,)

        self.assertReferenceChecks(gc, op, [X, W, b], fc_ref)
        for i in range(3):
            self.assertGradientChecks(gc, op, [X, W, b], i, [0])

    @given(X=hu.arrays(6, elements=hu.floats(min_value=-1.0, max_value=1.0)), **hu.gcs)
    @settings(deadline=None, max_examples=10)
    def test_scale_with_extra_reference_input(self, X, gc, dc):
        # the reference receives every input given, even those the op does not read
        op = core.CreateOperator("Scale", ["X"], ["Y"], scale=2.0)
        self.assertReferenceChecks(gc, op, [X, np.float32(2.0)], lambda X, s: [X * s])

    @given(data=hu.lengths_tensor(dtype=np.float32, min_value=1, max_value=5, allow_empty=True), **hu.gcs_no_hip)
    @settings(deadline=None, max_examples=10)
    def test_lengths_sum(self, data, gc, dc):
        X, lengths = data
        op = core.CreateOperator("LengthsSum", ["X", "L"], ["Y"])

        def ref(X, L):
            out = np.zeros((len(L),) + X.shape[1:], dtype=np.float32)
            start = 0
            for i, n in enumerate(L):
                out[i] = X[start : start + n].sum(axis=0)
                start += n
            return [out]

        self.assertReferenceChecks(gc, op, [X, lengths], ref)

    @given(N=st.integers(1, 5), **hu.gcs)
    @settings(deadline=None, max_examples=5)
    def test_validation_and_raises(self, N, gc, dc):
        X = np.random.rand(N, 3).astype(np.float32)
        op = core.CreateOperator("Softmax", ["X"], ["Y"])

        def validator(X, Y):
            np.testing.assert_allclose(Y.sum(axis=1), np.ones(N), rtol=1e-5)

        self.assertValidationChecks(gc, op, [X], validator)
        bad = core.CreateOperator("FC", ["X", "W", "b"], ["Y"])
        self.assertRunOpRaises(
            gc, bad, [X, np.ones((2, 4), np.float32), np.ones(2, np.float32)], exception=RuntimeError
        )

    def test_python_op_and_workspace_object(self):
        def double(inputs, outputs):
            outputs[0].feed(inputs[0].data * 2)

        op = core.CreatePythonOperator(double, ["x"], ["y"])
        self.ws.create_blob("x").feed(np.arange(3, dtype=np.float32))
        self.ws.run(op)
        np.testing.assert_array_equal(self.ws.blobs["y"].fetch(), [0.0, 2.0, 4.0])
        self.assertTrue(core.IsOperator("Relu") and not workspace.has_gpu_support)
        self.assertEqual(hu.gpu_do.device_type, caffe2_pb2.CUDA)

    def test_gradient_checker_module(self):
        from caffe2.python import gradient_checker

        op = core.CreateOperator("Tanh", ["X"], ["Y"])
        checker = gradient_checker.GradientChecker(stepsize=0.01, threshold=0.01, device_option=hu.cpu_do)
        res, grad, estimate = checker.CheckSimple(op, [np.random.rand(3, 2).astype(np.float32)], 0, [0])
        self.assertTrue(res)
        self.assertEqual(grad.shape, estimate.shape)


if __name__ == "__main__":
    unittest.main()
