"""The newest ONNX opset the installed onnxruntime accepts (probed once with a one-node model)."""

from __future__ import annotations

import functools


@functools.lru_cache(maxsize=1)
def ort_max_opset() -> int:
    import onnx
    import onnxruntime as ort
    from onnx import TensorProto, helper

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [1])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"])], "probe", [x], [y])
    for v in range(onnx.defs.onnx_opset_version(), 6, -1):
        model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", v)])
        try:
            ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
            return v
        except Exception:  # this build refuses the opset: try the one below
            continue
    return 7
