"""Caffe2's zip form of an ONNX model: the ModelProto as member ``__MODEL_PROTO`` and, for every tensor whose
``raw_data`` is the marker ``__EXTERNAL`` (an initializer or a Constant node's value), a member named after
the tensor holding its raw bytes.

``load_zip_archive(file)`` returns the ModelProto with those bytes put in place. A marked tensor without a
member, a member whose size does not fit the tensor's dims and type, or an archive without ``__MODEL_PROTO``
is an OnnxImportError naming it; members nobody refers to are not read.
"""

from __future__ import annotations

import zipfile
from typing import Any

import numpy as np

from framework.onnx.importer import OnnxImportError

__all__ = ["EXTERNAL_MARKER", "load_zip_archive", "resolve_external_values"]

EXTERNAL_MARKER = b"__EXTERNAL"
MODEL_MEMBER = "__MODEL_PROTO"


def _marked_tensors(model: Any) -> list[Any]:
    out = [t for t in model.graph.initializer if t.raw_data == EXTERNAL_MARKER]
    for node in model.graph.node:
        for a in node.attribute:
            if a.HasField("t") and a.t.raw_data == EXTERNAL_MARKER:
                out.append(a.t)
    return out


def resolve_external_values(model: Any, read: Any) -> None:
    """Replace, in place, the raw data of every marked tensor of ``model`` by ``read(name)`` (bytes or None)."""
    from onnx import helper

    for t in _marked_tensors(model):
        data = read(t.name)
        if data is None:
            raise OnnxImportError(
                f"tensor '{t.name}' is marked external but the archive has no member for it", [t.name]
            )
        itemsize = np.dtype(helper.tensor_dtype_to_np_dtype(t.data_type)).itemsize
        want = int(np.prod(list(t.dims), dtype=np.int64)) * itemsize
        if len(data) != want:
            raise OnnxImportError(
                f"external data of tensor '{t.name}' has {len(data)} bytes; dims {list(t.dims)} need {want}", [t.name]
            )
        t.raw_data = data


def load_zip_archive(file: Any) -> Any:
    """The ModelProto of a Caffe2 zip archive (a path or a binary file object), external values resolved."""
    import onnx

    try:
        with zipfile.ZipFile(file, mode="r") as z:
            names = set(z.namelist())
            if MODEL_MEMBER not in names:
                raise OnnxImportError(f"the zip archive has no {MODEL_MEMBER} member (members: {sorted(names)})", [])
            model = onnx.load_from_string(z.read(MODEL_MEMBER))
            resolve_external_values(model, lambda n: z.read(n) if n in names else None)
    except zipfile.BadZipFile as e:
        raise OnnxImportError(f"not a zip archive: {e}", []) from e
    return model
