"""framework.caffe2.python.schema against the behaviours of Caffe2's schema_test.py and schema.py docs."""

from __future__ import annotations

import numpy as np
import pytest

from framework import core, workspace
from framework.caffe2.python import schema
from framework.proto.framework_pb2 import TensorProto


def test_normalize_field_and_tuples():
    s = schema.Struct(("field1", np.int32), ("field2", str))
    assert s == schema.Struct(("field1", schema.Scalar(dtype=np.int32)), ("field2", schema.Scalar(dtype=str)))
    t = schema.Tuple(np.int32, str, np.float32)
    t2 = schema.Struct(
        ("field_0", schema.Scalar(np.int32)), ("field_1", schema.Scalar(str)), ("field_2", schema.Scalar(np.float32))
    )
    assert t == t2 and t[0] == schema.Scalar(np.int32) and t[2] == schema.Scalar(np.float32)
    assert t[2, 0] == schema.Struct(("field_2", schema.Scalar(np.float32)), ("field_0", schema.Scalar(np.int32)))
    for i, (v1, v2) in enumerate(zip(t, t2)):
        assert v1 == v2 == t[i] == t2[i]
    r = schema.RawTuple(2)
    assert r == schema.Struct(("field_0", schema.Scalar()), ("field_1", schema.Scalar()))
    assert r[0].dtype == np.void and schema.NamedTuple("x", np.int64).field_names() == ["x_0"]
    with pytest.raises(ValueError):
        schema.RawTuple(-1)


def test_struct_indexing_nesting_and_dup_fields():
    s = schema.Struct(("field1", schema.Scalar(np.int32)), ("field2", schema.List(schema.Scalar(str))))
    assert s["field2"] == s.field2 == schema.List(schema.Scalar(str))
    assert s["field2", "field1"].field_names() == ["field2:lengths", "field2:values", "field1"]
    assert getattr(s, "non_existent", None) is None and s.get("nope", 3) == 3
    with pytest.raises(ValueError):
        schema.Struct(("a", schema.Scalar()), ("a", schema.Scalar()))
    with pytest.raises(ValueError):
        schema.Struct(("lengths", schema.Scalar()))
    nested = schema.Struct(
        ("a", schema.Scalar()),
        ("b:c", schema.Scalar()),
        ("b:d:e", schema.Scalar()),
        ("b", schema.Struct(("f", np.int32))),
    )
    expected = schema.Struct(
        ("a", schema.Scalar()),
        ("b", schema.Struct(("c", schema.Scalar()), ("d", schema.Struct(("e", schema.Scalar()))), ("f", np.int32))),
    )
    assert nested == expected and nested.field_names() == ["a", "b:c", "b:d:e", "b:f"]
    assert "b:d:e" in nested and "b:d:x" not in nested and "a:x" not in nested
    assert nested["b:d:e"] == schema.Scalar() and nested["b:d"].field_names() == ["e"]
    with pytest.raises(KeyError):
        nested["b:zz"]
    with pytest.raises(TypeError):
        nested.a = schema.Scalar()
    lst = schema.List(schema.Struct(("x", np.int32), ("y", np.float32)))
    assert lst.x == schema.Scalar(np.int32) and lst["values:y"] == schema.Scalar(np.float32)
    assert lst["lengths"].dtype == np.int32
    with pytest.raises(KeyError):
        lst["nothing"]


def test_struct_arithmetic():
    s1 = schema.Struct(("a", schema.Scalar()), ("b", schema.Struct(("c", schema.Scalar()))))
    s2 = schema.Struct(("b", schema.Struct(("d", schema.Scalar()))))
    merged = s1 + s2
    assert merged.field_names() == ["a", "b:c", "b:d"]
    with pytest.raises(TypeError):
        s1 + schema.Struct(("a", schema.Scalar()))
    assert (merged - s2).field_names() == ["a", "b:c"]
    assert (
        merged - schema.Struct(("b", schema.Struct(("c", schema.Scalar()), ("d", schema.Scalar()))))
    ).field_names() == ["a"]
    with pytest.raises(TypeError):
        merged - schema.Struct(("a", schema.Struct(("z", schema.Scalar()))))


