"""caffe2.python.dataset in a session of its own workspace: a Dataset over a record's blobs reads them, and a
reader made without an init net gets its cursor from the reading task's init net (Caffe2's setup_ex)."""

import numpy as np

from framework import core, workspace
from framework.caffe2.python.dataset import Dataset
from framework.caffe2.python.pipeline import pipe
from framework.caffe2.python.schema import FeedRecord, FetchRecord, InitEmptyRecord, NewRecord, Struct
from framework.caffe2.python.session import LocalSession
from framework.caffe2.python.task import TaskGroup


def test_pipe_between_datasets_in_a_private_workspace():
    init_net = core.Net("h36b_ds_init")
    values = Struct(("k", np.array([3, 1, 2], np.int64)), ("v", np.array([0.5, 1.5, 2.5], np.float32)))
    with core.NameScope("h36b_src"):
        src = NewRecord(init_net, values)
        dst = InitEmptyRecord(init_net, values.clone_schema())
    src_ds, dst_ds = Dataset(src), Dataset(dst)
    assert src_ds.get_blobs() == [str(b) for b in src.field_blobs()]

    def double(rec):
        net = core.Net("h36b_double")
        with core.NameScope("h36b_double"):
            out = NewRecord(net, rec)
        net.Add([rec.k(), rec.k()], [out.k()])
        net.Scale([rec.v()], [out.v()], scale=-1.0)
        return [net], out

    with TaskGroup() as tg:
        pipe(pipe(src_ds.reader(), processor=double), dst_ds.writer())
    ws = workspace.C.Workspace()
    FeedRecord(src, values, ws)
    session = LocalSession(ws)
    session.run(init_net)
    session.run(tg)
    out = FetchRecord(dst, ws=ws)
    np.testing.assert_array_equal(out.k(), [6, 2, 4])
    np.testing.assert_array_equal(out.v(), [-0.5, -1.5, -2.5])
