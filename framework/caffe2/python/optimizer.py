"""Optimizer builders (Caffe2's ``caffe2.python.optimizer``): add the update ops of every trained parameter
of a model to ``model.net`` and their state to ``model.param_init_net``.

=========================  =====================================================================
builder                    update op(s) (sparse gradients: the Sparse*/RowWise* variant)
=========================  =====================================================================
build_sgd                  WeightedSum; MomentumSGDUpdate with ``momentum``; ``lars`` scales lr
build_multi_precision_sgd  MomentumSGDUpdate on the fp32 master copy of fp16 parameters
build_fp16_sgd             momentum SGD with weight decay on fp16 parameters (CPU ops)
build_adagrad              Adagrad / SparseAdagrad / RowWiseSparseAdagrad (``rowWise``)
build_wngrad, build_adadelta, build_ftrl, build_gftrl, build_adam, build_yellowfin, build_rms_prop
=========================  =====================================================================

Every builder takes ``max_gradient_norm`` (clip by the global norm of all gradients: the ratio
``clip / max(clip, norm)``, blob ``norm_clipped_grad_update/norm_ratio``, multiplies every learning rate)
and ``allow_lr_injection`` (a multiplier fed at run time: ``set_lr_injection``). A parameter given its
own optimizer by ``optimizer_context.UseOptimizer`` is updated by that one. Every update runs on the
device of its parameter (``get_param_device``).

>>> # model = ModelHelper(...); ...; model.AddGradientOperators([loss])
>>> # build_sgd(model, base_learning_rate=0.1, policy="step", stepsize=100, gamma=0.9, momentum=0.9)
"""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.caffe2.python.optimizers.adagrad import (
    AdadeltaOptimizer,
    AdagradOptimizer,
    FtrlOptimizer,
    GFtrlOptimizer,
    WngradOptimizer,
)
from framework.caffe2.python.optimizers.base import (
    LEARNING_RATE_INJECTION,
    OPTIMIZER_ITERATION_NAME,
    AuxOptimizerParams,
    Optimizer,
    optimizer_instance_count,
)
from framework.caffe2.python.optimizers.moments import (
    AdamOptimizer,
    DecayAdagradOptimizer,
    RmsPropOptimizer,
    YellowFinOptimizer,
)
from framework.caffe2.python.optimizers.sgd import (
    FP16SgdOptimizer,
    MultiPrecisionSgdOptimizer,
    SgdOptimizer,
    WeightDecayBuilder,
)
from framework.caffe2.python.optimizers.storm import StormOptimizer
from framework.errors import FrameworkError
from framework.ops.gradient import GradientSlice

# Caffe2's private names, used by its tests and scripts.
_OPTIMIZER_ITERATION_NAME = ITERATION_NAME = OPTIMIZER_ITERATION_NAME
_LEARNING_RATE_INJECTION = LEARNING_RATE_INJECTION
_optimizer_instance_count = optimizer_instance_count

__all__ = [
    "AdadeltaOptimizer",
    "AdagradOptimizer",
    "AdamOptimizer",
    "AuxOptimizerParams",
    "DecayAdagradOptimizer",
    "FP16SgdOptimizer",
    "FtrlOptimizer",
    "GFtrlOptimizer",
    "ITERATION_NAME",
    "MultiPrecisionSgdOptimizer",
    "Optimizer",
    "RmsPropOptimizer",
    "SgdOptimizer",
    "WeightDecayBuilder",
    "WngradOptimizer",
    "StormOptimizer",
    "build_storm",
    "YellowFinOptimizer",
    "add_weight_decay",
    "build_decay_adagrad",
    "build_adadelta",
    "build_adagrad",
    "build_adam",
    "build_fp16_sgd",
    "build_ftrl",
    "build_gftrl",
    "build_multi_precision_sgd",
    "build_rms_prop",
    "build_sgd",
    "build_wngrad",
    "build_yellowfin",
    "get_lr_injection",
    "get_param_device",
    "reset_optimizer_instance_count",
    "set_lr_injection",
]


def _get_param_to_device(model: Any) -> dict[str, Any]:
    """Every blob the model's nets produce, mapped to the DeviceOption of the op producing it."""
    from framework import core

    mapping = core.InferBlobDevices(model.net)
    mapping.update(core.InferBlobDevices(model.param_init_net))
    return mapping


def get_param_device(
    param_name: Any, grad: Any, param_to_device: dict | None = None, default_device: Any = None
) -> Any:
    """The DeviceOption a parameter's update runs on: ``param_to_device[param]``, else that of its gradient
    (the values or indices of a GradientSlice), else ``default_device``; FrameworkError when none is known."""
    param_to_device = param_to_device or {}
    device = default_device
    if str(param_name) in param_to_device:
        device = param_to_device[str(param_name)]
    elif isinstance(grad, GradientSlice):
        for blob in (grad.values, grad.indices):
            if str(blob) in param_to_device:
                device = param_to_device[str(blob)]
                break
    elif str(grad) in param_to_device:
        device = param_to_device[str(grad)]
    if device is None:
        raise FrameworkError(f"cannot infer the device of '{param_name}': no op creates it")
    return device


