"""Caffe2's own node-by-node ONNX -> Caffe2 translation rules (its C++ backend's ``convert_node``).

Caffe2 translated one ONNX node at a time by a fixed table: rename the op type (``MatMul`` ->
``BatchMatMul``, ``Identity`` -> ``Copy``...), rename attributes (``kernel_shape`` -> ``kernels``...),
copy every other attribute as an argument, and for a few op types (``Gemm``, ``Concat``, ``Cast``,
``DynamicSlice``...) emit a short fixed sequence of Caffe2 ops. Every emitted op must be a Caffe2 operator
and every argument one its schema declares (else ``RuntimeError("Don't know how to map unexpected
argument ...")``). Helper blobs are named by a ``DummyName`` generator (``OC2_DUMMY_<n>``).

This module gives those rules (``convert_node``), for Caffe2's ``C.Caffe2Backend`` and for nodes whose op
type is not an ONNX operator at all (a Caffe2 op written into an ONNX graph, which Caffe2's backend ran as
that op). ``framework.onnx.importer`` stays the translation for ONNX's own operators: it checks each
node's semantics against ONNX's, where these rules only rename.

>>> # init_ops, ops = convert_node(make_node("Gemm", ["A", "B", "C"], ["Y"], alpha=2.0), {}, 7, DummyName())
"""

from __future__ import annotations

from typing import Any, Callable, Iterable

from framework.proto.args import make_argument
from framework.proto.framework_pb2 import Argument, OperatorDef, TensorProto

__all__ = ["DummyName", "convert_node", "tensor_fill_op", "CAFFE2_RENAMED_OPERATORS"]

# ONNX op type -> Caffe2 op type where only the name differs.
CAFFE2_RENAMED_OPERATORS = {
    "Caffe2ConvTranspose": "ConvTranspose",
    "GlobalMaxPool": "MaxPool",
    "GlobalAveragePool": "AveragePool",
    "Pad": "PadImage",
    "Neg": "Negative",
    "BatchNormalization": "SpatialBN",
    "InstanceNormalization": "InstanceNorm",
    "MatMul": "BatchMatMul",
    "Upsample": "ResizeNearest",
    "Identity": "Copy",
    "Equal": "EQ",
    "Less": "LT",
    "Greater": "GT",
    "Unsqueeze": "ExpandDims",
    "Tile": "NumpyTile",
    "DynamicSlice": "Slice",
}
_RENAMED_ATTRS = {"kernel_shape": "kernels"}
_PER_OP_RENAMED_ATTRS = {
    "Squeeze": {"axes": "dims"},
    "Unsqueeze": {"axes": "dims"},
    "Transpose": {"perm": "axes"},
    "ConvTranspose": {"output_padding": "adjs"},
    "Selu": {"gamma": "scale"},
}
_EPS = 1e-15


class DummyName:
    """Caffe2's helper-blob namer: ``new_dummy_name()`` gives ``OC2_DUMMY_<n>`` for the smallest n not
    yet used; ``reset(names)`` forgets the past names, takes ``names`` as used and restarts n at 0."""

    def __init__(self) -> None:
        self._used: set[str] = set()
        self._counter = 0

    def reset(self, args: Iterable[str] | None = None) -> None:
        self._used = set(args or ())
        self._counter = 0

    def add_name(self, name: str) -> None:
        self._used.add(name)

    def new_dummy_name(self) -> str:
        while True:
            name = f"OC2_DUMMY_{self._counter}"
            self._counter += 1
            if name not in self._used:
                self._used.add(name)
                return name


class _Node:
    """An ONNX node under conversion: its proto and its attributes, some rewritten or removed."""

    def __init__(self, proto: Any) -> None:
        self.proto = proto
        self.attrs = {a.name: a for a in proto.attribute}  # in the node's order

    def has(self, key: str) -> bool:
        return key in self.attrs

    def get(self, key: str, default: Any) -> Any:
        from onnx import helper

        return helper.get_attribute_value(self.attrs[key]) if key in self.attrs else default

    def set(self, key: str, value: Any) -> None:
        from onnx import helper

        self.attrs[key] = helper.make_attribute(key, value)

    def remove(self, key: str) -> None:
        self.attrs.pop(key, None)


