"""``data_parallel_model`` (Caffe2's ``caffe2.python.data_parallel_model``): one model replicated on
several devices and, with a ``rendezvous``, on several processes (ranks of an MPI job).

``Parallelize(model, input_builder_fun, forward_pass_builder_fun, optimizer_builder_fun=..., devices=[0],
rendezvous=...)`` builds, for each device ``d``, the input and forward pass under ``NameScope("cpu_d")``
(``gpu_d`` unless ``cpu_device=True``, as Caffe2 names them; everything runs on the CPU here), with the
loss scaled by ``1 / (devices x shards)``; adds the gradient ops; sums every parameter gradient over the
devices and ranks (local ``Sum`` + ``Copy`` over devices, one ``AllreduceBuckets`` over the rendezvous'
common world) so
every replica applies the same averaged gradient; then builds the update per device. Parameters are
synchronised from device 0 of rank 0 (``Broadcast``) when the init net runs, so every replica starts
equal and stays equal. ``Parallelize_BMUF`` instead lets every replica train on its own and merges
them once per ``RunNet`` by block-wise model-update filtering.

A rendezvous is Caffe2's dict (``kv_handler``, ``shard_id``, ``num_shards``, ``engine``,
``transport``...); ``framework.distributed.rendezvous()`` makes one from the MPI job.

>>> model = model_helper.ModelHelper("mlp")
>>> Parallelize_CPU(model, add_input, add_forward, optimizer_builder_fun=add_sgd, devices=[0],
...                 rendezvous=framework.distributed.rendezvous())   # doctest: +SKIP
>>> RunInitNet(model); RunNet(model, num_iterations)                   # doctest: +SKIP
"""

from __future__ import annotations

import contextlib
import logging
from typing import Any, Callable, Iterable, Iterator

from framework import core, workspace
from framework.caffe2.python import data_parallel_model_rewrites as rewrites
from framework.caffe2.python import scope
from framework.errors import FrameworkError, ModelError
from framework.proto import framework_pb2 as pb

log = logging.getLogger("framework.caffe2.python.data_parallel_model")

__all__ = [
    "AddBlobSync",
    "ConvertNetForDevice",
    "FinalizeAfterCheckpoint",
    "GetCheckpointParams",
    "GetDevices",
    "GetLearningRateBlobNames",
    "Parallelize",
    "CreateNet",
    "Parallelize_BMUF",
    "Parallelize_CPU",
    "Parallelize_CPU_BMUF",
    "Parallelize_GPU",
    "Parallelize_GPU_BMUF",
    "RunInitNet",
    "RunNet",
    "RunWarmup",
    "Synchronize",
]

COMM_WORLD = "dpm_comm_world"


def Parallelize_CPU(*args: Any, **kwargs: Any) -> Any:
    """``Parallelize`` with ``cpu_device=True``: replicas named ``cpu_<d>/``."""
    kwargs["cpu_device"] = True
    return Parallelize(*args, **kwargs)


def Parallelize_GPU(*args: Any, **kwargs: Any) -> Any:
    """``Parallelize`` with ``cpu_device=False``: replicas named ``gpu_<d>/`` as Caffe2 names them; they run on
    the CPU here (as every CUDA device option does), after Caffe2's warning that fewer GPUs exist than asked."""
    kwargs["cpu_device"] = False
    return Parallelize(*args, **kwargs)


