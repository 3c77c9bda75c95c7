"""``Optimizer``: the bookkeeping every Caffe2 optimizer shares.

- instances of each class are numbered (``SgdOptimizer_0``, ``SgdOptimizer_1``...); blobs an instance
  owns are named ``<Class>_<n>_<base>_cpu`` (``..._gpu<id>`` under a CUDA DeviceScope, as Caffe2 names
  them; every device runs on the CPU here);
- ``build_lr`` creates once per model the int64 counter ``optimizer_iteration`` (ConstantFill 0 and a
  ``CreateMutex`` in the init net, ``AtomicIter`` in the net, on the CPU) and once per instance and device
  a ``LearningRate`` op with ``base_lr = -base_learning_rate`` ("we descend"); an lr multiplier
  (``add_lr_multiplier``: gradient clipping's norm ratio, LARS, lr injection) scales it with ``Mul``;
- ``get_auxiliary_parameters()`` lists the state blobs: ``local`` (one per parameter: momenta, squared
  sums) and ``shared`` (one per model: the counter, constants).
"""

from __future__ import annotations

import copy
from collections import defaultdict, namedtuple
from typing import Any

import numpy as np

from framework.errors import FrameworkError
from framework.proto.framework_pb2 import TensorProto

OPTIMIZER_ITERATION_NAME = "optimizer_iteration"
LEARNING_RATE_INJECTION = "lr_injection"
CUDA = 1

AuxOptimizerParams = namedtuple("AuxOptimizerParams", ["local", "shared"])

# Per class name: how many instances exist (the <n> of their blob names). Caffe2 keeps the same counter.
optimizer_instance_count: defaultdict[str, int] = defaultdict(int)


def current_device() -> Any:
    from framework.caffe2.python import scope

    return scope.CurrentDeviceScope()


def is_gpu_scope() -> bool:
    dev = current_device()
    return dev is not None and dev.device_type == CUDA


def constant(param_init_net: Any, name: str, value: float, shape: list[int] | None = None) -> Any:
    """A float constant in the init net, created once (later calls return the existing blob)."""
    from framework import core

    if param_init_net.BlobIsDefined(name):
        return core.BlobReference(name, param_init_net)
    return param_init_net.ConstantFill([], name, shape=[1] if shape is None else shape, value=float(value))


def device_constant(param_init_net: Any, prefix: str, value: float, with_node: bool = False) -> Any:
    """``<prefix>_<device_type>_<device_id>[node]`` (``ONE_0_0`` on the CPU), Caffe2's per-device constants."""
    dev = current_device()
    dtype, did, node = (0, 0, "") if dev is None else (dev.device_type, dev.device_id, dev.node_name)
    return constant(param_init_net, f"{prefix}_{dtype}_{did}{node if with_node else ''}", value)


