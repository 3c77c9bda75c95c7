"""The base of Caffe2's record schema (``framework.caffe2.python.schema`` re-exports it): ``Field``, the leaf
``Scalar`` (one tensor, a dtype that may carry an inner shape, optional blob and ``Metadata``)
and ``FeatureSpec``. Containers are in ``framework.caffe2.python.schema_containers``. Each field knows its
position among its root's flattened fields (``slice()``, ``Scalar.id()``), as Caffe2's do.
"""

from __future__ import annotations

import logging
from collections import namedtuple
from io import StringIO
from typing import Any, Iterable

import numpy as np

from framework.caffe2.python.builder.blob_reference import BlobReference

log = logging.getLogger("framework.caffe2.python.schema")

FIELD_SEPARATOR = ":"

FeatureSpec = namedtuple(
    "FeatureSpec",
    ["feature_type", "feature_names", "feature_ids", "feature_is_request_only", "desired_hash_size",
     "feature_to_index"],
    defaults=(None,) * 6,
)  # fmt: skip


class Metadata(namedtuple("Metadata", ["categorical_limit", "expected_value", "feature_specs"], defaults=(None,) * 3)):
    """Extra facts about a Scalar: ``categorical_limit`` (max value + 1 of a non-negative integral
    field, e.g. an embedding table size), ``expected_value`` (average, e.g. of list lengths),
    ``feature_specs`` (a FeatureSpec)."""

    __slots__ = ()


def _join_field_name(prefix: str, suffix: str) -> str:
    if prefix and suffix:
        return f"{prefix}{FIELD_SEPARATOR}{suffix}"
    return prefix or suffix or ""


def _normalize_field(value: Any, keep_blobs: bool = True) -> Field:
    """A field from a field (cloned), a type/dtype (a Scalar of it) or a blob (a Scalar holding it)."""
    if isinstance(value, Field):
        return value.clone(keep_blobs=keep_blobs)
    if isinstance(value, (type, np.dtype)):
        return Scalar(dtype=value)
    return Scalar(blob=value)


class Field:
    """An abstract node of a schema; derived classes call ``Field.__init__(children)`` last."""

    def __init__(self, children: Iterable[Field]) -> None:
        self._parent: tuple[Field | None, int] = (None, 0)
        offset = 0
        self._field_offsets = []
        for child in children:
            self._field_offsets.append(offset)
            offset += len(child.field_names())
        self._field_offsets.append(offset)

    def clone_schema(self) -> Field:
        return self.clone(keep_blobs=False)

    def field_names(self) -> list[str]:
        raise NotImplementedError("Field is an abstract class.")

    def field_types(self) -> list[np.dtype]:
        raise NotImplementedError("Field is an abstract class.")

    def field_metadata(self) -> list[Metadata | None]:
        raise NotImplementedError("Field is an abstract class.")

    def field_blobs(self) -> list[Any]:
        raise NotImplementedError("Field is an abstract class.")

    def all_scalars(self) -> list[Scalar]:
        raise NotImplementedError("Field is an abstract class.")

    def has_blobs(self) -> bool:
        raise NotImplementedError("Field is an abstract class.")

    def clone(self, keep_blobs: bool = True) -> Field:
        raise NotImplementedError("Field is an abstract class.")

    def _set_parent(self, parent: Field, relative_id: int) -> None:
        self._parent = (parent, relative_id)

    def slice(self) -> slice:
        """The range of this field's ids among its root's flattened fields."""
        base = self._child_base_id()
        return slice(base, base + len(self.field_names()))

    def _child_base_id(self, child_index: int | None = None) -> int:
        parent, i = self._parent
        pos = 0 if child_index is None else self._field_offsets[child_index]
        if parent is not None:
            pos += parent._child_base_id(i)
        return pos

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Field):
            return NotImplemented
        return (
            self.field_names() == other.field_names()
            and self.field_types() == other.field_types()
            and self.field_metadata() == other.field_metadata()
        )

    __hash__ = object.__hash__

    def _pprint_impl(self, indent: int, out: StringIO) -> None:
        raise NotImplementedError("Field is an abstract class.")

    def __repr__(self) -> str:
        out = StringIO()
        self._pprint_impl(0, out)
        return out.getvalue()