def test_slices_and_ids():
    s = schema.Struct(
        ("a", schema.Scalar()),
        ("b", schema.Struct(("b1", schema.Scalar()), ("b2", schema.List(np.int64)))),
        ("c", np.int32),
    )
    data = ["da", "db1", "db2l", "db2v", "dc"]
    assert data[s.b.slice()] == ["db1", "db2l", "db2v"]
    assert data[s.b.b2.slice()] == ["db2l", "db2v"] and s.c.id() == 4 and s.b.b2.values.id() == 3


def test_metadata_preserved_and_validated():
    s = schema.Struct(
        ("a", schema.Scalar(np.float32)),
        ("b", schema.Scalar(np.int32, metadata=schema.Metadata(categorical_limit=5))),
        ("c", schema.List(schema.Scalar(np.int32, metadata=schema.Metadata(categorical_limit=6)))),
    )
    s.c.lengths.set_metadata(schema.Metadata(categorical_limit=7))
    sv = schema.from_blob_list(s, [np.array([3.4]), np.array([2]), np.array([3]), np.array([1, 2, 3])])
    for r in (s, s.clone(), sv):
        assert r.a.metadata is None and r.b.metadata.categorical_limit == 5
        assert r.c.value.metadata.categorical_limit == 6 and r.c.lengths.metadata.categorical_limit == 7
    assert sv.a.get().dtype == np.float32 and sv.c.values.get().tolist() == [1, 2, 3]
    with pytest.raises(TypeError):
        schema.Scalar(np.float32, metadata=schema.Metadata(categorical_limit=3))
    specs = schema.FeatureSpec(feature_type="ID_LIST", feature_ids=[1, 2])
    assert schema.Metadata(feature_specs=specs).feature_specs.feature_ids == [1, 2]
    plain = schema.Struct(("a", np.float32), ("b", np.int32), ("c", schema.List(np.int32)))
    assert s.field_metadata()[0] is None and s == s.clone_schema() and s != plain  # metadata counts in ==
    assert not schema.equal_schemas(s, plain, check_field_metas=True)
    assert schema.equal_schemas(s, plain)
    assert not schema.equal_schemas(s, s.clone_schema() - schema.Struct(("a", schema.Scalar(np.float32))))


def test_preserves_empty_fields_and_scalar_shapes():
    s = schema.Struct(("a", schema.Scalar(np.float32)), ("b", schema.Struct()))
    sv = schema.from_blob_list(s, [np.array([3.4])])
    assert "b" in s.clone().fields and "b" in sv.fields and len(sv.b.fields) == 0
    assert schema.Scalar((np.int32, 5)).dtype.shape == (5,) and schema.Scalar((np.int32, 1)).dtype.shape == (1,)
    assert schema.Scalar(np.float32, 3.0).get().shape == (1,)
    assert schema.Scalar(np.float32, np.zeros((2, 3))).dtype.shape == (3,)
    with pytest.raises(ValueError):
        schema.Scalar(np.float32, "ambiguous")
    with pytest.raises(ValueError):
        schema.from_dtype(np.dtype([("x", np.int32), ("y", np.float32)]))  # y sits at offset 4
    assert schema.from_dtype(np.dtype([("x", np.int32)]), _outer_shape=(2,))["x"].dtype.shape == (2,)


def test_list_subclasses_clone_and_maps():
    lw = schema.ListWithEvicted(schema.Scalar(np.int64))
    assert lw.field_names() == ["lengths", "values", "_evicted_values"]
    assert type(lw.clone()) is schema.ListWithEvicted and lw._evicted_values.dtype == np.int64
    assert lw["_evicted_values"] is lw._evicted_values
    m = schema.Map(np.int64, np.float32)
    assert m.field_names() == ["lengths", "values:keys", "values:values"]
    assert schema.MapWithEvicted(np.int64, np.float32).field_names()[-1] == "_evicted_values"


