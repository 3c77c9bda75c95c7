"""``caffe2.python.data_parallel_model_utils``: activations of a data-parallel model and Caffe2's simple
model parallelism (moving the ops around some activations to another device).

- ``GetActivationBlobs(model)``: the activations of the first replica, without its ``<prefix>_<d>/``: blobs
  an op of ``model.net`` writes under that prefix, that some op reads, that are not parameters or gradients,
  and whose gradient some op reads.
- ``ShiftActivationDevices(model, activations, shifts)``: for each ``from_device -> to_device`` of ``shifts``
  (no device may be both), the ops of replica ``from_device`` that touch the given activations move to
  ``to_device`` (their ``device_option.device_id``), spreading to the other blobs of that replica as Caffe2's
  label propagation does, and so do the parameter initialisers of the blobs that moved. Caffe2 then inserts
  cross-device copies; everything runs on the CPU here, so none are needed and the nets run as they are.
"""

from __future__ import annotations

import logging
from typing import Any, Sequence

__all__ = ["GetActivationBlobs", "ShiftActivationDevices"]

log = logging.getLogger("data_parallel_model_utils")


def _strip(name: str) -> str:
    return name[name.index("/") + 1 :] if "/" in name else name


def GetActivationBlobs(model: Any) -> list[str]:
    prefix = f"{model._device_prefix}_{model._devices[0]}/"
    ops = list(model.net.Proto().op)
    read = {b for op in ops for b in op.input}
    params = {str(p) for p in model.GetParams("")}
    out = []
    for op in ops:
        for b in op.output:
            if b.startswith(prefix) and not b.endswith("_grad") and b in read and b not in params:
                if b + "_grad" in read:
                    out.append(_strip(b))
    return out


def _shift(model: Any, activations: Sequence[str], from_device: int, to_device: int) -> None:
    prefix = f"{model._device_prefix}_{from_device}/"
    moved = {prefix + a for a in activations}
    every = {prefix + a for a in GetActivationBlobs(model)}
    device = {b: to_device for b in moved}
    device.update({b: from_device for b in every if b not in moved})
    for op in model.net.Proto().op:
        if op.device_option.device_id != from_device:
            continue
        op_device = None
        for b in list(op.input) + list(op.output):
            if b in device and (b in every or op_device is None):
                op_device = device[b]  # an activation decides; the last one seen wins
        if op_device is None:
            op_device = op.device_option.device_id
        for b in list(op.input) + list(op.output):
            if b not in device and b.startswith(prefix):
                device[b] = op_device
        op.device_option.device_id = op_device
    for op in model.param_init_net.Proto().op:
        if op.output and op.output[0] in device:
            op.device_option.device_id = device[op.output[0]]


def ShiftActivationDevices(model: Any, activations: Sequence[str], shifts: dict[int, int]) -> None:
    if set(shifts.values()) & set(shifts):
        raise ValueError(f"ShiftActivationDevices: a device is both a source and a target in {shifts}")
    for from_device, to_device in shifts.items():
        log.info("Shifting %d activations from %d --> %d", len(activations), from_device, to_device)
        _shift(model, activations, from_device, to_device)
