"""SGD optimizers: plain / momentum (``SgdOptimizer``), fp32 master copies of fp16 parameters
(``MultiPrecisionSgdOptimizer``), fp16 storage (``FP16SgdOptimizer``), and ``WeightDecayBuilder``.

Update ops, as Caffe2 chooses them: ``WeightedSum(param, ONE, grad, lr)`` with a negative lr;
``MomentumSGDUpdate`` (it subtracts, so its lr is positive; Nesterov by default); for GradientSlice
gradients ``ScatterWeightedSum`` / ``SparseMomentumSGDUpdate`` on the looked-up rows only.
"""

from __future__ import annotations

from typing import Any

from framework.caffe2.python.optimizers.base import Optimizer, constant, device_constant
from framework.errors import FrameworkError
from framework.ops.arg_reader import ArgReader
from framework.ops.gradient import GradientSlice
from framework.ops.schema import FLOAT
from framework.proto.framework_pb2 import TensorProto

__all__ = ["FP16SgdOptimizer", "MultiPrecisionSgdOptimizer", "SgdOptimizer", "WeightDecayBuilder"]


def _positive(opt: Any, rate: float) -> bool:
    """False for a zero rate (the parameter is frozen: no update); FrameworkError for a negative one."""
    if rate == 0:
        return False
    if rate < 0:
        raise FrameworkError(f"{type(opt).__name__}: expected a positive base learning rate, got {rate}")
    return True