def get_lr_injection() -> Any:
    """The current learning-rate injection multiplier (a model built with ``allow_lr_injection=True``)."""
    from framework import workspace

    return workspace.FetchBlob(LEARNING_RATE_INJECTION)


def set_lr_injection(lr_injection_value: float) -> None:
    """Multiply every learning rate of models built with ``allow_lr_injection=True`` by this value."""
    from framework import workspace

    workspace.FeedBlob(LEARNING_RATE_INJECTION, np.array([float(lr_injection_value)], dtype=np.float32))


def _calc_norm_ratio(model: Any, params: list, name_scope: str, param_to_device: dict, max_gradient_norm: float) -> Any:
    """``clip / max(clip, global_norm)`` over the gradients of ``params`` (blob ``<name_scope>/norm_ratio``)."""
    from framework import core

    with core.NameScope(name_scope):
        sums = []
        for i, info in enumerate(params):
            with core.DeviceScope(get_param_device(str(info.blob), info.grad, param_to_device)):
                grad = info.grad.values if isinstance(info.grad, GradientSlice) else info.grad
                sq = model.net.SumSqrElements(grad, f"grad_{i}_squared_sum")
                sums.append(model.net.EnsureCPUOutput(sq))
        with core.DeviceScope(core.DeviceOption(0)):
            total = model.net.Sum(sums, "grad_squared_full_sum")
            global_norm = model.net.Pow(total, "global_norm", exponent=0.5)
            clip_norm = model.param_init_net.ConstantFill([], "clip_norm", shape=[], value=float(max_gradient_norm))
            max_norm = model.net.Max([global_norm, clip_norm], "max_norm")
            return model.net.Div([clip_norm, max_norm], "norm_ratio")


def _build(
    model: Any,
    optimizer: Optimizer,
    weights_only: bool = False,
    use_param_info_optim: bool = True,
    max_gradient_norm: float | None = None,
    allow_lr_injection: bool = False,
) -> Optimizer:
    if not model.gradient_ops_added and not model.param_to_grad:
        raise FrameworkError(
            f"model '{model.name}': no gradients yet; call model.AddGradientOperators([loss]) before the optimizer"
        )
    from framework import core

    param_to_device = _get_param_to_device(model)
    model.Validate()
    weights = {str(w) for w in model.weights}
    params = [
        info for info in model.GetOptimizationParamInfo() if not weights_only or str(info.blob) in weights
    ]  # fmt: skip
    lr_multiplier = None
    if max_gradient_norm is not None:
        lr_multiplier = _calc_norm_ratio(model, params, "norm_clipped_grad_update", param_to_device, max_gradient_norm)
    if allow_lr_injection:
        if not model.net.BlobIsDefined(LEARNING_RATE_INJECTION):
            injection = model.param_init_net.ConstantFill([], LEARNING_RATE_INJECTION, shape=[1], value=1.0)
        else:
            injection = core.BlobReference(LEARNING_RATE_INJECTION)
        if lr_multiplier is None:
            lr_multiplier = injection
        else:
            lr_multiplier = model.net.Mul([lr_multiplier, injection], "lr_multiplier", broadcast=1)
    optimizer.add_lr_multiplier(lr_multiplier)
    for info in params:
        with core.DeviceScope(get_param_device(str(info.blob), info.grad, param_to_device)):
            chosen = info.optimizer if use_param_info_optim and getattr(info, "optimizer", None) else optimizer
            chosen(model.net, model.param_init_net, info)
    return optimizer


def add_weight_decay(model: Any, weight_decay: float) -> Optimizer | None:
    """``grad += weight_decay * w`` for every weight (biases excluded): L2 regularization."""
    if not weight_decay:
        return None
    return _build(model, WeightDecayBuilder(weight_decay=weight_decay), weights_only=True, use_param_info_optim=False)


def _with_decay(model: Any, weight_decay: float) -> None:
    # An extension to Caffe2's builders: weight_decay=... adds the decay first, as add_weight_decay does.
    add_weight_decay(model, weight_decay)


def build_sgd(
    model: Any,
    base_learning_rate: float,
    max_gradient_norm: float | None = None,
    allow_lr_injection: bool = False,
    weight_decay: float = 0.0,
    **kwargs: Any,
) -> Optimizer:
    """SGD on every parameter with a gradient; ``kwargs`` go to SgdOptimizer (policy, momentum, nesterov,
    lars...) and to LearningRate (stepsize, gamma...)."""
    _with_decay(model, weight_decay)
    return _build(
        model, SgdOptimizer(base_learning_rate, **kwargs), max_gradient_norm=max_gradient_norm,
        allow_lr_injection=allow_lr_injection,
    )  # fmt: skip


