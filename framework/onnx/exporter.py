"""Caffe2 NetDefs -> an ONNX ModelProto (``export``).

1. Every op type must have a converter (``framework/onnx/convert_*.py``); otherwise one
   ``OnnxExportError`` lists every such op (type, index, name) with the opset tried.
2. The init net runs in a private workspace; the blobs the predict net reads become initializers
   (GivenTensorFill init nets are just the common case).
3. The predict net runs once, op by op, on random inputs of the given shapes, recording every
   input's exact shape and dtype (and the values of deterministic fills).
4. Each op is converted; in-place writes get SSA names, and the external outputs keep their
   Caffe2 names. Converters that refuse an argument combination add to the same error list.
5. Adjacent inverse Transposes (NHWC ops back to back) cancel; unused initializers are dropped.
6. ``onnx.checker.check_model(full_check=True)`` and ``onnx.shape_inference`` (strict) run on the result.

No file is written here: callers write the returned model only after it succeeded.
"""

from __future__ import annotations

from typing import Any, Mapping, Sequence

import numpy as np

from framework.memory.tensor import Tensor
from framework.memory.workspace import Workspace
from framework.net.graph import load_net_def
from framework.onnx import convert_math, convert_nn, convert_tensor  # noqa: F401  (registers converters)
from framework.onnx.context import CONVERTERS, ExportContext, NotExportable, OnnxExportError, OpView
from framework.onnx.passes import cancel_transposes, drop_unused_initializers, rename_outputs
from framework.ops.arguments import parse_args
from framework.ops.registry import get_schema, has_op

__all__ = ["export", "needed_init_ops", "default_opset", "MIN_OPSET", "exportable_op_types"]

MIN_OPSET = 13


def default_opset() -> int:
    """The newest opset both the installed onnx and onnxruntime (if present) support."""
    import onnx

    v = onnx.defs.onnx_opset_version()
    try:
        import onnxruntime  # noqa: F401

        from framework.onnx.ort_opset import ort_max_opset

        v = min(v, ort_max_opset())
    except ImportError:
        pass
    return v


def exportable_op_types() -> list[str]:
    return sorted(CONVERTERS)


def _describe(i: int, op: Any) -> str:
    return f"op {i} {op.type}" + (f" '{op.name}'" if op.name else "")


def _shapes_from(input_shapes: Any, value_info: Any) -> dict[str, tuple[np.dtype, tuple]]:
    from onnx import helper

    out: dict[str, tuple[np.dtype, tuple]] = {}
    for name, shape in dict(input_shapes or {}).items():
        out[name] = (np.dtype(np.float32), tuple(int(d) for d in shape))
    for name, info in dict(value_info or {}).items():
        elem, shape = info
        dt = helper.tensor_dtype_to_np_dtype(int(elem)) if isinstance(elem, (int, np.integer)) else np.dtype(elem)
        out[name] = (np.dtype(dt), tuple(int(d) for d in shape))
    return out


def _random(dtype: np.dtype, shape: tuple, rng: np.random.Generator) -> np.ndarray:
    if dtype.kind == "f":
        return rng.standard_normal(shape).astype(dtype)
    return np.zeros(shape, dtype)


def _tensor_of(ws: Workspace, name: str) -> Tensor | None:
    if not ws.has_blob(name):
        return None
    obj = ws.get_blob(name).held
    return obj if isinstance(obj, Tensor) and obj.is_initialized else None


def _spec(ws: Workspace, name: str) -> tuple:
    t = _tensor_of(ws, name)
    if t is None:
        raise OnnxExportError(f"export: blob '{name}' holds no tensor when the net reaches it")
    return tuple(t.dims), np.dtype(t.dtype)


def _try_run(ws: Workspace, op: Any) -> bool:
    """Run an op that will not be exported, so later ops still see their input shapes."""
    if not has_op(op.type):
        return False
    try:
        with np.errstate(all="ignore"):
            ws.run_operator_once(op)
        return True
    except Exception:
        return False


def needed_init_ops(init: Any, net: Any) -> list:
    """The ops of ``init`` the predict net ``net`` depends on (no data readers, no optimizer state)."""
    if init is None:
        return []
    init, net = load_net_def(init), load_net_def(net)
    needed, kept = {b for op in net.op for b in op.input}, []
    for op in reversed(init.op):
        if needed & set(op.output):
            kept.append(op)
            needed.update(op.input)
    return kept[::-1]