def Parallelize(
    model_helper_obj: Any,
    input_builder_fun: Callable[[Any], Any],
    forward_pass_builder_fun: Callable[[Any, float], Any],
    param_update_builder_fun: Callable[[Any], Any] | None = None,
    optimizer_builder_fun: Callable[[Any], Any] | None = None,
    post_sync_builder_fun: Callable[[Any], Any] | None = None,
    pre_grad_net_transformer_fun: Callable[[Any], Any] | None = None,
    net_transformer_fun: Callable[..., Any] | None = None,
    devices: Iterable[int] | None = None,
    rendezvous: dict[str, Any] | None = None,
    net_type: str = "dag",
    broadcast_computed_params: bool = True,
    optimize_gradient_memory: bool = False,
    dynamic_memory_management: bool = False,
    blobs_to_keep: Any = None,
    use_nccl: bool = False,
    max_concurrent_distributed_ops: int = 16,
    cpu_device: bool = False,
    num_threads_per_device: int = 4,
    shared_model: bool = False,
    combine_spatial_bn: bool = False,
    barrier_net_timeout_sec: int = 300,
) -> None:
    """Replicate ``model_helper_obj`` over ``devices`` (and the rendezvous' ranks); see module doc."""
    current = scope.CurrentDeviceScope()
    if current is not None and current.device_type != pb.CPU:
        raise ModelError(f"Parallelize must be called without a device scope; the device scope is {current}")
    model = model_helper_obj
    devices = list(devices if devices is not None else [0])
    if not devices:
        raise FrameworkError("Parallelize: devices is empty")
    if param_update_builder_fun is not None and optimizer_builder_fun is not None:
        raise FrameworkError("Parallelize: pass param_update_builder_fun or optimizer_builder_fun, not both")
    if shared_model and not cpu_device:
        raise ModelError("Parallelize: shared_model is only supported on CPU devices (cpu_device=True)")
    if shared_model and rendezvous is not None:
        raise ModelError("Parallelize: shared_model does not work with a rendezvous (several processes)")
    prefix = "cpu" if cpu_device else "gpu"
    if not cpu_device:
        log.warning("** Only %d GPUs available, GPUs %s requested (they run on the CPU)", 0, devices)
    shards = int(rendezvous["num_shards"]) if rendezvous else 1
    model._device_prefix, model._devices, model._rendezvous = prefix, devices, rendezvous
    model._device_type = pb.CPU
    loss_scale = 1.0 / (len(devices) * shards)

    losses: list[Any] = []
    by_device: dict[int, list[Any]] = {}
    for d in devices:
        with _device(model, d):
            input_builder_fun(model)
            out = forward_pass_builder_fun(model, loss_scale)
            by_device[d] = list(out) if isinstance(out, (list, tuple)) else ([out] if out is not None else [])
            losses += by_device[d]
    model._losses_by_device = losses
    _group_params(model)
    if param_update_builder_fun is None and optimizer_builder_fun is None:
        log.info("Parallelize: no update builder given: a forward-only (test) model")
        if net_transformer_fun is not None:
            net_transformer_fun(model, len(devices), prefix, model._device_type)
        _finish(model, net_type, num_threads_per_device)
        return
    if pre_grad_net_transformer_fun is not None:
        pre_grad_net_transformer_fun(model)
    # each replica's loss gradient (ones) is made on its own device, as Caffe2 does
    loss_grads = {}
    for d in devices:
        with scope.DeviceScope(core.DeviceOption(model._device_type, d)):
            for loss in by_device[d]:
                loss_grads[str(loss)] = str(model.net.ConstantFill(loss, str(loss) + "_grad", value=1.0))
    model.AddGradientOperators(loss_grads)
    if net_transformer_fun is not None:  # as Caffe2: after the gradient ops, before the updates
        net_transformer_fun(model, len(devices), prefix, model._device_type)
    if combine_spatial_bn:
        rewrites.interleave_ops(model)
        rewrites.cpu_inter_device_batch_norm(model)
    groups = []
    for name in sorted(model._device_grouped_blobs):
        grads = [model.param_to_grad.get(p) for p in _as_refs(model, name)]
        if all(g is not None for g in grads):
            groups.append([str(g) for g in grads])
    if rendezvous:
        _create_world(model, rendezvous)
    _sum_over_replicas(model, groups, copy_back=not shared_model)
    all_params = list(model.params)
    if shared_model:
        rewrites.prune_parameters_for_sharing(model)
    if optimizer_builder_fun is not None:
        # once, as in Caffe2: the optimizer walks every replica's parameters, each under its device
        model._optimizer = optimizer_builder_fun(model)
    else:
        for d in devices:
            with _device(model, d):
                param_update_builder_fun(model)
    if post_sync_builder_fun is not None:
        post_sync_builder_fun(model)
    _sync_params(model, model.param_init_net, _all_param_names(model, broadcast_computed_params))
    if shared_model:
        rewrites.remap_parameters_for_shared_model(model, all_params)
    model._shared_model = shared_model
    _finish(model, net_type, num_threads_per_device)


