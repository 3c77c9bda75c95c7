"""Caffe2's dataset schema walker (dataset_ops.cc): TreeIterator and TreeCursor.

A dataset is a list of fields (tensors) named like ``"a"``, ``"b:lengths"``,
``"b:values:lengths"``, ``"b:values:values"``. A field ``"{prefix}:lengths"``
defines the domain ``{prefix}``: each entry of its parent domain says how many
entries of ``{prefix}`` belong to it. Every field lives in the domain of the
length field whose prefix matches its name longest (or the root domain).
Offsets are kept per domain (root first, then one per length field).

A TreeCursor (the blob of ``CreateTreeCursor``) holds an iterator and the
current offsets behind a lock; it serializes as Caffe2 does (type
``"std::unique_ptr<TreeCursor>"``, the offsets as an int64 tensor, the field
names space-separated in ``content``).
"""

from __future__ import annotations

import threading
from typing import Sequence

import numpy as np

from framework.errors import SerializationError, ShapeError
from framework.memory.blob import Blob
from framework.memory.serialize import register_blob_serializer
from framework.memory.tensor_proto import proto_elements, tensor_to_proto
from framework.proto.framework_pb2 import BlobProto

INT64_MAX = np.iinfo(np.int64).max


class TreeIterator:
    """Field names -> for each field, the index of its offset domain (0 = root)."""

    def __init__(self, fields: Sequence[str]) -> None:
        self.fields = [str(f) for f in fields]
        parts = [f.split(":") for f in self.fields]
        self.length_field_ids = [i for i, p in enumerate(parts) if p and p[-1] == "lengths"]
        self.length_field_of: list[int] = []  # per field: index into length_field_ids, -1 = root
        for i, p in enumerate(parts):
            best_level, best = 1, -1
            for j, lid in enumerate(self.length_field_ids):
                if lid == i:
                    continue
                prefix = parts[lid][:-1]
                if p[: len(prefix)] == prefix and len(parts[lid]) > best_level:
                    best_level, best = len(parts[lid]), j
            self.length_field_of.append(best)
        for i, j in enumerate(self.length_field_of):
            if j >= 0 and self.length_field_ids[j] >= i:
                lid = self.length_field_ids[j]
                raise ShapeError(
                    f"field {i} ({self.fields[i]}) depends on a field defined afterwards: {lid} ({self.fields[lid]})"
                )

    @property
    def num_offset_fields(self) -> int:
        return len(self.length_field_ids) + 1

    def domain(self, field: int) -> int:
        """Offset index of a field's domain."""
        return self.length_field_of[field] + 1

    def advance(self, lengths: list[np.ndarray], offsets: list[int], limits: list[int], num: int) -> list[int]:
        """Move ``offsets`` forward by ``num`` root entries (fewer at the end); returns the sizes read."""
        sizes = [0] * len(offsets)
        new = list(offsets)
        if limits[0] < offsets[0]:
            raise ShapeError("tried to advance past the end of the cursor")
        sizes[0] = min(limits[0] - offsets[0], num)
        new[0] = offsets[0] + sizes[0]
        for j in range(1, len(offsets)):
            parent = self.domain(self.length_field_ids[j - 1])
            lens = lengths[j - 1]
            start, n = offsets[parent], sizes[parent]
            if start + n > len(lens) and n > 0:
                raise ShapeError(
                    f"inconsistent field length: lengths field {self.fields[self.length_field_ids[j - 1]]} has "
                    f"{len(lens)} entries, {start + n} needed"
                )
            total = int(np.sum(lens[start : start + n], dtype=np.int64)) if n else 0
            if offsets[j] + total > limits[j]:
                raise ShapeError(f"inconsistent field length: tried to advance past the end of field {j}")
            sizes[j] = total
            new[j] = offsets[j] + total
        offsets[:] = new
        return sizes


class TreeCursor:
    """A TreeIterator and the current offsets, behind a lock."""

    def __init__(self, iterator: TreeIterator, offsets: Sequence[int] = ()) -> None:
        self.it = iterator
        self.offsets: list[int] = [int(o) for o in offsets]
        self.lock = threading.Lock()

    def __repr__(self) -> str:
        return f"TreeCursor({self.it.fields}, offsets={self.offsets})"


CURSOR_TYPE = "std::unique_ptr<TreeCursor>"


def _serialize(c: TreeCursor, name: str) -> BlobProto:
    proto = BlobProto(name=name, type=CURSOR_TYPE)
    if c.offsets:
        proto.tensor.CopyFrom(tensor_to_proto(np.array(c.offsets, np.int64), name, typed=True))
    proto.content = "".join(f"{f} " for f in c.it.fields).encode("utf-8")
    return proto


def _deserialize(proto: BlobProto, blob: Blob) -> None:
    try:
        fields = proto.content.decode("utf-8").split()
    except UnicodeDecodeError as e:
        raise SerializationError(f"TreeCursor blob '{proto.name}': field names are not UTF-8: {e}") from None
    offsets: list[int] = []
    if proto.HasField("tensor"):
        meta, vals = proto_elements(proto.tensor)
        if meta.dtype.kind not in "iu":
            raise SerializationError(f"TreeCursor blob '{proto.name}': offsets must be integers, got {meta.name}")
        offsets = [int(v) for v in vals]
    it = TreeIterator(fields)
    if offsets and len(offsets) != it.num_offset_fields:
        raise SerializationError(
            f"TreeCursor blob '{proto.name}': {len(offsets)} offsets for {it.num_offset_fields} domains"
        )
    blob.reset(TreeCursor(it, offsets))


register_blob_serializer(TreeCursor, CURSOR_TYPE, _serialize, _deserialize)
