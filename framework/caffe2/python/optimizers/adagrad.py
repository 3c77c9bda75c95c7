"""Adaptive per-coordinate optimizers: Adagrad (dense, sparse, row-wise), WnGrad, Adadelta, FTRL and
group-lasso FTRL. Each keeps its state next to the parameter (``<p>_squared_sum``, ``<p>_moment``,
``<p>_ftrl_nz``...) and picks the Sparse* op for a GradientSlice gradient, as Caffe2 does.
"""

from __future__ import annotations

from typing import Any

from framework.caffe2.python.optimizers.base import Optimizer
from framework.errors import FrameworkError
from framework.ops.gradient import GradientSlice

__all__ = ["AdadeltaOptimizer", "AdagradOptimizer", "FtrlOptimizer", "GFtrlOptimizer", "WngradOptimizer"]


def row_state(param_init_net: Any, param: Any, name: str, **fill: Any) -> Any:
    """A zero vector (float, or as ``fill`` says: ``dtype=``, ``value=``) with one entry per row of ``param``:
    sized from the init net's shape inference when it knows the shape, else at run time (``Shape`` -> first
    dim -> ``ConstantFill(input_as_shape)``)."""
    from framework.net.inference import infer_net

    fill.setdefault("value", 0.0)
    spec = infer_net(param_init_net.Proto()).get(str(param))
    if spec is not None and spec.shape and spec.shape[0] is not None:
        return param_init_net.ConstantFill([], name, shape=[int(spec.shape[0])], **fill)
    shape = f"{param}_shape"
    if not param_init_net.BlobIsDefined(shape):
        param_init_net.Shape(param, shape)
    rows = f"{shape}_numrows"
    if not param_init_net.BlobIsDefined(rows):
        param_init_net.Slice([shape], rows, starts=[0], ends=[1])
    return param_init_net.ConstantFill([rows], name, input_as_shape=1, **fill)


def _effective_outputs(param: Any, outputs: list[Any], effective_lr: bool, effective_lr_and_update: bool) -> list:
    if effective_lr_and_update:
        return outputs + [f"{param}_effective_lr", f"{param}_update"]
    if effective_lr:
        return outputs + [f"{param}_effective_lr"]
    return outputs