@contextlib.contextmanager
def _device(model: Any, d: int) -> Iterator[None]:
    """Build for replica ``d``: NameScope ``<prefix>_<d>`` and its DeviceScope, as Caffe2 does."""
    with scope.DeviceScope(core.DeviceOption(model._device_type, d)), scope.NameScope(f"{model._device_prefix}_{d}"):
        yield


def ConvertNetForDevice(net: Any, device: Any = None) -> Any:
    """A copy of ``net`` for one replica: every blob of its ops and external lists gets the prefix
    ``<cpu|gpu>_<device_id>/`` and every op the device option, for ``device`` (a DeviceOption; default the
    current device scope, as inside ``forward_pass_builder_fun``). Lets a builder append another model's nets.
    RecurrentNetwork ops (blob names inside their step nets) are refused."""
    if device is None:
        device = scope.CurrentDeviceScope()
    if device is None:
        raise FrameworkError("ConvertNetForDevice: no device given and no device scope is active")
    prefix = "gpu" if core.IsGPUDeviceType(device.device_type) else "cpu"
    namescope = f"{prefix}_{device.device_id}/"
    copy = net.Clone(net.Name() + "_" + namescope.rstrip("/"), keep_schema=False)
    proto = copy.Proto()
    for op in proto.op:
        if "RecurrentNetwork" in op.type:
            raise FrameworkError("ConvertNetForDevice: RecurrentNetwork conversion is not supported")
        op.input[:] = [namescope + b for b in op.input]
        op.output[:] = [namescope + b for b in op.output]
        op.control_input[:] = [namescope + b for b in op.control_input]
        op.device_option.CopyFrom(device)
    proto.external_input[:] = [namescope + b for b in proto.external_input]
    proto.external_output[:] = [namescope + b for b in proto.external_output]
    return copy


def Parallelize_CPU_BMUF(*args: Any, **kwargs: Any) -> Any:
    """``Parallelize_BMUF`` with ``cpu_device=True``."""
    kwargs["cpu_device"] = True
    return Parallelize_BMUF(*args, **kwargs)


def Parallelize_GPU_BMUF(*args: Any, **kwargs: Any) -> Any:
    """``Parallelize_BMUF`` with replicas named ``gpu_<d>/`` (they run on the CPU here)."""
    kwargs["cpu_device"] = False
    return Parallelize_BMUF(*args, **kwargs)


