"""``caffe2.python.onnx.backend_rep``: the prepared model (``Caffe2Rep``: ``run(inputs)`` returns the
outputs as a namedtuple), ``framework.onnx.backend``'s."""

from __future__ import annotations

from framework.onnx.backend import Caffe2Rep

__all__ = ["Caffe2Rep"]
