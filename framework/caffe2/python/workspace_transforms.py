"""Caffe2's workspace-level helpers for one op's cost and for its C++ net transforms.

- ``GetOperatorCost(op, blobs)``: ``(flops, bytes_written)`` of one operator (an OperatorDef or its bytes)
  given the shapes of the named input blobs of the current workspace, from the op schema's cost function
  and shape inference (0 when the schema has no cost function, as Caffe2's default cost).
- ``ApplyTransform(name, net)``: the NetDef a registered transform makes of ``net``. Registered:
  ``ConvToNNPack`` (every CPU ``Conv`` not on NNPACK gets ``engine="NNPACK"``; it runs on the same CPU
  convolution here). An unknown name raises a FrameworkError (a RuntimeError, as Caffe2).
- ``ApplyTransformIfFaster(name, net, init_net, warmup_runs=5, main_runs=10, improvement_threshold=1.0)``:
  runs ``init_net`` and then times both nets in the current workspace; returns the transformed net if its
  mean time times ``improvement_threshold`` is below the original's, else the original.
"""

from __future__ import annotations

import math
import time
from typing import Any, Callable

from framework.errors import FrameworkError
from framework.proto import caffe2_pb2


def _op_def(operator: Any) -> Any:
    if isinstance(operator, bytes):
        return caffe2_pb2.OperatorDef.FromString(operator)
    if hasattr(operator, "SerializeToString"):
        return caffe2_pb2.OperatorDef.FromString(operator.SerializeToString())
    raise TypeError(f"GetOperatorCost takes an OperatorDef or its serialized bytes, got {type(operator).__name__}")


def GetOperatorCost(operator: Any, blobs: Any) -> tuple[float, float]:
    from framework.caffe2.python import workspace
    from framework.ops.arguments import parse_args
    from framework.ops.operator import describe_op
    from framework.ops.registry import get_schema
    from framework.ops.schema import UNKNOWN, TensorSpec

    op = _op_def(operator)
    schema = get_schema(op.type)
    shapes = {}
    for name in blobs:
        value = workspace.FetchBlob(str(name))
        shapes[str(name)] = TensorSpec(tuple(value.shape), getattr(value, "dtype", None))
    ins = [shapes.get(name, UNKNOWN) for name in op.input]
    args = parse_args(schema, op.arg, describe_op(op, 0), len(op.input), len(op.output))
    outs = list(schema.infer(args, ins)) if schema.infer is not None else [UNKNOWN] * len(op.output)
    if schema.cost is None:
        return 0.0, 0.0
    flops = float(schema.cost(args, ins, outs).flops)
    written = sum(math.prod(s.shape) * (s.dtype.itemsize if s.dtype is not None else 4) for s in outs if s.known)
    return flops, float(written)


def _conv_to_nnpack(net: Any) -> Any:
    for op in net.op:
        if op.type == "Conv" and op.device_option.device_type == caffe2_pb2.CPU and op.engine != "NNPACK":
            op.engine = "NNPACK"
    return net


TRANSFORMS: dict[str, Callable[[Any], Any]] = {"ConvToNNPack": _conv_to_nnpack}


def ApplyTransform(transform_key: str, net: Any) -> Any:
    if transform_key not in TRANSFORMS:
        raise FrameworkError(f"ApplyTransform: no transform called '{transform_key}' (known: {', '.join(TRANSFORMS)})")
    out = caffe2_pb2.NetDef()
    out.CopyFrom(net)
    return TRANSFORMS[transform_key](out)


def _mean_time(net: Any, warmup: int, runs: int) -> float:
    from framework.caffe2.python import workspace

    for _ in range(warmup):
        workspace.RunNetOnce(net)
    start = time.perf_counter()
    for _ in range(max(runs, 1)):
        workspace.RunNetOnce(net)
    return (time.perf_counter() - start) / max(runs, 1)


def ApplyTransformIfFaster(
    transform_key: str,
    net: Any,
    init_net: Any,
    warmup_runs: int = 5,
    main_runs: int = 10,
    improvement_threshold: float = 1.0,
) -> Any:
    from framework.caffe2.python import workspace

    transformed = ApplyTransform(transform_key, net)
    workspace.RunNetOnce(init_net)
    old = _mean_time(net, warmup_runs, main_runs)
    new = _mean_time(transformed, warmup_runs, main_runs)
    if new * improvement_threshold < old:
        return transformed
    out = caffe2_pb2.NetDef()
    out.CopyFrom(net)
    return out


def GetBlobSizeBytes(blob: Any) -> int:
    """Bytes held by a blob of the current workspace, as Caffe2's BlobStat: a tensor's element bytes, plus
    each string's length for string tensors."""
    from framework.caffe2.python import workspace
    from framework.memory.workspace import blob_nbytes

    return blob_nbytes(workspace.C().get_blob(str(blob)))
