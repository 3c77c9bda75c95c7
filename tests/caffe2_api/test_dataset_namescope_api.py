"""A Dataset made and written under a NameScope: its blobs are the scoped blobs init_empty made, and
ops added later under the same scope (the writer's Append) use them as they are, not scoped again
(Caffe2 keeps them as BlobReferences)."""

import numpy as np

import framework.caffe2 as hook


def test_writer_under_the_init_scope_appends_to_the_init_blobs():
    hook.install()
    from caffe2.python import core, dataset, workspace
    from caffe2.python.schema import FeedRecord, NewRecord, Scalar, Struct

    workspace.ResetWorkspace()
    schema = Struct(("dense", Scalar((np.float32, 2))), ("label", Scalar(np.int32)))
    contents = [np.array([[1.0, 2.0], [3.0, 4.0]], np.float32), np.array([7, 8], np.int32)]
    ds = dataset.Dataset(schema)
    net = core.Net("init_ns")
    with core.NameScope("outer"):
        ds.init_empty(net)
        record = NewRecord(net, schema)
        FeedRecord(record, contents)
        writer = ds.writer(init_net=net)
        writer.write_record(net, record)
    workspace.RunNetOnce(net)

    blobs = ds.get_blobs()
    assert blobs == ["outer/dataset:dense", "outer/dataset:label"]
    assert all(isinstance(b, core.BlobReference) for b in blobs)
    np.testing.assert_array_equal(workspace.FetchBlob(blobs[0]), contents[0])
    np.testing.assert_array_equal(workspace.FetchBlob(blobs[1]), contents[1])
    assert not workspace.HasBlob("outer/outer/dataset:dense")