def Parallelize_BMUF(
    model_helper_obj: Any,
    input_builder_fun: Callable[[Any], Any],
    forward_pass_builder_fun: Callable[[Any, float], Any],
    param_update_builder_fun: Callable[[Any], Any],
    block_learning_rate: float = 1.0,
    block_momentum: float | None = None,
    devices: Iterable[int] | None = None,
    rendezvous: dict[str, Any] | None = None,
    net_type: str = "dag",
    master_device: int | None = None,
    use_nccl: bool = False,
    nesterov: bool = False,
    optimize_gradient_memory: bool = False,
    reset_momentum_sgd: bool = False,
    warmup_iterations: int | None = None,
    max_concurrent_distributed_ops: int = 4,
    add_blobs_to_sync: Iterable[str] | None = None,
    num_threads_per_device: int = 4,
    cpu_device: bool = False,
    barrier_net_timeout_sec: int = 300,
) -> None:
    """Block-wise model-update filtering (Chen & Huo, ICASSP 2016), as Caffe2 builds it.

    Every replica (device x rank) trains on its own for ``num_iterations`` with ``param_update_builder_fun``
    (no gradient exchange); then a global net, run once per ``RunNet``, averages the parameters over all
    replicas and filters the block's update through a momentum: ``v = block_momentum * v +
    block_learning_rate * (avg - g)``, ``g += v`` (Nesterov: ``g -= block_momentum * (v - v_prev)``),
    every replica's parameter ``= g``. ``block_momentum`` defaults to ``1 - 1 / replicas``;
    ``reset_momentum_sgd`` zeroes MomentumSGDUpdate momenta after each block; ``warmup_iterations`` adds
    a ``RunWarmup`` (train, then broadcast the master's parameters).

    Departure: replicas start from the master device's initial parameters (broadcast by the init net),
    where Caffe2 left each at its own random init until the first block update; the result then does
    not depend on how the replicas were initialised.
    """
    current = scope.CurrentDeviceScope()
    if current is not None and current.device_type != pb.CPU:
        raise ModelError(f"Parallelize must be called without a device scope; the device scope is {current}")
    model = model_helper_obj
    devices = list(devices if devices is not None else [0])
    if not devices:
        raise FrameworkError("Parallelize_BMUF: devices is empty")
    master = devices[0] if master_device is None else master_device
    if master not in devices:
        raise FrameworkError(f"Parallelize_BMUF: master_device {master} is not one of devices {devices}")
    model._device_prefix = "cpu" if cpu_device else "gpu"
    model._devices = [master] + [d for d in devices if d != master]  # the master first: sync reads it
    model._rendezvous, model._device_type = rendezvous, pb.CPU
    replicas = len(devices) * (int(rendezvous["num_shards"]) if rendezvous else 1)
    if block_momentum is None:
        block_momentum = 1.0 - 1.0 / replicas
    losses: list[Any] = []
    for d in devices:
        with scope.NameScope(f"{model._device_prefix}_{d}"):
            input_builder_fun(model)
            out = forward_pass_builder_fun(model, 1.0 / replicas)
            losses += list(out) if isinstance(out, (list, tuple)) else ([out] if out is not None else [])
    model._losses_by_device = losses
    _group_params(model)
    model.AddGradientOperators(losses)
    for d in devices:
        with scope.NameScope(f"{model._device_prefix}_{d}"):
            param_update_builder_fun(model)
    names = sorted(model._device_grouped_blobs)
    groups = [[model._device_grouped_blobs[n][d] for d in model._devices] for n in names]
    if rendezvous:
        _create_world(model, rendezvous)
    _sync_params(model, model.param_init_net, groups)

    init = core.Net("global_model_init")
    update = core.Net("global_model")
    for blobs in groups:  # (step 0) v = 0 and g = the master's parameter
        init.ConstantFill(blobs[0], f"{blobs[0]}_v", value=0.0)
        init.Copy(blobs[0], f"{blobs[0]}_g")
        if nesterov:
            init.ConstantFill(blobs[0], f"{blobs[0]}_prev", value=0.0)
    for blobs in groups:  # (step 2) the sum over devices into the master...
        if len(blobs) > 1:
            update.Sum(blobs, blobs[0])
    if rendezvous and groups:  # ... and over ranks
        firsts = [blobs[0] for blobs in groups]
        update.AllreduceBuckets([COMM_WORLD, *firsts], firsts)
    for blobs in groups:  # (step 3) filter the block's update through the block momentum
        p, v, g, prev = blobs[0], f"{blobs[0]}_v", f"{blobs[0]}_g", f"{blobs[0]}_prev"
        update.Scale(p, p, scale=1.0 / replicas)
        update.Sub([p, g], p)
        update.Scale(p, p, scale=float(block_learning_rate))
        update.Scale(v, v, scale=float(block_momentum))
        update.Add([v, p], v)
        update.Add([g, v], g)
        if nesterov:
            update.Sub([v, prev], prev)
            update.Scale(prev, prev, scale=float(block_momentum))
            update.Sub([g, prev], g)
            update.Copy(v, prev)
        update.Copy(g, p)
    _sync_params(model, update, groups)
    if add_blobs_to_sync is not None:
        AddBlobSync(model, add_blobs_to_sync, net=update)
    if reset_momentum_sgd:
        for op in model.net.Proto().op:
            if op.type == "MomentumSGDUpdate":
                update.ConstantFill([op.input[1]], op.input[1], value=0.0)
    if warmup_iterations is not None:
        model._warmup_iterations = int(warmup_iterations)
        model._warmup_broadcast = core.Net("warmup-broadcast")
        _sync_params(model, model._warmup_broadcast, groups)
        for blobs in groups:
            model._warmup_broadcast.Copy(blobs[0], f"{blobs[0]}_g")
    _finish(model, net_type, num_threads_per_device)
    # The global nets stay "simple": their collectives must run in one order on every rank.
    model._global_model_init_net, model._global_model_param_updates_net = init, update
    model._data_parallel_model_init_nets.append(init)
    model._data_parallel_model_nets.append((update, 1))


