"""framework.caffe2.python.pipeline: multi-stage pipes (reader -> processor -> queue -> consumer) run by the
plan executor with concurrent steps, through framework.caffe2.python.task / framework.caffe2.python.session."""

from __future__ import annotations

import numpy as np
import pytest

from framework import core, workspace
from framework.caffe2.python import schema
from framework.caffe2.python.dataset import Dataset
from framework.caffe2.python.net_builder import ops
from framework.caffe2.python.pipeline import (
    NetProcessor,
    Output,
    ProcessingReader,
    pipe,
    pipe_and_output,
    processor_name,
)
from framework.caffe2.python.queue_util import Queue
from framework.caffe2.python.session import LocalSession
from framework.caffe2.python.task import Task, TaskGroup, final_output

SCHEMA = schema.Struct(("x", np.float32), ("label", np.int32))


def _source(name: str, n: int) -> tuple[Dataset, np.ndarray, np.ndarray]:
    ds = Dataset(SCHEMA, name=name)
    init = core.Net(f"{name}_init")
    ds.init_empty(init)
    workspace.RunNetOnce(init)
    x = np.random.default_rng(0).standard_normal(n).astype(np.float32)
    label = np.arange(n, dtype=np.int32)
    workspace.FeedBlob(f"{name}_x", x)
    workspace.FeedBlob(f"{name}_label", label)
    w = core.Net(f"{name}_fill")
    ds.writer().write(w, [f"{name}_x", f"{name}_label"])
    workspace.RunNetOnce(w)
    return ds, x, label


def _sink(name: str) -> Dataset:
    ds = Dataset(SCHEMA, name=name)
    init = core.Net(f"{name}_init")
    ds.init_empty(init)
    workspace.RunNetOnce(init)
    return ds


def _double(rec):
    """A function processor using the ops syntax."""
    return schema.Struct(("x", ops.Scale(rec.x(), scale=2.0)), ("label", rec.label()))


def _square_net() -> core.Net:
    net = core.Net("square")
    rec = net.set_input_record(SCHEMA.clone_schema())
    out = net.Sqr(rec.x())
    net.set_output_record(schema.Struct(("x", out), ("label", rec.label())))
    return net


def _content(ds: Dataset) -> tuple[np.ndarray, np.ndarray]:
    got = schema.FetchRecord(ds.content())
    order = np.argsort(got.label.get(), kind="stable")
    return got.x.get()[order], got.label.get()[order]


def test_three_stage_pipeline_with_concurrent_threads():
    workspace.ResetWorkspace()
    src, x, label = _source("p_src", 40)
    dst = _sink("p_dst")
    square = NetProcessor(_square_net())
    with TaskGroup() as tg:
        q1 = pipe(src.reader(batch_size=3), num_threads=2, processor=_double, capacity=2)
        q2 = pipe(q1, num_threads=3, processor=square, capacity=2)
        pipe(q2, output=dst.writer(), num_threads=2)
    assert isinstance(q1, Queue) and isinstance(q2, Queue) and tg.num_registered_tasks() == 3
    LocalSession().run(tg)
    got_x, got_label = _content(dst)
    np.testing.assert_array_equal(got_label, label)
    np.testing.assert_allclose(got_x, (2 * x) ** 2, rtol=1e-6)
    assert len(square.blob_maps()) == 3  # one clone per thread, each with its own blobs
    assert len({m[str(_square_net_output(square))] for m in square.blob_maps()}) == 3


def _square_net_output(processor: NetProcessor) -> str:
    return processor.net.Proto().op[0].output[0]


def test_pipe_and_output_and_a_consumer_task_reading_the_queue():
    workspace.ResetWorkspace()
    src, x, _ = _source("po_src", 10)
    workspace.FeedBlob("po_total", np.zeros((), np.float32))
    with TaskGroup() as tg:
        q, out = pipe_and_output(src.reader(batch_size=4), num_threads=2, final_outputs="po_total")
        with Task(name="consumer") as consumer:
            reader = q.reader()
            read = core.Net("po_read")
            status, fields = reader.read(read)
            add = core.Net("po_add")  # its own net: the stop blob is checked between nets
            add.Sum(["po_total", add.ReduceSum(fields[0], keepdims=0)], ["po_total"])
            ops.net(core.execution_step("consume", [read, add], should_stop_blob=status))
            total = final_output("po_total")
    LocalSession().run(tg)
    np.testing.assert_allclose(out.fetch(), x.sum(), rtol=1e-5)
    np.testing.assert_allclose(total.fetch(), x.sum(), rtol=1e-5)
    assert consumer.output_names() == ["po_total"]


