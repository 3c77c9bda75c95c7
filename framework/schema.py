"""Record schemas (a subset of Caffe2's ``caffe2.python.schema``): Scalar, List and Struct fields
whose flattened names are the dataset field names the dataset ops use (``"a"``,
``"b:lengths"``, ``"b:values"``...).

Covered: ``Scalar(dtype, blob=None)``, ``List(values, lengths_blob=None)``, ``Struct((name,
field), ...)`` with attribute and ``[]`` access, ``field_names()``, ``field_types()``,
``field_blobs()``, ``has_blobs()``, ``clone_schema()``, ``from_blob_list(schema, blobs)``,
``NewRecord(net, schema)``, ``FeedRecord(record, arrays)``, ``FetchRecord(record)``. Not covered:
Map/Tuple helpers, metadata, ``InitEmptyRecord`` and the schema-to-proto converters.

>>> s = Struct(("a", Scalar(np.int32)), ("b", List(Scalar(np.float32))))
>>> s.field_names()
['a', 'b:lengths', 'b:values']
"""

from __future__ import annotations

from typing import Any, Iterator, Sequence

import numpy as np

from framework import workspace

FIELD_SEPARATOR = ":"


class Field:
    """A node of a schema; leaves are Scalars."""

    def field_names(self) -> list[str]:
        raise NotImplementedError

    def field_types(self) -> list[np.dtype]:
        raise NotImplementedError

    def field_blobs(self) -> list[Any]:
        raise NotImplementedError

    def all_scalars(self) -> list[Scalar]:
        raise NotImplementedError

    def has_blobs(self) -> bool:
        return all(s.blob is not None for s in self.all_scalars())

    def clone_schema(self) -> Field:
        return from_blob_list(self, [None] * len(self.field_names()))

    def __len__(self) -> int:
        return len(self.field_names())


class Scalar(Field):
    """A leaf: one tensor per record batch, of ``dtype`` (and an optional bound blob)."""

    def __init__(self, dtype: Any = None, blob: Any = None) -> None:
        self.dtype = np.dtype(dtype) if dtype is not None else np.dtype(object)
        self.blob = blob

    def field_names(self) -> list[str]:
        return [""]

    def field_types(self) -> list[np.dtype]:
        return [self.dtype]

    def field_blobs(self) -> list[Any]:
        if self.blob is None:
            raise ValueError("this Scalar has no blob bound (use NewRecord or from_blob_list)")
        return [self.blob]

    def all_scalars(self) -> list[Scalar]:
        return [self]

    def get(self) -> Any:
        return self.blob

    def set_value(self, value: Any) -> None:
        workspace.FeedBlob(self.blob, np.asarray(value, dtype=self.dtype))

    def __repr__(self) -> str:
        return f"Scalar({self.dtype}, blob={self.blob})"


class List(Field):
    """A variable-length list per record: ``lengths`` (int32) and the concatenated ``values``."""

    def __init__(self, values: Field, lengths_blob: Any = None) -> None:
        self.lengths = Scalar(np.int32, lengths_blob)
        self._items = values if isinstance(values, Field) else Scalar(values)

    @property
    def values(self) -> Field:
        return self._items

    def _children(self) -> list[tuple[str, Field]]:
        return [("lengths", self.lengths), ("values", self._items)]

    def field_names(self) -> list[str]:
        return [_join(n, sub) for n, f in self._children() for sub in f.field_names()]

    def field_types(self) -> list[np.dtype]:
        return [t for _, f in self._children() for t in f.field_types()]

    def field_blobs(self) -> list[Any]:
        return [b for _, f in self._children() for b in f.field_blobs()]

    def all_scalars(self) -> list[Scalar]:
        return [s for _, f in self._children() for s in f.all_scalars()]

    def __repr__(self) -> str:
        return f"List({self._items!r})"


class Struct(Field):
    """Named fields, in order: ``Struct(("a", Scalar(...)), ("b", List(...)))``."""

    def __init__(self, *fields: tuple[str, Field]) -> None:
        self.fields: dict[str, Field] = {}
        for name, f in fields:
            if FIELD_SEPARATOR in name and name.split(FIELD_SEPARATOR)[0] in self.fields:
                raise ValueError(f"field {name!r} clashes with an existing field")
            self.fields[name] = f if isinstance(f, Field) else Scalar(f)

    def field_names(self) -> list[str]:
        return [_join(n, sub) for n, f in self.fields.items() for sub in f.field_names()]

    def field_types(self) -> list[np.dtype]:
        return [t for f in self.fields.values() for t in f.field_types()]

    def field_blobs(self) -> list[Any]:
        return [b for f in self.fields.values() for b in f.field_blobs()]

    def all_scalars(self) -> list[Scalar]:
        return [s for f in self.fields.values() for s in f.all_scalars()]

    def __getattr__(self, name: str) -> Field:
        fields = self.__dict__.get("fields", {})
        if name in fields:
            return fields[name]
        raise AttributeError(name)

    def __getitem__(self, name: str) -> Field:
        return self.fields[name]

    def __iter__(self) -> Iterator[Field]:
        return iter(self.fields.values())

    def __repr__(self) -> str:
        return "Struct(" + ", ".join(f"{n}={f!r}" for n, f in self.fields.items()) + ")"


def _join(prefix: str, sub: str) -> str:
    return f"{prefix}{FIELD_SEPARATOR}{sub}" if sub else prefix


def from_blob_list(schema: Field, values: Sequence[Any]) -> Field:
    """A copy of ``schema`` whose scalars are bound to ``values`` (in field order)."""
    values = list(values)
    if len(values) != len(schema.field_names()):
        raise ValueError(f"{len(values)} blobs for {len(schema.field_names())} fields")
    it = iter(values)

    def build(f: Field) -> Field:
        if isinstance(f, Scalar):
            return Scalar(f.dtype, next(it))
        if isinstance(f, List):
            lengths = next(it)
            out = List(build(f.values))
            out.lengths.blob = lengths
            return out
        return Struct(*[(n, build(c)) for n, c in f.fields.items()])

    return build(schema)


def NewRecord(net: Any, schema: Field) -> Field:  # noqa: N802 - Caffe2's name
    """``schema`` bound to fresh blob names of ``net`` (one per field)."""
    names = [net.NextScopedBlob(("record_" + n).replace(FIELD_SEPARATOR, "_")) for n in schema.field_names()]
    return from_blob_list(schema, names)


def FeedRecord(record: Field, arrays: Sequence[Any]) -> None:  # noqa: N802 - Caffe2's name
    """Feed ``arrays`` (one per field, in order) into the record's blobs, cast to the field types."""
    for blob, dtype, a in zip(record.field_blobs(), record.field_types(), arrays, strict=True):
        workspace.FeedBlob(blob, np.asarray(a, dtype=dtype))


def FetchRecord(record: Field) -> list[np.ndarray]:  # noqa: N802 - Caffe2's name
    """The arrays of the record's blobs, in field order."""
    return [workspace.FetchBlob(b) for b in record.field_blobs()]
