"""ONNX graph -> (init NetDef, predict NetDef) of our ops (``onnx_graph_to_nets``).

Each ONNX node goes through a translator (``framework/onnx/import_*.py``) registered for its op
type; the translator emits Caffe2 ops where their semantics match ONNX's for this node's
attributes, input types and (when known) shapes, and raises ``Unsupported`` otherwise. Types and
shapes come from ``onnx.shape_inference``; initializers and Constant nodes are known values (a
translator can fold them into arguments, e.g. Reshape's shape). Every unsupported node is
collected; the caller decides (the backend raises ``unittest.SkipTest`` listing them all).
"""

from __future__ import annotations

from typing import Any, Callable, Sequence

import numpy as np

from framework.errors import FrameworkError
from framework.proto.args import make_argument
from framework.proto.framework_pb2 import NetDef, OperatorDef

__all__ = ["Unsupported", "NeedsRuntime", "OnnxImportError", "onnx_graph_to_nets", "TRANSLATORS", "translator"]


class Unsupported(Exception):
    """This node (with these attributes/types) has no exact translation."""


class NeedsRuntime(Unsupported):
    """The translation needs a value or shape known only when the inputs are fed (the backend then
    translates again at run time with them)."""


class OnnxImportError(FrameworkError, ValueError):
    """The ONNX model cannot be translated: lists every unsupported node."""

    def __init__(self, message: str, nodes: Sequence[str]) -> None:
        super().__init__(message)
        self.nodes = list(nodes)


TRANSLATORS: dict[str, tuple[Callable, tuple[int, int]]] = {}


def translator(*op_types: str, opsets: tuple[int, int] = (1, 10_000), domain: str = "ai.onnx") -> Callable:
    """Register a translator for ``op_types`` of ``domain`` for that domain's opset range ``opsets``
    (keys: the op type for the default domain, ``"domain:OpType"`` for others, e.g. ai.onnx.ml)."""

    def deco(fn: Callable) -> Callable:
        for t in op_types:
            TRANSLATORS[t if domain == "ai.onnx" else f"{domain}:{t}"] = (fn, opsets)
        return fn

    return deco


FLOATS = (np.dtype(np.float32), np.dtype(np.float64))
INTS = (np.dtype(np.int32), np.dtype(np.int64))
NUMERIC = FLOATS + INTS
BOOL = (np.dtype(bool),)


class Node:
    """One ONNX node as translators see it: attributes as Python values, input/output names."""

    def __init__(self, proto: Any) -> None:
        from onnx import helper

        self.proto = proto
        self.op_type = proto.op_type
        self.name = proto.name
        self.inputs = list(proto.input)
        self.outputs = list(proto.output)
        self.attrs = {a.name: helper.get_attribute_value(a) for a in proto.attribute}
        for k, v in list(self.attrs.items()):
            if isinstance(v, bytes):
                self.attrs[k] = v.decode()

    def attr(self, name: str, default: Any = None) -> Any:
        return self.attrs.get(name, default)

    def input(self, i: int) -> str:
        """The i-th input name, '' when absent (optional inputs)."""
        return self.inputs[i] if i < len(self.inputs) else ""


