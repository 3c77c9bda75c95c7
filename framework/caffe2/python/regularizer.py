"""Regularizers of layer parameters (Caffe2's ``caffe2.python.regularizer``, both trees).

``reg(net, param_init_net, param, grad=None, by=None)`` runs one stage: ``by="on_loss"`` adds ops
computing a penalty blob (returned; ``LayerModelHelper`` adds it to the loss), ``by=
"after_optimizer"`` rewrites the parameter after its update (returns None). A stage a regularizer
does not have returns None. ``by=None`` is the older tree's call: the stage its
``apply_after_optimizer`` names (and a subclass's own ``_run`` if it defines one).

==============================  ==============================================================
L1Norm(l)                       l * sum|w|                                  (LpNorm p=1)
L2Norm(l)                       l * sum w^2        (Caffe2's LpNorm p=2 is the squared norm)
ElasticNet(l1, l2)              l1 * sum|w| + l2 * sum w^2
L1NormTrimmed(l, k)             l * (sum|w| - the k largest |w| of each row)  (trimmed lasso; TopK
                                works on the last axis)
ElasticNetL1NormTrimmed         l2 * sum w^2 + l1 * trimmed sum|w|
FCInputLpNorm(l, p=0.5)         l * (sum_j ||w[:, j]||_2^p)^(1/p)   (group norm over inputs)
GroupL1Norm(l, groups)          sum_g l sqrt(|g|) ||w[:, g]||_2    (groups: sizes of column groups)
LogBarrier(l, policy, options)  -discount * sum log(max(w, eps)) on the loss (discount a learning
                                rate schedule from -l); after the update w is clipped to (0, inf)
BoundedGradientProjection       after the update w is clipped to [lb, ub] (open ends by eps)
MaxNorm(n) / ConstantNorm(n)    after the update, rows a sparse gradient touched scaled to norm
                                <= n / exactly n (SparseNormalize); dense parameters: error
==============================  ==============================================================
"""

from __future__ import annotations

from typing import Any

import numpy as np

from framework import core
from framework.caffe2.python import utils
from framework.caffe2.python.layers.layers import LayerError

__all__ = [
    "BoundedGradientProjection", "ConstantNorm", "ElasticNet", "ElasticNetL1NormTrimmed", "FCInputLpNorm",
    "GroupL1Norm", "L1Norm", "L1NormTrimmed", "L2Norm", "LogBarrier", "MaxNorm", "RegularizationBy", "Regularizer",
]  # fmt: skip


class RegularizationBy:
    AFTER_OPTIMIZER = "after_optimizer"
    ON_LOSS = "on_loss"


_STAGES = (RegularizationBy.AFTER_OPTIMIZER, RegularizationBy.ON_LOSS)


class Regularizer:
    """Base (see module doc); subclasses define ``_run_on_loss`` and/or ``_run_after_optimizer``."""

    def __init__(self) -> None:
        self.kEpsilon = 1e-9
        self.apply_after_optimizer = False

    def __call__(self, net: Any, param_init_net: Any, param: Any, grad: Any = None, by: str | None = None) -> Any:
        if not isinstance(param, core.BlobReference):
            raise LayerError(f"regularizer: parameter {param!r} must be a BlobReference")
        own_stage = RegularizationBy.AFTER_OPTIMIZER if self.apply_after_optimizer else RegularizationBy.ON_LOSS
        by = own_stage if by is None else by
        if by not in _STAGES:
            raise LayerError(f"regularizer {type(self).__name__} called with invalid by={by!r}, not in {_STAGES}")
        if type(self)._run is not Regularizer._run:  # written for the older tree: one stage
            return self._run(net, param_init_net, param, grad) if by == own_stage else None
        return getattr(self, "_run_" + by)(net, param_init_net, param, grad)

    def _run(self, net: Any, param_init_net: Any, param: Any, grad: Any) -> Any:
        """The older tree's single entry point; subclasses written for it override this."""
        raise NotImplementedError

    def _run_on_loss(self, net: Any, param_init_net: Any, param: Any, grad: Any = None) -> Any:
        return None

    def _run_after_optimizer(self, net: Any, param_init_net: Any, param: Any, grad: Any) -> Any:
        return None

    def _feature_grouping(self, param: Any, net: Any) -> Any:
        return None

    def _ensure_clipped(
        self, net: Any, param: Any, grad: Any = None, min: float | None = None, max: float | None = None,
        open_range: bool = False, left_open: bool = False, right_open: bool = False,
    ) -> None:  # fmt: skip
        """EnsureClipped ``param`` to [min, max] (an open end moved in by kEpsilon), on the rows of a
        sparse gradient only when ``grad`` is a GradientSlice."""
        if min is not None and (open_range or left_open):
            min += self.kEpsilon
        if max is not None and (open_range or right_open):
            max -= self.kEpsilon
        inputs = [param, grad.indices, grad.values] if isinstance(grad, core.GradientSlice) else [param]
        kwargs = {k: v for k, v in (("min", min), ("max", max)) if v is not None}
        net.EnsureClipped(inputs, [param], **kwargs)