class SgdOptimizer(Optimizer):
    def __init__(
        self,
        base_learning_rate: float = 0.01,
        policy: str = "fixed",
        momentum: float = 0.0,
        nesterov: int = 1,
        sparse_dedup_aggregator: str | None = None,
        lars: float | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__()
        self.base_learning_rate = base_learning_rate
        self.policy = policy
        self.momentum = momentum
        self.nesterov = nesterov
        self.sparse_dedup_aggregator = sparse_dedup_aggregator
        self.lars = lars
        self.init_kwargs = kwargs

    def _run(self, net: Any, param_init_net: Any, param_info: Any) -> None:
        param, grad = param_info.blob, param_info.grad
        if not _positive(self, self.base_learning_rate):
            return
        self.add_lars(net, param_init_net, param, grad, self.lars)
        sign = -1 if self.momentum else 1  # MomentumSGDUpdate subtracts; WeightedSum adds
        lr, _ = self.build_lr(
            net, param_init_net, base_learning_rate=self.base_learning_rate * sign, policy=self.policy,
            **self.init_kwargs,
        )  # fmt: skip
        one = device_constant(param_init_net, "ONE", 1.0, with_node=True)
        self._aux_params.shared.append(one)
        momentum = None
        if self.momentum > 0:
            momentum = param_init_net.ConstantFill([param], f"{param}_momentum", value=0.0)
            self._aux_params.local.append(momentum)
        kw = {"momentum": float(self.momentum), "nesterov": int(self.nesterov)}
        if isinstance(grad, GradientSlice):
            grad = self.dedup(net, self.sparse_dedup_aggregator, grad)
            if momentum is not None:
                net.SparseMomentumSGDUpdate(
                    [grad.values, momentum, lr, param, grad.indices], [grad.values, momentum, param], **kw
                )
            else:
                net.ScatterWeightedSum([param, one, grad.indices, grad.values, lr], param)
        elif momentum is not None:
            net.MomentumSGDUpdate([grad, momentum, lr, param], [grad, momentum, param], **kw)
        else:
            net.WeightedSum([param, one, grad, lr], param)

    def scale_learning_rate(self, scale: float) -> None:
        self.base_learning_rate *= scale


class MultiPrecisionSgdOptimizer(SgdOptimizer):
    """Momentum SGD on the fp32 master copy of an fp16 parameter (``ParameterInfo.blob_copy[FLOAT]``, from
    ``PseudoFP16Initializer``), then ``FloatToHalf`` back into the parameter. A parameter without a master
    copy gets plain ``SgdOptimizer`` updates. Dense gradients only."""

    def __init__(
        self,
        base_learning_rate: float = 0.1,
        momentum: float = 0.0,
        policy: str = "fixed",
        nesterov: int = 1,
        sparse_dedup_aggregator: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            base_learning_rate=base_learning_rate, policy=policy, momentum=momentum, nesterov=nesterov,
            sparse_dedup_aggregator=sparse_dedup_aggregator, **kwargs,
        )  # fmt: skip

    def _run(self, net: Any, param_init_net: Any, param_info: Any) -> None:
        copies = getattr(param_info, "blob_copy", None) or {}
        master = copies.get(TensorProto.FLOAT)
        if master is None:
            return SgdOptimizer._run(self, net, param_init_net, param_info)
        param, grad = param_info.blob, param_info.grad
        if not _positive(self, self.base_learning_rate):
            return None
        if isinstance(grad, GradientSlice):
            raise FrameworkError(f"MultiPrecisionSgd: '{param}' has a sparse gradient, which it does not support")
        lr, _ = self.build_lr(
            net, param_init_net, base_learning_rate=-self.base_learning_rate, policy=self.policy, **self.init_kwargs
        )
        momentum = param_init_net.ConstantFill([master], f"{param}_momentum", value=0.0)
        self._aux_params.local.append(momentum)
        grad_fp32 = net.HalfToFloat(grad, f"{grad}_fp32")
        net.MomentumSGDUpdate(
            [grad_fp32, momentum, lr, master], [grad_fp32, momentum, master],
            momentum=float(self.momentum), nesterov=int(self.nesterov),
        )  # fmt: skip
        net.FloatToHalf(master, param)
        return None


class FP16SgdOptimizer(SgdOptimizer):
    """Momentum SGD with weight decay for parameters stored in float16.

    Caffe2 runs this with its CUDA-only ``FP16MomentumSGDUpdate`` / ``FP32MomentumSGDUpdate`` ops. Here
    the same update is composed of CPU ops: the fp16 parameter, momentum and gradient are widened
    (``HalfToFloat``), ``grad += weight_decay * param`` (``WeightedSum``), ``MomentumSGDUpdate`` runs in
    fp32, and the results are narrowed back (``FloatToHalf``). Parameters kept in fp32 (no fp16 copy,
    or a ``spatbn`` parameter, or ``fp32_update``) get the fp32 update directly.
    """

    def __init__(
        self,
        base_learning_rate: float = 0.1,
        momentum: float = 0.0,
        policy: str = "fixed",
        nesterov: int = 1,
        weight_decay: float = 0.0001,
        sparse_dedup_aggregator: str | None = None,
        **kwargs: Any,
    ) -> None:
        super().__init__(
            base_learning_rate=base_learning_rate, policy=policy, momentum=momentum, nesterov=nesterov,
            sparse_dedup_aggregator=sparse_dedup_aggregator, **kwargs,
        )  # fmt: skip
        self.weight_decay = weight_decay

    def _pair(self, param_info: Any, fp32_update: bool) -> tuple[Any, Any, bool]:
        """(fp16 param or None, fp32 param, whether the update runs on the fp32 param)."""
        copies = getattr(param_info, "blob_copy", None)
        if fp32_update or "spatbn" in str(param_info.blob) or copies is None:
            return None, param_info.blob, True
        if TensorProto.FLOAT in copies:
            return param_info.blob, copies[TensorProto.FLOAT], False
        if TensorProto.FLOAT16 in copies:
            return copies[TensorProto.FLOAT16], param_info.blob, False
        raise FrameworkError(f"FP16SgdOptimizer: parameter '{param_info.name}' has no fp16 or fp32 copy")

    def _run(self, net: Any, param_init_net: Any, param_info: Any, fp32_update: bool = False) -> None:
        half, full, fp32 = self._pair(param_info, fp32_update)
        grad = param_info.grad
        if not _positive(self, self.base_learning_rate):
            return
        if isinstance(grad, GradientSlice):
            raise FrameworkError(f"FP16Sgd: '{param_info.blob}' has a sparse gradient, which it does not support")
        lr, _ = self.build_lr(
            net, param_init_net, base_learning_rate=-self.base_learning_rate, policy=self.policy, **self.init_kwargs
        )
        name = str(half if half is not None and not fp32 else param_info.blob)
        mom32 = param_init_net.ConstantFill([full], f"{name}_momentum_fp32", value=0.0)
        mom16 = param_init_net.FloatToHalf(mom32, f"{name}_momentum")
        self._aux_params.local.append(mom16)
        kw = {"momentum": float(self.momentum), "nesterov": int(self.nesterov)}
        one = device_constant(param_init_net, "ONE", 1.0)
        wd = constant(param_init_net, f"{self.make_unique_blob_name('wd')}", self.weight_decay)
        if fp32:
            net.WeightedSum([grad, one, full, wd], grad)
            net.MomentumSGDUpdate([grad, mom32, lr, full], [grad, mom32, full], **kw)
            return
        g32 = net.HalfToFloat(grad, f"{grad}_fp32")
        p32 = net.HalfToFloat(half, f"{half}_fp32_step")
        m32 = net.HalfToFloat(mom16, f"{mom16}_fp32_step")
        net.WeightedSum([g32, one, p32, wd], g32)
        net.MomentumSGDUpdate([g32, m32, lr, p32], [g32, m32, p32], **kw)
        net.FloatToHalf(p32, half)
        net.FloatToHalf(m32, mom16)
        net.FloatToHalf(g32, grad)


class WeightDecayBuilder(Optimizer):
    """``grad += weight_decay * param`` (``WeightedSum`` in place on the gradient; dense gradients only)."""

    def __init__(self, weight_decay: float) -> None:
        super().__init__()
        self.weight_decay = weight_decay

    def _run(self, net: Any, param_init_net: Any, param_info: Any) -> None:
        one = device_constant(param_init_net, "ONE", 1.0)
        # Caffe2 names the decay constant per device only; a model with two decays keeps them apart here.
        wd = device_constant(param_init_net, "wd", self.weight_decay)
        if param_init_net.BlobIsDefined(str(wd)) and not _same_value(param_init_net, str(wd), self.weight_decay):
            wd = device_constant(param_init_net, f"wd_{self.weight_decay:g}", self.weight_decay)
        if isinstance(param_info.grad, GradientSlice):
            raise FrameworkError(f"weight decay: '{param_info.blob}' has a sparse gradient, which it does not support")
        net.WeightedSum([param_info.grad, one, param_info.blob, wd], param_info.grad)


def _same_value(param_init_net: Any, name: str, value: float) -> bool:
    for op in param_init_net.Proto().op:
        if name in op.output:
            args = ArgReader(op)
            if not args.has_single("value", FLOAT):
                return False
            return abs(args.single("value", kind=FLOAT) - value) <= 1e-6 * max(1e-30, abs(value))
    return True