class ImportContext:
    def __init__(self, opset: int, types: dict[str, np.dtype], shapes: dict[str, tuple | None]) -> None:
        self.opset = opset
        self.types = types
        self.shapes = shapes
        self.values: dict[str, np.ndarray] = {}  # initializers and Constant outputs
        self.wanted: set[str] = set()  # names a translator needed as constants and did not get
        self.ops: list[OperatorDef] = []
        self._n = 0

    def fresh(self, hint: str) -> str:
        self._n += 1
        return f"__{hint}_{self._n}"

    def op(self, op_type: str, inputs: Sequence[str], outputs: Sequence[str], **args: Any) -> None:
        op = OperatorDef(type=op_type, input=list(inputs), output=list(outputs))
        for k, v in args.items():
            if v is not None:
                op.arg.append(make_argument(k, v))
        self.ops.append(op)

    def dtype(self, name: str) -> np.dtype | None:
        if name in self.values:
            return self.values[name].dtype
        return self.types.get(name)

    def shape(self, name: str) -> tuple | None:
        if name in self.values:
            return tuple(self.values[name].shape)
        return self.shapes.get(name)

    def rank(self, name: str) -> int:
        s = self.shape(name)
        if s is None:
            raise NeedsRuntime(f"the rank of '{name}' is unknown")
        return len(s)

    def const(self, name: str) -> np.ndarray:
        if name not in self.values:
            self.wanted.add(name)
            raise NeedsRuntime(f"input '{name}' must be a constant (initializer or Constant)")
        return self.values[name]

    def require(self, node: Node, allowed: Sequence[np.dtype], inputs: Sequence[int] | None = None) -> None:
        """Unsupported unless the node's (given) inputs have dtypes in ``allowed``."""
        idx = range(len(node.inputs)) if inputs is None else inputs
        for i in idx:
            n = node.input(i)
            if not n:
                continue
            dt = self.dtype(n)
            if dt is None or dt not in allowed:
                raise Unsupported(f"input '{n}' of type {dt} (supported: {', '.join(str(a) for a in allowed)})")


SMALL_INT_INPUT = 64  # elements: integer inputs up to this size (and scalars) are specialized on at run time


def _specialize(model: Any, feeds: dict[str, np.ndarray], value_inputs: Any = ()) -> Any:
    """A copy of ``model`` whose inputs have the fed shapes/types and whose small integer inputs
    (and ``value_inputs``: inputs a translator needs as constants) are initializers holding the
    fed values."""
    from onnx import ModelProto, helper, numpy_helper

    m = ModelProto()
    m.CopyFrom(model)
    inputs = list(m.graph.input)
    del m.graph.input[:]
    for vi in inputs:
        v = feeds.get(vi.name)
        if not isinstance(v, np.ndarray):  # absent, or a sequence/optional value: as declared
            m.graph.input.append(vi)
            continue
        if (v.dtype.kind in "iu" and v.size <= SMALL_INT_INPUT) or v.size == 1 or vi.name in value_inputs:
            m.graph.initializer.append(numpy_helper.from_array(v, vi.name))
        try:
            elem = helper.np_dtype_to_tensor_dtype(v.dtype)
        except Exception:
            m.graph.input.append(vi)
            continue
        m.graph.input.append(helper.make_tensor_value_info(vi.name, elem, list(v.shape)))
    return m


def _value_infos(model: Any) -> tuple[dict, dict]:
    from onnx import helper

    from framework.onnx.shape_bound import infer_shapes

    try:
        inferred = infer_shapes(_without_weights(model))
    except Exception:  # a model onnx cannot infer: fall back to the declared infos only
        inferred = model
    types: dict[str, np.dtype] = {}
    shapes: dict[str, tuple | None] = {}
    g = inferred.graph
    for vi in _graph_infos(g):
        tt = vi.type.tensor_type if vi.type.HasField("tensor_type") else None
        if tt is None or not tt.elem_type:
            continue
        try:
            types[vi.name] = np.dtype(helper.tensor_dtype_to_np_dtype(tt.elem_type))
        except Exception:
            continue
        if tt.HasField("shape") and all(d.HasField("dim_value") for d in tt.shape.dim):
            shapes[vi.name] = tuple(int(d.dim_value) for d in tt.shape.dim)
        else:
            shapes[vi.name] = None
    for init in model.graph.initializer:
        types[init.name] = np.dtype(helper.tensor_dtype_to_np_dtype(init.data_type))
        shapes[init.name] = tuple(init.dims)
    return types, shapes


_WEIGHT_MIN_ELEMENTS = 64


