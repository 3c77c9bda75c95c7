"""The ONNX part of Caffe2's pybind module: ``C.DummyName`` and ``C.Caffe2Backend`` (its C++ ONNX
backend's node converter), over ``framework.onnx.caffe2_rules``.

Everything crosses this boundary as serialized protobuf bytes, as through Caffe2's binding.
"""

from __future__ import annotations

from typing import Any, Sequence

from framework.onnx.caffe2_rules import DummyName, convert_node, tensor_fill_op

__all__ = ["Caffe2Backend", "DummyName", "KNOWN_OPSET_VERSION", "new_dummy_name", "reset_dummy_name"]

# The ONNX opset Caffe2's C++ backend was written against (its convert_node default).
KNOWN_OPSET_VERSION = 9

# Op types Caffe2's C++ converter has a rule of its own for (``support_onnx_import``).
_SPECIAL_TYPES = frozenset(
    ("ArgMax", "ArgMin", "Cast", "Constant", "Conv", "AveragePool", "GlobalAveragePool", "GlobalMaxPool", "MaxPool",
     "Reshape", "Gather", "Gemm", "Pad", "Concat", "LogSoftmax", "Slice", "Split", "Reciprocal",
     "BatchNormalization", "MatMul", "Upsample", "Dropout", "LRN", "DynamicSlice")
)  # fmt: skip


class Caffe2Backend:
    """``C.Caffe2Backend([dummy_name])``: converts single ONNX nodes with Caffe2's rules."""

    def __init__(self, dummy: DummyName | None = None) -> None:
        self._dummy = dummy if dummy is not None else DummyName()

    def support_onnx_import(self, op_type: str) -> bool:
        """Whether Caffe2's converter has a rule of its own for ``op_type`` (others are renamed only)."""
        return op_type in _SPECIAL_TYPES

    def convert_node(
        self, node_str: bytes, value_infos_bytes: Sequence[bytes] = (), opset_version: int = KNOWN_OPSET_VERSION
    ) -> list[list[bytes]]:
        """``[init ops, ops]`` as serialized OperatorDefs for one serialized ONNX NodeProto;
        ``value_infos_bytes`` are serialized ValueInfoProtos (the shapes the Gemm rule looks at).
        RuntimeError for an op type or argument Caffe2 has no mapping for."""
        import onnx

        node = onnx.NodeProto()
        node.ParseFromString(bytes(node_str))
        infos: dict[str, Any] = {}
        for b in value_infos_bytes:
            vi = onnx.ValueInfoProto()
            vi.ParseFromString(bytes(b))
            infos[vi.name] = vi
        init_ops, ops = convert_node(node, infos, opset_version, self._dummy)
        return [[op.SerializeToString() for op in init_ops], [op.SerializeToString() for op in ops]]

    def _build_tensor_filling_op(self, tensor_str: bytes, name: str = "") -> bytes:
        """The serialized GivenTensor*Fill OperatorDef making a serialized ONNX TensorProto."""
        import onnx

        tensor = onnx.TensorProto()
        tensor.ParseFromString(bytes(tensor_str))
        return tensor_fill_op(tensor, name or None).SerializeToString()


# The 2018 binding's one process-wide namer (``C.new_dummy_name()``, ``C.reset_dummy_name(names)``).
_GLOBAL_DUMMY = DummyName()


def new_dummy_name() -> str:
    return _GLOBAL_DUMMY.new_dummy_name()


def reset_dummy_name(names: Any = None) -> None:
    _GLOBAL_DUMMY.reset(names)
