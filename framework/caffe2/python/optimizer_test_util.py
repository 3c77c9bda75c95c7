"""Shared optimizer test cases (Caffe2's ``caffe2.python.optimizer_test_util``): mix ``OptimizerTestBase``
(and ``LRModificationTestBase``) into a ``unittest.TestCase`` that defines ``build_optimizer(model, **kw)``
(setting ``self._skip_gpu``) and ``check_optimizer(optimizer)``.

- ``testDense``: a 5-weight linear regression (fc, SquaredL2Distance, AveragedLoss) must learn the exact
  weights ``[2, 6, 5, 0, 1]`` (atol 1e-2) in 2000 single-example steps;
- ``testSparse``: the same weights looked up by ``Gather`` (each twice), so the gradient is a GradientSlice
  with repeated indices; int32 and int64 indices;
- ``testGPUDense``: runs only with a GPU, which this framework never has (skipped, as on a CPU-only Caffe2);
- ``LRModificationTestBase``: ``max_gradient_norm`` clips by the global norm (the ratio checked against
  numpy) and ``allow_lr_injection`` feeds a multiplier.
"""

from __future__ import annotations

import unittest
from typing import Any

import numpy as np

from framework import core, workspace
from framework.caffe2.python import brew, cnn
from framework.caffe2.python.model_helper import ModelHelper
from framework.caffe2.python.modeling.initializers import Initializer, PseudoFP16Initializer
from framework.ops.gradient import GradientSlice

__all__ = ["LRModificationTestBase", "OptimizerTestBase"]

PERFECT = np.array([2, 6, 5, 0, 1], dtype=np.float32)


class OptimizerTestBase:
    """Convergence tests for one optimizer (not a TestCase itself; mix it into one)."""

    def _createDense(self, dtype: int = core.DataType.FLOAT) -> tuple[Any, np.ndarray, np.ndarray, np.ndarray]:
        np.random.seed(123)
        fp16 = dtype == core.DataType.FLOAT16
        data = np.random.randint(2, size=(20, PERFECT.size)).astype(np.float16 if fp16 else np.float32)
        label = np.dot(data, PERFECT)[:, np.newaxis]
        init = PseudoFP16Initializer if fp16 else Initializer
        model = ModelHelper(name="test", arg_scope={"order": "NCHW"})
        out = brew.fc(
            model, "data", "fc", PERFECT.size, 1, ("ConstantFill", {}), ("ConstantFill", {}), axis=0,
            WeightInitializer=init, BiasInitializer=init,
        )  # fmt: skip
        if fp16:
            out = model.HalfToFloat(out, out + "_fp32")
        loss = model.AveragedLoss(model.SquaredL2Distance([out, "label"]), "avg_loss")
        grad_map = model.AddGradientOperators([loss])
        self.assertIsInstance(grad_map["fc_w"], core.BlobReference)
        return model, PERFECT, data, label

    def testDense(self) -> None:
        model, perfect, data, label = self._createDense()
        optimizer = self.build_optimizer(model)
        workspace.FeedBlob("data", data[0])
        workspace.FeedBlob("label", label[0])
        workspace.RunNetOnce(model.param_init_net)
        workspace.CreateNet(model.net, True)
        for _ in range(2000):
            idx = np.random.randint(data.shape[0])
            workspace.FeedBlob("data", data[idx])
            workspace.FeedBlob("label", label[idx])
            workspace.RunNet(model.net.Proto().name)
        np.testing.assert_allclose(perfect[np.newaxis, :], workspace.FetchBlob("fc_w"), atol=1e-2)
        self.check_optimizer(optimizer)

    @unittest.skipIf(not workspace.has_gpu_support, "No gpu support")
    def testGPUDense(self, dtype: int = core.DataType.FLOAT) -> None:
        raise unittest.SkipTest("no GPU")  # pragma: no cover - has_gpu_support is always False here

    def testSparse(self) -> None:
        dup = 2  # every weight is looked up by two indices, so a row may be counted twice
        np.random.seed(123)
        data = np.random.randint(2, size=(20, PERFECT.size * dup)).astype(np.float32)
        label = np.dot(data, np.repeat(PERFECT, dup))
        model = cnn.CNNModelHelper("NCHW", name="test")
        w = model.param_init_net.ConstantFill([], "w", shape=[PERFECT.size], value=0.0)
        model.params.append(w)
        out = model.ReduceFrontSum(model.net.Gather([w, "indices"], "gather"), "sum")
        loss = model.AveragedLoss(model.SquaredL2Distance([out, "label"]), "avg_loss")
        grad_map = model.AddGradientOperators([loss])
        self.assertIsInstance(grad_map["w"], GradientSlice)
        optimizer = self.build_optimizer(model)
        workspace.CreateBlob("indices")
        workspace.CreateBlob("label")
        for indices_type in (np.int32, np.int64):
            workspace.RunNetOnce(model.param_init_net)
            workspace.CreateNet(model.net, True)
            for _ in range(2000):
                idx = np.random.randint(data.shape[0])
                indices = np.repeat(np.arange(PERFECT.size), dup)[data[idx] == 1]
                if indices.size == 0:
                    continue
                workspace.FeedBlob("indices", indices.astype(indices_type))
                workspace.FeedBlob("label", np.array(label[idx]).astype(np.float32))
                workspace.RunNet(model.net.Proto().name)
            np.testing.assert_allclose(PERFECT, workspace.FetchBlob("w"), atol=1e-2)
        self.check_optimizer(optimizer)


