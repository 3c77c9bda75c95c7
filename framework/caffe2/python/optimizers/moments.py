"""Moment-based optimizers: Adam (dense, sparse, row-wise), DecayAdagrad, RmsProp and YellowFin.

Adam and DecayAdagrad (Adagrad's squared sum with an averaged first moment) read the shared
``optimizer_iteration`` counter (their bias correction), so the counter is one of their shared auxiliary
parameters. RmsProp follows Caffe2: the ``RmsProp`` op (lr 1) writes the step into
``<p>_grad_o``, which ``MomentumSGDUpdate`` applies with the learning rate. YellowFin keeps its tuner state
(moment, curvature window, averages of the gradient and its square, lr and mu, five scalars) per parameter.
"""

from __future__ import annotations

from typing import Any

from framework.caffe2.python.optimizers.adagrad import row_state
from framework.caffe2.python.optimizers.base import Optimizer, device_constant
from framework.errors import FrameworkError
from framework.ops.gradient import GradientSlice

__all__ = ["AdamOptimizer", "DecayAdagradOptimizer", "RmsPropOptimizer", "YellowFinOptimizer"]


class AdamOptimizer(Optimizer):
    """Adam / SparseAdam; with ``rowWise`` and a GradientSlice, RowWiseSparseAdam (one second moment per row,
    ``<p>_avg_second_moment``). Departure, as for Adagrad: ``rowWise`` on a dense gradient gives plain Adam."""

    def __init__(
        self,
        alpha: float = 0.001,
        beta1: float = 0.9,
        beta2: float = 0.999,
        epsilon: float = 1e-8,
        policy: str = "fixed",
        sparse_dedup_aggregator: str | None = None,
        rowWise: bool = False,
        engine: str = "",
        **kwargs: Any,
    ) -> None:
        super().__init__()
        self.alpha, self.beta1, self.beta2, self.epsilon = alpha, beta1, beta2, epsilon
        self.policy = policy
        self.sparse_dedup_aggregator = sparse_dedup_aggregator
        self.rowWise = rowWise
        self.engine = engine
        self.init_kwargs = kwargs

    def _run(self, net: Any, param_init_net: Any, param_info: Any) -> None:
        param, grad = param_info.blob, param_info.grad
        if self.alpha <= 0:
            return
        lr, iteration = self.build_lr(
            net, param_init_net, base_learning_rate=self.alpha, policy=self.policy, **self.init_kwargs
        )
        m1 = param_init_net.ConstantFill([param], f"{param}_first_moment", value=0.0)
        sparse = isinstance(grad, GradientSlice)
        row_wise = self.rowWise and sparse
        if row_wise:
            m2 = row_state(param_init_net, param, f"{param}_avg_second_moment")
        else:
            m2 = param_init_net.ConstantFill([param], f"{param}_second_moment", value=0.0)
        self._aux_params.shared.append(iteration)
        self._aux_params.local.extend([m1, m2])
        kw = {"beta1": self.beta1, "beta2": self.beta2, "epsilon": self.epsilon}
        if sparse:
            grad = self.dedup(net, self.sparse_dedup_aggregator, grad)
            op = "RowWiseSparseAdam" if row_wise else "SparseAdam"
            getattr(net, op)([param, m1, m2, grad.indices, grad.values, lr, iteration], [param, m1, m2], **kw)
        else:
            net.Adam([param, m1, m2, grad, lr, iteration], [param, m1, m2], **kw)

    def scale_learning_rate(self, scale: float) -> None:
        self.alpha *= scale


class RmsPropOptimizer(Optimizer):
    def __init__(
        self,
        alpha: float = 0.01,
        decay: float = 0.9,
        momentum: float = 0.0,
        epsilon: float = 1e-5,
        policy: str = "fixed",
        engine: str = "",
        **kwargs: Any,
    ) -> None:
        super().__init__()
        self.alpha, self.decay, self.momentum, self.epsilon = alpha, decay, momentum, epsilon
        self.policy = policy
        self.engine = engine
        self.init_kwargs = kwargs

    def _run(self, net: Any, param_init_net: Any, param_info: Any) -> None:
        param, grad = param_info.blob, param_info.grad
        if self.alpha <= 0:
            raise FrameworkError(f"RmsPropOptimizer: alpha must be positive, got {self.alpha}")
        if isinstance(grad, GradientSlice):
            raise FrameworkError(f"RmsPropOptimizer: '{param}' has a sparse gradient, which it does not support")
        one = device_constant(param_init_net, "ONE", 1.0)
        lr, _ = self.build_lr(
            net, param_init_net, base_learning_rate=-self.alpha, policy=self.policy, **self.init_kwargs
        )
        grad_o = param_init_net.ConstantFill([param], f"{param}_grad_o", value=0.0)
        ms = param_init_net.ConstantFill([param], f"{param}_mean_squares", value=0.0)
        mom = param_init_net.ConstantFill([param], f"{param}_momentum", value=0.0)
        self._aux_params.local.extend([ms, mom])
        net.RmsProp(
            [grad, ms, mom, one], [grad_o, ms, mom], decay=self.decay, momentum=self.momentum,
            epsilon=self.epsilon, engine=self.engine,
        )  # fmt: skip
        net.MomentumSGDUpdate([grad_o, mom, lr, param], [grad_o, mom, param])

    def scale_learning_rate(self, scale: float) -> None:
        self.alpha *= scale


