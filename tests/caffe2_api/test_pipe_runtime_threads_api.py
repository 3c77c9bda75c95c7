"""pipeline.pipe(num_runtime_threads=N): one read-write loop run as N concurrent task instances;
Dataset: a record's own blobs, init_empty under a NameScope and for untyped fields, a reader whose
cursor is made by the pipe's init net in the session's workspace (Caffe2's DatasetReader.setup_ex)."""

import numpy as np
import pytest

from framework import core, workspace
from framework.caffe2.python.dataset import Dataset
from framework.caffe2.python.pipeline import pipe
from framework.caffe2.python.schema import FeedRecord, NewRecord, Struct
from framework.caffe2.python.session import LocalSession
from framework.caffe2.python.task import TaskGroup, WorkspaceType


@pytest.fixture(autouse=True)
def _fresh():
    workspace.ResetWorkspace()
    yield
    workspace.ResetWorkspace()


def _source(ws, values):
    init = core.Net("src_init")
    with core.NameScope("src"):
        record = Struct(("label", np.array(values)))
        blobs = NewRecord(init, record)
        ds = Dataset(blobs)
        FeedRecord(blobs, record, ws)
    ws.run(init)
    return ds


def _empty_copy(ws, schema):
    init = core.Net("dst_init")
    with core.NameScope("dst"):
        ds = Dataset(schema.clone_schema())
        ds.init_empty(init)
    ws.run(init)
    return ds


def test_dataset_of_a_record_reads_the_records_blobs():
    ws = workspace.C.Workspace()
    ds = _source(ws, [4, 5, 6])
    assert ds.get_blobs() == [str(b) for b in ds.schema.field_blobs()]
    assert ds.get_blobs()[0].startswith("src/")


def test_init_empty_names_follow_the_name_scope_and_untyped_fields_are_empty_floats():
    ws = workspace.C.Workspace()
    init = core.Net("typed_init")
    with core.NameScope("scoped"):
        ds = Dataset(Struct(("x", np.int64)), name="d")
        ds.init_empty(init)
    ws.run(init)
    assert ds.get_blobs() == ["scoped/d:x"]
    assert ws.fetch_blob("scoped/d:x").dtype == np.int64 and ws.fetch_blob("scoped/d:x").shape == (0,)
    untyped = Dataset(["a", "b"], name="raw")
    init = core.Net("untyped_init")
    untyped.init_empty(init)
    ws.run(init)
    for blob in untyped.get_blobs():
        value = ws.fetch_blob(blob)
        assert value.dtype == np.float32 and value.shape == (0,)


@pytest.mark.parametrize("threads", [1, 4])
def test_runtime_threads_copy_every_record_once(threads):
    ws = workspace.C.Workspace()
    src = _source(ws, list(range(50)))
    dst = _empty_copy(ws, src.content())
    with TaskGroup(workspace_type=WorkspaceType.GLOBAL) as tg:
        # no init net: the pipe's init net makes the cursor, in the session's workspace
        pipe(src.reader(batch_size=3), dst.writer(), num_runtime_threads=threads)
    LocalSession(ws).run(tg)
    copied = ws.fetch_blob(dst.get_blobs()[0])
    assert sorted(copied.tolist()) == list(range(50))


def test_runtime_threads_and_static_threads_exclude_each_other():
    ws = workspace.C.Workspace()
    src = _source(ws, [1, 2])
    with TaskGroup(), pytest.raises(ValueError, match="Only one of num_threads or num_runtime_threads"):
        pipe(src.reader(), num_threads=2, num_runtime_threads=2)