def _without_weights(model: Any) -> Any:
    """``model`` for onnx's shape inference: floating-point initializers of at least
    ``_WEIGHT_MIN_ELEMENTS`` values become graph inputs of their type and dims. onnx serializes the
    model it infers (a ResNet-18's 47 MB of weights twice) and needs only the dims of weights; integer
    initializers (shapes, axes, indices) and small ones stay, as data propagation may read them."""
    import onnx
    from onnx import helper

    g = model.graph
    floats = (onnx.TensorProto.FLOAT, onnx.TensorProto.DOUBLE, onnx.TensorProto.FLOAT16, onnx.TensorProto.BFLOAT16)
    declared = {i.name: i for i in g.input}

    def weight(t: Any) -> bool:
        n = 1
        for d in t.dims:
            n *= int(d)
        if t.data_type not in floats or n < _WEIGHT_MIN_ELEMENTS or t.data_location == onnx.TensorProto.EXTERNAL:
            return False
        vi = declared.get(t.name)  # an initializer also declared as an input needs its full declared shape
        if vi is None:
            return True
        tt = vi.type.tensor_type
        return tt.HasField("shape") and [d.dim_value if d.HasField("dim_value") else -1 for d in tt.shape.dim] == list(
            t.dims
        )

    weights = [t for t in g.initializer if weight(t)]
    if not weights:
        return model
    names = {t.name for t in weights}
    light = onnx.ModelProto(ir_version=model.ir_version)
    light.opset_import.extend(model.opset_import)
    light.functions.extend(model.functions)
    lg = light.graph
    lg.name = g.name
    for field in ("node", "input", "output", "value_info", "sparse_initializer"):
        getattr(lg, field).extend(getattr(g, field))
    lg.initializer.extend(t for t in g.initializer if t.name not in names)
    lg.input.extend(
        helper.make_tensor_value_info(t.name, t.data_type, list(t.dims)) for t in weights if t.name not in declared
    )
    return light


def _graph_infos(g: Any) -> list:
    """The value infos of graph ``g`` and of its subgraphs (If/Loop/Scan bodies), recursively."""
    out = list(g.input) + list(g.value_info) + list(g.output)
    for node in g.node:
        for a in node.attribute:
            for sub in ([a.g] if a.HasField("g") else []) + list(a.graphs):
                out += _graph_infos(sub)
    return out


_FILL_FOR = {
    np.dtype(np.float32): "GivenTensorFill",
    np.dtype(np.float64): "GivenTensorDoubleFill",
    np.dtype(np.int32): "GivenTensorIntFill",
    np.dtype(np.int64): "GivenTensorInt64Fill",
    np.dtype(np.int16): "GivenTensorInt16Fill",
    np.dtype(bool): "GivenTensorBoolFill",
}


def fill_op(name: str, value: np.ndarray) -> OperatorDef | None:
    """A GivenTensor*Fill creating ``value`` (None for dtypes without one)."""
    fill = _FILL_FOR.get(value.dtype)
    if fill is None:
        return None
    op = OperatorDef(type=fill, output=[name])
    op.arg.append(make_argument("shape", list(value.shape)))
    op.arg.append(make_argument("values", value))  # one conversion of the whole array
    return op


_FOLD_LIMIT = 1 << 16  # elements: constants folded at translation (shape arithmetic), not big tensors


def _infer_emitted(ctx: ImportContext, ops: Sequence[OperatorDef]) -> None:
    """Shapes/types of the emitted ops' outputs from our schemas, where onnx's inference did not tell."""
    from framework.ops.inference import infer_op
    from framework.ops.schema import UNKNOWN, TensorSpec

    for op in ops:
        specs = [TensorSpec(ctx.shape(b), ctx.dtype(b)) if b in ctx.types or b in ctx.values else UNKNOWN
                 for b in op.input]  # fmt: skip
        try:
            outs = infer_op(op, specs)
        except Exception:
            continue
        for b, spec in zip(op.output, outs):
            if spec is None:
                continue
            if ctx.shapes.get(b) is None and spec.known:
                ctx.shapes[b] = tuple(int(d) for d in spec.shape)
            if b not in ctx.types and spec.dtype is not None:
                ctx.types[b] = np.dtype(spec.dtype)


