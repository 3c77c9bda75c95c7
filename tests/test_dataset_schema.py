"""caffe2.python schema + dataset: a nested-record dataset written in batches and read back
through a plan whose step stops on the reader's should_stop; the rows equal what was written."""

from __future__ import annotations

import numpy as np

from framework import core, workspace
from framework.caffe2.python import dataset, schema
from framework.proto.framework_pb2 import ExecutionStep, PlanDef


def test_write_then_read_nested_records_in_a_plan():
    workspace.ResetWorkspace()
    s = schema.Struct(("label", schema.Scalar(np.int32)), ("ids", schema.List(schema.Scalar(np.int64))))
    assert s.field_names() == ["label", "ids:lengths", "ids:values"]
    ds = dataset.Dataset(s, name="ds")
    init = core.Net("ds_init")
    ds.init_empty(init)
    workspace.RunNetOnce(init)
    batches = [([1, 2], [2, 0], [10, 11]), ([3], [3], [12, 13, 14])]
    for label, lengths, values in batches:
        rec = schema.NewRecord(core.Net("tmp"), s)
        schema.FeedRecord(rec, [label, lengths, values])
        w = core.Net("ds_write")
        ds.writer().write_record(w, rec)
        workspace.RunNetOnce(w)
    content = schema.FetchRecord(ds.content()).field_blobs()
    assert [a.tolist() for a in content] == [[1, 2, 3], [2, 0, 3], [10, 11, 12, 13, 14]]

    read_init = core.Net("ds_read_init")
    reader = ds.reader(read_init, batch_size=2)
    read = core.Net("ds_read")
    should_stop, fields = reader.read(read)
    collect = core.Net("ds_collect")
    workspace.FeedBlob("seen_labels", np.zeros(0, np.int32))
    collect.Append(["seen_labels", fields[0]], ["seen_labels"])
    plan = PlanDef(name="ds_plan", network=[read_init.Proto(), read.Proto(), collect.Proto()])
    plan.execution_step.add(name="init", network=[read_init.Proto().name])
    plan.execution_step.add(
        name="loop",
        substep=[
            ExecutionStep(name="r", network=[read.Proto().name]),
            ExecutionStep(name="c", network=[collect.Proto().name]),
        ],
        should_stop_blob=str(should_stop),
    )
    workspace.RunPlan(plan)
    assert workspace.FetchBlob("seen_labels").tolist() == [1, 2, 3]
    rec = from_fields = schema.from_blob_list(s, fields)
    assert isinstance(from_fields.ids, schema.List) and rec.label.get() == fields[0]


def test_random_reader_reads_in_the_order_of_indices_and_of_a_shuffle():
    from framework.caffe2.python.dataset import Const

    workspace.ResetWorkspace()
    ds = dataset.Dataset(["label", "ids:lengths", "ids:values"], name="rr")  # raw column names, as Caffe2
    assert isinstance(ds.schema.ids, schema.List) and ds.fields == ds.field_names()
    init = core.Net("rr_init")
    blobs = [Const(init, np.arange(6, dtype=np.int32), name="l"), Const(init, np.ones(6, np.int32), name="n"),
             Const(init, np.arange(100, 106, dtype=np.int64), name="v")]  # fmt: skip
    for b, target in zip(blobs, ds.get_blobs()):
        init.Copy([b], [target])
    workspace.RunNetOnce(init)
    order = np.array([5, 3, 1, 0, 2, 4], np.int64)
    workspace.FeedBlob("rr_order", order)
    for indices, shuffle in (("rr_order", False), (None, True)):
        prep = core.Net("rr_prep")
        reader = ds.random_reader(prep, indices=indices, cursor_name=f"rr_cursor_{shuffle}", batch_size=4)
        reader.computeoffset(prep)
        if shuffle:
            reader.sort_and_shuffle(prep, shuffle_size=2, batch_size=2)
        workspace.RunNetOnce(prep)
        read = core.Net("rr_read")
        should_stop, fields = reader.read(read)
        seen, values = [], []
        while True:
            workspace.RunNetOnce(read)
            if workspace.FetchBlob(should_stop):
                break
            seen += workspace.FetchBlob(fields[0]).tolist()
            values += workspace.FetchBlob(fields[2]).tolist()
        assert values == [100 + s for s in seen]
        if shuffle:
            assert sorted(seen) == list(range(6))
        else:
            assert seen == order.tolist()


def test_init_empty_keeps_the_item_shape_of_a_field():
    workspace.ResetWorkspace()
    s = schema.Struct(
        ("dense", schema.Scalar((np.float32, 3))), ("id", schema.Scalar(np.int64)), ("name", schema.Scalar(str))
    )
    ds = dataset.Dataset(s, name="shaped")
    init = core.Net("shaped_init")
    ds.init_empty(init)
    workspace.RunNetOnce(init)
    dense = workspace.FetchBlob("shaped:dense")
    assert dense.shape == (0, 3) and dense.dtype == np.float32
    assert workspace.FetchBlob("shaped:id").shape == (0,)
    rec = schema.NewRecord(core.Net("tmp"), s)
    schema.FeedRecord(rec, [np.ones((2, 3), np.float32), np.array([4, 5], np.int64), np.array([b"a", b"b"], object)])
    w = core.Net("shaped_write")
    ds.writer().write_record(w, rec)
    workspace.RunNetOnce(w)
    assert workspace.FetchBlob("shaped:dense").shape == (2, 3)
    assert workspace.FetchBlob("shaped:name").tolist() == [b"a", b"b"]  # a str field is a string tensor