class AdagradOptimizer(Optimizer):
    """Adagrad (``decay`` < 1 makes the squared sum a running average), SparseAdagrad for GradientSlices,
    RowWiseSparseAdagrad with ``rowWise`` (one accumulator per row, ``<p>_avg_squared_sum``).

    Departure: Caffe2 refuses ``rowWise`` for a dense gradient; here the dense parameters of such a model
    get plain Adagrad, so one builder trains both the embedding tables and the dense layers.
    ``weight_decay`` (Caffe2 2020) is passed to the update op. ``counter_halflife`` > 0 (Caffe2 2020) keeps,
    for a sparse gradient, a decayed count of each row's updates: ``<p>_update_counter`` (double) and
    ``<p>_prev_update_iter`` (int64), one entry per row, updated by RowWiseCounter after each sparse update
    (local auxiliary parameters; the iteration counter becomes a shared one).
    """

    def __init__(
        self,
        alpha: float = 0.01,
        epsilon: float = 1e-4,
        decay: float = 1,
        weight_decay: float = 0.0,
        policy: str = "fixed",
        sparse_dedup_aggregator: str | None = None,
        rowWise: bool = False,
        engine: str = "",
        lars: float | None = None,
        output_effective_lr: bool = False,
        output_effective_lr_and_update: bool = False,
        counter_halflife: int = -1,
        **kwargs: Any,
    ) -> None:
        super().__init__()
        self.alpha, self.epsilon, self.decay, self.weight_decay = alpha, epsilon, decay, weight_decay
        self.counter_halflife = counter_halflife
        self.policy = policy
        self.sparse_dedup_aggregator = sparse_dedup_aggregator
        self.rowWise = rowWise
        self.engine = engine
        self.lars = lars
        self.output_effective_lr = output_effective_lr
        self.output_effective_lr_and_update = output_effective_lr_and_update
        self.init_kwargs = kwargs

    def _run(self, net: Any, param_init_net: Any, param_info: Any) -> None:
        param, grad = param_info.blob, param_info.grad
        if self.alpha <= 0:
            return
        self.add_lars(net, param_init_net, param, grad, self.lars)
        lr, iteration = self.build_lr(
            net, param_init_net, base_learning_rate=self.alpha, policy=self.policy, **self.init_kwargs
        )
        if self.counter_halflife > 0:
            self._aux_params.shared.append(iteration)
        sparse = isinstance(grad, GradientSlice)
        row_wise = self.rowWise and sparse
        if row_wise:
            state = row_state(param_init_net, param, f"{param}_avg_squared_sum")
        else:
            state = param_init_net.ConstantFill([param], f"{param}_squared_sum", value=0.0)
        self._aux_params.local.append(state)
        if self.counter_halflife > 0:
            from framework.proto.framework_pb2 import TensorProto

            counter = row_state(param_init_net, param, f"{param}_update_counter", dtype=TensorProto.DOUBLE)
            prev_iter = row_state(param_init_net, param, f"{param}_prev_update_iter", value=0, dtype=TensorProto.INT64)
            self._aux_params.local.extend([counter, prev_iter])
        kw: dict[str, Any] = {"epsilon": self.epsilon, "engine": self.engine}
        if self.weight_decay:
            kw["weight_decay"] = float(self.weight_decay)
        if sparse:
            if self.decay != 1:
                raise FrameworkError(f"SparseAdagrad ('{param}'): decay is not implemented and must be 1")
            grad = self.dedup(net, self.sparse_dedup_aggregator, grad)
            op = "RowWiseSparseAdagrad" if row_wise else "SparseAdagrad"
            getattr(net, op)([param, state, grad.indices, grad.values, lr], [param, state], **kw)
            if self.counter_halflife > 0:
                net.RowWiseCounter(
                    [prev_iter, counter, grad.indices, iteration],
                    [prev_iter, counter],
                    counter_halflife=self.counter_halflife,
                )
            return
        outputs = _effective_outputs(
            param, [param, state], self.output_effective_lr, self.output_effective_lr_and_update
        )
        net.Adagrad([param, state, grad, lr], outputs, decay=float(self.decay), **kw)

    def scale_learning_rate(self, scale: float) -> None:
        self.alpha *= scale


class WngradOptimizer(Optimizer):
    """WnGrad (Caffe2 2020): one scalar moment ``<p>_moment`` (initialized to ``moment_init``) per parameter."""

    def __init__(
        self,
        alpha: float = 1.0,
        epsilon: float = 1e-9,
        policy: str = "fixed",
        sparse_dedup_aggregator: str | None = None,
        engine: str = "",
        moment_init: float = 100.0,
        lars: float | None = None,
        output_effective_lr: bool = False,
        output_effective_lr_and_update: bool = False,
        **kwargs: Any,
    ) -> None:
        super().__init__()
        self.alpha, self.epsilon, self.policy = alpha, epsilon, policy
        self.sparse_dedup_aggregator = sparse_dedup_aggregator
        self.engine = engine
        self.moment_init = moment_init
        self.lars = lars
        self.output_effective_lr = output_effective_lr
        self.output_effective_lr_and_update = output_effective_lr_and_update
        self.init_kwargs = kwargs

    def _run(self, net: Any, param_init_net: Any, param_info: Any) -> None:
        param, grad = param_info.blob, param_info.grad
        if self.alpha <= 0:
            return
        self.add_lars(net, param_init_net, param, grad, self.lars)
        lr, _ = self.build_lr(
            net, param_init_net, base_learning_rate=self.alpha, policy=self.policy, **self.init_kwargs
        )
        moment = param_init_net.ConstantFill([], f"{param}_moment", shape=[1], value=float(self.moment_init))
        self._aux_params.local.append(moment)
        if isinstance(grad, GradientSlice):
            grad = self.dedup(net, self.sparse_dedup_aggregator, grad)
            net.SparseWngrad(
                [param, moment, grad.indices, grad.values, lr], [param, moment], epsilon=self.epsilon,
                engine=self.engine,
            )  # fmt: skip
            return
        outputs = _effective_outputs(
            param, [param, moment], self.output_effective_lr, self.output_effective_lr_and_update
        )
        net.Wngrad([param, moment, grad, lr], outputs, epsilon=self.epsilon, engine=self.engine)

    def scale_learning_rate(self, scale: float) -> None:
        self.alpha *= scale