def _fold(ctx: ImportContext, node: "Node", start: int) -> None:
    """All inputs constant: run the emitted ops now (our kernels) and keep the outputs as constants."""
    from framework.memory.workspace import Workspace

    ins = [n for n in node.inputs if n]
    if (
        start == len(ctx.ops)
        or not all(n in ctx.values for n in ins)
        or any(ctx.values[n].size > _FOLD_LIMIT for n in ins)
    ):
        return
    ops = ctx.ops[start:]
    ws = Workspace()
    for n in {b for op in ops for b in op.input}:
        if n in ctx.values:
            ws.feed_blob(n, ctx.values[n])
    try:
        with np.errstate(all="ignore"):
            for op in ops:
                ws.run_operator_once(op)
        values = {o: ws.fetch_blob(o) for o in node.outputs if o}
    except Exception:
        return
    if not all(isinstance(v, np.ndarray) for v in values.values()):  # sequences, optionals: run time
        return
    if any(v.dtype.kind in "OUS" or v.size > _FOLD_LIMIT for v in values.values()):
        return
    ctx.values.update(values)
    del ctx.ops[start:]


class _FreshNames:
    """Caffe2's rules name their helper blobs through this (fresh names of the import)."""

    def __init__(self, ctx: ImportContext) -> None:
        self._ctx = ctx

    def new_dummy_name(self) -> str:
        return self._ctx.fresh("c2")


def _caffe2_op(ctx: ImportContext, proto: Any) -> bool:
    """A node whose op type ONNX does not define but Caffe2 does (``Scale``, ``DynamicSlice``...): Caffe2's
    backend ran it as that Caffe2 op, and so does this one (``caffe2_rules``). False when ONNX defines the
    type or no rule applies (the node then counts as unsupported)."""
    from onnx import defs

    from framework.onnx.caffe2_rules import convert_node

    if defs.has(proto.op_type):
        return False
    try:
        _, ops = convert_node(proto, {}, ctx.opset, _FreshNames(ctx))
    except RuntimeError:
        return False
    n_ops = len(ctx.ops)
    ctx.ops.extend(ops)
    _infer_emitted(ctx, ctx.ops[n_ops:])
    return True


def translate_nodes(ctx: ImportContext, protos: Sequence[Any], path: str = "") -> list[str]:
    """Translate ONNX nodes into ``ctx.ops`` (constants folded into ``ctx.values``); returns the
    descriptions of the nodes without a translation (``path`` prefixes them: subgraphs)."""
    unsupported: list[str] = []
    opset = ctx.opset
    versions = getattr(ctx, "opset_imports", {})
    for i, proto in enumerate(protos):
        node = Node(proto)
        where = f"{path}node {i} {node.op_type}" + (f" '{node.name}'" if node.name else "")
        domain = proto.domain or "ai.onnx"
        key, version = node.op_type, opset
        if domain != "ai.onnx":
            key, version = f"{domain}:{node.op_type}", versions.get(domain, 1)
        entry = TRANSLATORS.get(key)
        if entry is None and domain == "ai.onnx" and _caffe2_op(ctx, proto):
            continue
        if entry is None or not entry[1][0] <= version <= entry[1][1]:
            where_domain = f"opset {opset}"
            if domain != "ai.onnx":
                where_domain = f"domain {domain}" + (f" opset {version}" if entry is not None else "")
            unsupported.append(f"{where} ({where_domain}): no translation")
            continue
        n_ops = len(ctx.ops)
        try:
            entry[0](ctx, node)
        except Unsupported as e:
            del ctx.ops[n_ops:]
            kind = "needs run-time values: " if isinstance(e, NeedsRuntime) else ""
            unsupported.append(f"{where} (opset {opset}): {kind}{e}")
            for o in node.outputs:  # later nodes must not take a stale spec for these
                ctx.shapes.setdefault(o, None)
            continue
        except FrameworkError:
            raise
        except (ValueError, TypeError, KeyError, IndexError, OverflowError, UnicodeDecodeError) as e:
            # a malformed node (attribute of the wrong kind, value of the wrong size...): the file's fault
            raise OnnxImportError(f"{where}: malformed node: {type(e).__name__}: {e}", [where]) from e
        _infer_emitted(ctx, ctx.ops[n_ops:])
        _fold(ctx, node, n_ops)
    return unsupported


