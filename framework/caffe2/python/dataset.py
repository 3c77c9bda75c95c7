"""In-memory datasets of records, as Caffe2's ``caffe2.python.dataset``.

A ``Dataset(schema or raw field names, name)`` keeps one blob per schema field (the flattened names of
``framework.caffe2.python.schema``). ``init_empty(init_net)`` creates them empty; ``writer()`` (a
``dataio.Writer``) appends batches (``Append`` per field; ``AtomicAppend`` under a mutex once
``setup_ex`` ran, as in pipes); ``reader(init_net, batch_size=...)`` (a ``dataio.Reader``) makes a
TreeCursor and reads with ``ReadNextBatch``, returning ``(should_stop, fields)`` where
``should_stop`` is true once a read is empty (``IsEmpty``), so a step can loop on it; ``trim(net,
multiple_of)`` is ``TrimDataset``. ``random_reader``, ``Const`` and ``execution_step_with_progress``
come from ``framework.caffe2.python.dataset_random``. Not ported: ``init_from_dataframe`` (pandas).

>>> import numpy as np
>>> from framework import core, workspace
>>> from framework.caffe2.python import schema
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
from framework.caffe2.python.dataio import Reader, Writer
from framework.caffe2.python.schema import Field, Struct, from_blob_list, from_column_list
from framework.proto.framework_pb2 import TensorProto

_PROTO_TYPES = {
    np.dtype(np.float32): TensorProto.FLOAT,
    np.dtype(np.float64): TensorProto.DOUBLE,
    np.dtype(np.int32): TensorProto.INT32,
    np.dtype(np.int64): TensorProto.INT64,
    np.dtype(np.bool_): TensorProto.BOOL,
    np.dtype(object): TensorProto.STRING,
}


class DatasetReader(Reader):
    """Reads batches of ``batch_size`` records through a TreeCursor (see module doc); each read
    net gets its own output blobs, so several threads can read one cursor (it has a lock)."""

    def __init__(
        self, dataset: Dataset, cursor: str, batch_size: int, enforce_batch_size: bool, created: bool = True
    ) -> None:
        super().__init__(dataset.schema)
        self.dataset, self.cursor = dataset, cursor
        self.batch_size, self.enforce_batch_size = batch_size, enforce_batch_size
        self._cursor_created = created

    def setup_ex(self, init_net: Any, finish_net: Any) -> None:
        """Create the cursor in ``init_net`` unless ``Dataset.reader`` was given an init net (Caffe2)."""
        if not self._cursor_created:
            init_net.CreateTreeCursor([], [self.cursor], fields=self.dataset.field_names())
            self._cursor_created = True

    def read(self, read_net: Any) -> tuple[Any, list[Any]]:
        if not self._cursor_created:
            # read without setup (Caffe2 refuses): the cursor is made at once in the current workspace
            self.dataset._cursor(None, self.cursor)
            self._cursor_created = True
        prefix = f"{read_net.Name()}/{self.dataset.name}/read"
        names = [f"{prefix}/{n.replace(':', '_')}" for n in self.dataset.field_names()]
        read_net.ReadNextBatch(
            [self.cursor, *self.dataset.get_blobs()],
            names,
            batch_size=self.batch_size,
            enforce_batch_size=self.enforce_batch_size,
        )
        should_stop = read_net.IsEmpty([names[0]], [f"{prefix}/should_stop"])
        return should_stop, names

    def reset(self, net: Any) -> None:
        net.ResetCursor([self.cursor], [])


class DatasetWriter(Writer):
    """Appends batches to the dataset's blobs (AtomicAppend under a mutex made by the first
    ``write_ex``, so concurrent pipe threads may write; ``write`` alone uses Append)."""

    def __init__(self, dataset: Dataset) -> None:
        self.dataset = dataset
        self._schema = dataset.schema
        self._mutex: str | None = None

    def setup_ex(self, init_net: Any, exit_net: Any) -> None:
        if self._mutex is None:
            self._mutex = f"{self.dataset.name}/writer_mutex"
            init_net.CreateMutex([], [self._mutex])

    def write_ex(
        self, fields: list[Any], local_init_net: Any, local_finish_net: Any, stop_blob: Any = None
    ) -> list[Any]:
        if self._mutex is None:
            return super().write_ex(fields, local_init_net, local_finish_net, stop_blob)
        blobs = self.dataset.get_blobs()
        if len(fields) != len(blobs):
            raise ValueError(f"{len(fields)} field blobs for a dataset of {len(blobs)} fields")
        net = core.Net("dataset_append")
        net.AtomicAppend([self._mutex, *blobs, *fields], blobs)
        return [net]

    def write(self, writer_net: Any, fields: Sequence[Any]) -> None:
        blobs = self.dataset.get_blobs()
        if len(fields) != len(blobs):
            raise ValueError(f"{len(fields)} field blobs for a dataset of {len(blobs)} fields")
        for b, f in zip(blobs, fields):
            writer_net.Append([b, f], [b])


class Dataset:
    """Blobs holding a dataset of ``schema`` records (see module doc)."""

    def __init__(self, fields: Any, name: str | None = None) -> None:
        if isinstance(fields, list) and all(isinstance(f, str) for f in fields):
            fields = from_column_list(fields)  # Caffe2: raw field names (types unknown)
        self.schema = fields if isinstance(fields, Field) else Struct(*fields)
        self.fields = self.schema.field_names()
        self.name = name or "dataset"
        # a record that already names its blobs (e.g. a ConstRecord) is the dataset's content, as Caffe2's
        # (only BlobReferences: a record of numpy values describes types, not blobs)
        has_blobs = (
            isinstance(fields, Field)
            and fields.has_blobs()
            and all(isinstance(b, core.BlobReference) for b in fields.field_blobs())
        )
        self.field_blob_names = (
            [str(b) for b in fields.field_blobs()] if has_blobs else [f"{self.name}:{n}" for n in self.fields]
        )

    def field_names(self) -> list[str]:
        return self.schema.field_names()

    def field_types(self) -> list[np.dtype]:
        return self.schema.field_types()

    def get_blobs(self) -> list[str]:
        return list(self.field_blob_names)

    @property
    def field_blobs(self) -> list[Any]:
        """The field blobs (Caffe2's attribute; the same names as ``get_blobs()``)."""
        return list(self.field_blob_names)

    @field_blobs.setter
    def field_blobs(self, blobs: Sequence[Any]) -> None:
        if len(blobs) != len(self.field_blob_names):
            raise ValueError(f"{len(blobs)} field blobs for a dataset of {len(self.field_blob_names)} fields")
        self.field_blob_names = list(blobs)

    def content(self) -> Field:
        return from_blob_list(self.schema, self.field_blob_names)

    def init_empty(self, init_net: Any) -> None:
        """Add ops to ``init_net`` creating every field blob empty: shape [0] plus the field's own item
        shape (``(np.float32, 3)`` gives [0, 3]), of the field's element type (float [0] for a type with
        no TensorProto type, e.g. np.void, as Caffe2).

        The blobs are new ones named after the dataset (``<name>:<field>``), even for a dataset made from a
        record that has blobs: as Caffe2's (which clones the schema without its blobs), emptying a dataset
        never empties the record it was described by (a reader's schema, say)."""
        created = []
        fresh = [f"{self.name}:{n}" for n in self.fields]
        for blob, dtype in zip(fresh, self.field_types()):
            created.append(self._init_empty_field(init_net, blob, np.dtype(dtype)))
        # the blobs the net made (a NameScope prefixes them), kept as BlobReferences as Caffe2's InitEmptyRecord
        # record keeps them: ops added later under the same scope (a writer's Append) do not scope them again
        self.field_blob_names = [b if isinstance(b, core.BlobReference) else core.BlobReference(b) for b in created]

    @staticmethod
    def _init_empty_field(init_net: Any, blob: str, dtype: np.dtype) -> Any:
        """The op making one empty field blob; returns its output."""
        # strings of any numpy spelling (object, str, bytes) are Caffe2's STRING
        proto_type = TensorProto.STRING if dtype.base.kind in "OUS" else _PROTO_TYPES.get(dtype.base)
        if proto_type is None:
            # as Caffe2's InitEmptyRecord: a type with no TensorProto type (np.void: the field types of
            # a dataset made from raw names) gets the default empty float blob; writing fills it
            return init_net.ConstantFill([], [blob], shape=[0])
        shape = [0, *dtype.shape]
        if proto_type == TensorProto.STRING:
            return init_net.GivenTensorStringFill([], [blob], shape=shape, values=[])
        return init_net.ConstantFill([], [blob], shape=shape, dtype=proto_type)

    def reader(self, init_net: Any = None, cursor_name: str | None = None, batch_size: int = 1,
               enforce_batch_size: bool = False) -> DatasetReader:  # fmt: skip
        """A reader; its TreeCursor is created by ``init_net``, else by the net its ``setup_ex`` is given
        (a pipe's init net), else at once in the current workspace on the first ``read``."""
        if init_net is not None:
            return DatasetReader(self, self._cursor(init_net, cursor_name), batch_size, enforce_batch_size)
        cursor = cursor_name or f"{self.name}_cursor"
        return DatasetReader(self, cursor, batch_size, enforce_batch_size, created=False)

    def random_reader(
        self, init_net: Any = None, indices: Any = None, cursor_name: str | None = None, batch_size: int = 1,
        loop_over: bool = False,
    ) -> DatasetRandomReader:  # fmt: skip
        """A reader in the order of ``indices`` (see ``framework.caffe2.python.dataset_random``); its cursor is
        created by ``init_net`` (or at once, with no net)."""
        return DatasetRandomReader(self, self._cursor(init_net, cursor_name), indices, batch_size, loop_over)

    def _cursor(self, init_net: Any, cursor_name: str | None) -> str:
        """The cursor blob: a CreateTreeCursor added to ``init_net``, or run at once with no net."""
        cursor = cursor_name or f"{self.name}_cursor"
        if init_net is not None:
            # a Net or NetBuilder's ``ops``
            init_net.CreateTreeCursor([], [cursor], fields=self.field_names())
        else:
            op = core.CreateOperator("CreateTreeCursor", [], [cursor], fields=self.field_names())
            from framework import workspace

            workspace.RunOperatorOnce(op)
        return cursor

    def writer(self, init_net: Any = None) -> DatasetWriter:
        return DatasetWriter(self)

    def trim(self, net: Any, multiple_of: int) -> None:
        blobs = self.get_blobs()
        net.TrimDataset(blobs, blobs, fields=self.field_names(), multiple_of=multiple_of)


from framework.caffe2.python.dataset_random import (  # noqa: E402  (it needs Reader; re-exported as Caffe2's dataset has them)
    Const,
    DatasetRandomReader,
    execution_step_with_progress,
)

__all__ = ["Const", "Dataset", "DatasetRandomReader", "DatasetReader", "DatasetWriter", "execution_step_with_progress"]
