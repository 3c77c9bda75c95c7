"""Optimizer builders (Caffe2's ``caffe2.python.optimizer``): add the update
ops of every trained parameter to ``model.net``.

Each builder adds, once per model, an int64 counter ``optimizer_iteration``
(ConstantFill 0 in the init net, ``Iter`` in the net) and a ``LearningRate``
op, then per parameter its state blobs (init net) and its update op:

=================  ============================================  ==========================
builder            update op(s)                                  state blobs
=================  ============================================  ==========================
build_sgd          WeightedSum(param, ONE, grad, lr) (lr < 0);   ``<p>_momentum``
                   MomentumSGDUpdate if momentum > 0 (lr > 0);
                   sparse: ScatterWeightedSum / SparseMomentumSGDUpdate
build_adagrad      Adagrad / SparseAdagrad (lr < 0); rowWise:    ``<p>_squared_sum`` (rowWise sparse:
                   RowWiseSparseAdagrad for GradientSlices       ``<p>_avg_squared_sum``, one per row)
build_adam         Adam / SparseAdam (lr < 0); rowWise:          ``<p>_first_moment``, ``<p>_second_moment``
                   RowWiseSparseAdam for GradientSlices          (rowWise sparse: ``<p>_avg_second_moment``)
build_rms_prop     RmsProp + WeightedSum (lr < 0)                ``<p>_mean_squares``, ``<p>_momentum``
=================  ============================================  ==========================

As in Caffe2, ``LearningRate`` gets ``base_lr = -base_learning_rate`` ("we
descend"), except for MomentumSGDUpdate, which subtracts its step.

>>> # model = ModelHelper(...); ...; model.AddGradientOperators([loss])
>>> # build_sgd(model, base_learning_rate=0.1, policy="step", stepsize=100, gamma=0.9, momentum=0.9)
"""

from __future__ import annotations

from typing import Any

from framework.errors import FrameworkError
from framework.ops.gradient import GradientSlice
from framework.proto.framework_pb2 import TensorProto

ITERATION_NAME = "optimizer_iteration"

__all__ = [
    "AdagradOptimizer",
    "AdamOptimizer",
    "ITERATION_NAME",
    "Optimizer",
    "RmsPropOptimizer",
    "SgdOptimizer",
    "WeightDecayBuilder",
    "add_weight_decay",
    "build_adagrad",
    "build_adam",
    "build_rms_prop",
    "build_sgd",
]


def _defined(net: Any, blob: str) -> bool:
    is_def = getattr(net, "BlobIsDefined", None)
    if is_def is not None:
        return bool(is_def(blob))
    return any(blob in op.output for op in net.Proto().op)


def _ref(blob: str) -> Any:
    from framework import core

    ref = getattr(core, "BlobReference", None)
    return ref(blob) if ref is not None else blob


