"""framework.caffe2.python.record_queue: producers read a Dataset into a RecordQueue while a consumer drains it
in the same plan; every record arrives once."""

from __future__ import annotations

import numpy as np

from framework import core, workspace
from framework.caffe2.python import dataset, schema
from framework.caffe2.python.record_queue import RecordQueue


def test_record_queue_moves_a_dataset():
    workspace.ResetWorkspace()
    s = schema.Struct(("v", schema.Scalar(np.int64)))
    ds = dataset.Dataset(s, name="rq_ds")
    init = core.Net("rq_init")
    ds.init_empty(init)
    workspace.RunNetOnce(init)
    workspace.FeedBlob("rq_new", np.arange(10, dtype=np.int64))
    w = core.Net("rq_w")
    ds.writer().write(w, ["rq_new"])
    workspace.RunNetOnce(w)
    rq = RecordQueue(s, name="rq", capacity=2)
    reader, producer, exit_step, _ = rq.build(ds.reader(batch_size=3))
    consume = core.Net("rq_consume")
    done, fields = reader.read(consume)
    workspace.FeedBlob("rq_seen", np.zeros(0, np.int64))
    keep = core.Net("rq_keep")  # a separate net: should_stop is checked between the two
    keep.Append(["rq_seen", fields[0]], ["rq_seen"])
    plan = core.Plan("rq_plan")
    plan.AddStep(
        core.execution_step(
            "all",
            [
                core.execution_step("produce_then_close", [producer, exit_step]),
                core.execution_step(
                    "consume",
                    [core.execution_step("deq", consume), core.execution_step("keep", keep)],
                    should_stop_blob=done,
                ),
            ],
            concurrent_substeps=True,
        )
    )
    workspace.RunPlan(plan)
    assert sorted(workspace.FetchBlob("rq_seen").tolist()) == list(range(10))
