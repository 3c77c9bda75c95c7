"""``caffe2.python.hip_test_util``: whether a test's device options put it on a HIP (ROCm) device.

On this CPU-only build no generated device option is HIP, so tests take their CPU/CUDA branch, as on
a Caffe2 built without ROCm."""

from __future__ import annotations

from typing import Any, Iterable

from framework.proto.caffe2_pb2 import HIP


def run_in_hip(gc: Any, dc: Iterable[Any]) -> bool:
    """True when the gradient-check device ``gc`` or any device in ``dc`` is a HIP device."""
    return gc.device_type == HIP or any(d.device_type == HIP for d in dc)
