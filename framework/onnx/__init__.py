"""ONNX interop: export Caffe2 NetDefs to ONNX (``export``; Caffe2's ``frontend``).

Needs the ``onnx`` extra (``pip install 'framework[onnx]'``); importing this package does not.

>>> # model = export(predict_net, init_net, input_shapes={"data": (1, 3, 224, 224)})
>>> # onnx.save(model, "model.onnx")
"""

from __future__ import annotations

from typing import Any

from framework.onnx.context import OnnxExportError

__all__ = ["export", "OnnxExportError", "default_opset", "exportable_op_types"]


def export(*args: Any, **kwargs: Any) -> Any:
    from framework.onnx.exporter import export as _export

    return _export(*args, **kwargs)


def default_opset() -> int:
    from framework.onnx.exporter import default_opset as _default

    return _default()


def exportable_op_types() -> list[str]:
    from framework.onnx.exporter import exportable_op_types as _types

    return _types()
