"""``caffe2.python.onnx.backend``: the ONNX backend (``prepare``, ``run_model``, ``run_node``) under Caffe2's
names; it is ``framework.onnx.backend``'s (ONNX graphs translated onto our ops, run on our executors)."""

from __future__ import annotations

from framework.onnx.backend import (
    Caffe2Backend,
    Caffe2Rep,
    load_model,
    prepare,
    prepare_zip_archive,
    run_model,
    run_node,
    supports_device,
)

__all__ = [
    "Caffe2Backend",
    "Caffe2Rep",
    "is_compatible",
    "load_model",
    "prepare",
    "prepare_zip_archive",
    "run_model",
    "run_node",
    "supports_device",
]


def is_compatible(model, device: str = "CPU", **kwargs) -> bool:
    """Caffe2's optimistic answer: every model on a supported device (``prepare`` tells the truth)."""
    return supports_device(device)