def export(
    predict_net: Any,
    init_net: Any = None,
    input_shapes: Mapping[str, Sequence[int]] | None = None,
    value_info: Mapping[str, tuple] | None = None,
    opset: int | None = None,
    inputs: Mapping[str, np.ndarray] | None = None,
    outputs: Sequence[str] | None = None,
    name: str | None = None,
    seed: int = 0,
    workspace: Workspace | None = None,
    dynamic_axes: Mapping[str, Any] | None = None,
) -> Any:
    """An ``onnx.ModelProto`` computing ``predict_net`` (after ``init_net``) as Caffe2 does.

    Input shapes come from ``input_shapes`` ({name: shape}, float32), ``value_info`` (Caffe2's
    frontend format: {name: (onnx TensorProto elem type, shape)}) or ``inputs`` (arrays). The
    graph outputs are the net's ``external_output`` (or ``outputs``), else the blobs written and
    never read. ``workspace``: take the parameters from it (e.g. a loaded checkpoint) instead of
    running ``init_net``. Raises OnnxExportError listing every op that has no ONNX expression.

    A blob named in ``input_shapes``, ``value_info`` or ``inputs`` is a graph input even when the init
    net fills it (Caffe2's exporters fill the data blob with a (1, 1) placeholder). Outputs of an op
    that nothing reads and that are not graph outputs are dropped before conversion where the op's
    schema allows it (LRN's training-form ``scale``, a Dropout mask), so they need no ONNX expression.

    ``dynamic_axes`` as torch.onnx.export's: {input or output name: {axis: symbolic name} or [axes]};
    only axis 0 (the batch) is supported: every named blob's dim 0 becomes the symbol, and reshapes
    whose leading dim is the traced batch size keep it free (-1), so the model runs on any batch.
    """
    try:
        import onnx
        from onnx import helper, numpy_helper
    except ImportError as e:  # pragma: no cover - exercised without the extra
        raise ImportError("ONNX export needs the onnx package: pip install 'framework[onnx]'") from e
    net = load_net_def(predict_net)
    init = load_net_def(init_net) if init_net is not None else None
    opset = default_opset() if opset is None else int(opset)
    top = onnx.defs.onnx_opset_version()
    if not MIN_OPSET <= opset <= top:
        raise OnnxExportError(f"export: opset {opset} is outside the supported range {MIN_OPSET}..{top}")
    ws = Workspace()
    read = {b for op in net.op for b in op.input}
    if workspace is not None:
        for b in sorted(read):
            if workspace.has_blob(b) and _tensor_of(workspace, b) is not None:
                ws.feed_blob(b, workspace.fetch_blob(b))
    else:
        for op in needed_init_ops(init, net):
            ws.run_operator_once(op)
    shapes = _shapes_from(input_shapes, value_info)
    declared_inputs = set(shapes) | set(inputs or {})
    written_by_init = set(ws.blobs()) - declared_inputs
    written: set[str] = set()
    first_read_before_write = []
    for op in net.op:
        for b in op.input:
            if b not in written and b not in written_by_init and b not in first_read_before_write:
                first_read_before_write.append(b)
        written.update(op.output)
    declared = [b for b in net.external_input if b not in written_by_init]
    graph_inputs = declared + [b for b in first_read_before_write if b not in declared]
    rng = np.random.default_rng(seed)
    feeds: dict[str, np.ndarray] = {}
    for b in graph_inputs:
        if inputs is not None and b in inputs:
            feeds[b] = np.asarray(inputs[b])
        elif b in shapes:
            feeds[b] = _random(shapes[b][0], shapes[b][1], rng)
        elif b in read:
            raise OnnxExportError(
                f"export of net '{net.name}': no shape for input '{b}' (give input_shapes/value_info or --shape)"
            )
    graph_inputs = [b for b in graph_inputs if b in feeds]
    for b, v in feeds.items():
        ws.feed_blob(b, v)

    init_names = [b for b in written_by_init if b in read and _tensor_of(ws, b) is not None]
    batch = _dynamic_batch(dynamic_axes, feeds)
    init_values = {b: ws.fetch_blob(b) for b in init_names}
    ctx = ExportContext(opset, reserved=list(feeds) + init_names)
    ctx.batch = batch[1] if batch else None
    ctx.initial_values = init_values
    for b in graph_inputs + init_names:
        ctx.bind_input(b)
    ctx.initializers.update(init_values)

    out_blobs = list(outputs or net.external_output)
    if not out_blobs:
        reread: set[str] = set()
        for op in reversed(net.op):
            out_blobs += [b for b in op.output if b not in reread and b not in out_blobs]
            reread.update(op.input)
        out_blobs.reverse()
    failures: list[str] = []
    shapes_lost = False  # an op we cannot run: later ops are only checked for a converter
    for i, op in enumerate(_without_unused_outputs(net, set(out_blobs))):
        if op.type not in CONVERTERS:
            failures.append(f"{_describe(i, op)}: no ONNX equivalent")
            shapes_lost = shapes_lost or not _try_run(ws, op)
            continue
        if shapes_lost:
            continue
        in_specs = [_spec(ws, b) for b in op.input]
        with np.errstate(all="ignore"):  # random inputs: log of negatives etc. only matter for shapes
            ws.run_operator_once(op)
        out_specs = [_spec(ws, b) for b in op.output]
        args = parse_args(get_schema(op.type), op.arg, _describe(i, op), len(op.input), len(op.output))
        view = OpView(i, op, args, in_specs, out_specs)
        if op.type in convert_tensor._DETERMINISTIC_FILLS:
            view.values = [ws.fetch_blob(b) for b in op.output]
        try:
            CONVERTERS[op.type](ctx, view)
        except NotExportable as e:
            failures.append(f"{_describe(i, op)}: {e}")
            for b in op.output:
                ctx.write(b)
        finally:
            ctx.pending_transposes.clear()
    if failures:
        raise OnnxExportError(
            f"export of net '{net.name}' to ONNX opset {opset}: {len(failures)} op(s) have no ONNX expression:\n  "
            + "\n  ".join(failures)
        )

    out_names = rename_outputs(ctx, out_blobs, set(graph_inputs))
    cancel_transposes(ctx, set(out_names))
    drop_unused_initializers(ctx, set(out_names))

    def vi(onnx_name: str, blob: str, output: bool) -> Any:
        t = _tensor_of(ws, blob)
        dt = helper.np_dtype_to_tensor_dtype(np.dtype(t.dtype))
        dims: list = list(t.dims)
        # inputs named in dynamic_axes, and outputs of the traced batch size, get the batch symbol
        if batch and dims and dims[0] == batch[1] and (blob in batch[2] or output):
            dims[0] = batch[2].get(blob, batch[0])
        return helper.make_tensor_value_info(onnx_name, dt, dims)

    graph_in = [vi(b, b, False) for b in graph_inputs]
    graph_out = [vi(n, b, True) for n, b in zip(out_names, out_blobs)]
    _check(ctx, graph_in, graph_out, opset, name or net.name or "caffe2_net")
    graph = helper.make_graph(
        ctx.nodes,
        name or net.name or "caffe2_net",
        graph_in,
        graph_out,
        initializer=[numpy_helper.from_array(np.asarray(v), k) for k, v in ctx.initializers.items()],
        value_info=ctx.value_info,
    )
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", opset)], producer_name="framework", producer_version="0.1.0"
    )


