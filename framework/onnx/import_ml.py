"""ONNX -> our ops: the ai.onnx.ml ops of onnx's node tests (LabelEncoder, Binarizer,
ArrayFeatureExtractor; framework/ops/onnx/ml.py)."""

from __future__ import annotations

import numpy as np

from framework.onnx.import_elementwise import typed_inputs
from framework.onnx.importer import ImportContext, Node, Unsupported, translator
from framework.ops.onnx.elementwise import NUMBER

ML = "ai.onnx.ml"


def _tensor_list(t) -> tuple[str, list]:
    """(kind suffix, values) of a TensorProto attribute: floats, int64s or strings."""
    from onnx import numpy_helper

    v = numpy_helper.to_array(t).reshape(-1)
    if v.dtype.kind in "OSU":
        return "strings", [x.decode() if isinstance(x, bytes) else str(x) for x in v.tolist()]
    if v.dtype.kind == "f":
        return "floats", [float(x) for x in v.tolist()]
    if v.dtype.kind in "iub":
        return "int64s", [int(x) for x in v.tolist()]
    raise Unsupported(f"tensor attribute of type {v.dtype}")


@translator("LabelEncoder", domain=ML, opsets=(2, 4))
def _label_encoder(ctx: ImportContext, node: Node) -> None:
    from onnx import numpy_helper

    args: dict = {}
    for side in ("keys", "values"):
        for kind in ("floats", "int64s", "strings"):
            v = node.attr(f"{side}_{kind}")
            if v:
                args[f"{side}_{kind}"] = [x.decode() if isinstance(x, bytes) else x for x in v]
        t = node.attr(f"{side}_tensor")
        if t is not None:
            kind, vals = _tensor_list(t)
            args[f"{side}_{kind}"] = vals
            if side == "values":
                dt = numpy_helper.to_array(t).dtype
                args["values_dtype"] = "string" if dt.kind in "OSU" else dt.name
    d = node.attr("default_tensor")
    if d is not None:
        kind, vals = _tensor_list(d)
        args[{"floats": "default_float", "int64s": "default_int64", "strings": "default_string"}[kind]] = vals[0]
    for k in ("default_float", "default_int64", "default_string"):
        if node.attr(k) is not None:
            args[k] = node.attr(k)
    x = ctx.dtype(node.input(0))
    if x is None or (x.kind != "O" and not args.get("keys_floats") and not args.get("keys_int64s")):
        raise Unsupported(f"input of type {x} for these keys")
    ctx.op("ONNXLabelEncoder", [node.input(0)], [node.outputs[0]], **args)


@translator("Binarizer", domain=ML)
def _binarizer(ctx: ImportContext, node: Node) -> None:
    typed_inputs(ctx, node, NUMBER, node.inputs[:1])
    if ctx.dtype(node.input(0)) not in (
        np.dtype(np.float32),
        np.dtype(np.float64),
        np.dtype(np.int32),
        np.dtype(np.int64),
    ):
        raise Unsupported(f"input of type {ctx.dtype(node.input(0))}")
    ctx.op("ONNXBinarizer", [node.input(0)], [node.outputs[0]], threshold=float(node.attr("threshold", 0.0)))


@translator("ArrayFeatureExtractor", domain=ML)
def _array_feature_extractor(ctx: ImportContext, node: Node) -> None:
    if ctx.dtype(node.input(1)) != np.dtype(np.int64):
        raise Unsupported(f"indices of type {ctx.dtype(node.input(1))}")
    ctx.op("ONNXArrayFeatureExtractor", node.inputs[:2], [node.outputs[0]])


@translator("TreeEnsemble", domain=ML, opsets=(5, 5))
def _tree_ensemble(ctx: ImportContext, node: Node) -> None:
    from onnx import numpy_helper

    typed_inputs(ctx, node, ("float",), node.inputs[:1])
    if int(node.attr("post_transform", 0)) != 0:
        raise Unsupported(f"post_transform {node.attr('post_transform')}")
    ins = [node.input(0)]
    for name in ("nodes_splits", "leaf_weights", "membership_values"):
        t = node.attr(name)  # a TensorProto
        if t is None:
            if name != "membership_values":
                raise Unsupported(f"attribute {name} missing")
            continue
        value = numpy_helper.to_array(t).reshape(-1)
        if value.dtype.kind != "f" or value.dtype.itemsize < 4:
            value = value.astype(np.float64)
        blob = ctx.fresh(name)
        ctx.values[blob] = value
        ins.append(blob)
    ints = ("nodes_featureids", "nodes_truenodeids", "nodes_falsenodeids", "nodes_trueleafs", "nodes_falseleafs")
    ints += ("leaf_targetids", "tree_roots")
    args = {k: [int(v) for v in node.attr(k, [])] for k in ints}
    modes = node.attr("nodes_modes")
    args["nodes_modes"] = [int(v) for v in (numpy_helper.to_array(modes) if hasattr(modes, "dims") else modes)]
    tracks = node.attr("nodes_missing_value_tracks_true")
    if tracks is not None:
        args["nodes_missing_value_tracks_true"] = [
            int(v) for v in (numpy_helper.to_array(tracks) if hasattr(tracks, "dims") else tracks)
        ]
    args["n_targets"] = int(node.attr("n_targets", 1))
    args["aggregate_function"] = int(node.attr("aggregate_function", 1))
    ctx.op("ONNXTreeEnsemble", ins, [node.outputs[0]], **args)