class LRModificationTestBase:
    """Learning-rate modifiers: global-norm gradient clipping and lr injection."""

    def _gradient_ratio_reference(self, model: Any, params: list, max_gradient_norm: float) -> float:
        total = 0.0
        for param in params:
            grad = model.param_to_grad[param]
            grad = grad.values if isinstance(grad, GradientSlice) else grad
            total += float(np.sum(np.square(workspace.FetchBlob(grad).astype(np.float64))))
        return max_gradient_norm / max(max_gradient_norm, np.sqrt(total))

    def test_global_norm_based_gradient_clipping(self) -> None:
        max_gradient_norm = 1.0
        model, _, data, label = self._createDense()
        opt = self.build_optimizer(model, max_gradient_norm=max_gradient_norm)
        params = [
            p for p in model.GetParams(top_scope=True)
            if p in model.param_to_grad and not isinstance(model.param_to_grad[p], GradientSlice)
        ]  # fmt: skip
        workspace.FeedBlob("data", data[0])
        workspace.FeedBlob("label", label[0])
        workspace.RunNetOnce(model.param_init_net)
        workspace.CreateNet(model.net, True)
        self.assertIsNotNone(opt._lr_multiplier)
        idx = np.random.randint(data.shape[0])
        workspace.FeedBlob("data", data[idx])
        workspace.FeedBlob("label", label[idx])
        workspace.RunNet(model.net.Proto().name)
        reference = self._gradient_ratio_reference(model, params, max_gradient_norm)
        norm_ratio = workspace.FetchBlob("norm_clipped_grad_update/norm_ratio")
        np.testing.assert_almost_equal(norm_ratio, reference)
        self.assertTrue(reference < 1.0, "bad test: the gradient is not scaled")

    def test_lr_injection(self) -> None:
        from framework.caffe2.python import optimizer

        model, _, data, label = self._createDense()
        opt = self.build_optimizer(model, max_gradient_norm=1, allow_lr_injection=True)
        workspace.FeedBlob("data", data[0])
        workspace.FeedBlob("label", label[0])
        workspace.RunNetOnce(model.param_init_net)
        workspace.CreateNet(model.net, True)
        self.assertIsNotNone(opt._lr_multiplier)
        self.assertEqual(optimizer.get_lr_injection(), 1)
        optimizer.set_lr_injection(0)
        self.assertEqual(optimizer.get_lr_injection(), 0)
        workspace.RunNet(model.net.Proto().name)
        self.assertEqual(workspace.FetchBlob("lr_multiplier"), 0)