def _dynamic_batch(dynamic_axes: Mapping[str, Any] | None, feeds: dict) -> tuple | None:
    """(default symbol, traced batch size, {blob: symbol}) for ``dynamic_axes``, or None."""
    if not dynamic_axes:
        return None
    names: dict[str, str] = {}
    for blob, axes in dynamic_axes.items():
        spec = dict(axes) if isinstance(axes, Mapping) else {int(a): "batch" for a in axes}
        if set(spec) - {0}:
            raise OnnxExportError(f"export: dynamic_axes['{blob}'] = {axes!r}: only axis 0 (the batch) can be dynamic")
        names[blob] = str(spec.get(0, "batch"))
    sizes = {b: np.shape(feeds[b])[0] for b in names if b in feeds and np.ndim(feeds[b])}
    if not sizes:
        raise OnnxExportError(f"export: dynamic_axes names no graph input (inputs: {', '.join(feeds) or 'none'})")
    if len(set(sizes.values())) > 1:
        raise OnnxExportError(f"export: the inputs with a dynamic batch axis disagree on its size: {sizes}")
    return next(iter(names.values())), next(iter(sizes.values())), names


def _without_unused_outputs(net: Any, graph_outputs: set[str]) -> list:
    """``net``'s ops, each without its trailing outputs that no later op reads (before writing them
    afresh) and that are not graph outputs, where the op's schema accepts fewer outputs."""
    from framework.proto.framework_pb2 import OperatorDef

    ops = list(net.op)
    out = []
    for i, op in enumerate(ops):
        keep = len(op.output)
        while keep > 1 and _unused(ops, i, op.output[keep - 1], graph_outputs):
            keep -= 1
        if keep < len(op.output) and has_op(op.type) and get_schema(op.type).output_count_ok(keep):
            trimmed = OperatorDef()
            trimmed.CopyFrom(op)
            del trimmed.output[keep:]
            op = trimmed
        out.append(op)
    return out


def _unused(ops: list, i: int, blob: str, graph_outputs: set[str]) -> bool:
    if blob in graph_outputs or blob in ops[i].input or list(ops[i].output).count(blob) > 1:
        return False
    for later in ops[i + 1 :]:
        if blob in later.input:
            return False
        if blob in later.output:
            return True
    return True


_SMALL = 4096  # bytes: initializers this small stay in the checked skeleton (shape constants)


def _check(ctx: ExportContext, graph_in: list, graph_out: list, opset: int, name: str) -> None:
    """onnx.checker (full) and strict shape inference on the graph with its large initializers
    turned into typed inputs (no weight bytes serialized); the inferred value_info is kept."""
    import onnx
    from onnx import helper, numpy_helper

    small = {k: v for k, v in ctx.initializers.items() if np.asarray(v).nbytes <= _SMALL}
    big = [
        helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(np.asarray(v).dtype), list(np.shape(v)))
        for k, v in ctx.initializers.items()
        if k not in small
    ]
    graph = helper.make_graph(
        ctx.nodes, name, graph_in + big, graph_out,
        initializer=[numpy_helper.from_array(np.asarray(v), k) for k, v in small.items()],
    )  # fmt: skip
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])
    onnx.checker.check_model(model, full_check=True)
    inferred = onnx.shape_inference.infer_shapes(model, check_type=True, strict_mode=True)
    ctx.value_info = list(inferred.graph.value_info)
