"""Caffe2's ``caffe2.python.onnx.frontend`` under its names, over ``framework.onnx.export``.

``Caffe2Frontend.caffe2_net_to_onnx_model(predict_net, init_net=None, value_info=None)`` with
``value_info`` = {input name: (onnx TensorProto elem type, shape)}, as Caffe2's; the model is
checked and shape-inferred. ``caffe2_net_to_onnx_graph`` returns its graph.

>>> # model = Caffe2Frontend.caffe2_net_to_onnx_model(predict_net, init_net, {"data": (1, [1, 3, 32, 32])})
"""

from __future__ import annotations

from typing import Any

from framework.onnx.exporter import default_opset, export

__all__ = ["Caffe2Frontend", "caffe2_net_to_onnx_model", "caffe2_net_to_onnx_graph"]


class Caffe2Frontend:
    # Caffe2's frontend targeted a fixed opset; here: the newest both onnx and onnxruntime support.
    @classmethod
    def target_opset_version(cls) -> int:
        return default_opset()

    @classmethod
    def caffe2_net_to_onnx_model(
        cls, predict_net: Any, init_net: Any = None, value_info: Any = None, opset: Any = None
    ):
        return export(predict_net, init_net, value_info=value_info, opset=opset)

    @classmethod
    def caffe2_net_to_onnx_graph(
        cls, predict_net: Any, init_net: Any = None, value_info: Any = None, opset: Any = None
    ):
        return cls.caffe2_net_to_onnx_model(predict_net, init_net, value_info, opset).graph


caffe2_net_to_onnx_model = Caffe2Frontend.caffe2_net_to_onnx_model
caffe2_net_to_onnx_graph = Caffe2Frontend.caffe2_net_to_onnx_graph