def test_from_column_list_builds_lists_and_maps():
    names = ["a", "b:lengths", "b:values", "c:lengths", "c:keys", "c:values", "d:e"]
    types = [np.int32, np.int32, np.float32, np.int32, np.int64, np.float32, np.int64]
    s = schema.from_column_list(names, types, col_metadata=[None] * 6 + [schema.Metadata(categorical_limit=9)])
    assert isinstance(s.b, schema.List) and isinstance(s.c, schema.List) and isinstance(s.d, schema.Struct)
    assert s.field_names() == ["a", "b:lengths", "b:values", "c:lengths", "c:values:keys", "c:values:values", "d:e"]
    assert s.field_types() == [np.dtype(t) for t in types] and s.d.e.metadata.categorical_limit == 9
    with pytest.raises(ValueError):
        schema.from_column_list(["a"], [np.int32, np.int32])


def test_as_record_and_schema_check():
    r = schema.as_record([("x", np.int32), ("y", schema.List(np.float32))])
    assert r.field_names() == ["x", "y:lengths", "y:values"]
    assert schema.as_record([np.int32, np.int64]).field_names() == ["field_0", "field_1"]
    assert schema.as_record({"k": np.int32}).field_names() == ["k"]
    assert schema.schema_check(r, r) is r
    with pytest.raises(ValueError):
        schema.schema_check(r, schema.Struct(("x", np.int32)))
    assert schema.is_schema_subset(schema.Struct(("x", np.int32)), r)


def test_records_in_the_workspace():
    workspace.ResetWorkspace()
    s = schema.Struct(("label", np.int32), ("feat", schema.Scalar((np.float32, 2))), ("ids", schema.List(np.int64)))
    net = core.Net("rec")
    empty = schema.InitEmptyRecord(net, s)
    workspace.RunNetOnce(net)
    got = schema.FetchRecord(empty)
    assert [a.shape for a in got.field_blobs()] == [(0,), (0, 2), (0,), (0,)]
    assert [a.dtype for a in got.field_blobs()] == [np.int32, np.float32, np.int32, np.int64]
    arrays = schema.from_blob_list(
        s,
        [np.array([1, 2], np.int32), np.ones((2, 2), np.float32), np.array([1, 0], np.int32), np.array([7], np.int64)],
    )
    const_net = core.Net("const_rec")
    const = schema.ConstRecord(const_net, arrays)
    workspace.RunNetOnce(const_net)
    back = schema.FetchRecord(const, throw_on_type_mismatch=True)
    for a, b in zip(back.field_blobs(), arrays.field_blobs()):
        np.testing.assert_array_equal(a, b)
    rec = schema.NewRecord(core.Net("fed"), s)
    schema.FeedRecord(rec, arrays)
    assert schema.FetchRecord(rec).ids.values.get().tolist() == [7]
    with pytest.raises(ValueError):
        schema.FeedRecord(rec, [np.zeros(1)])
    assert schema.NewRecord(core.Net("sc"), schema.Scalar(np.int32)).has_blobs()
    with pytest.raises(TypeError):
        schema.InitEmptyRecord(core.Net("void"), schema.Struct(("v", schema.Scalar())), enforce_types=True)


def test_type_maps_and_categorical_limit():
    assert schema.data_type_for_dtype(np.dtype(np.int64)) == TensorProto.INT64
    assert schema.data_type_for_dtype(np.dtype(object)) == TensorProto.STRING
    assert schema.dtype_for_core_type(TensorProto.FLOAT) is np.float32
    with pytest.raises(TypeError):
        schema.data_type_for_dtype(np.dtype(np.void))
    id_list = schema.List(schema.Scalar(np.int64, metadata=schema.Metadata(categorical_limit=100)))
    assert schema.get_categorical_limit(id_list) == 100
    id_score = schema.Map(schema.Scalar(np.int64, metadata=schema.Metadata(categorical_limit=7)), np.float32)
    assert schema.get_categorical_limit(id_score) == 7
    with pytest.raises(ValueError):
        schema.get_categorical_limit(schema.List(np.int64))
    with pytest.raises(NotImplementedError):
        schema.get_categorical_limit(schema.Scalar(np.int64))