def _group_params(model: Any) -> None:
    """``model._device_grouped_blobs``: unscoped parameter name -> {device: blob name}."""
    grouped: dict[str, dict[int, str]] = {}
    for p in list(model.params) + list(getattr(model, "_computed_params", [])):
        s = str(p)
        for d in model._devices:
            tag = f"{model._device_prefix}_{d}/"
            if s.startswith(tag):
                grouped.setdefault(s[len(tag) :], {})[d] = s
    model._device_grouped_blobs = grouped


def _as_refs(model: Any, name: str) -> list[Any]:
    by_name = {str(p): p for p in model.params}
    return [by_name.get(model._device_grouped_blobs[name][d]) for d in model._devices]


def _all_param_names(model: Any, computed: bool) -> list[list[str]]:
    computed_names = {str(p) for p in getattr(model, "_computed_params", [])}
    out = []
    for name in sorted(model._device_grouped_blobs):
        replicas = [model._device_grouped_blobs[name][d] for d in model._devices]
        if computed or replicas[0] not in computed_names:
            out.append(replicas)
    return out


def _create_world(model: Any, rendezvous: dict[str, Any]) -> None:
    inputs = [rendezvous["kv_handler"]] if rendezvous.get("kv_handler") else []
    model.param_init_net.CreateCommonWorld(
        inputs,
        COMM_WORLD,
        size=int(rendezvous["num_shards"]),
        rank=int(rendezvous["shard_id"]),
        engine=rendezvous.get("engine", "GLOO"),
    )


def _sum_over_replicas(model: Any, groups: list[list[str]], copy_back: bool = True) -> None:
    """Every gradient of each group becomes the group's sum over devices and (with a rendezvous) ranks.

    Devices are summed locally into device 0's copy; one ``AllreduceBuckets`` then sums device 0's
    gradients over the ranks (small ones packed into one MPI call; one collective per step, so every
    rank runs the same sequence under any executor); the result is copied back to the other devices.
    """
    net = model.net
    for blobs in groups:
        if len(blobs) > 1:
            net.Sum(blobs, blobs[0])
    if model._rendezvous and groups:
        firsts = [blobs[0] for blobs in groups]
        net.AllreduceBuckets([COMM_WORLD, *firsts], firsts)
    if not copy_back:  # shared model: only device 0's parameters are updated
        return
    for blobs in groups:
        for b in blobs[1:]:
            net.Copy(blobs[0], b)


def _sync_params(model: Any, net: Any, groups: list[list[str]]) -> None:
    """Every replica gets device 0's (of rank 0's) value."""
    rendezvous = model._rendezvous
    for replicas in groups:
        if rendezvous:
            net.Broadcast([COMM_WORLD, replicas[0]], [replicas[0]], root=0)
        for b in replicas[1:]:
            net.Copy(replicas[0], b)


def _finish(model: Any, net_type: str, threads: int) -> None:
    proto = model.net.Proto()
    proto.type = net_type
    proto.num_workers = max(1, threads * len(model._devices))
    model._data_parallel_model_init_nets = [model.param_init_net]
    model._data_parallel_model_nets = [model.net]


def CreateNet(model: Any, overwrite: bool = False) -> None:
    """Create every net ``RunNet`` runs (the training net; with BMUF, the global update net too)."""
    for entry in model._data_parallel_model_nets:
        workspace.CreateNet(entry[0] if isinstance(entry, tuple) else entry, overwrite=overwrite)