def build_multi_precision_sgd(
    model: Any,
    base_learning_rate: float,
    max_gradient_norm: float | None = None,
    allow_lr_injection: bool = False,
    **kwargs: Any,
) -> Optimizer:
    return _build(
        model, MultiPrecisionSgdOptimizer(base_learning_rate, **kwargs), max_gradient_norm=max_gradient_norm,
        allow_lr_injection=allow_lr_injection,
    )  # fmt: skip


def build_fp16_sgd(model: Any, base_learning_rate: float, **kwargs: Any) -> Optimizer:
    return _build(model, FP16SgdOptimizer(base_learning_rate, **kwargs))


def build_ftrl(model: Any, engine: str | None = "SIMD", **kwargs: Any) -> Optimizer:
    """FTRL on every parameter. Caffe2's default ``engine="SIMD"`` (an AVX kernel) runs the same update
    here; it is accepted and recorded on the ops."""
    return _build(model, FtrlOptimizer(engine=engine or "", **kwargs))


def build_gftrl(model: Any, engine: str | None = "", **kwargs: Any) -> Optimizer:
    return _build(model, GFtrlOptimizer(engine=engine or "", **kwargs))


def build_adagrad(
    model: Any,
    base_learning_rate: float,
    parameters: Any = None,
    max_gradient_norm: float | None = None,
    allow_lr_injection: bool = False,
    **kwargs: Any,
) -> Optimizer:
    """Adagrad on every parameter (``rowWise=True``: row-wise for the sparse ones); ``weight_decay`` goes to
    the update op (``grad + weight_decay * param``), as in Caffe2 2020."""
    return _build(
        model, AdagradOptimizer(alpha=base_learning_rate, **kwargs), max_gradient_norm=max_gradient_norm,
        allow_lr_injection=allow_lr_injection,
    )  # fmt: skip


def build_wngrad(
    model: Any,
    base_learning_rate: float,
    parameters: Any = None,
    max_gradient_norm: float | None = None,
    allow_lr_injection: bool = False,
    **kwargs: Any,
) -> Optimizer:
    return _build(
        model, WngradOptimizer(alpha=base_learning_rate, **kwargs), max_gradient_norm=max_gradient_norm,
        allow_lr_injection=allow_lr_injection,
    )  # fmt: skip


def build_storm(
    model: Any,
    base_learning_rate: float,
    parameters: Any = None,
    max_gradient_norm: float | None = None,
    allow_lr_injection: bool = False,
    **kwargs: Any,
) -> Optimizer:
    return _build(
        model, StormOptimizer(lr=base_learning_rate, **kwargs), max_gradient_norm=max_gradient_norm,
        allow_lr_injection=allow_lr_injection,
    )  # fmt: skip


def build_adadelta(
    model: Any,
    base_learning_rate: float,
    parameters: Any = None,
    max_gradient_norm: float | None = None,
    allow_lr_injection: bool = False,
    **kwargs: Any,
) -> Optimizer:
    return _build(
        model, AdadeltaOptimizer(alpha=base_learning_rate, **kwargs), max_gradient_norm=max_gradient_norm,
        allow_lr_injection=allow_lr_injection,
    )  # fmt: skip


def build_adam(
    model: Any,
    base_learning_rate: float,
    max_gradient_norm: float | None = None,
    allow_lr_injection: bool = False,
    weight_decay: float = 0.0,
    **kwargs: Any,
) -> Optimizer:
    _with_decay(model, weight_decay)
    return _build(
        model, AdamOptimizer(alpha=base_learning_rate, **kwargs), max_gradient_norm=max_gradient_norm,
        allow_lr_injection=allow_lr_injection,
    )  # fmt: skip


def build_decay_adagrad(
    model: Any,
    base_learning_rate: float,
    max_gradient_norm: float | None = None,
    allow_lr_injection: bool = False,
    **kwargs: Any,
) -> Optimizer:
    """DecayAdagrad on every parameter (Caffe2 2020's builder; SparseAdagrad for sparse gradients)."""
    return _build(
        model, DecayAdagradOptimizer(alpha=base_learning_rate, **kwargs), max_gradient_norm=max_gradient_norm,
        allow_lr_injection=allow_lr_injection,
    )  # fmt: skip


def build_yellowfin(model: Any, base_learning_rate: float = 0.1, **kwargs: Any) -> Optimizer:
    return _build(model, YellowFinOptimizer(alpha=base_learning_rate, **kwargs))


def build_rms_prop(
    model: Any,
    base_learning_rate: float,
    max_gradient_norm: float | None = None,
    allow_lr_injection: bool = False,
    weight_decay: float = 0.0,
    **kwargs: Any,
) -> Optimizer:
    _with_decay(model, weight_decay)
    return _build(
        model, RmsPropOptimizer(alpha=base_learning_rate, **kwargs), max_gradient_norm=max_gradient_norm,
        allow_lr_injection=allow_lr_injection,
    )  # fmt: skip


def reset_optimizer_instance_count() -> None:
    """Restart the per-class instance numbers used in blob names (Caffe2's function of this name)."""
    optimizer_instance_count.clear()