def _nonneg(name: str, value: float) -> float:
    if value < 0:
        raise LayerError(f"{name}: factor ahead of regularization should be 0 or positive, got {value}")
    return value


def _scaled_lp(net: Any, param: Any, suffix: str, p: int, scale: float, out: Any = None) -> Any:
    out = out or net.NextScopedBlob(str(param) + suffix)
    net.LpNorm([param], [out], p=p)
    net.Scale([out], [out], scale=scale)
    return out


def _trimmed_l1(net: Any, param: Any, k: int, out: Any) -> Any:
    """sum|w| minus its k largest terms, into ``out``."""
    absolute = net.Abs([param], [net.NextScopedBlob("abs")])
    total = net.SumElements([absolute], [net.NextScopedBlob("sum_abs")], average=False)
    top, _, _ = net.TopK(
        [absolute], [net.NextScopedBlob("topk"), net.NextScopedBlob("id"), net.NextScopedBlob("flat_id")], k=k
    )
    top_sum = net.SumElements([top], [net.NextScopedBlob("topk_sum")], average=False)
    net.Sub([total, top_sum], [out])
    return out


def _check_k(k: Any) -> int:
    if not isinstance(k, int) or k < 1:
        raise LayerError(f"k should be an integer >= 1 (the number kept after selection), got {k!r}")
    return k


class L1Norm(Regularizer):
    def __init__(self, reg_lambda: float) -> None:
        super().__init__()
        self.reg_lambda = _nonneg("L1Norm", reg_lambda)

    def _run_on_loss(self, net: Any, param_init_net: Any, param: Any, grad: Any = None) -> Any:
        return _scaled_lp(net, param, "_l1_regularization", 1, self.reg_lambda)


class L2Norm(Regularizer):
    def __init__(self, reg_lambda: float) -> None:
        super().__init__()
        self.reg_lambda = _nonneg("L2Norm", reg_lambda)

    def _run_on_loss(self, net: Any, param_init_net: Any, param: Any, grad: Any = None) -> Any:
        return _scaled_lp(net, param, "_l2_regularization", 2, self.reg_lambda)


class ElasticNet(Regularizer):
    def __init__(self, l1: float, l2: float) -> None:
        super().__init__()
        self.l1, self.l2 = l1, l2

    def _run_on_loss(self, net: Any, param_init_net: Any, param: Any, grad: Any = None) -> Any:
        out = net.NextScopedBlob(str(param) + "_elastic_net_regularization")
        l2 = _scaled_lp(net, param, "", 2, self.l2, net.NextScopedBlob(str(param) + "_l2_blob"))
        l1 = _scaled_lp(net, param, "", 1, self.l1, net.NextScopedBlob(str(param) + "_l1_blob"))
        net.Add([l1, l2], [out])
        return out