def test_processor_stop_blob_and_zero_threads_reader():
    workspace.ResetWorkspace()
    src, _, _ = _source("ps_src", 12)
    dst = _sink("ps_dst")

    def stop_at_once(rec):
        return Output(record=rec, should_stop=ops.Const(True))

    with TaskGroup() as tg:
        pipe(src.reader(batch_size=2), output=dst.writer(), num_threads=1, processor=stop_at_once)
    LocalSession().run(tg)  # ends although the source is not exhausted
    assert schema.FetchRecord(dst.content()).label.get().size == 0
    reader = pipe(src.reader(cursor_name="ps_cursor2", batch_size=5), num_threads=0, processor=_double)
    assert isinstance(reader, ProcessingReader)
    with pytest.raises(ValueError):
        pipe(src.reader(cursor_name="ps_cursor3"), output=dst.writer(), num_threads=0)
    with pytest.raises(ValueError):
        pipe(object())
    assert processor_name(_double) == "_double" and processor_name(NetProcessor(_square_net())).startswith("square")


def test_closed_input_queue_ends_the_pipe():
    workspace.ResetWorkspace()
    q = Queue(capacity=4, schema=SCHEMA, name="closed_q")
    init = core.Net("closed_init")
    q.setup(init)
    q.close(init)
    workspace.RunNetOnce(init)
    dst = _sink("closed_dst")
    with TaskGroup() as tg:
        pipe(q, output=dst.writer(), num_threads=2)
    LocalSession().run(tg)
    assert schema.FetchRecord(dst.content()).x.get().size == 0


def test_clone_and_bind_net_binds_inputs_and_prefixes_the_rest():
    net = _square_net()
    bound = schema.from_blob_list(SCHEMA, [core.BlobReference("in_x"), core.BlobReference("in_label")])
    clone, remap = core.clone_and_bind_net(net, "square_t0", "t0/", inputs=bound)
    op = clone.Proto().op[0]
    assert list(op.input) == ["in_x"] and op.output[0] == "t0/" + net.Proto().op[0].output[0]
    assert clone.output_record().field_blobs() == ["t0/" + net.Proto().op[0].output[0], "in_label"]
    with pytest.raises(Exception, match="missing"):
        core.clone_and_bind_net(net, "bad", "b/", inputs=schema.from_blob_list(schema.Struct(("x", np.float32)), ["a"]))


def test_task_group_runs_tasks_and_session_runs_nets():
    workspace.ResetWorkspace()
    net = core.Net("tg_fill")
    net.ConstantFill([], ["tg_a"], shape=[2], value=3.0)
    with TaskGroup() as tg:
        t = Task(step=net, outputs=["tg_a"], name="fill")
    assert tg.tasks() == [t] and Task.current(required=False) is None
    with LocalSession() as session:
        session.run(tg)
        np.testing.assert_array_equal(t.outputs()[0].fetch()[0], [3.0, 3.0])
        with pytest.raises(RuntimeError):
            tg.add(Task(step=net))
        session.run(core.Net("tg_empty"))
        with pytest.raises(TypeError):
            session.run(42)
    with pytest.raises(RuntimeError):
        session.run(tg)
    with pytest.raises(RuntimeError):
        Task(name="unrun", outputs="x").outputs()[0].fetch()


def test_reader_with_limit_stops_after_num_iter_batches_over_all_threads():
    from framework.caffe2.python.dataio import ReaderWithLimit

    workspace.ResetWorkspace()
    src, _, label = _source("lim_src", 20)
    dst, dst2 = _sink("lim_dst"), _sink("lim_dst2")
    limited = ReaderWithLimit(src.reader(batch_size=3), num_iter=4)
    unlimited = ReaderWithLimit(src.reader(cursor_name="lim_cursor2", batch_size=3), num_iter=100)
    with TaskGroup() as tg:
        pipe(limited, output=dst.writer(), num_threads=2)
        pipe(unlimited, output=dst2.writer(), num_threads=2)
    LocalSession().run(tg)
    got = np.sort(schema.FetchRecord(dst.content()).label.get())
    assert got.size == 12 and set(got.tolist()) <= set(label.tolist())  # 4 batches of 3
    assert not workspace.FetchBlob(limited.data_finished())
    np.testing.assert_array_equal(np.sort(schema.FetchRecord(dst2.content()).label.get()), label)
    assert workspace.FetchBlob(unlimited.data_finished())


