"""``BatchLRLoss``: logistic-regression loss of a batch.

Input record: ``label`` and ``logit`` (and optionally ``weight``; ``prediction`` for the JSD term).
Ops: label cast to float32 and expanded to ``(batch, 1)``; with ``pos_label_target`` /
``neg_label_target`` other than 1/0 the label is smoothed (StumpFunc at 0.5);
SigmoidCrossEntropyWithLogits(logit, label); with ``jsd_weight > 0`` (or ``homotopy_weighting``)
the loss is ``xent_weight * xent + jsd_weight * BernoulliJSD(prediction, label)``, the weights
either constants (``1 - jsd_weight``, ``jsd_weight``) or, with homotopy weighting, moved from
(1, 0) by ``LearningRate(policy="inv", gamma=1e-6, power=0.1)`` of an atomic counter; a ``weight``
field multiplies it (with no gradient through the weight); then AveragedLoss (``average_loss``) or
ReduceFrontSum. The layer is excluded from prediction."""

from __future__ import annotations

from typing import Any

import numpy as np

from framework import core, schema
from framework.caffe2.python.layers.layers import LayerError, ModelLayer
from framework.caffe2.python.layers.tags import Tags

__all__ = ["BatchLRLoss"]


class BatchLRLoss(ModelLayer):
    def __init__(
        self, model: Any, input_record: Any, name: str = "batch_lr_loss", average_loss: bool = True,
        jsd_weight: float = 0.0, pos_label_target: float = 1.0, neg_label_target: float = 0.0,
        homotopy_weighting: bool = False, **kwargs: Any,
    ) -> None:  # fmt: skip
        super().__init__(model, name, input_record, **kwargs)
        self.average_loss = average_loss
        required = schema.Struct(("label", schema.Scalar()), ("logit", schema.Scalar()))
        if not schema.is_schema_subset(required, input_record):
            raise LayerError(f"BatchLRLoss: input record needs label and logit, got {input_record.field_names()}")
        if not 0 <= jsd_weight <= 1:
            raise LayerError(f"BatchLRLoss: jsd_weight must be in [0, 1], got {jsd_weight}")
        self.jsd_fuse = False
        if jsd_weight > 0 or homotopy_weighting:
            if "prediction" not in input_record:
                raise LayerError("BatchLRLoss: the JSD term needs input_record.prediction")
            self.init_weight(jsd_weight, homotopy_weighting)
            self.jsd_fuse = True
        self.homotopy_weighting = homotopy_weighting
        if not (0 <= neg_label_target <= pos_label_target <= 1):
            raise LayerError(
                f"BatchLRLoss: need 0 <= neg_label_target <= pos_label_target <= 1, "
                f"got {neg_label_target}, {pos_label_target}"
            )
        self.pos_label_target = pos_label_target
        self.neg_label_target = neg_label_target
        self.tags.update([Tags.EXCLUDE_FROM_PREDICTION])
        self.output_schema = schema.Scalar(np.float32, self.get_next_blob_reference("output"))

    def init_weight(self, jsd_weight: float, homotopy_weighting: bool) -> None:
        if not homotopy_weighting:
            self.jsd_weight = self.model.add_global_constant(f"{self.name}_jsd_weight", jsd_weight)
            self.xent_weight = self.model.add_global_constant(f"{self.name}_xent_weight", 1.0 - jsd_weight)
            return
        no_optim = self.model.NoOptim
        self.mutex = self.create_param(f"{self.name}_mutex", None, ("CreateMutex",), no_optim)
        self.counter = self.create_param(
            f"{self.name}_counter", [1], ("ConstantFill", {"value": 0, "dtype": core.DataType.INT64}), no_optim
        )
        self.xent_weight = self.create_param(
            f"{self.name}_xent_weight", [1], ("ConstantFill", {"value": 1.0, "dtype": core.DataType.FLOAT}), no_optim
        )
        self.jsd_weight = self.create_param(
            f"{self.name}_jsd_weight", [1], ("ConstantFill", {"value": 0.0, "dtype": core.DataType.FLOAT}), no_optim
        )

    def update_weight(self, net: Any) -> tuple[Any, Any]:
        """Step the counter; xent weight = (1 + 1e-6 * iter)^-0.1, jsd weight = 1 - xent weight."""
        net.AtomicIter([self.mutex, self.counter], [self.counter])
        net.LearningRate([self.counter], [self.xent_weight], base_lr=1.0, policy="inv", gamma=1e-6, power=0.1)
        net.Sub([self.model.global_constants["ONE"], self.xent_weight], [self.jsd_weight])
        return self.xent_weight, self.jsd_weight

    def add_ops(self, net: Any) -> None:
        label = net.Cast(self.input_record.label(), net.NextScopedBlob("label_float32"), to=core.DataType.FLOAT)
        label = net.ExpandDims(label, net.NextScopedBlob("expanded_label"), dims=[1])
        if self.pos_label_target != 1.0 or self.neg_label_target != 0.0:
            label = net.StumpFunc(
                label, net.NextScopedBlob("smoothed_label"), threshold=0.5, low_value=self.neg_label_target,
                high_value=self.pos_label_target,
            )  # fmt: skip
        loss = net.SigmoidCrossEntropyWithLogits(
            [self.input_record.logit(), label], net.NextScopedBlob("cross_entropy")
        )
        if self.jsd_fuse:
            jsd = net.BernoulliJSD([self.input_record.prediction(), label], net.NextScopedBlob("jsd"))
            if self.homotopy_weighting:
                self.update_weight(net)
            loss = net.WeightedSum([loss, self.xent_weight, jsd, self.jsd_weight], net.NextScopedBlob("loss"))
        if "weight" in self.input_record.fields:
            weight = self.input_record.weight()
            if self.input_record.weight.field_type().base != np.float32:
                weight = net.Cast(weight, weight + "_float32", to=core.DataType.FLOAT)
            weight = net.StopGradient([weight], [net.NextScopedBlob("weight_stop_gradient")])
            loss = net.Mul([loss, weight], net.NextScopedBlob("weighted_cross_entropy"))
        if self.average_loss:
            net.AveragedLoss(loss, self.output_schema.field_blobs())
        else:
            net.ReduceFrontSum(loss, self.output_schema.field_blobs())