class L1NormTrimmed(Regularizer):
    """The trimmed lasso (Bertsimas et al., arXiv:1708.04527)."""

    def __init__(self, reg_lambda: float, k: int) -> None:
        super().__init__()
        self.reg_lambda = _nonneg("L1NormTrimmed", reg_lambda)
        self.k = _check_k(k)

    def _run_on_loss(self, net: Any, param_init_net: Any, param: Any, grad: Any = None) -> Any:
        out = _trimmed_l1(net, param, self.k, net.NextScopedBlob(str(param) + "_l1_trimmed_regularization"))
        net.Scale([out], [out], scale=self.reg_lambda)
        return out


class ElasticNetL1NormTrimmed(Regularizer):
    def __init__(self, l1: float, l2: float, k: int) -> None:
        super().__init__()
        self.l1, self.l2, self.k = l1, l2, k

    def _run_on_loss(self, net: Any, param_init_net: Any, param: Any, grad: Any = None) -> Any:
        out = net.NextScopedBlob(str(param) + "_elastic_net_l1_trimmed_regularization")
        l2 = _scaled_lp(net, param, "", 2, self.l2, net.NextScopedBlob(str(param) + "_l2_blob"))
        l1 = _trimmed_l1(net, param, self.k, net.NextScopedBlob(str(param) + "_l1_blob"))
        net.Scale([l1], [l1], scale=self.l1)
        net.Add([l1, l2], [out])
        return out


class FCInputLpNorm(Regularizer):
    def __init__(self, reg_lambda: float, p_value: float = 0.5) -> None:
        super().__init__()
        self.reg_lambda = _nonneg("FCInputLpNorm", reg_lambda)
        if p_value < 0:
            raise LayerError(f"FCInputLpNorm: p_value should be 0 or positive, got {p_value}")
        self.p_value = p_value

    def _feature_grouping(self, param: Any, net: Any) -> Any:
        """The L2 norm of each input's weights (column of an FC weight)."""
        squared = net.Mul([param, param], [net.NextScopedBlob("param_mul")])
        reduced = net.ReduceFrontSum([squared], [net.NextScopedBlob("param_reduced")])
        return net.Pow([reduced], [net.NextScopedBlob("grouped_feature_weight_vec")], exponent=0.5)

    def _run_on_loss(self, net: Any, param_init_net: Any, param: Any, grad: Any = None) -> Any:
        out = net.NextScopedBlob(str(param) + "_dense_feature_regularization")
        grouped = self._feature_grouping(param, net)
        raised = net.Pow([grouped], [net.NextScopedBlob("lp_vec_raised")], exponent=self.p_value)
        summed = net.ReduceFrontSum([raised], [net.NextScopedBlob("lp_vec_summed")])
        lp = net.Pow([summed], [net.NextScopedBlob("lp_vec")], exponent=1 / self.p_value)
        net.Scale([lp], [out], scale=self.reg_lambda)
        return out


class GroupL1Norm(Regularizer):
    """Group sparse regularization (Scardapane et al., Neurocomputing 241, 2017) of a weight of
    shape (output_dim, sum(groups)); ``stabilizing_val`` is added before the square root."""

    def __init__(self, reg_lambda: float, groups: list[int], stabilizing_val: float = 0) -> None:
        super().__init__()
        self.reg_lambda = _nonneg("GroupL1Norm", reg_lambda)
        if not isinstance(groups, list):
            raise LayerError("GroupL1Norm: groups needs to be a list")
        self.groups = groups
        self.stabilizing_val = stabilizing_val

    def _run_on_loss(self, net: Any, param_init_net: Any, param: Any, grad: Any = None) -> Any:
        squared = net.Sqr(param)
        column_sums = net.ReduceSum(squared, axes=[0], keepdims=0)
        group_sizes = net.GivenTensorIntFill([], 1, shape=[len(self.groups)], values=self.groups)
        sums = net.LengthsSum([column_sums, group_sizes])
        if self.stabilizing_val:
            stab = net.ConstantFill([], 1, value=self.stabilizing_val)
            net.Add([sums, stab], [sums], broadcast=1)
        norms = net.Sqrt(sums)
        weights = net.GivenTensorFill([], shape=[len(self.groups)], values=np.sqrt(self.groups) * self.reg_lambda)
        scaled = net.Mul([norms, weights], [net.NextScopedBlob("normalized_l2_norm_scaled")])
        return net.LpNorm(scaled, [net.NextScopedBlob("group_l1_norm")], p=1)


