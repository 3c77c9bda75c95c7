"""Record schemas, as Caffe2's ``caffe2.python.schema``: nested columnar records over tensors.

A schema is a tree of fields (Scalar with Metadata/FeatureSpec from ``framework.caffe2.python.schema_fields``;
List, ListWithEvicted, Struct from ``framework.caffe2.python.schema_containers``) whose flattened names
(``"a"``, ``"b:lengths"``, ``"b:values"``) are the dataset field names the dataset ops use.
This module adds the constructors (``Map``, ``MapWithEvicted``, ``NamedTuple``, ``Tuple``,
``RawTuple``, ``from_dtype``, ``from_column_list``, ``from_blob_list``, ``as_record``), the
workspace helpers (``NewRecord``, ``ConstRecord``, ``InitEmptyRecord``, ``FeedRecord``,
``FetchRecord``), schema comparison (``equal_schemas``, ``is_schema_subset``, ``schema_check``),
the dtype <-> TensorProto type maps and ``get_categorical_limit`` (from Caffe2's ``layers``).

>>> s = Struct(("a", Scalar(np.int32)), ("b", List(Scalar(np.float32))))
>>> s.field_names()
['a', 'b:lengths', 'b:values']
>>> s.b.values.slice()
slice(2, 3, None)
"""

from __future__ import annotations

import logging
from typing import Any, Sequence

import numpy as np

from framework import workspace
from framework.caffe2.python.builder.blob_reference import BlobReference
from framework.caffe2.python.schema_containers import List, ListWithEvicted, Struct
from framework.caffe2.python.schema_fields import (
    FIELD_SEPARATOR,
    FeatureSpec,
    Field,
    Metadata,
    Scalar,
    _normalize_field,
)
from framework.proto.framework_pb2 import TensorProto

__all__ = [
    "FIELD_SEPARATOR", "FeatureSpec", "Field", "List", "ListWithEvicted", "Metadata", "Scalar", "Struct",
    "Map", "MapWithEvicted", "NamedTuple", "Tuple", "RawTuple", "from_dtype", "from_column_list",
    "from_blob_list", "as_record", "FetchRecord", "FeedRecord", "NewRecord", "ConstRecord", "InitEmptyRecord",
    "is_schema_subset", "equal_schemas", "schema_check", "data_type_for_dtype", "dtype_for_core_type",
    "attach_metadata_to_scalars", "get_categorical_limit",
]  # fmt: skip

log = logging.getLogger("framework.caffe2.python.schema")


def Map(keys: Any, values: Any, keys_name: str = "keys", values_name: str = "values", lengths_blob: Any = None) -> List:
    """A List of Struct(keys, values)."""
    return List(Struct((keys_name, keys), (values_name, values)), lengths_blob=lengths_blob)


def MapWithEvicted(
    keys: Any, values: Any, keys_name: str = "keys", values_name: str = "values", lengths_blob: Any = None,
    evicted_values: Any = None,
) -> ListWithEvicted:  # fmt: skip
    """A Map with the ``_evicted_values`` field of ListWithEvicted."""
    return ListWithEvicted(Struct((keys_name, keys), (values_name, values)), lengths_blob, evicted_values)


def NamedTuple(name_prefix: str, *fields: Any) -> Struct:
    """A Struct of ``fields`` named ``<name_prefix>_0``, ``<name_prefix>_1``..."""
    return Struct(*[(f"{name_prefix}_{i}", f) for i, f in enumerate(fields)])


def Tuple(*fields: Any) -> Struct:
    """A Struct of ``fields`` named ``field_0``, ``field_1``..."""
    return NamedTuple("field", *fields)


def RawTuple(num_fields: int, name_prefix: str = "field") -> Struct:
    """A tuple of ``num_fields`` untyped (np.void) scalars."""
    if not isinstance(num_fields, int) or num_fields < 0:
        raise ValueError(f"num_fields must be an int >= 0, got {num_fields!r}")
    return NamedTuple(name_prefix, *([np.void] * num_fields))


def from_dtype(dtype: Any, _outer_shape: tuple = ()) -> Field:
    """A schema from a numpy dtype: a Scalar, or a Struct of the structured dtype's fields (each
    field's shape prefixed by the outer shapes). Fields at byte offsets other than 0 (packed
    structs) are refused, as in Caffe2."""
    if not isinstance(dtype, np.dtype):
        shape = _outer_shape
        dtype = np.dtype((dtype, _outer_shape))
    else:
        shape = _outer_shape + dtype.shape
        if shape != dtype.shape:
            dtype = np.dtype((dtype.base, shape))
    if not dtype.base.fields:
        return Scalar(dtype)
    fields = []
    for name, (fdtype, offset, *_) in dtype.base.fields.items():
        if offset != 0:
            raise ValueError("Fields with byte offsets are not supported.")
        fields.append((name, from_dtype(fdtype, _outer_shape=shape)))
    return Struct(*fields)