def test_count_until_and_time_limit():
    from framework.caffe2.python.dataio import CountUntil, ReaderWithTimeLimit

    workspace.ResetWorkspace()
    workspace.FeedBlob("cu_total", np.zeros((), np.int64))
    workspace.FeedBlob("cu_calls", np.zeros((), np.int64))

    def add(rec):
        ops.Add(["cu_total", rec.iter()], ["cu_total"])

    def count(rec):
        ops.Add(["cu_calls", ops.Const(np.int64(1))], ["cu_calls"])

    with TaskGroup() as tg:
        pipe(CountUntil(5), num_threads=1, processor=add)
        timed = ReaderWithTimeLimit(CountUntil(1000000), duration=0.2)
        pipe(timed, num_threads=1, processor=count)
    LocalSession().run(tg)
    assert int(workspace.FetchBlob("cu_total")) == 0 + 1 + 2 + 3 + 4
    assert 0 < int(workspace.FetchBlob("cu_calls")) < 1000000 and not workspace.FetchBlob(timed.data_finished())


def test_a_caffe2_script_builds_and_runs_a_pipeline():
    """Caffe2's imports, through framework.caffe2's hook: schema, dataset, pipeline, task, session."""
    import framework.caffe2 as hook

    hook.install()
    try:
        from caffe2.python import core as c2core
        from caffe2.python import dataset as c2dataset
        from caffe2.python import pipeline as c2pipeline
        from caffe2.python import schema as c2schema
        from caffe2.python import workspace as c2ws
        from caffe2.python.session import LocalSession as C2Session
        from caffe2.python.task import TaskGroup as C2TaskGroup

        c2ws.ResetWorkspace()
        src = c2dataset.Dataset(c2schema.Struct(("v", np.float32)), name="c2src")
        dst = c2dataset.Dataset(c2schema.Struct(("v", np.float32)), name="c2dst")
        init = c2core.Net("c2init")
        src.init_empty(init)
        dst.init_empty(init)
        c2ws.RunNetOnce(init)
        c2ws.FeedBlob("c2v", np.arange(7, dtype=np.float32))
        fill = c2core.Net("c2fill")
        src.writer().write(fill, ["c2v"])
        c2ws.RunNetOnce(fill)
        with C2TaskGroup() as tg:
            q = c2pipeline.pipe(src.reader(batch_size=2), num_threads=2, capacity=3)
            c2pipeline.pipe(q, dst.writer(), num_threads=1)
        C2Session().run(tg)
        assert sorted(c2ws.FetchBlob(dst.get_blobs()[0]).tolist()) == list(range(7))
    finally:
        hook.uninstall()


def test_net_processor_thread_init_nets_run_once_per_thread_before_the_pipe():
    workspace.ResetWorkspace()
    src, x, label = _source("ti_src", 9)
    dst = _sink("ti_dst")
    init = core.Net("ti_thread_init")
    init.ConstantFill([], ["ti_offset"], shape=[1], value=10.0)
    net = core.Net("ti_add")
    rec = net.set_input_record(SCHEMA.clone_schema())
    shifted = net.Add([rec.x(), "ti_offset"], broadcast=1)
    net.set_output_record(schema.Struct(("x", shifted), ("label", rec.label())))
    proc = NetProcessor(net, thread_init_nets=[init])
    with TaskGroup() as tg:
        pipe(src.reader(batch_size=2), output=dst.writer(), num_threads=2, processor=proc)
    LocalSession().run(tg)
    got_x, got_label = _content(dst)
    np.testing.assert_array_equal(got_label, label)
    np.testing.assert_allclose(got_x, x + 10.0, rtol=1e-6)
    offsets = {m["ti_offset"] for m in proc.blob_maps()}
    assert len(offsets) == 2 and all(workspace.FetchBlob(o).tolist() == [10.0] for o in offsets)
    with pytest.raises(RuntimeError):
        proc(rec)  # set up already: no more clones