def _argument(name: str, attr: Any) -> Argument:
    """Caffe2's copy of one ONNX attribute into an argument (a tensor attribute becomes its serialized bytes)."""
    from onnx import AttributeProto

    arg = Argument(name=name)
    t = attr.type
    if t == AttributeProto.FLOAT:
        arg.f = attr.f
    elif t == AttributeProto.INT:
        arg.i = attr.i
    elif t == AttributeProto.STRING:
        arg.s = attr.s
    elif t == AttributeProto.TENSOR:
        arg.s = attr.t.SerializeToString()
    elif t == AttributeProto.FLOATS:
        arg.floats.extend(attr.floats)
    elif t == AttributeProto.INTS:
        arg.ints.extend(attr.ints)
    elif t == AttributeProto.STRINGS:
        arg.strings.extend(attr.strings)
    else:
        raise RuntimeError(f"Unsupported ONNX attribute: {attr.name}")
    return arg


def _op(op_type: str, inputs: Iterable[str], outputs: Iterable[str], **args: Any) -> OperatorDef:
    op = OperatorDef(type=op_type, input=list(inputs), output=list(outputs))
    for k, v in args.items():
        op.arg.append(make_argument(k, v))
    return op


def _common(node: _Node) -> list[OperatorDef]:
    """The renaming translation (Caffe2's CommonOnnxNodeToCaffe2Ops)."""
    from framework.ops.registry import has_op

    onnx_type = node.proto.op_type
    op = OperatorDef(type=CAFFE2_RENAMED_OPERATORS.get(onnx_type, onnx_type), name=node.proto.name)
    op.input.extend(node.proto.input)
    op.output.extend(node.proto.output)
    if not has_op(op.type):
        raise RuntimeError(f"Don't know how to translate op {onnx_type}")
    per_op = _PER_OP_RENAMED_ATTRS.get(onnx_type, {})
    for key, attr in node.attrs.items():
        op.arg.append(_argument(per_op.get(key, _RENAMED_ATTRS.get(key, key)), attr))
    return [op]


def _arg_max_min(node: _Node, ctx: "_Context") -> list[OperatorDef]:
    if not node.has("axis"):
        node.set("axis", 0)
    return _common(node)


def _split(node: _Node, ctx: "_Context") -> list[OperatorDef]:
    if not node.has("axis"):
        node.set("axis", 0)
    return _common(node)


# ONNX element types Cast may target, by name (the names are shared, the numbers differ)
_CAST_NAMES = ("FLOAT", "UINT8", "INT8", "UINT16", "INT16", "INT32", "INT64", "STRING", "BOOL", "FLOAT16", "DOUBLE")


def _cast(node: _Node, ctx: "_Context") -> list[OperatorDef]:
    ops = _common(node)
    import onnx

    to = node.get("to", 0)
    name = onnx.TensorProto.DataType.Name(to) if to in onnx.TensorProto.DataType.values() else ""
    if name not in _CAST_NAMES:
        raise RuntimeError(f"Casting to '{to}' dtype is not supported")
    if len(ops[0].arg) != 1:
        raise RuntimeError("Unexpected number of attributes in 'Cast'")
    ops[0].arg[0].i = TensorProto.DataType.Value(name)
    return ops


def _constant(node: _Node, ctx: "_Context") -> list[OperatorDef]:
    if len(node.proto.output) != 1:
        raise RuntimeError("Constant must have exactly one output")
    return [tensor_fill_op(node.get("value", None), node.proto.output[0])]


def _conv_pool(node: _Node, ctx: "_Context") -> list[OperatorDef]:
    if node.proto.op_type.startswith("Global"):
        node.set("global_pooling", 1)
    if node.has("kernel_shape") and node.has("pads"):
        kernel, pads = list(node.get("kernel_shape", [])), list(node.get("pads", []))
        if len(kernel) == len(pads):  # Caffe2 wants a begin and an end pad per spatial axis
            node.set("pads", pads + pads)
    return _common(node)


