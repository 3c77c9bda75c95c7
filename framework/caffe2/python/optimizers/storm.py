"""STORM (Caffe2 2020's StormOptimizer): a momentum-based variance-reduced update with an adaptive step.

Per parameter: ``<p>_moment`` (zeros like the parameter) and ``<p>_grad_sq_sum`` (one value,
``grad_sq_init``), both local auxiliary parameters; dense gradients run the ``Storm`` op, sparse ones
(deduplicated by ``sparse_dedup_aggregator``) ``SparseStorm``, with ``momentum`` and ``beta``. ``lr`` is
the base learning rate of the ``policy`` schedule; ``lars`` adds a LARS multiplier for dense gradients.
"""

from __future__ import annotations

from typing import Any

from framework.caffe2.python.optimizers.base import Optimizer
from framework.ops.gradient import GradientSlice


class StormOptimizer(Optimizer):
    def __init__(
        self, lr: float = 0.1, momentum: float = 10.0, beta: float = 0.1, grad_sq_init: float = 0.01,
        policy: str = "fixed", sparse_dedup_aggregator: str | None = None, lars: float | None = None, **kwargs: Any,
    ) -> None:  # fmt: skip
        super().__init__()
        self.lr, self.momentum, self.beta, self.grad_sq_init = lr, momentum, beta, grad_sq_init
        self.policy, self.sparse_dedup_aggregator, self.lars = policy, sparse_dedup_aggregator, lars
        self.init_kwargs = kwargs

    def _run(self, net: Any, param_init_net: Any, param_info: Any) -> None:
        param, grad = param_info.blob, param_info.grad
        if self.lr <= 0:
            return
        self.add_lars(net, param_init_net, param, grad, self.lars)  # clears the multiplier; dense gradients only
        lr, _ = self.build_lr(net, param_init_net, base_learning_rate=self.lr, policy=self.policy, **self.init_kwargs)
        moment = param_init_net.ConstantFill(param, f"{param}_moment", value=0.0)
        self._aux_params.local.append(moment)
        grad_sq_sum = param_init_net.ConstantFill([], f"{param}_grad_sq_sum", shape=[1], value=self.grad_sq_init)
        self._aux_params.local.append(grad_sq_sum)
        if isinstance(grad, GradientSlice):
            grad = self.dedup(net, self.sparse_dedup_aggregator, grad)
            net.SparseStorm(
                [param, moment, grad_sq_sum, grad.values, grad.indices, lr], [param, moment, grad_sq_sum],
                momentum=self.momentum, beta=self.beta,
            )  # fmt: skip
        else:
            net.Storm(
                [param, moment, grad_sq_sum, grad, lr], [param, moment, grad_sq_sum], momentum=self.momentum,
                beta=self.beta,
            )  # fmt: skip

    def scale_learning_rate(self, scale: float) -> None:
        self.lr *= scale