class Scalar(Field):
    """A leaf: one tensor per record batch. ``dtype`` may carry an inner shape (``(np.int32, 5)`` is
    a [L, 5] tensor); no dtype is ``np.void`` (unknown). ``blob`` is a BlobReference or data (cast
    to an array of the dtype; a 0-d value becomes [1]; a data array's inner shape is taken into the
    dtype). ``metadata`` is a Metadata (``categorical_limit`` only on integral fields)."""

    def __init__(self, dtype: Any = None, blob: Any = None, metadata: Metadata | None = None) -> None:
        self._metadata: Metadata | None = None
        self.set(dtype, blob, metadata, unsafe=True)
        Field.__init__(self, [])

    def field_names(self) -> list[str]:
        return [""]

    def field_type(self) -> np.dtype:
        return self.dtype

    def field_types(self) -> list[np.dtype]:
        return [self.dtype]

    def field_metadata(self) -> list[Metadata | None]:
        return [self._metadata]

    def has_blobs(self) -> bool:
        return self._blob is not None

    def field_blobs(self) -> list[Any]:
        if self._blob is None:
            raise ValueError("Value is not set for this field.")
        return [self._blob]

    def all_scalars(self) -> list[Scalar]:
        return [self]

    def clone(self, keep_blobs: bool = True) -> Scalar:
        return Scalar(self._original_dtype, self._blob if keep_blobs else None, self._metadata)

    def get(self) -> Any:
        if self._blob is None:
            raise ValueError("Value is not set for this field.")
        return self._blob

    def __call__(self) -> Any:
        return self.get()

    @property
    def blob(self) -> Any:
        return self._blob

    @property
    def metadata(self) -> Metadata | None:
        return self._metadata

    def set_metadata(self, value: Metadata) -> None:
        if not isinstance(value, Metadata):
            raise TypeError(f"metadata must be Metadata, got {type(value)}")
        self._metadata = value
        self._validate_metadata()

    def _validate_metadata(self) -> None:
        m = self._metadata
        if m is not None and m.categorical_limit is not None and not np.issubdtype(self.dtype.base, np.integer):
            raise TypeError(f"`categorical_limit` can be specified only in integral fields but got {self.dtype}")

    def set_value(self, blob: Any, throw_on_type_mismatch: bool = False, unsafe: bool = False) -> None:
        """Set the blob only, keeping (and with ``throw_on_type_mismatch`` checking) the dtype."""
        if self.dtype.base != np.void and throw_on_type_mismatch:
            if not isinstance(blob, np.ndarray):
                raise TypeError(f"Got {blob!r}")
            if blob.dtype.base != self.dtype.base:
                raise TypeError(f"Expected {self.dtype.base}, got {blob.dtype.base}")
        self.set(dtype=self._original_dtype, blob=blob, unsafe=unsafe)

    def set(self, dtype: Any = None, blob: Any = None, metadata: Metadata | None = None, unsafe: bool = False) -> None:
        """Set the dtype and/or blob (see the class doc); a plain str blob is ambiguous (ValueError)."""
        if not unsafe:
            log.warning("Scalar should be considered immutable. Only call Scalar.set() on newly created Scalar.")
        if blob is not None and isinstance(blob, str) and not isinstance(blob, BlobReference):
            raise ValueError(
                "Passing str blob to Scalar.set() is ambiguous. Do either set(blob=np.array(blob)) or "
                "set(blob=BlobReference(blob))"
            )
        self._original_dtype = dtype
        if isinstance(dtype, tuple) and len(dtype) == 2 and dtype[1] == 1:
            dtype = (dtype[0], (1,))
        if dtype is not None:
            if isinstance(dtype, tuple) and dtype[0] == np.void:
                raise TypeError(f"Cannot set the Scalar with type {dtype} for blob {blob}.")
            dtype = np.dtype(dtype)
        if blob is not None and not isinstance(blob, BlobReference):
            preserve_shape = isinstance(blob, np.ndarray)
            if dtype is not None and dtype != np.void:
                blob = np.array(blob, dtype=dtype.base)
                if blob.size == 0 and not preserve_shape:
                    blob = blob.reshape((0,) + dtype.shape)
            elif not isinstance(blob, np.ndarray):
                raise TypeError(f"Invalid blob type: {type(blob)}")
            if blob.ndim == 0 and not preserve_shape:
                blob = blob.reshape((1,))
            if blob.ndim > 1 and dtype is not None and dtype.base != np.void:
                dtype = np.dtype((dtype.base, blob.shape[1:]))
        if dtype is None:
            dtype = np.dtype(np.void)
        if dtype.fields:
            raise TypeError("Cannot create Scalar with a structured dtype. Use from_dtype instead.")
        self.dtype = dtype
        self._blob = blob
        if metadata is not None:
            self.set_metadata(metadata)
        self._validate_metadata()

    def set_type(self, dtype: Any) -> None:
        self._original_dtype = dtype
        self.dtype = np.dtype(dtype) if dtype is not None else np.dtype(np.void)
        self._validate_metadata()

    def _pprint_impl(self, indent: int, out: StringIO) -> None:
        out.write("  " * indent + f"Scalar({self.dtype!r}, {self._blob!r}, {self._metadata!r})\n")

    def id(self) -> int:
        """This scalar's position among its root's flattened fields."""
        return self._child_base_id()