def _with_dummy_output(node: _Node, ctx: "_Context") -> list[OperatorDef]:
    """Reshape and Concat: Caffe2's ops have a second output (old shape / split sizes)."""
    ops = _common(node)
    ops[0].output.append(ctx.dummy.new_dummy_name())
    return ops


def _reciprocal(node: _Node, ctx: "_Context") -> list[OperatorDef]:
    p = node.proto
    if len(p.input) != 1 or len(p.output) != 1:
        raise RuntimeError("Caffe2 Reciprocal should have 1 input and 1 output")
    return [_op("Pow", p.input, p.output, exponent=-1.0)]


def _gather(node: _Node, ctx: "_Context") -> list[OperatorDef]:
    p = node.proto
    if len(p.input) < 2 or len(p.output) < 1:
        raise RuntimeError("Caffe2 Gather should have 2 inputs and 1 output")
    axis = node.get("axis", 0)
    if axis not in (0, 1):
        raise RuntimeError(f"Caffe2 only supports Gather with axis being 0 or 1, whereas axis is {axis}")
    return [_op("Gather" if axis == 0 else "BatchGather", p.input[:2], p.output[:1])]


def _gemm(node: _Node, ctx: "_Context") -> list[OperatorDef]:
    p = node.proto
    if len(p.input) < 3 or len(p.output) < 1:
        raise RuntimeError("Caffe2 Gemm should have 3 inputs and 1 output")
    a, b, c = p.input[:3]
    out = p.output[0]
    ops: list[OperatorDef] = []
    alpha, beta = float(node.get("alpha", 1.0)), float(node.get("beta", 1.0))
    if abs(alpha - 1) >= _EPS:
        scaled = ctx.dummy.new_dummy_name()
        ops.append(_op("Scale", [a], [scaled], scale=alpha))
        a = scaled
    if abs(beta - 1) >= _EPS:
        scaled = ctx.dummy.new_dummy_name()
        ops.append(_op("Scale", [c], [scaled], scale=beta))
        c = scaled
    trans_a, trans_b = int(node.get("transA", 0)), int(node.get("transB", 0))
    broadcast = int(node.get("broadcast", 1 if ctx.opset > 6 else 0))
    if not trans_a and broadcast and _c_fits_fc(ctx, p.input[1], p.input[2], trans_b):
        ops.append(_op("FC" if trans_b else "FCTransposed", [a, b, c], [out]))
        return ops
    ab = ctx.dummy.new_dummy_name()
    ops.append(_op("MatMul", [a, b], [ab], trans_a=trans_a, trans_b=trans_b))
    if ctx.opset >= 7:
        ops.append(_op("Add", [ab, c], [out]))
    else:
        ops.append(_op("Add", [ab, c], [out], broadcast=broadcast))
    return ops


def _c_fits_fc(ctx: "_Context", b: str, c: str, trans_b: int) -> bool:
    """Gemm becomes FC when C is known to be 1-D, and, when it has one element, B's output dim is 1."""
    c_shape = ctx.shape(c)
    if c_shape is None or len(c_shape) != 1:
        return False
    if c_shape[0] == 1:
        b_shape = ctx.shape(b)
        last = 0 if trans_b else 1
        if b_shape is None or len(b_shape) <= last or b_shape[last] != 1:
            return False
    return True


def _log_softmax(node: _Node, ctx: "_Context") -> list[OperatorDef]:
    p = node.proto
    if len(p.input) < 1 or len(p.output) < 1:
        raise RuntimeError("LogSoftmax should have 1 input and 1 output")
    soft = ctx.dummy.new_dummy_name()
    return [_op("Softmax", p.input[:1], [soft], axis=int(node.get("axis", 1))), _op("Log", [soft], p.output[:1])]