class Optimizer:
    """Base class: ``opt(net, param_init_net, param_info)`` or ``opt(net, param_init_net, param, grad)``
    adds the update of one parameter; subclasses implement ``_run(net, param_init_net, param_info)``."""

    def __init__(self) -> None:
        self._aux_params = AuxOptimizerParams(local=[], shared=[])
        cls = type(self).__name__
        self._instance_num = optimizer_instance_count[cls]
        optimizer_instance_count[cls] += 1
        self._lr_multiplier: Any = None
        self._lr_multiplier_on_gpu = False
        self._local_lr_multiplier: Any = None
        self._local_lr_multiplier_on_gpu = False

    def __call__(self, net: Any, param_init_net: Any, param: Any, grad: Any = None) -> None:
        from framework import core
        from framework.caffe2.python.modeling.parameter_info import ParameterInfo

        if grad is None:
            if not hasattr(param, "grad"):
                raise FrameworkError(f"optimizer: expected a ParameterInfo (or a param and its grad), got {param!r}")
            if param.grad is None:
                raise FrameworkError(f"optimizer: parameter '{param}' has no gradient")
        else:
            if isinstance(param, str) and not isinstance(param, core.BlobReference):
                param = core.BlobReference(param)
            param = ParameterInfo(param_id=None, param=param, grad=grad)
        self._run(net, param_init_net, param)

    def _run(self, net: Any, param_init_net: Any, param_info: Any) -> None:
        raise NotImplementedError(f"{type(self).__name__} must implement _run")

    @property
    def attributes(self) -> dict[str, Any]:
        """A deep copy of the instance's attributes except its instance number: two optimizers with equal
        attributes are configured alike (the check on shared parameters compares them)."""
        attrs = copy.deepcopy(self.__dict__)
        del attrs["_instance_num"]
        return attrs

    # -- names --------------------------------------------------------------------------------
    def get_cpu_blob_name(self, base_str: str, node_name: str = "") -> str:
        return f"{type(self).__name__}_{self._instance_num}_{base_str}{node_name}_cpu"

    def get_gpu_blob_name(self, base_str: str, gpu_id: int, node_name: str) -> str:
        return f"{type(self).__name__}_{self._instance_num}_{base_str}{node_name}_gpu{gpu_id}"

    def make_unique_blob_name(self, base_str: str) -> str:
        """A name unique to this instance and the current device."""
        dev = current_device()
        if dev is None:
            return self.get_cpu_blob_name(base_str)
        if dev.device_type == CUDA:
            return self.get_gpu_blob_name(base_str, dev.device_id, dev.node_name)
        return self.get_cpu_blob_name(base_str, dev.node_name)

    # -- learning rate --------------------------------------------------------------------------
    @staticmethod
    def build_iteration(net: Any, param_init_net: Any, iter_val: int = 0) -> Any:
        """The model's shared ``optimizer_iteration`` counter (stepped by ``AtomicIter`` once per run)."""
        from framework import core

        if param_init_net.BlobIsDefined(OPTIMIZER_ITERATION_NAME):
            return core.BlobReference(OPTIMIZER_ITERATION_NAME, param_init_net)
        with core.DeviceScope(core.DeviceOption(0)):
            it = param_init_net.ConstantFill(
                [], OPTIMIZER_ITERATION_NAME, shape=[1], value=iter_val, dtype=TensorProto.INT64
            )
            mutex = param_init_net.CreateMutex([], ["iteration_mutex"])
            net.AtomicIter([mutex, it], [it])
        return it

    def build_lr(
        self,
        net: Any,
        param_init_net: Any,
        base_learning_rate: float,
        learning_rate_blob: Any = None,
        policy: str = "fixed",
        iter_val: int = 0,
        **kwargs: Any,
    ) -> tuple[Any, Any]:
        """``(lr, iteration)``: ``LearningRate(iteration) -> lr`` with ``base_lr = -base_learning_rate``,
        created once per name; times the lr multiplier when one is set."""
        from framework import core

        if learning_rate_blob is None:
            learning_rate_blob = self.make_unique_blob_name("lr")
        iteration = self.build_iteration(net, param_init_net, iter_val)
        if not net.BlobIsDefined(learning_rate_blob):
            lr = net.LearningRate(
                [iteration], learning_rate_blob, base_lr=-float(base_learning_rate), policy=policy, **kwargs
            )
        else:
            lr = core.BlobReference(str(learning_rate_blob), net)
        if self._lr_multiplier is not None:
            multiplier = self._lr_multiplier
            if is_gpu_scope() and not self._lr_multiplier_on_gpu:
                multiplier = net.CopyFromCPUInput(multiplier, self.make_unique_blob_name("lr_multiplier"))
            lr = net.Mul([lr, multiplier], self.make_unique_blob_name("scaled_lr"), broadcast=1)
        if self._local_lr_multiplier is not None:
            multiplier = self._local_lr_multiplier
            if is_gpu_scope() and not self._local_lr_multiplier_on_gpu:
                multiplier = net.CopyFromCPUInput(multiplier, self.make_unique_blob_name("local_lr_multiplier"))
            lr = net.Mul([lr, multiplier], self.make_unique_blob_name("local_scaled_lr"), broadcast=1)
        return lr, iteration

    def add_lr_multiplier(self, lr_multiplier: Any, is_gpu_blob: bool = False) -> None:
        """Scale every learning rate this optimizer builds from now on by the blob ``lr_multiplier``."""
        self._lr_multiplier = lr_multiplier
        self._lr_multiplier_on_gpu = is_gpu_blob

    def create_lars_inputs(self, param_init_net: Any, weight_decay: float, trust: float, lr_max: float) -> tuple:
        """The ``Lars`` op's constant inputs ``weight_decay``, ``trust``, ``lr_max`` (created once per model)."""
        return (
            constant(param_init_net, "weight_decay", weight_decay),
            constant(param_init_net, "trust", trust),
            constant(param_init_net, "lr_max", lr_max),
        )

    def add_lars(self, net: Any, param_init_net: Any, param: Any, grad: Any, offset: float | None) -> None:
        """LARS (layer-wise adaptive rate scaling): the ``Lars`` op's trust ratio scales the learning rate of
        this parameter only (dense gradients only). As Caffe2 2020: the multiplier is local to the parameter
        (Caffe2 2018 set it for every later parameter too) and the op takes weight decay 0, trust 1 and
        the float32 maximum as its bounds."""
        from framework.ops.gradient import GradientSlice

        self._local_lr_multiplier = None
        if offset is None or isinstance(grad, GradientSlice):
            return
        if offset < 0:
            raise FrameworkError(f"{type(self).__name__}: the LARS offset must be nonnegative, got {offset}")
        wd, trust, lr_max = self.create_lars_inputs(param_init_net, 0.0, 1.0, float(np.finfo(np.float32).max))
        ratio = net.Lars(
            [param, grad, wd, trust, lr_max], self.make_unique_blob_name(f"{param}_lars"), offset=float(offset),
            lr_min=0.0,
        )  # fmt: skip
        self._local_lr_multiplier = ratio
        self._local_lr_multiplier_on_gpu = is_gpu_scope()

    @staticmethod
    def dedup(net: Any, sparse_dedup_aggregator: str | None, grad: Any) -> Any:
        """With ``sparse_dedup_aggregator`` ("sum" or "mean"), merge the rows of a GradientSlice that share an
        index. Caffe2 has one (GPU) op for this; here ``Unique`` + ``UnsortedSegmentSum``/``...Mean``."""
        from framework.ops.gradient import GradientSlice

        if not isinstance(grad, GradientSlice):
            raise FrameworkError(f"dedup works on sparse gradients (GradientSlice), got {grad}")
        if not sparse_dedup_aggregator:
            return grad
        if sparse_dedup_aggregator not in ("sum", "mean"):
            raise FrameworkError(f"sparse_dedup_aggregator must be 'sum' or 'mean', got '{sparse_dedup_aggregator}'")
        indices, remap = net.Unique([grad.indices], 2)
        op = "UnsortedSegmentSum" if sparse_dedup_aggregator == "sum" else "UnsortedSegmentMean"
        values = getattr(net, op)([grad.values, remap], 1)
        return GradientSlice(indices, values)

    def get_auxiliary_parameters(self) -> AuxOptimizerParams:
        """The optimizer's state blobs: ``local`` (per parameter) and ``shared`` (per model)."""
        return self._aux_params

    def scale_learning_rate(self, scale: float) -> None:
        raise NotImplementedError(f"{type(self).__name__} does not implement scale_learning_rate")