def RunInitNet(model: Any) -> None:
    """Run the init nets (parameters, then their synchronisation) and create the training nets."""
    for net in model._data_parallel_model_init_nets:
        workspace.RunNetOnce(net)
    CreateNet(model, overwrite=True)


def RunNet(model: Any, num_iterations: int = 1) -> None:
    """Run the training net ``num_iterations`` times (then, with BMUF, the global update net once)."""
    for entry in model._data_parallel_model_nets:
        net, times = entry if isinstance(entry, tuple) else (entry, num_iterations)
        for _ in range(times):
            workspace.RunNet(net)


def RunWarmup(model: Any) -> None:
    """BMUF with ``warmup_iterations``: train that many iterations, then give every replica the master's
    parameters."""
    if not hasattr(model, "_warmup_iterations"):
        raise FrameworkError("RunWarmup: the model was not parallelized with Parallelize_BMUF(warmup_iterations=N)")
    for _ in range(model._warmup_iterations):
        workspace.RunNet(model.net)
    workspace.RunNetOnce(model._warmup_broadcast)


def GetDevices(model: Any) -> list[int]:
    return list(model._devices)


def _first_device_names(model: Any) -> list[str]:
    d0 = model._devices[0]
    return [g[d0] for _, g in sorted(model._device_grouped_blobs.items())]


def GetCheckpointParams(model: Any) -> set[str]:
    """What a checkpoint needs: device 0's parameters, its optimizer state (momenta...) and the iteration
    counters outside the replicas' scopes (the other replicas are synchronised from them by
    FinalizeAfterCheckpoint)."""
    first = f"{model._device_prefix}_{model._devices[0]}/"
    names = set(_first_device_names(model))
    init_nets = [model.param_init_net] + [n for n in [getattr(model, "_global_model_init_net", None)] if n]
    for net in init_nets:  # with BMUF, the block momentum and global model too
        for op in net.Proto().op:
            for out in op.output:
                if out.startswith(first):
                    names.add(out)
    for op in model.net.Proto().op:  # iteration counters outside the replicas' scopes, as Caffe2 adds them
        if op.type in ("Iter", "AtomicIter") and not op.output[0].startswith(f"{model._device_prefix}_"):
            names.add(op.output[0])
    return names


def FinalizeAfterCheckpoint(model: Any, blobs: Iterable[str] | None = None) -> None:
    """After loading device 0's blobs from a checkpoint, copy them to every other replica and rank."""
    first = f"{model._device_prefix}_{model._devices[0]}/"
    names = sorted(blobs if blobs is not None else GetCheckpointParams(model))
    groups = []
    for n in names:
        rest = str(n)[len(first) :] if str(n).startswith(first) else None
        if rest is None:
            continue
        groups.append([f"{model._device_prefix}_{d}/{rest}" for d in model._devices])
    net = core.Net(f"{model.net.Proto().name}_finalize")
    _sync_params(model, net, groups)
    workspace.RunNetOnce(net)


def AddBlobSync(model: Any, blobs: Iterable[str], net: Any = None) -> None:
    """Keep ``blobs`` (unscoped names) equal on every replica: device 0's value is broadcast in ``net``
    (default: the training net)."""
    groups = [[f"{model._device_prefix}_{d}/{b}" for d in model._devices] for b in blobs]
    _sync_params(model, net or model.net, groups)


def Synchronize(model: Any, timeout_sec: int = 300) -> None:
    """Wait until every rank reaches this point (a Barrier); nothing to do without a rendezvous."""
    if model._rendezvous:
        net = core.Net(f"{model.net.Proto().name}_barrier")
        net.Barrier([COMM_WORLD], [])
        workspace.RunNetOnce(net)


def GetLearningRateBlobNames(model: Any) -> list[str]:
    """The blobs the training net's LearningRate ops write (one per device and optimizer)."""
    return [out for op in model.net.Proto().op if op.type == "LearningRate" for out in op.output]
