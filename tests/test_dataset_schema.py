"""framework.schema + framework.dataset: a nested-record dataset written in batches and read back
through a plan whose step stops on the reader's should_stop; the rows equal what was written."""

from __future__ import annotations

import numpy as np

from framework import core, dataset, schema, workspace
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