class AdadeltaOptimizer(Optimizer):
    """Adadelta (Caffe2 2020): running averages of squared gradients (``<p>_squared_moment``) and of squared
    updates (``<p>_squared_moment_update``), decayed by ``decay``."""

    def __init__(
        self,
        alpha: float = 0.01,
        epsilon: float = 1e-4,
        decay: float = 0.95,
        policy: str = "fixed",
        sparse_dedup_aggregator: str | None = None,
        engine: str = "",
        **kwargs: Any,
    ) -> None:
        super().__init__()
        self.alpha, self.epsilon, self.decay, self.policy = alpha, epsilon, decay, policy
        self.sparse_dedup_aggregator = sparse_dedup_aggregator
        self.engine = engine
        self.init_kwargs = kwargs

    def _run(self, net: Any, param_init_net: Any, param_info: Any) -> None:
        param, grad = param_info.blob, param_info.grad
        if self.alpha <= 0:
            return
        lr, _ = self.build_lr(
            net, param_init_net, base_learning_rate=self.alpha, policy=self.policy, **self.init_kwargs
        )
        moment = param_init_net.ConstantFill([param], f"{param}_squared_moment", value=0.0)
        update = param_init_net.ConstantFill([param], f"{param}_squared_moment_update", value=0.0)
        self._aux_params.local.extend([moment, update])
        kw = {"epsilon": self.epsilon, "decay": self.decay, "engine": self.engine}
        if isinstance(grad, GradientSlice):
            grad = self.dedup(net, self.sparse_dedup_aggregator, grad)
            net.SparseAdadelta([param, moment, update, grad.indices, grad.values, lr], [param, moment, update], **kw)
        else:
            net.Adadelta([param, moment, update, grad, lr], [param, moment, update], **kw)

    def scale_learning_rate(self, scale: float) -> None:
        self.alpha *= scale


class FtrlOptimizer(Optimizer):
    """FTRL-proximal: per coordinate ``(n, z)`` in ``<p>_ftrl_nz`` (the parameter's shape plus a last dim of 2).
    It needs no learning-rate op: ``alpha`` and ``beta`` are arguments of ``Ftrl``/``SparseFtrl``."""

    _state = "ftrl_nz"

    def __init__(
        self,
        alpha: float = 0.01,
        beta: float = 1e-4,
        lambda1: float = 0,
        lambda2: float = 0,
        sparse_dedup_aggregator: str | None = None,
        engine: str = "",
    ) -> None:
        super().__init__()
        self.alpha, self.beta, self.lambda1, self.lambda2 = alpha, beta, lambda1, lambda2
        self.sparse_dedup_aggregator = sparse_dedup_aggregator
        self.engine = engine or ""

    def _args(self) -> dict[str, Any]:
        return {
            "engine": self.engine,
            "alpha": float(self.alpha),
            "beta": float(self.beta),
            "lambda1": float(self.lambda1),
            "lambda2": float(self.lambda2),
        }

    def _run(self, net: Any, param_init_net: Any, param_info: Any) -> None:
        param, grad = param_info.blob, param_info.grad
        if self.alpha <= 0:
            return
        nz = param_init_net.ConstantFill([param], f"{param}_{self._state}", extra_shape=[2], value=0.0)
        self._aux_params.local.append(nz)
        self._update(net, param, nz, grad)

    def _update(self, net: Any, param: Any, nz: Any, grad: Any) -> None:
        if isinstance(grad, GradientSlice):
            grad = self.dedup(net, self.sparse_dedup_aggregator, grad)
            net.SparseFtrl([param, nz, grad.indices, grad.values], [param, nz], **self._args())
        else:
            net.Ftrl([param, nz, grad], [param, nz], **self._args())

    def scale_learning_rate(self, scale: float) -> None:
        self.alpha *= scale


class GFtrlOptimizer(FtrlOptimizer):
    """Group-lasso FTRL (Caffe2 2020): the ``GFtrl`` op, state ``<p>_gftrl_nz``; dense gradients only."""

    _state = "gftrl_nz"

    def _update(self, net: Any, param: Any, nz: Any, grad: Any) -> None:
        if isinstance(grad, GradientSlice):
            raise FrameworkError(f"GFtrl: '{param}' has a sparse gradient, which GFtrl does not support")
        net.GFtrl([param, nz, grad], [param, nz], **self._args())
