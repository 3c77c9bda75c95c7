"""``caffe2.python.onnx.frontend``: Caffe2 NetDef -> ONNX model (``caffe2_net_to_onnx_model``), the
framework's exporter under Caffe2's names (``framework.onnx.frontend``) with Caffe2's interface (value info
required for every input, initializers also listed as graph inputs), plus Caffe2's SSA rewrite.

``Caffe2Frontend.ssa_rewrite(net, init_net, value_info)`` renames, in place, every blob of ``net`` written
more than once to ``<name>_<version>`` (its SSA version from ``core.get_ssa``; a blob with a single
version keeps its name), inputs and external outputs included, so each name is written once as ONNX
requires. ``init_net`` (if given) may hold only single-output ``GivenTensor*Fill`` ops and is left as it
is; ``value_info`` is not changed.
"""

from __future__ import annotations

import re
from typing import Any

from framework.caffe2.python.core_ssa import get_ssa
from framework.errors import FrameworkError
from framework.onnx.frontend import Caffe2Frontend as _Frontend

__all__ = [
    "Caffe2Frontend",
    "caffe2_net_to_onnx_graph",
    "caffe2_net_to_onnx_model",
    "ssa_rewrite",
]


class Caffe2Frontend(_Frontend):
    @classmethod
    def caffe2_net_to_onnx_model(
        cls, predict_net: Any, init_net: Any = None, value_info: Any = None, opset: Any = None
    ) -> Any:
        """As ``framework.onnx.frontend``'s, with Caffe2's interface: every external input of ``predict_net``
        needs a type and shape from ``value_info`` or ``init_net`` (else RuntimeError "Could not find value
        info of inputs: ..."), and, as Caffe2 listed them, the external inputs the init net makes are graph
        inputs as well as initializers (in the net's external-input order)."""
        made = {o for op in init_net.op for o in op.output} if init_net is not None else set()
        missing = [n for n in predict_net.external_input if n not in made and n not in (value_info or {})]
        if missing:
            raise RuntimeError(f"Could not find value info of inputs: {', '.join(missing)}")
        model = super().caffe2_net_to_onnx_model(predict_net, init_net, value_info, opset)
        _initializers_as_inputs(model, list(predict_net.external_input))
        return model

    @classmethod
    def caffe2_net_to_onnx_graph(
        cls, predict_net: Any, init_net: Any = None, value_info: Any = None, opset: Any = None
    ) -> Any:
        return cls.caffe2_net_to_onnx_model(predict_net, init_net, value_info, opset).graph

    @classmethod
    def ssa_rewrite(cls, net: Any, init_net: Any, value_info: Any) -> None:
        cls._ssa_rewrite(net, init_net, value_info)

    @classmethod
    def _ssa_rewrite(cls, net: Any, init_net: Any, value_info: Any) -> None:
        if init_net:
            for op in init_net.op:
                if not re.match("GivenTensor.*Fill", op.type) or len(op.output) != 1:
                    raise FrameworkError(
                        f"ssa_rewrite: the init net may hold only single-output GivenTensor*Fill ops, "
                        f"found {op.type} writing {list(op.output)}"
                    )
        ssa, blob_versions = get_ssa(net)
        versions: dict[str, set[int]] = {}
        for inputs, outputs in ssa:
            for name, version in inputs + outputs:
                versions.setdefault(name, set()).add(version)

        def ssa_name(name: str, version: int) -> str:
            if version == 0 or len(versions.get(name, ())) <= 1:
                return name
            return f"{name}_{version}"

        for op, (inputs, outputs) in zip(net.op, ssa):
            op.input[:] = [ssa_name(n, v) for n, v in inputs]
            op.output[:] = [ssa_name(n, v) for n, v in outputs]
        net.external_output[:] = [ssa_name(n, blob_versions[n]) for n in net.external_output]


def _initializers_as_inputs(model: Any, external_inputs: list[str]) -> None:
    from onnx import helper

    graph = model.graph
    inputs = {vi.name: vi for vi in graph.input}
    inits = {t.name: t for t in graph.initializer}
    ordered = []
    for name in external_inputs:
        if name in inputs:
            ordered.append(inputs.pop(name))
        elif name in inits:
            t = inits[name]
            ordered.append(helper.make_tensor_value_info(name, t.data_type, list(t.dims)))
    ordered += list(inputs.values())
    del graph.input[:]
    graph.input.extend(ordered)


caffe2_net_to_onnx_model = Caffe2Frontend.caffe2_net_to_onnx_model
caffe2_net_to_onnx_graph = Caffe2Frontend.caffe2_net_to_onnx_graph
ssa_rewrite = Caffe2Frontend.ssa_rewrite