class Optimizer:
    """Base: ``opt(net, param_init_net, param_info)`` adds the update of one parameter."""

    _counts: dict[str, int] = {}

    def __init__(self) -> None:
        cls = type(self).__name__
        self._instance = Optimizer._counts.get(cls, 0)
        Optimizer._counts[cls] = self._instance + 1
        self._lr_blobs: dict[tuple, Any] = {}
        self.aux_local: list[Any] = []
        self.aux_shared: list[Any] = []

    def __call__(self, net: Any, param_init_net: Any, param: Any, grad: Any = None) -> None:
        from framework.model_helper import ParameterInfo

        if grad is not None:
            param = ParameterInfo(None, param, grad=grad)
        if param.grad is None:
            raise FrameworkError(f"optimizer: parameter '{param}' has no gradient")
        self._run(net, param_init_net, param)

    def _run(self, net: Any, param_init_net: Any, info: Any) -> None:
        raise NotImplementedError

    def iteration(self, net: Any, param_init_net: Any, iter_val: int = 0) -> Any:
        """The shared ``optimizer_iteration`` counter (created and stepped once per model)."""
        if not _defined(param_init_net, ITERATION_NAME):
            it = param_init_net.ConstantFill([], ITERATION_NAME, shape=[1], value=iter_val, dtype=TensorProto.INT64)
            net.Iter(it, it)
            return it
        return _ref(ITERATION_NAME)

    def build_lr(
        self, net: Any, param_init_net: Any, base_learning_rate: float, policy: str = "fixed", **kwargs: Any
    ) -> tuple[Any, Any]:
        """``LearningRate(optimizer_iteration) -> lr`` with ``base_lr = -base_learning_rate``; one per optimizer."""
        it = self.iteration(net, param_init_net)
        key = (base_learning_rate, policy, tuple(sorted(kwargs.items())))
        lr = self._lr_blobs.get(key)
        if lr is None:
            name = f"{type(self).__name__}_{self._instance}_lr_{len(self._lr_blobs)}".replace("_lr_0", "_lr")
            lr = net.LearningRate([it], name, base_lr=-float(base_learning_rate), policy=policy, **kwargs)
            self._lr_blobs[key] = lr
        return lr, it

    def get_cpu_blob_name(self, base_str: str, node_name: str = "") -> str:
        """Caffe2's name for this optimizer's CPU-side blob: ``<Class>_<instance>_<base><node>_cpu``."""
        return f"{type(self).__name__}_{self._instance}_{base_str}{node_name}_cpu"

    def get_gpu_blob_name(self, base_str: str, gpu_id: int, node_name: str) -> str:
        """Caffe2's name for this optimizer's blob on GPU ``gpu_id``: ``<Class>_<instance>_<base><node>_gpu<id>``
        (the blob lives on the CPU here, as everything does)."""
        return f"{type(self).__name__}_{self._instance}_{base_str}{node_name}_gpu{int(gpu_id)}"

    @staticmethod
    def one(param_init_net: Any) -> Any:
        """The shared float constant ``ONE_0_0`` = [1.0]."""
        name = "ONE_0_0"
        if not _defined(param_init_net, name):
            return param_init_net.ConstantFill([], name, shape=[1], value=1.0)
        return _ref(name)


class SgdOptimizer(Optimizer):
    """Plain SGD (WeightedSum) or momentum SGD (MomentumSGDUpdate, Nesterov by default as Caffe2)."""

    def __init__(
        self,
        base_learning_rate: float = 0.01,
        policy: str = "fixed",
        momentum: float = 0.0,
        nesterov: bool = True,
        **kwargs: Any,
    ) -> None:
        super().__init__()
        self.base_learning_rate = base_learning_rate
        self.policy = policy
        self.momentum = momentum
        self.nesterov = nesterov
        self.init_kwargs = kwargs

    def _run(self, net: Any, param_init_net: Any, info: Any) -> None:
        param, grad = info.blob, info.grad
        if self.base_learning_rate == 0:
            return
        if self.base_learning_rate < 0:
            raise FrameworkError(f"build_sgd: base_learning_rate must be positive, got {self.base_learning_rate}")
        sign = -1 if self.momentum else 1  # MomentumSGDUpdate subtracts; WeightedSum adds
        lr, _ = self.build_lr(net, param_init_net, self.base_learning_rate * sign, self.policy, **self.init_kwargs)
        one = self.one(param_init_net)
        self.aux_shared.append(one)
        if isinstance(grad, GradientSlice):
            if self.momentum:  # Caffe2: the rows' momentum update, in place on the table
                m = param_init_net.ConstantFill([param], f"{param}_momentum", value=0.0)
                self.aux_local.append(m)
                net.SparseMomentumSGDUpdate(
                    [grad.values, m, lr, param, grad.indices],
                    [grad.values, m, param],
                    momentum=float(self.momentum),
                    nesterov=int(self.nesterov),
                )
            else:
                net.ScatterWeightedSum([param, one, grad.indices, grad.values, lr], param)
        elif self.momentum > 0:
            m = param_init_net.ConstantFill([param], f"{param}_momentum", value=0.0)
            self.aux_local.append(m)
            net.MomentumSGDUpdate(
                [grad, m, lr, param], [grad, m, param], momentum=float(self.momentum), nesterov=int(self.nesterov)
            )
        else:
            net.WeightedSum([param, one, grad, lr], param)


class WeightDecayBuilder(Optimizer):
    """``grad += weight_decay * param`` (WeightedSum in place on the gradient)."""

    def __init__(self, weight_decay: float) -> None:
        super().__init__()
        self.weight_decay = weight_decay

    def _run(self, net: Any, param_init_net: Any, info: Any) -> None:
        if isinstance(info.grad, GradientSlice):
            raise FrameworkError("weight decay does not support sparse gradients")
        one = self.one(param_init_net)
        wd_name = "wd_0_0" if self.weight_decay == 0.0 else f"wd_0_0_{self.weight_decay:g}"
        wd = (
            param_init_net.ConstantFill([], wd_name, shape=[1], value=float(self.weight_decay))
            if not _defined(param_init_net, wd_name)
            else _ref(wd_name)
        )
        net.WeightedSum([info.grad, one, info.blob, wd], info.grad)


