"""dataio.CompositeReader / CompositeReaderBuilder, db_file_reader.DBFileReader, cached_reader.CachedReader."""

import numpy as np
import pytest

from framework import core, workspace
from framework.caffe2.python import schema
from framework.caffe2.python.cached_reader import CachedReader
from framework.caffe2.python.dataio import CompositeReader, CompositeReaderBuilder, ReaderBuilder
from framework.caffe2.python.dataset import Dataset
from framework.caffe2.python.db_file_reader import DBFileReader


@pytest.fixture(autouse=True)
def _fresh():
    workspace.ResetWorkspace()
    yield
    workspace.ResetWorkspace()


def _dataset(name, values):
    ds = Dataset(schema.Struct(("label", schema.Scalar(np.int64))), name)
    for blob in ds.get_blobs():
        workspace.FeedBlob(blob, np.array(list(values), np.int64))
    return ds


def _drain(nets, should_stop, fields, steps=20):
    for net in nets:
        workspace.CreateNet(net)
    batches = []
    for _ in range(steps):
        for net in nets:
            workspace.RunNet(net.Name())
        if workspace.FetchBlob(should_stop):
            return batches
        batches.append([workspace.FetchBlob(f).tolist() for f in fields])
    raise AssertionError("the reader never stopped")


def test_composite_reader_reads_side_by_side_and_stops_with_the_first():
    a, b = _dataset("h36c_a", range(0, 5)), _dataset("h36c_b", range(100, 104))
    init, finish = core.Net("h36c_init"), core.Net("h36c_finish")
    reader = CompositeReader(["a", "b"], [a.reader(init, batch_size=2), b.reader(init, batch_size=2)])
    assert reader.schema().field_names() == ["a:label", "b:label"]
    nets, should_stop, fields = reader.read_ex(init, finish)
    workspace.RunNetOnce(init)
    # b runs out first (4 rows): two full steps, then the third step's empty read of b stops both
    assert _drain(nets, should_stop, fields) == [[[0, 1], [100, 101]], [[2, 3], [102, 103]]]
    with pytest.raises(ValueError, match="2 names for 1 readers"):
        CompositeReader(["a", "b"], [a.reader(init)])


class _Builder(ReaderBuilder):
    def __init__(self, name, values, finished):
        self._name, self._values, self._finished, self.kwargs = name, values, finished, None
        self._schema = schema.Struct(("label", schema.Scalar(np.int64)))

    def schema(self):
        return self._schema

    def setup(self, **kwargs):
        self.kwargs = kwargs
        self._ds = _dataset(self._name, self._values)
        return self._finished

    def new_reader(self, **kwargs):
        return self._ds.reader(batch_size=3)


def test_composite_reader_builder_gives_the_limiter_to_the_last_builder():
    first, last = _Builder("h36c_p", range(3), {"p": "p_done"}), _Builder("h36c_q", range(10, 13), {"q": "q_done"})
    builder = CompositeReaderBuilder(["p", "q"], [first, last])
    assert builder.setup(limiter="L", ws=None) == {"p": "p_done", "q": "q_done"}
    assert "limiter" not in first.kwargs and last.kwargs["limiter"] == "L"
    reader = builder.new_reader()
    assert isinstance(reader, CompositeReader) and reader.schema().field_names() == ["p:label", "q:label"]
    nets, stop, fields = reader.read_ex(core.Net("h36c_i"), core.Net("h36c_f"))
    assert _drain(nets, stop, fields) == [[[0, 1, 2], [10, 11, 12]]]
    clash = CompositeReaderBuilder(
        ["p", "q"], [_Builder("h36c_r", [1], {"x": "d"}), _Builder("h36c_s", [1], {"y": "d"})]
    )
    with pytest.raises(ValueError, match="share data-finished blobs"):
        clash.setup()


