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


def test_text_file_reader_takes_str_fields_as_caffe2_does(tmp_path):
    # Caffe2 maps each field's dtype through schema.data_type_for_dtype: Scalar(dtype=str) is a STRING field.
    workspace.ResetWorkspace(str(tmp_path))
    rows = [("a", "b", 0.5), ("c", "d", -2.25)]
    (tmp_path / "r.tsv").write_text("".join("\t".join(str(v) for v in r) + "\n" for r in rows))
    s = schema.Struct(
        ("f1", schema.Scalar(dtype=str)), ("f2", schema.Scalar(dtype=np.str_)), ("f3", schema.Scalar(np.float32))
    )
    init = core.Net("tr_init")
    reader = TextFileReader(init, str(tmp_path / "r.tsv"), s, batch_size=5)
    workspace.RunNetOnce(init)
    read = core.Net("tr_read")
    _, fields = reader.read(read)
    workspace.RunNetOnce(read)
    got = [workspace.FetchBlob(f) for f in fields]
    assert [v.decode() if isinstance(v, bytes) else v for v in got[0]] == ["a", "c"]
    assert [v.decode() if isinstance(v, bytes) else v for v in got[1]] == ["b", "d"]
    np.testing.assert_allclose(got[2], [0.5, -2.25])
