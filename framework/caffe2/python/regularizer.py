"""Regularizers of layer parameters (Caffe2's ``caffe2.python.regularizer``).

A regularizer is called as ``reg(net, param_init_net, param, grad=None)``. Those applied before the
optimizer (``apply_after_optimizer`` False) add ops computing a penalty blob, which
``LayerModelHelper`` adds to the loss; those applied after the optimizer rewrite the parameter
in place (``MaxNorm`` / ``ConstantNorm`` renormalize the rows a sparse gradient touched).

=============  =========================================================
L1Norm(l)      l * sum(|w|)             (LpNorm p=1, Scale)
L2Norm(l)      l * sum(w^2)             (LpNorm p=2, Scale; Caffe2's LpNorm p=2 is the squared norm)
MaxNorm(n)     rows touched by a sparse gradient scaled to norm <= n (SparseNormalize)
ConstantNorm   the same rows scaled to norm exactly n
=============  =========================================================
"""

from __future__ import annotations

from typing import Any

from framework import core
from framework.caffe2.python.layers.layers import LayerError

__all__ = ["ConstantNorm", "L1Norm", "L2Norm", "MaxNorm", "Regularizer"]


class Regularizer:
    """Base: subclasses define ``_run(net, param_init_net, param, grad)``."""

    def __init__(self) -> None:
        self.apply_after_optimizer = False

    def __call__(self, net: Any, param_init_net: Any, param: Any, grad: Any = None) -> Any:
        if not isinstance(param, core.BlobReference):
            raise LayerError(f"regularizer: parameter {param!r} must be a BlobReference")
        return self._run(net, param_init_net, param, grad)

    def _run(self, net: Any, param_init_net: Any, param: Any, grad: Any) -> Any:
        raise NotImplementedError(f"{type(self).__name__} does not define _run")


def _check_lambda(reg_lambda: float) -> float:
    if reg_lambda < 0:
        raise LayerError(f"factor ahead of regularization should be 0 or positive, got {reg_lambda}")
    return reg_lambda


class _LpPenalty(Regularizer):
    p = 1
    suffix = ""

    def __init__(self, reg_lambda: float) -> None:
        super().__init__()
        self.reg_lambda = _check_lambda(reg_lambda)

    def _run(self, net: Any, param_init_net: Any, param: Any, grad: Any = None) -> Any:
        out = net.NextScopedBlob(str(param) + self.suffix)
        net.LpNorm([param], [out], p=self.p)
        net.Scale([out], [out], scale=self.reg_lambda)
        return out


class L1Norm(_LpPenalty):
    p = 1
    suffix = "_l1_regularization"


class L2Norm(_LpPenalty):
    p = 2
    suffix = "_l2_regularization"


class _SparseRenorm(Regularizer):
    use_max_norm = True

    def __init__(self, norm: float = 1.0) -> None:
        super().__init__()
        self.norm = norm
        self.apply_after_optimizer = True

    def _run(self, net: Any, param_init_net: Any, param: Any, grad: Any) -> Any:
        if self.norm <= 0:
            raise LayerError(f"{type(self).__name__}: norm should be bigger than 0, got {self.norm}")
        if not isinstance(grad, core.GradientSlice):
            raise NotImplementedError(f"{type(self).__name__} is not supported for dense parameters")
        net.SparseNormalize([param, grad.indices, grad.values], [param], use_max_norm=self.use_max_norm, norm=self.norm)
        return None


class MaxNorm(_SparseRenorm):
    use_max_norm = True


class ConstantNorm(_SparseRenorm):
    use_max_norm = False