def _field_from_tree(node: dict) -> Field:
    """A column tree node: {"field": Scalar} for a leaf, else {"children": {name: node}}."""
    if node.get("field") is not None:
        return node["field"]
    children = node["children"]
    if not children:
        return Struct()
    built = {name: _field_from_tree(child) for name, child in children.items()}
    if set(built) == {"lengths", "values"}:
        return List(built["values"], lengths_blob=built["lengths"])
    if set(built) == {"lengths", "keys", "values"}:
        return Map(built["keys"], built["values"], lengths_blob=built["lengths"])
    return Struct(*built.items())


def from_column_list(
    col_names: Sequence[str], col_types: Sequence[Any] | None = None, col_blobs: Sequence[Any] | None = None,
    col_metadata: Sequence[Any] | None = None,
) -> Field:  # fmt: skip
    """A schema from flattened column names (``'a:lengths'``...), with optional types, blobs and
    metadata per column: a node whose children are exactly {lengths, values} is a List, exactly
    {lengths, keys, values} a Map, anything else a Struct."""
    n = len(col_names)
    col_types = [None] * n if col_types is None else list(col_types)
    col_blobs = [None] * n if col_blobs is None else list(col_blobs)
    col_metadata = [None] * n if col_metadata is None else list(col_metadata)
    if not (len(col_types) == len(col_blobs) == len(col_metadata) == n):
        raise ValueError("col_names, col_types, col_blobs and col_metadata must have the same length.")
    root: dict = {"children": {}, "field": None}
    for name, ctype, blob, meta in zip(col_names, col_types, col_blobs, col_metadata):
        node = root
        for part in name.split(FIELD_SEPARATOR):
            node = node["children"].setdefault(part, {"children": {}, "field": None})
        node["field"] = Scalar(dtype=ctype, blob=blob, metadata=meta)
    return _field_from_tree(root)


def from_blob_list(schema: Field, values: Any, throw_on_type_mismatch: bool = False) -> Field:
    """A clone of ``schema`` whose scalars hold ``values`` (one per field, in order)."""
    if not isinstance(schema, Field):
        raise TypeError("Argument `schema` must be a Field.")
    if isinstance(values, BlobReference):
        values = [values]
    record = schema.clone_schema()
    scalars = record.all_scalars()
    values = list(values)
    if len(scalars) != len(values):
        raise ValueError(f"Values must have {len(scalars)} elements, got {len(values)}.")
    for scalar, value in zip(scalars, values):
        if isinstance(value, str) and not isinstance(value, BlobReference):
            value = BlobReference(value)
        scalar.set_value(value, throw_on_type_mismatch, unsafe=True)
    return record


def as_record(value: Any) -> Field:
    """A Field from a Field (itself), a list of (name, value) pairs (a Struct), another list or tuple
    (a Tuple), a dict (a Struct) or a type/blob (a Scalar)."""
    if isinstance(value, Field):
        return value
    if isinstance(value, (list, tuple)):
        if value and all(isinstance(f, tuple) and len(f) == 2 and isinstance(f[0], str) for f in value):
            return Struct(*[(k, as_record(v)) for k, v in value])
        return Tuple(*[as_record(f) for f in value])
    if isinstance(value, dict):
        return Struct(*[(k, as_record(v)) for k, v in value.items()])
    return _normalize_field(value)


def _blob_refs(record: Field) -> list[Any]:
    blobs = record.field_blobs()
    if not all(isinstance(b, (BlobReference, str)) for b in blobs):
        raise TypeError("the record must hold blob references (use NewRecord)")
    return blobs


def FetchRecord(blob_record: Field, ws: Any = None, throw_on_type_mismatch: bool = False) -> Field:
    """A record of the same schema holding the arrays of ``blob_record``'s blobs."""
    if not isinstance(blob_record, Field):
        raise TypeError("FetchRecord takes a schema Field")
    fetch = workspace.FetchBlob if ws is None else (lambda b: ws.fetch_blob(str(b)))
    arrays = [fetch(str(b)) for b in _blob_refs(blob_record)]
    return from_blob_list(blob_record, arrays, throw_on_type_mismatch)


def FeedRecord(blob_record: Field, arrays: Any, ws: Any = None) -> None:
    """Feed ``arrays`` (a list, one per field, or a record of arrays) into the record's blobs.
    Arrays go in as they are; a value that is not an ndarray (a Python list) becomes an array of
    the field's type (Caffe2 would make it int64/float64)."""
    if not isinstance(blob_record, Field):
        raise TypeError("FeedRecord takes a schema Field")
    blobs = _blob_refs(blob_record)
    if isinstance(arrays, Field):
        arrays = arrays.field_blobs()
    arrays = list(arrays)
    if len(arrays) != len(blobs):
        raise ValueError(f"Values must contain exactly {len(blobs)} ndarrays.")
    for b, a, t in zip(blobs, arrays, blob_record.field_types()):
        if not isinstance(a, np.ndarray):
            a = np.asarray(a, dtype=None if t.base == np.void else t.base)
        if ws is None:
            workspace.FeedBlob(str(b), a)
        else:
            ws.feed_blob(str(b), a)


