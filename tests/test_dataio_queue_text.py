"""framework.caffe2.python.queue_util / dataio / text_file_reader: a text file read by TextFileReader inside a
plan, each batch written to a queue_util.Queue by one step while another step drains it; the
rows that come out are the file's rows, and both steps end on their should_stop blobs."""

from __future__ import annotations

import numpy as np

from framework import core, workspace
from framework.caffe2.python import schema
from framework.caffe2.python.queue_util import Queue
from framework.caffe2.python.text_file_reader import TextFileReader


def test_text_file_to_queue_to_consumer(tmp_path):
    workspace.ResetWorkspace(str(tmp_path))
    rows = [(f"w{i}", float(i) / 2) for i in range(7)]
    (tmp_path / "rows.tsv").write_text("".join(f"{w}\t{x}\n" for w, x in rows))
    s = schema.Struct(("word", schema.Scalar(object)), ("x", schema.Scalar(np.float32)))
    init = core.Net("tq_init")
    # as Caffe2's, the reader opens its path as given (relative to the working directory, not the root folder)
    reader = TextFileReader(init, str(tmp_path / "rows.tsv"), s, batch_size=3)
    q = Queue(capacity=2, schema=s, name="tq")
    q.setup(init)

    produce = core.Net("tq_produce")
    stop_reading, fields = reader.read(produce)
    q.writer().write(produce, fields)
    close = core.Net("tq_close")
    q.close(close)
    consume = core.Net("tq_consume")
    done, out = q.reader().read(consume)
    workspace.FeedBlob("seen", np.zeros(0, np.float32))
    consume.Append(["seen", out[1]], ["seen"])

    producer = core.execution_step(
        "producer",
        [core.execution_step("fill", produce, should_stop_blob=stop_reading), core.execution_step("close", close)],
    )
    consumer = core.execution_step("consumer", consume, should_stop_blob=done)
    plan = core.Plan("tq_plan")
    plan.AddStep(core.execution_step("init", init))
    plan.AddStep(core.execution_step("run", [producer, consumer], concurrent_substeps=True))
    workspace.RunPlan(plan)
    assert workspace.FetchBlob("seen").tolist() == [x for _, x in rows]