def _batch_norm(node: _Node, ctx: "_Context") -> list[OperatorDef]:
    if ctx.opset < 6:
        node.remove("consumed_inputs")
    if ctx.opset >= 7:
        node.set("is_test", 1)
    if node.has("spatial") and node.get("spatial", 0) == 1:
        node.remove("spatial")
    return _common(node)


def _mat_mul(node: _Node, ctx: "_Context") -> list[OperatorDef]:
    if len(node.proto.input) != 2:
        raise RuntimeError("MatMul should have 2 inputs")
    ops = _common(node)
    ops[0].arg.append(make_argument("broadcast", 1))
    return ops


def _upsample(node: _Node, ctx: "_Context") -> list[OperatorDef]:
    node.remove("mode")
    if ctx.opset < 7:
        return _common(node)
    scales = list(node.get("scales", []))
    if len(scales) != 4:
        raise RuntimeError("The scales argument should have size 4")
    if abs(scales[0] - 1) >= _EPS or abs(scales[1] - 1) >= _EPS:
        raise RuntimeError("The first two elements in the scales argument must be 1")
    node.remove("scales")
    ops = _common(node)
    ops[0].arg.extend([make_argument("height_scale", float(scales[2])), make_argument("width_scale", float(scales[3]))])
    return ops


def _dropout(node: _Node, ctx: "_Context") -> list[OperatorDef]:
    if ctx.opset >= 7:
        node.set("is_test", 1)
    return _common(node)


def _lrn(node: _Node, ctx: "_Context") -> list[OperatorDef]:
    had_alpha, had_beta = node.has("alpha"), node.has("beta")
    ops = _common(node)
    if not had_alpha:
        ops[0].arg.append(make_argument("alpha", 1e-4))
    if not had_beta:
        ops[0].arg.append(make_argument("beta", 0.75))
    return ops


def _dynamic_slice(node: _Node, ctx: "_Context") -> list[OperatorDef]:
    """Slice with starts/ends (and axes) as run-time inputs: both are widened to the data's rank
    (start 0 and end -1 on unnamed axes) and a negative index moves down by one, as Caffe2's Slice
    counts a negative end from one past the last element.

    Departure: with three inputs the axes are 0..len(starts)-1 of a Range; Caffe2 read a fourth
    input that was not there."""
    base = _common(node)[0]
    p = node.proto
    data, starts, ends = p.input[0], p.input[1], p.input[2]
    d = ctx.dummy
    ops: list[OperatorDef] = []
    size, rank = d.new_dummy_name(), d.new_dummy_name()
    ops += [_op("Shape", [data], [size]), _op("Shape", [size], [rank])]
    if len(p.input) > 3:
        axes = p.input[3]
    else:
        axes = d.new_dummy_name()
        ops.append(_op("Range", [rank], [axes]))

    def int_constant(value: int) -> str:
        name = d.new_dummy_name()
        ops.append(_op("ConstantFill", [], [name], value=value, dtype=TensorProto.INT64, shape=[1]))
        return name

    zero, one = int_constant(0), int_constant(1)

    def full_index(indices: str, default: int) -> str:
        full, lt, minus_one, adjusted = (d.new_dummy_name() for _ in range(4))
        ops.append(_op("ConstantFill", [rank], [full], value=default, dtype=TensorProto.INT64, input_as_shape=1))
        ops.append(_op("LT", [indices, zero], [lt], broadcast=1))
        ops.append(_op("Sub", [indices, one], [minus_one], broadcast=1))
        ops.append(_op("Conditional", [lt, minus_one, indices], [adjusted]))
        ops.append(_op("ScatterAssign", [full, axes, adjusted], [full]))
        return full

    full_starts = full_index(starts, 0)
    full_ends = full_index(ends, -1)
    sliced = OperatorDef()
    sliced.CopyFrom(base)
    del sliced.input[:]
    sliced.input.extend([data, full_starts, full_ends])
    ops.append(sliced)
    return ops