def _rows_of(param_init_net: Any, param: Any) -> int:
    """The first dimension of ``param`` as the init net creates it (shape inference, as Caffe2's optimizers)."""
    from framework.net.inference import infer_net

    spec = infer_net(param_init_net.Proto()).get(str(param))
    if spec is None or not spec.shape or spec.shape[0] is None:
        raise FrameworkError(f"optimizer: cannot infer the number of rows of '{param}' from the init net")
    return int(spec.shape[0])


class AdagradOptimizer(Optimizer):
    """Adagrad; with a sparse gradient (GradientSlice) SparseAdagrad, or with ``rowWise`` RowWiseSparseAdagrad
    (one accumulator per row, ``<p>_avg_squared_sum``). Caffe2 refuses ``rowWise`` for dense gradients;
    here they get plain Adagrad, so one builder trains a model's dense layers and its embedding tables."""

    def __init__(
        self,
        alpha: float = 0.01,
        epsilon: float = 1e-4,
        decay: float = 1.0,
        weight_decay: float = 0.0,
        policy: str = "fixed",
        rowWise: bool = False,  # noqa: N803 - Caffe2's argument name
        **kwargs: Any,
    ) -> None:
        super().__init__()
        self.alpha, self.epsilon, self.decay, self.policy, self.init_kwargs = alpha, epsilon, decay, policy, kwargs
        self.weight_decay = weight_decay  # Caffe2: passed to the (Sparse)Adagrad op
        self.rowWise = rowWise

    def _run(self, net: Any, param_init_net: Any, info: Any) -> None:
        param, grad = info.blob, info.grad
        if self.alpha <= 0:
            return
        lr, _ = self.build_lr(net, param_init_net, self.alpha, self.policy, **self.init_kwargs)
        wd = {"weight_decay": self.weight_decay} if self.weight_decay else {}
        if self.rowWise and isinstance(grad, GradientSlice):
            rows = _rows_of(param_init_net, param)
            h = param_init_net.ConstantFill([], f"{param}_avg_squared_sum", shape=[rows], value=0.0)
            self.aux_local.append(h)
            net.RowWiseSparseAdagrad([param, h, grad.indices, grad.values, lr], [param, h], epsilon=self.epsilon, **wd)
            return
        h = param_init_net.ConstantFill([param], f"{param}_squared_sum", value=0.0)
        self.aux_local.append(h)
        if isinstance(grad, GradientSlice):
            net.SparseAdagrad([param, h, grad.indices, grad.values, lr], [param, h], epsilon=self.epsilon, **wd)
        else:
            kw = {"decay": self.decay} if self.decay != 1.0 else {}
            net.Adagrad([param, h, grad, lr], [param, h], epsilon=self.epsilon, **kw, **wd)


class AdamOptimizer(Optimizer):
    def __init__(
        self,
        alpha: float = 0.001,
        beta1: float = 0.9,
        beta2: float = 0.999,
        epsilon: float = 1e-8,
        policy: str = "fixed",
        rowWise: bool = False,  # noqa: N803 - Caffe2's argument name
        **kwargs: Any,
    ) -> None:
        super().__init__()
        self.alpha, self.beta1, self.beta2, self.epsilon = alpha, beta1, beta2, epsilon
        self.policy, self.init_kwargs = policy, kwargs
        self.rowWise = rowWise

    def _run(self, net: Any, param_init_net: Any, info: Any) -> None:
        param, grad = info.blob, info.grad
        if self.alpha <= 0:
            return
        lr, it = self.build_lr(net, param_init_net, self.alpha, self.policy, **self.init_kwargs)
        m1 = param_init_net.ConstantFill([param], f"{param}_first_moment", value=0.0)
        if self.rowWise and isinstance(grad, GradientSlice):  # Caffe2: one second moment per row
            m2 = param_init_net.ConstantFill(
                [], f"{param}_avg_second_moment", shape=[_rows_of(param_init_net, param)], value=0.0
            )
            self.aux_shared.append(it)
            self.aux_local += [m1, m2]
            kw = {"beta1": self.beta1, "beta2": self.beta2, "epsilon": self.epsilon}
            net.RowWiseSparseAdam([param, m1, m2, grad.indices, grad.values, lr, it], [param, m1, m2], **kw)
            return
        m2 = param_init_net.ConstantFill([param], f"{param}_second_moment", value=0.0)
        self.aux_shared.append(it)
        self.aux_local += [m1, m2]
        kw = {"beta1": self.beta1, "beta2": self.beta2, "epsilon": self.epsilon}
        if isinstance(grad, GradientSlice):
            net.SparseAdam([param, m1, m2, grad.indices, grad.values, lr, it], [param, m1, m2], **kw)
        else:
            net.Adam([param, m1, m2, grad, lr, it], [param, m1, m2], **kw)


