"""``caffe2.python.onnx.error``: Caffe2's ONNX exception types (``Unsupported`` for a model the
conversion cannot handle)."""

from __future__ import annotations

__all__ = ["BaseException", "Unsupported"]


class BaseException(Exception):
    """The base of Caffe2's ONNX errors."""


class Unsupported(BaseException):
    """A model or node the conversion does not support."""
