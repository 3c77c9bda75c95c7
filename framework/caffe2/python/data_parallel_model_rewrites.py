"""Rewrites ``data_parallel_model.Parallelize`` applies on the CPU, as Caffe2 does them.

- ``interleave_ops(model)``: the training net built device after device becomes op 0 of every device, op 1 of
  every device..., so replicas advance together (each op found by its ``device_option.device_id``).
- ``cpu_inter_device_batch_norm(model)``: every group of replica ``SpatialBN`` ops normalises with the
  statistics of the whole batch: each replica's ``ChannelStats`` (sums, sums of squares) are summed and given
  to the SpatialBN ops (``num_batches`` = replicas); their gradients' scale/bias parts come from every
  replica's ``ChannelBackpropStats``, summed on ``cpu_0`` and copied back.
- ``prune_parameters_for_sharing(model)`` / ``remap_parameters_for_shared_model(model, all_params)``
  (``shared_model=True``): only device 0's parameters get updates, every other replica reads them, and the
  ops writing the others' copies are removed.
"""

from __future__ import annotations

from typing import Any, Iterable

from framework.caffe2.python import core
from framework.errors import ModelError
from framework.proto.args import make_argument

__all__ = [
    "cpu_inter_device_batch_norm",
    "interleave_ops",
    "prune_parameters_for_sharing",
    "remap_parameters_for_shared_model",
]


def interleave_ops(model: Any) -> None:
    ops = list(model.net.Proto().op)
    devices = list(model._devices)
    per_device: dict[int, list[Any]] = {d: [] for d in devices}
    for op in ops:
        d = op.device_option.device_id
        if d not in per_device:
            raise ModelError(f"interleave: op {op.type} ({list(op.output)}) is on device {d}, not one of {devices}")
        per_device[d].append(op)
    counts = {d: len(v) for d, v in per_device.items()}
    if len(set(counts.values())) != 1:
        raise ModelError(f"interleave: the replicas have different numbers of ops: {counts}")
    interleaved = []
    for j in range(counts[devices[0]]):
        column = [per_device[d][j] for d in devices]
        if len({op.type for op in column}) != 1:
            raise ModelError(f"interleave: op {j} differs between replicas: {[op.type for op in column]}")
        interleaved += column
    del model.net.Proto().op[:]
    model.net.Proto().op.extend(interleaved)


def _strip(name: str) -> str:
    return name.split("/", 1)[1] if "/" in name else name


def cpu_inter_device_batch_norm(model: Any) -> None:
    n_devices = len(model._devices)
    new_ops: list[Any] = []
    pending_stats: list[Any] = []  # ChannelStats / ChannelBackpropStats of the current group
    pending_bn: list[Any] = []  # the group's SpatialBN / SpatialBNGradient ops
    sums: list[str] = []
    sumsqs: list[str] = []
    first_input: str | None = None
    scale_grads: list[str] = []
    bias_grads: list[str] = []

    def reduce(blobs: list[str]) -> list[Any]:
        combined = f"cpu_0/{_strip(blobs[0])}_combined"
        return [core.CreateOperator("Sum", blobs, combined)] + [core.CreateOperator("Copy", combined, b) for b in blobs]

    def flush() -> None:
        nonlocal pending_stats, pending_bn, sums, sumsqs, first_input, scale_grads, bias_grads
        if not pending_bn:
            return
        new_ops.extend(pending_stats)
        if pending_bn[0].type == "SpatialBN":
            new_ops.append(core.CreateOperator("Sum", sums, first_input + "_sums_combined"))
            new_ops.append(core.CreateOperator("Sum", sumsqs, first_input + "_sumsq_combined"))
        else:
            new_ops.extend(reduce(scale_grads))
            new_ops.extend(reduce(bias_grads))
        new_ops.extend(pending_bn)
        pending_stats, pending_bn, sums, sumsqs, scale_grads, bias_grads = [], [], [], [], [], []
        first_input = None

    for op in list(model.net.Proto().op):
        if op.type not in ("SpatialBN", "SpatialBNGradient") or (pending_bn and pending_bn[0].type != op.type):
            flush()
        if op.type == "SpatialBN":
            x = op.input[0]
            first_input = first_input or x
            pending_stats.append(core.CreateOperator("ChannelStats", x, [x + "_sums", x + "_sumsq"]))
            sums.append(x + "_sums")
            sumsqs.append(x + "_sumsq")
            op.input.extend([first_input + "_sums_combined", first_input + "_sumsq_combined"])
            op.arg.append(make_argument("num_batches", n_devices))
            pending_bn.append(op)
        elif op.type == "SpatialBNGradient":
            pending_stats.append(
                core.CreateOperator(
                    "ChannelBackpropStats",
                    [op.input[0], op.input[3], op.input[4], op.input[2]],
                    [op.output[1], op.output[2]],
                )
            )
            scale_grads.append(op.output[1])
            bias_grads.append(op.output[2])
            op.arg.append(make_argument("num_batches", n_devices))
            op.input.extend([op.output[1], op.output[2]])
            pending_bn.append(op)
        else:
            new_ops.append(op)
    flush()
    del model.net.Proto().op[:]
    model.net.Proto().op.extend(new_ops)


def _master_prefix(model: Any) -> str:
    return f"{model._device_prefix}_{model._devices[0]}/"


def prune_parameters_for_sharing(model: Any) -> None:
    master = _master_prefix(model)
    model.params = [p for p in model.params if str(p).startswith(master)]
    keep = {str(p) for p in model.params}
    model.param_to_grad = {p: g for p, g in model.param_to_grad.items() if str(p) in keep}
    model.weights = [w for w in model.weights if str(w) in keep]
    model.biases = [b for b in model.biases if str(b) in keep]


def remap_parameters_for_shared_model(model: Any, all_params: Iterable[Any]) -> None:
    master = _master_prefix(model)
    every = {str(p) for p in all_params}
    masters = {str(p) for p in model.params}
    others = every - masters
    for net in (model.param_init_net, model.net):
        kept = []
        for op in net.Proto().op:
            if any(o in others for o in op.output):
                continue  # the non-master copies are neither made nor updated
            op.input[:] = [master + _strip(b) if b in others else b for b in op.input]
            kept.append(op)
        del net.Proto().op[:]
        net.Proto().op.extend(kept)