class RmsPropOptimizer(Optimizer):
    """RmsProp step (rate 1) then ``param += lr * step`` with a negative ``lr``."""

    def __init__(
        self,
        alpha: float = 0.01,
        decay: float = 0.9,
        momentum: float = 0.0,
        epsilon: float = 1e-5,
        policy: str = "fixed",
        **kwargs: Any,
    ) -> None:
        super().__init__()
        self.alpha, self.decay, self.momentum, self.epsilon = alpha, decay, momentum, epsilon
        self.policy, self.init_kwargs = policy, kwargs

    def _run(self, net: Any, param_init_net: Any, info: Any) -> None:
        param, grad = info.blob, info.grad
        if isinstance(grad, GradientSlice):
            raise FrameworkError("build_rms_prop: sparse gradients are not supported")
        if self.alpha <= 0:
            return
        lr, _ = self.build_lr(net, param_init_net, self.alpha, self.policy, **self.init_kwargs)
        ms = param_init_net.ConstantFill([param], f"{param}_mean_squares", value=0.0)
        mom = param_init_net.ConstantFill([param], f"{param}_momentum", value=0.0)
        one = self.one(param_init_net)
        self.aux_local += [ms, mom]
        net.RmsProp(
            [grad, ms, mom, one],
            [grad, ms, mom],
            decay=self.decay,
            momentum=self.momentum,
            epsilon=self.epsilon,
        )
        net.WeightedSum([param, one, grad, lr], param)


def _build(model: Any, optimizer: Optimizer, weights_only: bool = False) -> Optimizer:
    if not model.gradient_ops_added and not model.param_to_grad:
        raise FrameworkError(
            f"model '{model.name}': no gradients yet; call model.AddGradientOperators([loss]) before the optimizer"
        )
    model.Validate()
    weights = {str(w) for w in model.weights}
    for info in model.GetOptimizationParamInfo():
        if weights_only and str(info.blob) not in weights:
            continue
        optimizer(model.net, model.param_init_net, info)
    return optimizer


def add_weight_decay(model: Any, weight_decay: float) -> Optimizer | None:
    """``grad += weight_decay * w`` for every weight (biases excluded)."""
    if not weight_decay:
        return None
    return _build(model, WeightDecayBuilder(weight_decay), weights_only=True)


def build_sgd(
    model: Any,
    base_learning_rate: float,
    policy: str = "fixed",
    momentum: float = 0.0,
    nesterov: bool = True,
    weight_decay: float = 0.0,
    **kwargs: Any,
) -> Optimizer:
    """SGD on every parameter with a gradient. ``kwargs`` go to LearningRate (stepsize, gamma...)."""
    add_weight_decay(model, weight_decay)
    return _build(model, SgdOptimizer(base_learning_rate, policy, momentum, nesterov, **kwargs))


def build_adagrad(model: Any, base_learning_rate: float, weight_decay: float = 0.0, **kwargs: Any) -> Optimizer:
    add_weight_decay(model, weight_decay)
    return _build(model, AdagradOptimizer(alpha=base_learning_rate, **kwargs))


def build_adam(model: Any, base_learning_rate: float, weight_decay: float = 0.0, **kwargs: Any) -> Optimizer:
    add_weight_decay(model, weight_decay)
    return _build(model, AdamOptimizer(alpha=base_learning_rate, **kwargs))


def build_rms_prop(model: Any, base_learning_rate: float, weight_decay: float = 0.0, **kwargs: Any) -> Optimizer:
    add_weight_decay(model, weight_decay)
    return _build(model, RmsPropOptimizer(alpha=base_learning_rate, **kwargs))


def reset_optimizer_instance_count() -> None:
    """Restart the per-class instance numbers used in blob names (Caffe2's function of this name)."""
    Optimizer._counts.clear()