_SPECIAL: dict[str, Callable[[_Node, "_Context"], list[OperatorDef]]] = {
    "ArgMax": _arg_max_min,
    "ArgMin": _arg_max_min,
    "Cast": _cast,
    "Constant": _constant,
    "Conv": _conv_pool,
    "GlobalMaxPool": _conv_pool,
    "MaxPool": _conv_pool,
    "Reshape": _with_dummy_output,
    "Concat": _with_dummy_output,
    "Gather": _gather,
    "Gemm": _gemm,
    "LogSoftmax": _log_softmax,
    "Split": _split,
    "Reciprocal": _reciprocal,
    "BatchNormalization": _batch_norm,
    "MatMul": _mat_mul,
    "Upsample": _upsample,
    "Dropout": _dropout,
    "LRN": _lrn,
    "DynamicSlice": _dynamic_slice,
}


class _Context:
    def __init__(self, value_infos: dict[str, Any], opset: int, dummy: Any) -> None:
        self.value_infos = value_infos
        self.opset = opset
        self.dummy = dummy

    def shape(self, name: str) -> tuple | None:
        vi = self.value_infos.get(name)
        if vi is None:
            return None
        return tuple(int(d.dim_value) for d in vi.type.tensor_type.shape.dim)


def convert_node(node: Any, value_infos: dict[str, Any], opset: int, dummy: Any) -> tuple[list, list]:
    """(init ops, ops): Caffe2's translation of the ONNX NodeProto ``node``.

    ``value_infos`` maps blob names to ONNX ValueInfoProtos (shapes some rules look at); ``dummy`` names
    helper blobs (``new_dummy_name()``). RuntimeError for an op or argument Caffe2 has no mapping for.
    """
    from framework.ops.registry import get_schema, has_op

    ctx = _Context(value_infos, int(opset), dummy)
    rule = _SPECIAL.get(node.op_type, lambda n, c: _common(n))
    ops = rule(_Node(node), ctx)
    for op in ops:
        if not has_op(op.type):
            raise RuntimeError(f"Caffe2 has no such operator, could not find schema for {op.type}")
        declared = get_schema(op.type).args
        if declared:
            for arg in op.arg:
                if arg.name not in declared:
                    raise RuntimeError(
                        f"Don't know how to map unexpected argument {arg.name} (from operator {op.type})"
                    )
    return [], ops


# ONNX element type -> (fill op, argument field)
_FILLS = {
    1: ("GivenTensorFill", "floats"),
    11: ("GivenTensorDoubleFill", "floats"),
    7: ("GivenTensorInt64Fill", "ints"),
    12: ("GivenTensorInt64Fill", "ints"),
    2: ("GivenTensorIntFill", "ints"),
    3: ("GivenTensorIntFill", "ints"),
    4: ("GivenTensorIntFill", "ints"),
    5: ("GivenTensorIntFill", "ints"),
    6: ("GivenTensorIntFill", "ints"),
    9: ("GivenTensorBoolFill", "ints"),
    8: ("GivenTensorStringFill", "strings"),
}


def tensor_fill_op(tensor: Any, name: str | None = None) -> OperatorDef:
    """The GivenTensor*Fill op that makes the ONNX TensorProto ``tensor`` as blob ``name`` (default: the
    tensor's name): float -> GivenTensorFill, double -> ...DoubleFill, int64/uint32 -> ...Int64Fill,
    smaller integers -> ...IntFill, bool -> ...BoolFill, string -> ...StringFill. RuntimeError for others."""
    from onnx import numpy_helper

    name = name or tensor.name
    if not name:
        raise RuntimeError("a tensor filling op needs a name: the tensor has none")
    if tensor.data_type not in _FILLS:
        raise RuntimeError(f"unrecognized tensor type {tensor.data_type}")
    op_type, kind = _FILLS[tensor.data_type]
    op = OperatorDef(type=op_type, output=[name])
    values = Argument(name="values")
    if kind == "strings":
        values.strings.extend(tensor.string_data)
    else:
        flat = numpy_helper.to_array(tensor).reshape(-1)
        getattr(values, kind).extend(flat.astype(float if kind == "floats" else "int64").tolist())
    op.arg.append(values)
    op.arg.append(make_argument("shape", [int(d) for d in tensor.dims]))
    return op
