"""Caffe2's dataset API details: blobs made by init_empty under a NameScope take its prefix and
the dataset keeps them (readers and writers find them); Reader.execution_step loops a read net
until the data runs out; workspace.RunNet(str(net)) runs the net (str(net) is its name)."""

import numpy as np

from framework import core, workspace
from framework.caffe2.python import dataset, schema


def _filled_dataset(name):
    s = schema.Struct(("x", schema.Scalar(np.float32)))
    ds = dataset.Dataset(s, name=name)
    init = core.Net(f"{name}_init")
    with core.NameScope("scoped"):
        ds.init_empty(init)
    workspace.RunNetOnce(init)
    workspace.FeedBlob(f"{name}_new", np.arange(5, dtype=np.float32))
    w = core.Net(f"{name}_write")
    ds.writer().write(w, [f"{name}_new"])
    workspace.RunNetOnce(w)
    return ds


def test_init_empty_under_a_name_scope_keeps_the_scoped_blobs():
    workspace.ResetWorkspace()
    ds = _filled_dataset("dsa")
    assert [str(b) for b in ds.get_blobs()] == ["scoped/dsa:x"]
    assert not workspace.HasBlob("dsa:x")
    assert workspace.FetchBlob("scoped/dsa:x").tolist() == [0, 1, 2, 3, 4]


def test_reader_execution_step_reads_until_the_end():
    workspace.ResetWorkspace()
    ds = _filled_dataset("dsb")
    init = core.Net("dsb_reader_init")
    reader = ds.reader(init, batch_size=2)
    workspace.RunNetOnce(init)
    step, fields = reader.execution_step("dsb_reader")
    assert step.Proto().name == "dsb_reader_step" and step.Proto().should_stop_blob
    total = core.Net("dsb_sum")
    acc = total.ConstantFill([], "acc_init", shape=[], value=0.0)
    workspace.RunNetOnce(total)
    consume = core.Net("dsb_consume")
    part = consume.ReduceSum([fields.x()], "part", keepdims=0)
    consume.Add([acc, part], [acc])
    plan = core.Plan("dsb_plan")
    plan.AddStep(step.AddNet(consume))
    workspace.RunPlan(plan)
    # batches [0 1], [2 3], [4], then an empty read stops the loop (the empty batch adds 0)
    assert float(workspace.FetchBlob(acc)) == 10.0
    unnamed, _ = reader.execution_step()
    assert unnamed.Proto().name == "None_step"  # Caffe2 formats the missing name


def test_run_net_by_str_of_the_net():
    workspace.ResetWorkspace()
    net = core.Net("by_str")
    net.ConstantFill([], "c", shape=[2], value=3.0)
    workspace.CreateNet(net)
    workspace.RunNet(str(net))
    assert str(net) == net.Name() and workspace.FetchBlob("c").tolist() == [3.0, 3.0]


def test_field_blobs_attribute():
    ds = dataset.Dataset(schema.Struct(("a", schema.Scalar(np.int32)), ("b", schema.Scalar(np.float32))), name="fb")
    assert ds.field_blobs == ds.get_blobs() == ["fb:a", "fb:b"]
    ds.field_blobs = ["p", "q"]  # Caffe2 assigns it (init_empty, init_from_dataframe)
    assert ds.get_blobs() == ["p", "q"]


def test_a_record_with_blobs_is_stored_in_them():
    rec = schema.NewRecord(core.Net("rec_init"), schema.Struct(("label", schema.Scalar(np.int64))))
    ds = dataset.Dataset(rec, name="withblobs")
    assert ds.field_blobs == [str(b) for b in rec.field_blobs()] and ds.field_blobs != ["withblobs:label"]


def test_init_empty_of_an_untyped_field_is_an_empty_float_tensor():
    workspace.ResetWorkspace()
    ds = dataset.Dataset(schema.Struct(("label", schema.Scalar())), name="untyped")
    init = core.Net("untyped_init")
    ds.init_empty(init)
    workspace.RunNetOnce(init)
    blob = workspace.FetchBlob(ds.get_blobs()[0])
    assert blob.shape == (0,) and blob.dtype == np.float32