class LogBarrier(Regularizer):
    """Log barrier (Nocedal & Wright, Numerical Optimization, ch. 19) keeping ``w`` positive."""

    def __init__(self, reg_lambda: float, discount_policy: str = "inv", discount_options: Any = None) -> None:
        super().__init__()
        if reg_lambda <= 0:
            raise LayerError(f"LogBarrier: reg_lambda should be positive, got {reg_lambda}")
        self.reg_lambda = reg_lambda
        self.discount_policy = discount_policy
        self.discount_options = discount_options or {"gamma": 1.0, "power": 1.0}

    def _run_on_loss(self, net: Any, param_init_net: Any, param: Any, grad: Any = None) -> Any:
        iteration = utils.BuildUniqueMutexIter(param_init_net, net)
        discount = net.NextScopedBlob(str(param) + "_log_barrier_discount")
        net.LearningRate(
            [iteration], [discount], base_lr=-self.reg_lambda, policy=self.discount_policy, **self.discount_options
        )
        non_neg = net.NextScopedBlob(str(param) + "_non_neg")
        net.Clip([param], [non_neg], min=self.kEpsilon)
        log = net.NextScopedBlob(str(param) + "_log")
        net.Log([non_neg], [log])
        log_sum = net.NextScopedBlob(str(param) + "_log_sum")
        net.SumElements([log], [log_sum])
        out = net.NextScopedBlob(str(param) + "_log_barrier")
        net.Mul([log_sum, discount], [out], broadcast=1)
        return out

    def _run_after_optimizer(self, net: Any, param_init_net: Any, param: Any, grad: Any) -> Any:
        self._ensure_clipped(net, param, grad, min=0, open_range=True)


class BoundedGradientProjection(Regularizer):
    """Projection onto a box after each update (Nocedal & Wright, ch. 16)."""

    def __init__(
        self, lb: float | None = None, ub: float | None = None, left_open: bool = False, right_open: bool = False,
        epsilon: float | None = None,
    ) -> None:  # fmt: skip
        super().__init__()
        lb = float(lb) if lb is not None else None
        ub = float(ub) if ub is not None else None
        epsilon = float(epsilon) if epsilon is not None else self.kEpsilon
        if epsilon <= 0:
            raise LayerError(f"BoundedGradientProjection with invalid eps={epsilon}")
        if lb is not None and ub is not None:
            if lb + (epsilon if left_open else 0.0) > ub - (epsilon if right_open else 0.0):
                raise LayerError(
                    f"BoundedGradientProjection with invalid {'(' if left_open else '['}lb={lb}, ub={ub}"
                    f"{')' if right_open else ']'}, eps={epsilon}"
                )
        self.left_open, self.right_open = left_open, right_open
        self.kEpsilon = epsilon
        self.lb, self.ub = lb, ub
        self.apply_after_optimizer = True

    def _run_after_optimizer(self, net: Any, param_init_net: Any, param: Any, grad: Any) -> Any:
        self._ensure_clipped(
            net, param, grad, min=self.lb, max=self.ub, left_open=self.left_open, right_open=self.right_open
        )


class _SparseRenorm(Regularizer):
    use_max_norm = True

    def __init__(self, norm: float = 1.0) -> None:
        super().__init__()
        self.norm = norm
        self.apply_after_optimizer = True

    def _run_after_optimizer(self, net: Any, param_init_net: Any, param: Any, grad: Any) -> Any:
        if self.norm <= 0:
            raise LayerError(f"{type(self).__name__}: norm should be bigger than 0, got {self.norm}")
        if not isinstance(grad, core.GradientSlice):
            raise NotImplementedError(f"{type(self).__name__} is not supported for dense parameters")
        net.SparseNormalize([param, grad.indices], [param], use_max_norm=self.use_max_norm, norm=self.norm)


class MaxNorm(_SparseRenorm):
    use_max_norm = True


class ConstantNorm(_SparseRenorm):
    use_max_norm = False
