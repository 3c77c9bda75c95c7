"""Shape and type inference over whole nets, tolerant of unknowns.

Ops are visited in the net's execution order (declared order when the net
does not validate, e.g. it has a cycle); each op's schema inference
(``framework.ops.inference.infer_op``) maps input TensorSpecs to output specs.
Unknown op types, failing inference and unknown inputs give UNKNOWN outputs
rather than errors. A gradient blob ``<p>_grad`` whose inference is unknown
takes the spec of ``<p>``.

>>> from framework.core import CreateOperator
>>> net = NetDef(name="n", op=[CreateOperator("Relu", "X", "Y")])
>>> infer_net(net, {"X": TensorSpec((2, 3), np.dtype("float32"))})["Y"].shape
(2, 3)
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from framework.errors import UnknownOperatorError
from framework.memory.int8_tensor import Int8TensorCPU
from framework.memory.tensor import Tensor
from framework.memory.typemeta import TypeMeta
from framework.memory.workspace import Workspace
from framework.net.graph import build_graph, load_net_def
from framework.net.nested import infer_nested
from framework.ops.inference import infer_op
from framework.ops.schema import UNKNOWN, TensorSpec
from framework.proto.framework_pb2 import NetDef

__all__ = ["infer_net", "infer_nets", "specs_from_workspace", "to_caffe2_maps"]


def _order(net_def: NetDef) -> list[int]:
    try:
        order = build_graph(net_def)[0].order()
        if order is not None:
            return order
    except Exception:  # inference never fails on a net it cannot order: fall back to declared order
        pass
    return list(range(len(net_def.op)))


def infer_net(net: Any, known: dict[str, TensorSpec] | None = None) -> dict[str, TensorSpec]:
    """Specs of every blob of ``net`` given ``known`` input specs (not modified)."""
    net_def = load_net_def(net)
    specs = dict(known or {})
    for i in _order(net_def):
        op = net_def.op[i]
        if op.arg:
            nested = infer_nested(op, specs, infer_net)
            if nested is not None:  # an If: what both branches agree on
                specs.update(nested)
                continue
        ins = [specs.get(b, UNKNOWN) for b in op.input]
        try:
            outs = infer_op(op, ins)
        except UnknownOperatorError:
            outs = [UNKNOWN] * len(op.output)
        for b, spec in zip(op.output, outs):
            spec = spec if spec is not None else UNKNOWN
            if spec.shape is None and b.endswith("_grad") and b[:-5] in specs:
                spec = specs[b[:-5]]
            prev = specs.get(b)
            if spec.shape is None and spec.dtype is None and prev is not None:
                continue  # an op that cannot tell does not erase what is known
            specs[b] = spec
    return specs


def specs_from_workspace(ws: Workspace, names: Iterable[str] | None = None) -> dict[str, TensorSpec]:
    """Specs of the initialized tensors in ``ws`` (an Int8TensorCPU blob: its codes' shape and dtype)."""
    out = {}
    for name in ws.blobs() if names is None else names:
        if not ws.has_blob(name):
            continue
        obj = ws.get_blob(name).held
        if isinstance(obj, Int8TensorCPU):
            obj = obj.t
        if isinstance(obj, Tensor) and obj.is_initialized:
            out[name] = TensorSpec(tuple(obj.dims), obj.dtype)
    return out


def _dtype_of(t: Any) -> np.dtype | None:
    if t is None:
        return None
    if isinstance(t, (int, np.integer)) and not isinstance(t, bool):
        return TypeMeta.from_proto(int(t)).dtype
    return TypeMeta.of(t).dtype


def infer_nets(
    nets: Iterable[Any],
    known: dict[str, TensorSpec] | None = None,
    blob_dimensions: dict[str, Any] | None = None,
    blob_types: dict[str, Any] | None = None,
) -> dict[str, TensorSpec]:
    """Infer through ``nets`` in sequence (e.g. init net, then predict net).

    ``blob_dimensions`` (blob -> dims) and ``blob_types`` (blob ->
    TensorProto.DataType or dtype) add to ``known``; dims without a type are
    float32, as in Caffe2.
    """
    specs = dict(known or {})
    blob_types = blob_types or {}
    for name, dims in (blob_dimensions or {}).items():
        dt = _dtype_of(blob_types.get(name)) or np.dtype(np.float32)
        specs[name] = TensorSpec(tuple(int(d) for d in dims), dt)
    for name, t in blob_types.items():
        if name not in specs:
            specs[name] = TensorSpec(None, _dtype_of(t))
    for net in nets:
        specs = infer_net(net, specs)
    return specs


def to_caffe2_maps(specs: dict[str, TensorSpec]) -> tuple[dict[str, list[int]], dict[str, int]]:
    """(blob -> dims list, blob -> TensorProto.DataType) for the known parts of ``specs``."""
    shapes: dict[str, list[int]] = {}
    types: dict[str, int] = {}
    for name, spec in specs.items():
        if spec.shape is not None and all(d is not None for d in spec.shape):
            shapes[name] = [int(d) for d in spec.shape]
        if spec.dtype is not None:
            try:
                types[name] = TypeMeta.of(spec.dtype).proto_type
            except Exception:  # dtypes without a TensorProto type are left out
                pass
    return shapes, types