class YellowFinOptimizer(Optimizer):
    """YellowFin (an automatic tuner for momentum SGD): separate learning rate and momentum per parameter,
    tuned by the ``YellowFin`` op from running curvature and variance estimates. Dense gradients only."""

    SCALARS_MEMORY_SIZE = 5

    def __init__(
        self,
        alpha: float = 0.1,
        mu: float = 0.0,
        beta: float = 0.999,
        curv_win_width: int = 20,
        zero_debias: bool = True,
        epsilon: float = 0.1**6,
        policy: str = "fixed",
        sparse_dedup_aggregator: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__()
        self.alpha, self.mu, self.beta = alpha, mu, beta
        self.curv_win_width = curv_win_width
        self.zero_debias = zero_debias
        self.epsilon = epsilon
        self.policy = policy
        self.sparse_dedup_aggregator = sparse_dedup_aggregator
        self.init_kwargs = kwargs

    def _run(self, net: Any, param_init_net: Any, param_info: Any) -> None:
        param, grad = param_info.blob, param_info.grad
        if self.alpha <= 0:
            raise FrameworkError(f"YellowFinOptimizer: alpha must be positive, got {self.alpha}")
        if isinstance(grad, GradientSlice):
            raise FrameworkError(f"YellowFin: '{param}' has a sparse gradient, which it does not support")
        init = param_init_net
        moment = init.ConstantFill([param], f"{param}_moment", value=0.0)
        curv_win = init.ConstantFill([], f"{param}_curv_win", shape=[self.curv_win_width], value=0.0)
        g_avg = init.ConstantFill([param], f"{param}_g_avg", value=0.0)
        g2_avg = init.ConstantFill([param], f"{param}_g2_avg", value=0.0)
        lr_avg = init.ConstantFill([], f"{param}_lr_avg", shape=[1], value=float(self.alpha))
        mu_avg = init.ConstantFill([], f"{param}_mu_avg", shape=[1], value=float(self.mu))
        scalars = init.ConstantFill([], f"{param}_scalars_memory", shape=[self.SCALARS_MEMORY_SIZE], value=0.0)
        iteration = self.build_iteration(net, param_init_net)
        self._aux_params.shared.append(iteration)
        state = [param, moment, lr_avg, mu_avg, curv_win, g_avg, g2_avg, scalars]
        self._aux_params.local.extend(state[1:])
        net.YellowFin(
            state + [grad, iteration], state, beta=self.beta, epsilon=self.epsilon,
            curv_win_width=self.curv_win_width, zero_debias=int(self.zero_debias),
        )  # fmt: skip

    def scale_learning_rate(self, scale: float) -> None:
        self.alpha *= scale


class DecayAdagradOptimizer(Optimizer):
    """DecayAdagrad (Caffe2 2020): the ``DecayAdagrad`` op on dense gradients, with state
    ``<p>_first_mo1ment`` (Caffe2's spelling, kept so checkpoints match) and ``<p>_second_moment``, and the
    shared iteration counter; a GradientSlice gets plain SparseAdagrad on ``<p>_squared_sum``, as Caffe2.

    Departure: ``ema_options`` (Caffe2's EMA of the parameters) is refused, the EMA op is not ported."""

    def __init__(
        self,
        alpha: float = 0.01,
        beta1: float = 0.0,
        beta2: float = 0.999,
        epsilon: float = 0.1,
        weight_decay: float = 0.0,
        ema_options: dict | None = None,
        bias_correction_first: bool = True,
        policy: str = "fixed",
        engine: str = "",
        **kwargs: Any,
    ) -> None:
        super().__init__()
        if ema_options:
            raise FrameworkError("DecayAdagradOptimizer: ema_options needs Caffe2's EMA op, which is not ported")
        self.alpha, self.beta1, self.beta2, self.epsilon = alpha, beta1, beta2, epsilon
        self.weight_decay = weight_decay
        self.bias_correction_first = bias_correction_first
        self.policy = policy
        self.engine = engine
        self.init_kwargs = kwargs

    def _run(self, net: Any, param_init_net: Any, param_info: Any) -> None:
        param, grad = param_info.blob, param_info.grad
        if self.alpha <= 0:
            return
        lr, iteration = self.build_lr(
            net, param_init_net, base_learning_rate=self.alpha, policy=self.policy, **self.init_kwargs
        )
        if isinstance(grad, GradientSlice):
            squared_sum = param_init_net.ConstantFill([param], f"{param}_squared_sum", value=0.0)
            self._aux_params.local.append(squared_sum)
            net.SparseAdagrad(
                [param, squared_sum, grad.indices, grad.values, lr], [param, squared_sum], epsilon=self.epsilon
            )
            return
        m1 = param_init_net.ConstantFill([param], f"{param}_first_mo1ment", value=0.0)
        m2 = param_init_net.ConstantFill([param], f"{param}_second_moment", value=0.0)
        self._aux_params.shared.append(iteration)
        self._aux_params.local.extend([m1, m2])
        net.DecayAdagrad(
            [param, m1, m2, grad, lr, iteration],
            [param, m1, m2],
            beta1=self.beta1,
            beta2=self.beta2,
            epsilon=self.epsilon,
            weight_decay=self.weight_decay,
            bias_correction_first=self.bias_correction_first,
        )

    def scale_learning_rate(self, scale: float) -> None:
        self.alpha *= scale
