"""An ONNX backend on our ops (``onnx.backend.base.Backend``), with Caffe2's backend names.

``prepare(model)`` translates the graph into an init NetDef (initializers as GivenTensor*Fill ops)
and a predict NetDef of our ops (``framework.onnx.importer``), runs the init net once in a private
workspace and returns a rep whose ``run(inputs)`` feeds the inputs, runs the predict net on our
executor and returns the outputs. A model with any node we cannot translate exactly makes
``prepare`` raise ``unittest.SkipTest`` listing every such node (type, domain, opset): never a
wrong answer. ``Caffe2Backend.onnx_graph_to_caffe2_net(model)`` gives the two NetDefs.

>>> # rep = prepare(onnx.load("model.onnx")); (y,) = rep.run([x])
"""

from __future__ import annotations

import unittest
from collections import namedtuple
from typing import Any, Sequence

import numpy as np

from framework.memory.workspace import Workspace
from framework.onnx.importer import OnnxImportError, onnx_graph_to_nets

__all__ = ["Caffe2Backend", "Caffe2Rep", "prepare", "run_model", "run_node", "supports_device"]

try:  # onnx is optional: the base classes only shape the API
    from onnx.backend.base import Backend as _Backend
    from onnx.backend.base import BackendRep as _BackendRep
except ImportError:  # pragma: no cover
    _Backend = _BackendRep = object


class Caffe2Rep(_BackendRep):
    """A prepared model: its workspace (parameters loaded) and predict net."""

    def __init__(self, init_net: Any, predict_net: Any, extra: dict, inputs: list[str], outputs: list[str]) -> None:
        self.init_net = init_net
        self.predict_net = predict_net
        self.workspace = Workspace()
        self.uninitialized = list(inputs)
        self.outputs = list(outputs)
        for name, value in extra.items():
            self.workspace.feed_blob(name, value)
        self.workspace.run_net_once(init_net)
        self._net = None

    def run(self, inputs: Any, **kwargs: Any) -> tuple:
        ws = self.workspace
        if isinstance(inputs, dict):
            feeds = dict(inputs)
        elif isinstance(inputs, (list, tuple)):
            if len(inputs) > len(self.uninitialized):
                raise ValueError(f"{len(inputs)} inputs given, the model takes {len(self.uninitialized)}")
            feeds = dict(zip(self.uninitialized, inputs))
        else:
            feeds = {self.uninitialized[0]: inputs}
        for k, v in feeds.items():
            ws.feed_blob(k, np.asarray(v))
        if self._net is None:
            self._net = ws.create_net(self.predict_net, overwrite=True)
        self._net.run()
        Outputs = namedtuple("Outputs", [f"o{i}" for i in range(len(self.outputs))], rename=True)  # noqa: N806
        return Outputs(*[ws.fetch_blob(o) for o in self.outputs])


class Caffe2Backend(_Backend):
    @classmethod
    def onnx_graph_to_caffe2_net(cls, model: Any, device: str = "CPU", opset_version: int | None = None) -> tuple:
        """(init_net, predict_net) NetDefs; OnnxImportError listing every node without a translation."""
        init, predict, extra, unsupported = _translate(model)
        if unsupported:
            raise OnnxImportError(_message(model, unsupported), unsupported)
        if extra:
            raise OnnxImportError(
                "initializers of types without a GivenTensor*Fill op: " + ", ".join(sorted(extra)), list(extra)
            )
        return init, predict

    @classmethod
    def prepare(cls, model: Any, device: str = "CPU", **kwargs: Any) -> Caffe2Rep:
        if isinstance(model, (str, bytes)):
            import onnx

            model = onnx.load(model) if isinstance(model, str) else onnx.load_from_string(model)
        init, predict, extra, unsupported = _translate(model)
        if unsupported:
            raise unittest.SkipTest(_message(model, unsupported))
        init_names = {o for o in init.external_output} | set(extra)
        inputs = [i.name for i in model.graph.input if i.name not in init_names]
        return Caffe2Rep(init, predict, extra, inputs, [o.name for o in model.graph.output])

    @classmethod
    def run_model(cls, model: Any, inputs: Any, device: str = "CPU", **kwargs: Any) -> tuple:
        return cls.prepare(model, device, **kwargs).run(inputs)

    @classmethod
    def run_node(cls, node: Any, inputs: Any, device: str = "CPU", outputs_info: Any = None, **kwargs: Any) -> tuple:
        """Run one NodeProto on ``inputs`` (a list in the node's input order, or a dict)."""
        from onnx import helper

        names = [n for n in node.input if n]
        if isinstance(inputs, dict):
            arrays = [np.asarray(inputs[n]) for n in names]
        else:
            arrays = [np.asarray(v) for v in inputs]
        vis = [
            helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(a.dtype), list(a.shape))
            for n, a in zip(names, arrays)
        ]
        outs = [helper.make_empty_tensor_value_info(o) for o in node.output if o]
        opset = kwargs.get("opset_version")
        graph = helper.make_graph([node], "run_node", vis, outs)
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)] if opset else None)
        return cls.prepare(model, device).run(dict(zip(names, arrays)))

    @classmethod
    def supports_device(cls, device: str) -> bool:
        return str(device).upper().startswith("CPU")


def _translate(model: Any) -> tuple:
    return onnx_graph_to_nets(model)


def _message(model: Any, unsupported: Sequence[str]) -> str:
    opsets = ", ".join(f"{o.domain or 'ai.onnx'} {o.version}" for o in model.opset_import)
    return f"framework's ONNX backend cannot run {len(unsupported)} node(s) (opsets {opsets}):\n  " + "\n  ".join(
        unsupported
    )


prepare = Caffe2Backend.prepare
run_model = Caffe2Backend.run_model
run_node = Caffe2Backend.run_node
supports_device = Caffe2Backend.supports_device
