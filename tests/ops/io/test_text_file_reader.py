"""CreateTextFileReader / TextFileReaderRead against Python's own parsing of the same file;
passes, batching, strtof-style floats, malformed rows; FeedBlob."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError, SerializationError
from framework.memory.serialize import serialize_blob
from framework.memory.workspace import Workspace
from framework.ops import create_operator
from framework.proto.framework_pb2 import TensorProto


@settings(max_examples=15, deadline=None)
@given(
    rows=st.lists(st.tuples(st.text("abc xyz", max_size=5), st.floats(-1e3, 1e3, width=32)), max_size=8),
    batch=st.integers(1, 4),
    passes=st.integers(1, 2),
)
def test_reads_rows_in_batches_over_passes(tmp_path_factory, rows, batch, passes):
    d = tmp_path_factory.mktemp("t")
    (d / "data.tsv").write_bytes(b"".join(f"{s}\t{x!r}\n".encode() for s, x in rows))
    ws = Workspace(root_folder=str(d))
    types = [TensorProto.STRING, TensorProto.FLOAT]
    ws.run_operator_once(
        CreateOperator("CreateTextFileReader", [], ["r"], filename="data.tsv", num_passes=passes, field_types=types)
    )
    read = create_operator(CreateOperator("TextFileReaderRead", ["r"], ["s", "x"], batch_size=batch), ws)
    all_rows = rows * passes
    for start in range(0, len(all_rows) + 1, batch):
        read.run()
        part = all_rows[start : start + batch]
        assert ws.fetch_blob("s").tolist() == [s.encode() for s, _ in part]
        np.testing.assert_array_equal(ws.fetch_blob("x"), np.array([x for _, x in part], np.float32))
    read.run()
    assert ws.fetch_blob("s").shape == (0,) and ws.fetch_blob("x").dtype == np.float32


def test_errors_floats_and_feed_blob(tmp_path):
    (tmp_path / "f.tsv").write_bytes(b"1.5abc\tx\n2\n")
    ws = Workspace(root_folder=str(tmp_path))
    types = [TensorProto.FLOAT, TensorProto.STRING]
    ws.run_operator_once(CreateOperator("CreateTextFileReader", [], ["r"], filename="f.tsv", field_types=types))
    ws.run_operator_once(CreateOperator("TextFileReaderRead", ["r"], ["a", "b"]))
    assert ws.fetch_blob("a").tolist() == [1.5]  # strtof: the leading number
    with pytest.raises(FrameworkError, match="invalid number of columns at row 2"):
        ws.run_operator_once(CreateOperator("TextFileReaderRead", ["r"], ["a", "b"]))
    with pytest.raises(FrameworkError, match="expected 2, got 1"):
        ws.run_operator_once(CreateOperator("TextFileReaderRead", ["r"], ["a"]))
    with pytest.raises(FrameworkError, match="unsupported field types"):
        create_operator(CreateOperator("CreateTextFileReader", [], ["r2"], filename="f.tsv", field_types=[2]), ws)
    with pytest.raises(FrameworkError, match="cannot open"):
        ws.run_operator_once(
            CreateOperator("CreateTextFileReader", [], ["r3"], filename="missing.tsv", field_types=[4])
        )
    with pytest.raises(SerializationError, match="no serializer"):
        list(serialize_blob("r", ws.get_blob("r")))
    (tmp_path / "g.tsv").write_bytes(b"abc\n")
    ws.run_operator_once(CreateOperator("CreateTextFileReader", [], ["g"], filename="g.tsv", field_types=[1]))
    with pytest.raises(FrameworkError, match="invalid float"):
        ws.run_operator_once(CreateOperator("TextFileReaderRead", ["g"], ["v"]))
    ws.run_operator_once(CreateOperator("FeedBlob", [], ["msg"], value="hello"))
    assert ws.fetch_blob("msg") == b"hello"
