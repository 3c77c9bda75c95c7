"""Caffe2's ``predictor.mobile_exporter``: a self-contained (init_net, predict_net) pair.

``Export(workspace, net, params)`` copies ``net`` as the predict net and builds
an init net holding the current value of every parameter in a
``GivenTensor*Fill`` op. The predict net's other inputs (blobs it reads that
nothing writes and that are not parameters, e.g. ``data``) get a dummy
``[1, 1]`` fill so the net can be created before the first feed, and come
first in ``external_input`` (the order ``Predictor.run`` feeds a list in). Its
``external_output`` lists the blobs it writes and never reads.

>>> # init_net, predict_net = Export(workspace, deploy_model.net, deploy_model.params)
"""

from __future__ import annotations

from typing import Any, Iterable

import numpy as np

from framework.errors import FrameworkError
from framework.proto.args import make_argument
from framework.proto.framework_pb2 import NetDef, OperatorDef

__all__ = ["Export", "add_tensor"]

_FILLS = {
    np.dtype(np.float32): "GivenTensorFill",
    np.dtype(np.float64): "GivenTensorDoubleFill",
    np.dtype(np.int32): "GivenTensorIntFill",
    np.dtype(np.int64): "GivenTensorInt64Fill",
    np.dtype(np.bool_): "GivenTensorBoolFill",
    np.dtype(object): "GivenTensorStringFill",
}


def add_tensor(net: NetDef, name: str, blob: Any) -> None:
    """Append to ``net`` a ``GivenTensor*Fill`` op writing ``blob`` (a numpy array) into ``name``."""
    arr = np.asarray(blob)
    fill = _FILLS.get(arr.dtype)
    if fill is None:
        raise FrameworkError(
            f"mobile_exporter: blob '{name}' has dtype {arr.dtype}; no GivenTensor*Fill holds it "
            f"(supported: {', '.join(str(d) for d in _FILLS)})"
        )
    values = arr.reshape(-1).tolist()
    if arr.dtype == object:
        values = [v if isinstance(v, bytes) else str(v).encode() for v in values]
    op = OperatorDef(type=fill, output=[name])
    op.arg.extend([make_argument("shape", [int(d) for d in arr.shape]), make_argument("values", values)])
    net.op.append(op)


def _fetch(workspace: Any, name: str) -> Any:
    """FetchBlob on the ``framework.workspace`` module or on a Workspace object."""
    if hasattr(workspace, "FetchBlob"):
        return workspace.FetchBlob(name)
    return workspace.fetch_blob(name)


def _blob_versions(proto: NetDef) -> tuple[list[str], dict[str, int]]:
    """(every blob read, blob -> number of writes), as Caffe2's ``core.get_ssa``."""
    versions: dict[str, int] = {str(b): 0 for b in proto.external_input}
    read: list[str] = []
    for op in proto.op:
        for b in op.input:
            if not proto.external_input:
                versions.setdefault(b, 0)
            read.append(b)
        for b in op.output:
            versions[b] = versions.get(b, 0) + 1
    return read, versions


def Export(workspace: Any, net: Any, params: Iterable[Any]) -> tuple[NetDef, NetDef]:  # noqa: N802
    """``(init_net, predict_net)`` for ``net`` (a core.Net or NetDef) with ``params`` baked in.

    ``workspace`` is the ``framework.workspace`` module (or a Workspace) that
    holds the trained values of ``params``.
    """
    proto = net if isinstance(net, NetDef) else net.Proto()
    params = [str(p) for p in params]
    predict_net = NetDef()
    predict_net.CopyFrom(proto)
    for op in predict_net.op:
        op.ClearField("debug_info")
    init_net = NetDef(name=proto.name + "_init" if proto.name else "")
    read, versions = _blob_versions(proto)
    read_set = set(read)
    input_blobs = [b for b, v in versions.items() if v == 0 and b not in params]
    output_blobs = [b for b, v in versions.items() if v != 0 and b not in read_set]
    for name in params:
        try:
            value = _fetch(workspace, name)
        except Exception as e:
            raise FrameworkError(
                f"mobile_exporter: parameter '{name}' cannot be fetched ({e}); run the init net / train first"
            ) from e
        add_tensor(init_net, name, value)
        init_net.external_output.append(name)
    for name in input_blobs:
        add_tensor(init_net, name, np.zeros((1, 1), np.float32))
        init_net.external_output.append(name)
    external = list(input_blobs)
    external += [b for b in proto.external_input if b not in external]
    del predict_net.external_input[:]
    predict_net.external_input.extend(external)
    del predict_net.external_output[:]
    predict_net.external_output.extend(output_blobs)
    return init_net, predict_net