def test_cached_reader_builds_its_file_once_then_reads_it(tmp_path):
    src = _dataset("h36c_src", range(7))
    path = str(tmp_path / "cache.db")
    cached = CachedReader(src.reader(batch_size=3), path, db_type="minidb", batch_size=3)
    assert cached.name == "cache_cached_reader" and cached.schema().field_names() == ["label"]
    plan = core.Plan("h36c_build")
    plan.AddStep(cached.build_cache_step())
    workspace.RunPlan(plan)
    # the file holds the column under its field name
    workspace.RunOperatorOnce(core.CreateOperator("Load", [], ["label"], db=path, db_type="minidb", absolute_path=1))
    np.testing.assert_array_equal(workspace.FetchBlob("label"), np.arange(7))
    assert cached.build_cache_step().Proto().substep == []  # exists: nothing to do
    init, finish = core.Net("h36c_ci"), core.Net("h36c_cf")
    cached.setup_ex(init, finish)
    read_net = core.Net("h36c_read")
    should_stop, fields = cached.read(read_net)
    workspace.RunNetOnce(init)
    rows = [v for batch in _drain([read_net], should_stop, fields) for v in batch[0]]
    assert sorted(rows) == list(range(7))  # random order, every row once

    reader = DBFileReader(path, "minidb", batch_size=4)
    assert reader.name == "cache_db_file_reader" and reader.schema().field_names() == ["label"]
    with pytest.raises(AssertionError, match="not available"):
        DBFileReader(path, "no_such_db")


def test_cached_reader_over_a_record_with_blobs_keeps_the_source_data(tmp_path):
    # the source is a dataset over a record that names its own blobs (NewRecord + FeedRecord, as Caffe2's
    # programs build it); the cache's dataset takes that schema and must get blobs of its own
    init = core.Net("h36b_src_init")
    with core.NameScope("h36b_src"):
        record = schema.NewRecord(init, schema.Struct(("label", np.arange(5, dtype=np.int64))))
        schema.FeedRecord(record, schema.Struct(("label", np.arange(5, dtype=np.int64))))
    src = Dataset(record, name="h36b_src")
    path = str(tmp_path / "rec.db")
    cached = CachedReader(src.reader(), path, db_type="minidb")
    plan = core.Plan("h36b_build")
    plan.AddStep(cached.build_cache_step())
    workspace.RunPlan(plan)
    np.testing.assert_array_equal(workspace.FetchBlob(str(record.label())), np.arange(5))  # source untouched
    workspace.RunOperatorOnce(core.CreateOperator("Load", [], ["got"], db=path, db_type="minidb", absolute_path=1,
                                                  source_blob_names=["label"]))  # fmt: skip
    np.testing.assert_array_equal(workspace.FetchBlob("got"), np.arange(5))


def test_init_empty_of_a_dataset_over_a_record_makes_new_blobs():
    init = core.Net("h36b_rec_init")
    record = schema.NewRecord(init, schema.Struct(("x", schema.Scalar(np.float32))))
    workspace.FeedBlob(str(record.x()), np.ones(3, np.float32))
    ds = Dataset(record, name="h36b_ds")
    empty = core.Net("h36b_empty")
    ds.init_empty(empty)
    workspace.RunNetOnce(empty)
    assert ds.get_blobs() == ["h36b_ds:x"]
    assert workspace.FetchBlob("h36b_ds:x").shape == (0,)
    np.testing.assert_array_equal(workspace.FetchBlob(str(record.x())), np.ones(3, np.float32))


def test_cached_reader_caffe2_2018_form_names_its_file_in_build_cache(tmp_path):
    src = _dataset("h36b_src18", range(6))
    cached = CachedReader(src.reader(batch_size=4), db_type="minidb")
    assert cached.name == "cached_reader"
    with pytest.raises(AssertionError, match="build_cache"):
        cached.setup_ex(core.Net("h36b_early"), core.Net("h36b_early_f"))
    path = str(tmp_path / "c18.db")
    plan = core.Plan("h36b_build18")
    plan.AddStep(cached.build_cache(path))
    workspace.RunPlan(plan)
    assert cached.db_path == path
    assert cached.build_cache(str(tmp_path / "other.db")).Proto().substep == []  # the cache exists: kept
    assert cached.db_path == path
    init, finish = core.Net("h36b_ci18"), core.Net("h36b_cf18")
    cached.setup_ex(init, finish)
    read_net = core.Net("h36b_read18")
    should_stop, fields = cached.read(read_net)
    workspace.RunNetOnce(init)
    rows = [v for batch in _drain([read_net], should_stop, fields) for v in batch[0]]
    assert sorted(rows) == list(range(6))