def NewRecord(net: Any, schema: Field) -> Field:
    """``schema`` bound to fresh blobs of ``net`` (``net.NextScopedBlob(field_name)`` each)."""
    if isinstance(schema, Scalar):
        result = schema.clone()
        result.set_value(blob=net.NextScopedBlob("unnamed_scalar"), unsafe=True)
        return result
    if not isinstance(schema, Field):
        raise TypeError("Record must be a schema.Field instance.")
    return from_blob_list(schema, [net.NextScopedBlob(prefix=name) for name in schema.field_names()])


def ConstRecord(net: Any, array_record: Field) -> Field:
    """A record of blobs filled by ``net.Const`` with the arrays of ``array_record``."""
    blob_record = NewRecord(net, array_record)
    for blob, array in zip(blob_record.field_blobs(), array_record.field_blobs()):
        net.Const(array, blob)
    return blob_record


def InitEmptyRecord(net: Any, schema_or_record: Field, enforce_types: bool = False) -> Field:
    """Add ConstantFills of empty ([0, *inner shape]) tensors of each field's type; a field whose
    type has no TensorProto type gets an empty float tensor, or a TypeError with ``enforce_types``."""
    record = schema_or_record if schema_or_record.has_blobs() else NewRecord(net, schema_or_record)
    for blob_type, blob in zip(record.field_types(), record.field_blobs()):
        try:
            data_type = data_type_for_dtype(blob_type)
        except TypeError:
            log.warning("Blob %s has type error", blob)
            if enforce_types:
                raise
            net.ConstantFill([], blob, shape=[0])
            continue
        net.ConstantFill([], blob, shape=[0, *blob_type.shape], dtype=data_type)
    return record


_DATA_TYPE_FOR_DTYPE = [
    (str, TensorProto.STRING),
    (np.float16, TensorProto.FLOAT16),
    (np.float32, TensorProto.FLOAT),
    (np.float64, TensorProto.DOUBLE),
    (bool, TensorProto.BOOL),
    (np.int8, TensorProto.INT8),
    (np.int16, TensorProto.INT16),
    (np.int32, TensorProto.INT32),
    (np.int64, TensorProto.INT64),
    (np.uint8, TensorProto.UINT8),
    (np.uint16, TensorProto.UINT16),
]


def data_type_for_dtype(dtype: Any) -> int:
    """The TensorProto data type of a numpy dtype (strings and objects are STRING)."""
    base = np.dtype(dtype).base
    if base.kind in "OUS":
        return TensorProto.STRING
    for np_type, dt in _DATA_TYPE_FOR_DTYPE:
        if base == np.dtype(np_type):
            return dt
    raise TypeError(f"Unknown dtype: {base}")


def dtype_for_core_type(core_type: int) -> Any:
    for np_type, dt in _DATA_TYPE_FOR_DTYPE:
        if dt == core_type:
            return np_type
    raise TypeError(f"Unknown core type: {core_type}")


def is_schema_subset(schema: Field, original_schema: Field) -> bool:
    return set(schema.field_names()).issubset(set(original_schema.field_names()))


def equal_schemas(
    schema: Field, original_schema: Field, check_field_names: bool = True, check_field_types: bool = True,
    check_field_metas: bool = False,
) -> bool:  # fmt: skip
    if not isinstance(schema, Field) or not isinstance(original_schema, Field):
        raise TypeError("equal_schemas compares two schema Fields")
    if check_field_names and schema.field_names() != original_schema.field_names():
        return False
    if check_field_types and schema.field_types() != original_schema.field_types():
        return False
    return not (check_field_metas and schema.field_metadata() != original_schema.field_metadata())


def schema_check(schema: Any, previous: Field | None = None) -> Field:
    """``as_record(schema)``, asserting it equals ``previous`` when given."""
    record = as_record(schema)
    if previous is not None and not equal_schemas(record, previous):
        raise ValueError(f"schema {record.field_names()} differs from {previous.field_names()}")
    return record


def attach_metadata_to_scalars(field: Field, metadata: Metadata) -> None:
    for f in field.all_scalars():
        f.set_metadata(metadata)


def get_categorical_limit(record: Field) -> int:
    """The categorical_limit of an IdList's values or an IdScoreList's keys (Caffe2's
    ``layers.get_categorical_limit``); NotImplementedError for other records."""
    if equal_schemas(record, List(Scalar(np.int64))):
        key = "values"
    elif equal_schemas(record, Map(Scalar(np.int64), Scalar(np.float32)), check_field_types=False):
        key = "values:keys"
    else:
        raise NotImplementedError(f"get_categorical_limit: not an IdList or IdScoreList: {record.field_names()}")
    meta = record[key].metadata
    if meta is None:
        raise ValueError(f"categorical_limit for feature {record[key]!r} is not set")
    return meta.categorical_limit
