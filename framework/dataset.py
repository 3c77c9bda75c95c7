"""In-memory datasets of records (a subset of Caffe2's ``caffe2.python.dataset``).

A ``Dataset(schema, name)`` keeps one blob per schema field (the flattened names of
``framework.schema``). ``init_empty(init_net)`` creates them empty; ``writer()`` appends batches
(``Append`` per field); ``reader(init_net, batch_size=...)`` makes a TreeCursor and reads with
``ReadNextBatch``, returning ``(should_stop, fields)`` where ``should_stop`` is true once a read is
empty (``IsEmpty``), so a step can loop on it; ``trim(net, multiple_of)`` is ``TrimDataset``.

>>> import numpy as np
>>> from framework import core, workspace, schema
>>> ds = Dataset(schema.Struct(("x", schema.Scalar(np.float32))), name="doc_ds")
>>> init = core.Net("doc_ds_init")
>>> ds.init_empty(init)
>>> workspace.RunNetOnce(init)
True
>>> workspace.FeedBlob("doc_new_x", np.arange(5, dtype=np.float32))
True
>>> w = core.Net("doc_ds_write")
>>> ds.writer().write(w, ["doc_new_x"])
>>> workspace.RunNetOnce(w)
True
>>> workspace.FetchBlob(ds.get_blobs()[0]).tolist()
[0.0, 1.0, 2.0, 3.0, 4.0]
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from framework import core
from framework.proto.framework_pb2 import TensorProto
from framework.schema import Field, Struct, from_blob_list

_PROTO_TYPES = {
    np.dtype(np.float32): TensorProto.FLOAT,
    np.dtype(np.float64): TensorProto.DOUBLE,
    np.dtype(np.int32): TensorProto.INT32,
    np.dtype(np.int64): TensorProto.INT64,
    np.dtype(np.bool_): TensorProto.BOOL,
    np.dtype(object): TensorProto.STRING,
}


class DatasetReader:
    """Reads batches of ``batch_size`` records through a TreeCursor (see module doc)."""

    def __init__(self, dataset: Dataset, cursor: str, batch_size: int, enforce_batch_size: bool) -> None:
        self.dataset, self.cursor = dataset, cursor
        self.batch_size, self.enforce_batch_size = batch_size, enforce_batch_size

    def read(self, read_net: Any) -> tuple[Any, list[Any]]:
        names = [f"{self.dataset.name}/read/{n.replace(':', '_')}" for n in self.dataset.field_names()]
        read_net.ReadNextBatch(
            [self.cursor, *self.dataset.get_blobs()],
            names,
            batch_size=self.batch_size,
            enforce_batch_size=self.enforce_batch_size,
        )
        should_stop = read_net.IsEmpty([names[0]], [f"{self.dataset.name}/read/should_stop"])
        return should_stop, names

    def read_record(self, read_net: Any) -> tuple[Any, Field]:
        should_stop, fields = self.read(read_net)
        return should_stop, from_blob_list(self.dataset.schema, fields)

    def reset(self, net: Any) -> None:
        net.ResetCursor([self.cursor], [])


class DatasetWriter:
    """Appends batches to the dataset's blobs."""

    def __init__(self, dataset: Dataset) -> None:
        self.dataset = dataset

    def write(self, writer_net: Any, fields: Sequence[Any]) -> None:
        blobs = self.dataset.get_blobs()
        if len(fields) != len(blobs):
            raise ValueError(f"{len(fields)} field blobs for a dataset of {len(blobs)} fields")
        for b, f in zip(blobs, fields):
            writer_net.Append([b, f], [b])

    def write_record(self, writer_net: Any, record: Field) -> None:
        self.write(writer_net, record.field_blobs())


class Dataset:
    """Blobs holding a dataset of ``schema`` records (see module doc)."""

    def __init__(self, fields: Any, name: str | None = None) -> None:
        self.schema = fields if isinstance(fields, Field) else Struct(*fields)
        self.name = name or "dataset"
        self.field_blob_names = [f"{self.name}:{n}" for n in self.schema.field_names()]

    def field_names(self) -> list[str]:
        return self.schema.field_names()

    def field_types(self) -> list[np.dtype]:
        return self.schema.field_types()

    def get_blobs(self) -> list[str]:
        return list(self.field_blob_names)

    def content(self) -> Field:
        return from_blob_list(self.schema, self.field_blob_names)

    def init_empty(self, init_net: Any) -> None:
        """Add ops to ``init_net`` creating every field blob empty (shape [0], the field's type)."""
        for blob, dtype in zip(self.field_blob_names, self.field_types()):
            proto_type = _PROTO_TYPES.get(np.dtype(dtype))
            if proto_type is None:
                raise ValueError(f"field type {dtype} has no TensorProto type")
            if proto_type == TensorProto.STRING:
                init_net.GivenTensorStringFill([], [blob], shape=[0], values=[])
            else:
                init_net.ConstantFill([], [blob], shape=[0], dtype=proto_type)

    def reader(self, init_net: Any = None, cursor_name: str | None = None, batch_size: int = 1,
               enforce_batch_size: bool = False) -> DatasetReader:  # fmt: skip
        """A reader; its TreeCursor is created by ``init_net`` (or at once, with no net)."""
        cursor = cursor_name or f"{self.name}_cursor"
        op = core.CreateOperator("CreateTreeCursor", [], [cursor], fields=self.field_names())
        if init_net is not None:
            init_net.Proto().op.add().CopyFrom(op)
        else:
            from framework import workspace

            workspace.RunOperatorOnce(op)
        return DatasetReader(self, cursor, batch_size, enforce_batch_size)

    def writer(self, init_net: Any = None) -> DatasetWriter:
        return DatasetWriter(self)

    def trim(self, net: Any, multiple_of: int) -> None:
        blobs = self.get_blobs()
        net.TrimDataset(blobs, blobs, fields=self.field_names(), multiple_of=multiple_of)
