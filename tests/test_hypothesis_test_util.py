"""Caffe2's test-case API: tests written exactly as for Caffe2 (only the imports
change), plus checks that the assertions fail when they should."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import framework.caffe2.python.hypothesis_test_util as hu
from framework import core, workspace
from framework.proto import framework_pb2 as caffe2_pb2


class TestCaffe2Style(hu.HypothesisTestCase):
    @given(X=hu.tensor(), **hu.gcs)
    def test_relu(self, X, gc, dc):
        X += 0.02 * np.sign(X)  # keep away from the kink, as Caffe2's relu test does
        X[X == 0.0] += 0.02
        op = core.CreateOperator("Relu", ["X"], ["Y"])

        def ref(X):
            return [np.maximum(X, 0)]

        self.assertReferenceChecks(gc, op, [X], ref)
        self.assertGradientChecks(gc, op, [X], 0, [0])
        self.assertDeviceChecks(dc, op, [X], [0])

    @given(inputs=hu.tensors(n=3, min_dim=2, max_dim=3), axis=st.integers(0, 1), **hu.gcs_cpu_only)
    def test_concat(self, inputs, axis, gc, dc):
        op = core.CreateOperator("Concat", ["X0", "X1", "X2"], ["Y", "split_info"], axis=axis)

        def ref(*xs):
            return (np.concatenate(xs, axis=axis), np.array([x.shape[axis] for x in xs], dtype=np.int32))

        self.assertReferenceChecks(gc, op, inputs, ref)
        for i in range(3):
            self.assertGradientChecks(gc, op, inputs, i, [0])
        self.assertDeviceChecks(dc, op, inputs, [0, 1])

    @given(X=hu.tensor(min_dim=2, max_dim=4), **hu.gcs)
    def test_transpose_with_grad_reference(self, X, gc, dc):
        op = core.CreateOperator("Transpose", ["X"], ["Y"])

        def grad_ref(g_out, outputs, fwd_inputs):
            return [g_out.T]

        self.assertReferenceChecks(
            gc, op, [X], lambda X: [X.T], output_to_grad="Y", grad_reference=grad_ref, ensure_outputs_are_inferred=True
        )

    @given(data=hu.tensor(min_dim=2, max_dim=2, min_value=2), **hu.gcs_cpu_only)
    def test_gather_sparse_grad_reference(self, data, gc, dc):
        indices = np.array([1, 0, 1], dtype=np.int64)
        op = core.CreateOperator("Gather", ["data", "indices"], ["out"])

        def grad_ref(g_out, outputs, fwd_inputs):
            return [(g_out, fwd_inputs[1]), None]

        self.assertReferenceChecks(
            gc, op, [data, indices], lambda d, i: [d[i]], output_to_grad="out", grad_reference=grad_ref
        )

    @given(X=hu.tensor(dtype=np.int32), **hu.gcs)
    def test_validation_and_outputs_to_check(self, X, gc, dc):
        op = core.CreateOperator("Reshape", ["X"], ["Y", "old"], shape=[-1])

        def validator(X, Y, old):
            np.testing.assert_array_equal(Y, X.ravel())
            np.testing.assert_array_equal(old, X.shape)

        self.assertValidationChecks(gc, op, [X], validator)
        out = self.assertReferenceChecks(gc, op, [X], lambda X: [np.array(X.shape)], outputs_to_check=[1])
        assert len(out) == 1

    def test_run_op_raises(self):
        op = core.CreateOperator("Reshape", ["X"], ["Y", "old"], shape=[7])
        self.assertRunOpRaises(hu.cpu_do, op, [np.zeros((2, 3), np.float32)], regexp="does not agree")
        self.assertRunOpRaises(hu.gpu_do, op, [np.zeros((2, 3), np.float32)])
        with pytest.raises(AssertionError):
            self.assertRunOpRaises(hu.cpu_do, core.CreateOperator("Relu", ["X"], ["Y"]), [np.zeros(2, np.float32)])

    def test_gpu_device_option_runs_on_cpu(self):
        X = np.array([-1.0, 2.0], np.float32)
        op = core.CreateOperator("Relu", ["X"], ["Y"])
        self.assertDeviceChecks([hu.cpu_do, hu.gpu_do], op, [X], [0])
        (y,) = hu.runOpOnInput(hu.gpu_do, op, [X])
        np.testing.assert_array_equal(y, [0.0, 2.0])

    def test_wrong_reference_fails(self):
        op = core.CreateOperator("Relu", ["X"], ["Y"])
        X = np.array([-1.0, 2.0], np.float32)
        with pytest.raises(AssertionError):
            self.assertReferenceChecks(hu.cpu_do, op, [X], lambda X: [X])
        with pytest.raises(RuntimeError, match="tuple/list"):
            self.assertReferenceChecks(hu.cpu_do, op, [X], lambda X: np.maximum(X, 0))
        with pytest.raises(ValueError, match="must supply an input"):
            self.assertReferenceChecks(hu.cpu_do, op, [], lambda: [X])

    def test_data_dependent_output_size_is_not_a_mismatch(self):
        # BooleanMask's output length depends on the mask: inferred as (None, 3), which is no error
        op = core.CreateOperator("BooleanMask", ["data", "mask"], ["masked"])
        data = np.arange(15, dtype=np.float32).reshape(5, 3)
        mask = np.array([True, False, True, True, False])
        self.assertReferenceChecks(hu.cpu_do, op, [data, mask], lambda d, m: [d[m]])

    def test_gradient_outputs_unknown_to_inference_take_the_param_shape(self):
        # Concat's gradient is Split(dY, split_info): its sizes come from data, so inference cannot
        # give them; Caffe2 then shapes each X_i_grad as X_i
        xs = [np.random.rand(2, k).astype(np.float32) for k in (1, 3)]
        op = core.CreateOperator("Concat", ["X_0", "X_1"], ["Y", "split_info"], axis=1)
        self.assertGradientChecks(hu.cpu_do, op, xs, 0, [0], ensure_outputs_are_inferred=True)

    def test_scalar_reference_matches_any_shape(self):
        # Caffe2 compares with numpy's assert_allclose, which lets a 0-d reference stand for every element
        op = core.CreateOperator("ConstantFill", [], ["Y"], shape=[1], value=2.0)
        self.assertReferenceChecks(hu.cpu_do, op, [], lambda: [2.0])
        with pytest.raises(AssertionError):
            self.assertReferenceChecks(hu.cpu_do, op, [], lambda: [3.0])

    def test_wrong_gradient_fails(self):
        # Relu's gradient ops, handed to a Sigmoid: the check must notice
        op = core.CreateOperator("Sigmoid", ["X"], ["Y"])
        grad_ops = [core.CreateOperator("ReluGradient", ["Y", "Y_grad"], ["X_grad"])]
        with pytest.raises(AssertionError):
            self.assertGradientChecks(hu.cpu_do, op, [np.array([0.5, -0.3], np.float32)], 0, [0], grad_ops=grad_ops)

    def test_temp_workspace_restores_the_current_one(self):
        workspace.FeedBlob("kept", np.ones(1))
        with hu.temp_workspace():
            assert not workspace.HasBlob("kept")
            workspace.FeedBlob("tmp", np.ones(1))
        assert workspace.HasBlob("kept") and not workspace.HasBlob("tmp")


class TestStrategies(hu.HypothesisTestCase):
    @settings(max_examples=20)
    @given(X=hu.tensor(min_dim=2, max_dim=3, dtype=np.float64, min_value=2, max_value=3))
    def test_tensor(self, X):
        assert 2 <= X.ndim <= 3 and X.dtype == np.float64
        assert all(2 <= d <= 3 for d in X.shape)
        assert np.all(np.abs(X) <= 1)

    @settings(max_examples=20)
    @given(Xs=hu.tensors(n=2, dtype=np.int32), x1=hu.tensor1d(max_len=5), b=hu.arrays([3], dtype=bool))
    def test_tensors_share_a_shape(self, Xs, x1, b):
        assert len(Xs) == 2 and Xs[0].shape == Xs[1].shape and Xs[0].dtype == np.int32
        assert np.all(Xs[0] >= 0)
        assert x1.ndim == 1 and 1 <= x1.size <= 5
        assert b.dtype == np.bool_

    @settings(max_examples=20)
    @given(size=st.integers(0, 8), data=st.data())
    def test_segments_and_lengths(self, size, data):
        ids = data.draw(hu.segment_ids(size, is_sorted=True))
        assert ids.dtype == np.int32 and ids.size == size
        if size:
            assert ids[0] == 0 and np.all(np.diff(ids) >= 0) and np.all(np.diff(ids) <= 1)
        lens = data.draw(hu.lengths(size))
        assert lens.sum() == size and np.all(lens >= 0)
        data_, lens2 = data.draw(hu.lengths_tensor(min_value=1, max_value=4))
        assert lens2.sum() == data_.shape[0]

    def test_elements_of_type_rejects_unknown(self):
        with pytest.raises(ValueError):
            hu.elements_of_type(np.complex64)

    def test_device_fixtures(self):
        assert hu.cpu_do == caffe2_pb2.DeviceOption()
        assert hu.gpu_do.device_type == caffe2_pb2.CUDA
        assert set(hu.gcs) == {"gc", "dc"} and set(hu.gcs_cpu_only) == {"gc", "dc"}


def test_wrong_known_inferred_shape_fails(monkeypatch):
    case = TestCaffe2Style()
    from framework.ops.registry import get_schema
    from framework.ops.schema import TensorSpec

    schema = get_schema("BooleanMask")
    real_infer = schema.infer

    def wrong_rank(op, specs):
        out = real_infer(op, specs)
        return [TensorSpec((None,), out[0].dtype)] + list(out[1:])

    def wrong_dim(op, specs):
        out = real_infer(op, specs)
        return [TensorSpec((None, 4), out[0].dtype)] + list(out[1:])

    op = core.CreateOperator("BooleanMask", ["data", "mask"], ["masked"])
    data = np.arange(15, dtype=np.float32).reshape(5, 3)
    mask = np.array([True, False, True, True, False])
    for wrong in (wrong_rank, wrong_dim):
        monkeypatch.setattr(schema, "infer", wrong)
        with pytest.raises(AssertionError, match="inferred shape"):
            case.assertReferenceChecks(hu.cpu_do, op, [data, mask], lambda d, m: [d[m]])
    # asked for, an unknown dim is a failure
    monkeypatch.setattr(schema, "infer", real_infer)
    with pytest.raises(AssertionError, match="unknown"):
        case.assertReferenceChecks(hu.cpu_do, op, [data, mask], lambda d, m: [d[m]], ensure_outputs_are_inferred=True)


def test_gpu_only_tests_skip_without_a_gpu():
    # Caffe2 2018 writes @given(**hu.gcs_gpu_only) outside @unittest.skipIf(not has_gpu_support)
    import unittest

    ran = []

    class Case(unittest.TestCase):
        @given(n=st.integers(0, 3), **hu.gcs_gpu_only)
        def test_gpu(self, n, gc, dc):
            ran.append(gc)

    result = unittest.TestResult()
    Case("test_gpu").run(result)
    assert ran == [] and len(result.skipped) == 1 and not result.errors and not result.failures
