"""``BatchLRLoss``: logistic-regression loss of a batch.

Input record: ``label`` and ``logit`` (and optionally ``weight``; ``prediction`` for the JSD term).
Ops: label cast to float32 and expanded to ``(batch, 1)``; with ``pos_label_target`` /
``neg_label_target`` other than 1/0 the label is smoothed (StumpFunc at 0.5);
SigmoidCrossEntropyWithLogits(logit, label); with ``jsd_weight > 0`` (or ``homotopy_weighting``)
the loss is ``xent_weight * xent + jsd_weight * BernoulliJSD(prediction, label)``, the weights
either constants (``1 - jsd_weight``, ``jsd_weight``) or, with homotopy weighting, moved from
(1, 0) by ``LearningRate(policy="inv", gamma=1e-6, power=0.1)`` of an atomic counter; a ``weight``
field multiplies it (with no gradient through the weight); then AveragedLoss (``average_loss``) or
ReduceFrontSum. The later tree's options: ``focal_gamma`` multiplies the cross entropy by the focal
factor ``(y + p - 2 y p)^gamma`` of ``prediction`` (optionally without gradient through it); a
``log_variance`` field s gives ``0.5 (exp(-s) loss + uncertainty_penalty s)``; ``log_D_trick`` /
``unjoined_lr_loss`` are passed to the op. As in Caffe2, a ``(batch, 1)`` logit gives a ``(batch,)``
cross entropy while the focal factor and the log-variance terms are ``(batch, 1)``: their products
broadcast to ``(batch, batch)`` before the average. The layer is excluded from prediction."""

from __future__ import annotations

from typing import Any

import numpy as np

from framework import core
from framework.caffe2.python import schema
from framework.caffe2.python.layers.layers import LayerError, ModelLayer
from framework.caffe2.python.layers.tags import Tags

__all__ = ["BatchLRLoss"]


class BatchLRLoss(ModelLayer):
    def __init__(
        self, model: Any, input_record: Any, name: str = "batch_lr_loss", average_loss: bool = True,
        jsd_weight: float = 0.0, pos_label_target: float = 1.0, neg_label_target: float = 0.0,
        homotopy_weighting: bool = False, log_D_trick: bool = False, unjoined_lr_loss: bool = False,
        uncertainty_penalty: float = 1.0, focal_gamma: float = 0.0, stop_grad_in_focal_factor: bool = False,
        **kwargs: Any,
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
        if log_D_trick and unjoined_lr_loss:
            raise LayerError("BatchLRLoss: log_D_trick and unjoined_lr_loss exclude each other")
        self.log_D_trick = log_D_trick
        self.unjoined_lr_loss = unjoined_lr_loss
        if uncertainty_penalty < 0:
            raise LayerError(f"BatchLRLoss: uncertainty_penalty must be >= 0, got {uncertainty_penalty}")
        self.uncertainty_penalty = uncertainty_penalty
        self.focal_gamma = focal_gamma
        self.stop_grad_in_focal_factor = stop_grad_in_focal_factor
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
            [self.input_record.logit(), label], net.NextScopedBlob("cross_entropy"), log_D_trick=self.log_D_trick,
            unjoined_lr_loss=self.unjoined_lr_loss,
        )  # fmt: skip
        if self.focal_gamma != 0:
            label = net.StopGradient([label], [net.NextScopedBlob("label_stop_gradient")])
            loss = net.Mul([loss, self._focal_factor(net, label)], net.NextScopedBlob("focallossxent"))
        if self.jsd_fuse:
            jsd = net.BernoulliJSD([self.input_record.prediction(), label], net.NextScopedBlob("jsd"))
            if self.homotopy_weighting:
                self.update_weight(net)
            loss = net.WeightedSum([loss, self.xent_weight, jsd, self.jsd_weight], net.NextScopedBlob("loss"))
        if "log_variance" in self.input_record.fields:
            loss = self._with_uncertainty(net, loss)
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

    def _focal_factor(self, net: Any, label: Any) -> Any:
        """``(y (1 - p) + p (1 - y))^gamma`` = ``(y + p - 2 y p)^gamma`` of ``prediction`` p."""
        p = self.input_record.prediction()
        y_plus_p = net.Add([p, label], net.NextScopedBlob("y_plus_p"))
        yp = net.Mul([p, label], net.NextScopedBlob("yp"))
        two_yp = net.Scale(yp, net.NextScopedBlob("two_yp"), scale=2.0)
        base = net.Sub([y_plus_p, two_yp], net.NextScopedBlob("y_plus_p_sub_two_yp"))
        factor = net.Pow(base, net.NextScopedBlob("y_plus_p_sub_two_yp_power"), exponent=float(self.focal_gamma))
        if self.stop_grad_in_focal_factor is True:
            factor = net.StopGradient([factor], [net.NextScopedBlob("focal_factor_stop_gradient")])
        return factor

    def _with_uncertainty(self, net: Any, loss: Any) -> Any:
        """``0.5 (exp(-s) loss + penalty s)`` with the learned ``log_variance`` s (exp's argument
        clipped at 88 against overflow)."""
        s = net.ExpandDims(self.input_record.log_variance(), net.NextScopedBlob("expanded_log_variance"), dims=[1])
        neg = net.Negative([s], net.NextScopedBlob("neg_log_variance"))
        neg = net.Clip([neg], net.NextScopedBlob("clipped_neg_log_variance"), max=88.0)
        scaled = net.Mul([net.Exp([neg], net.NextScopedBlob("exp_neg_log_variance")), loss],
                         net.NextScopedBlob("exp_neg_log_variance_loss"))  # fmt: skip
        penalty = net.Scale(s, net.NextScopedBlob("penalized_unceratinty"), scale=float(self.uncertainty_penalty))
        total = net.Add([scaled, penalty], net.NextScopedBlob("loss"))
        return net.Scale(total, net.NextScopedBlob("loss"), scale=0.5)