def initializer_array(t: Any) -> np.ndarray:
    """An initializer's value as one array (``raw_data``: a read-only view of the tensor's bytes, no
    per-value work); OnnxImportError naming it when its data disagrees with its dims or type."""
    from onnx import numpy_helper

    from framework.memory.allocator import check_elements

    dims = [int(d) for d in t.dims]
    if any(d < 0 for d in dims):
        raise OnnxImportError(f"initializer '{t.name}' has negative dims {dims}", [t.name])
    try:
        check_elements(dims, 8, f"initializer '{t.name}'")
        return numpy_helper.to_array(t)
    except (ValueError, TypeError, KeyError, UnicodeDecodeError) as e:
        raise OnnxImportError(
            f"initializer '{t.name}' (dims {list(t.dims)}, data_type {t.data_type}) cannot be read: {e}", [t.name]
        ) from e


def onnx_graph_to_nets(
    model: Any,
    feeds: dict[str, np.ndarray] | None = None,
    value_inputs: Any = (),
    wanted: set | None = None,
    fills: bool = True,
) -> tuple[NetDef, NetDef, dict[str, np.ndarray], list[str]]:
    """(init_net, predict_net, values without a fill op, unsupported node descriptions).

    ``fills=True``: initializers and folded constants become GivenTensor*Fill ops of the init net
    (a self-contained pair of NetDefs, as Caffe2's backend gives). ``fills=False``: every such value
    is returned as an array (the third item) to feed into the workspace, and the init net only lists
    them: no value goes through an argument list (what ``prepare`` does).

    ``feeds`` (input arrays): translate for these inputs' shapes and types, with the small integer
    inputs taken as constants (shape arithmetic, axes, indices); the result is only valid for them.
    ``value_inputs``: more inputs taken as constants (any type or size). ``wanted`` (a set) receives
    the names translators needed as constants and did not get (the caller may feed them next time).
    """
    from framework.onnx import (  # noqa: F401  (registers translators)
        import_attention,
        import_control,  # If/Loop/Scan/SequenceMap
        import_detection,  # NonMaxSuppression/RoiAlign
        import_elementwise,
        import_index,  # index/scatter/pad/selection
        import_layout,  # DepthToSpace/SpaceToDepth/CenterCropPad/ReverseSequence
        import_math,
        import_ml,
        import_nn,
        import_norm,
        import_quant,
        import_reduce,
        import_resize,  # Resize/Upsample/GridSample/AffineGrid
        import_rnn,  # RNN/GRU/LSTM
        import_sequence,  # sequences, optionals, Identity of them
        import_signal,  # DFT/STFT/windows/MelWeightMatrix
        import_strings,
        import_tensor,
        import_training,  # ai.onnx.preview.training
        import_types,
    )

    import_elementwise.wrap_low_precision(TRANSLATORS)  # float16/bfloat16 via float32

    opset = next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 1)
    model = _specialize(model, feeds, value_inputs) if feeds else model
    # initializers are validated (dims, sizes, types) before onnx's shape inference reads them
    values = {t.name: initializer_array(t) for t in model.graph.initializer}
    types, shapes = _value_infos(model)
    ctx = ImportContext(opset, types, shapes)
    g = model.graph
    init = NetDef(name=(g.name or "onnx") + "_init")
    extra: dict[str, np.ndarray] = {}
    ctx.values.update(values)
    ctx.opset_imports = {o.domain or "ai.onnx": o.version for o in model.opset_import}
    unsupported = translate_nodes(ctx, g.node)
    if wanted is not None:
        wanted.update(ctx.wanted)
    for name, value in ctx.values.items():
        op = fill_op(name, value) if fills else None
        if op is None:  # no GivenTensor*Fill for this dtype (uint8...): fed into the workspace before the init net
            extra[name] = value
            init.external_input.append(name)
        else:
            init.op.append(op)
        init.external_output.append(name)
    from framework.onnx.layouts import rewrite_layouts

    ops, _ = rewrite_layouts(ctx.ops, {o.name for o in g.output}, ctx.shape)
    predict = NetDef(name=g.name or "onnx", op=ops)
    init_names = set(ctx.values)
    predict.external_input.extend([i.name for i in g.input if i.name not in init_names] + sorted(init_names))
    predict.external_output.extend(o.name for o in g.output)
    return init, predict, extra, unsupported
