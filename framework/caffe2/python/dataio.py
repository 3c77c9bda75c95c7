"""Readers and writers of records (the base classes of Caffe2's ``caffe2.python.dataio``).

A ``Reader`` adds ops to a net that read one batch and returns ``(should_stop, fields)``; a
``Writer`` adds ops that write a batch. ``framework.caffe2.python.dataset``, ``framework.caffe2.python.queue_util`` and
``framework.caffe2.python.text_file_reader`` implement them. Covered: ``Reader`` (``read``, ``read_record``,
``read_ex``, ``read_record_ex``, ``execution_step``, ``setup_ex``, ``reset``, ``schema``) and ``Writer`` (``write``,
``write_record``, ``write_ex``, ``write_record_ex``, ``setup_ex``, ``commit``), ``Pipe`` (the base of
queues and streams), ``CounterReader``, ``ReaderWithLimit`` / ``CountUntil`` / ``ReaderWithTimeLimit``
(``dataio_limits``, re-exported here); ``pipeline`` pipes readers into writers
through processors. ``ReaderBuilder``, ``PipedReaderBuilder``, ``ReaderWithDelay``, ``CompositeReader``
and ``CompositeReaderBuilder`` live in ``dataio_composite``, re-exported here.
"""

from __future__ import annotations

from typing import Any

from framework import core
from framework.caffe2.python.schema import Field, from_blob_list


class Reader:
    """Adds read ops to nets; subclasses implement ``read(read_net) -> (should_stop, fields)``."""

    def __init__(self, schema: Field | None = None) -> None:
        self._schema = schema

    def schema(self) -> Field | None:
        return self._schema

    def _set_schema(self, schema: Field | None) -> None:
        self._schema = schema

    def setup_ex(self, init_net: Any, finish_net: Any) -> None:
        """Ops run once before (init_net) and after (finish_net) reading."""

    def read(self, read_net: Any) -> tuple[Any, list[Any]]:
        raise NotImplementedError(f"{type(self).__name__} does not implement read()")

    def reset(self, net: Any) -> None:
        raise NotImplementedError(f"{type(self).__name__} cannot be reset")

    def read_ex(self, local_init_net: Any, local_finish_net: Any) -> tuple[list[Any], Any, list[Any]]:
        read_net = core.Net("reader_body")
        should_stop, fields = self.read(read_net)
        return [read_net], should_stop, fields

    def read_record(self, read_net: Any) -> tuple[Any, Any]:
        should_stop, fields = self.read(read_net)
        return should_stop, (from_blob_list(self._schema, fields) if self._schema is not None else fields)

    def read_record_ex(self, local_init_net: Any, local_finish_net: Any) -> tuple[list[Any], Any, Any]:
        nets, should_stop, fields = self.read_ex(local_init_net, local_finish_net)
        return nets, should_stop, (from_blob_list(self._schema, fields) if self._schema is not None else fields)

    def execution_step(self, reader_net_name: str | None = None, external_should_stop: Any = None) -> tuple[Any, Any]:
        """``(read_step, fields)``: a step running a new net (``reader_net_name``, default ``reader``) that
        reads one batch per iteration into ``fields`` (a record when the reader has a schema) and stops
        the step's loop once a read finds no data, or once ``external_should_stop`` is true. The step is
        named ``<reader_net_name>_step`` (``None_step`` without a name, as Caffe2)."""
        reader_net = core.Net(reader_net_name or "reader")
        should_stop, fields = self.read_record(reader_net)
        if external_should_stop is not None:
            should_stop = reader_net.Or([external_should_stop, should_stop])
        read_step = core.execution_step(f"{reader_net_name}_step", reader_net, should_stop_blob=should_stop)
        return read_step, fields


class Writer:
    """Adds write ops to nets; subclasses implement ``write(writer_net, fields)``."""

    _schema: Field | None = None

    def schema(self) -> Field | None:
        return self._schema

    def setup_ex(self, init_net: Any, finish_net: Any) -> None:
        """Ops run once before and after writing."""

    def write(self, writer_net: Any, fields: list[Any]) -> None:
        raise NotImplementedError(f"{type(self).__name__} does not implement write()")

    def write_record(self, writer_net: Any, fields: Any) -> None:
        if isinstance(fields, Field):
            self._schema = fields
            fields = fields.field_blobs()
        self.write(writer_net, fields)

    def write_ex(
        self, fields: list[Any], local_init_net: Any, local_finish_net: Any, stop_blob: Any = None
    ) -> list[Any]:
        writer_net = core.Net("writer")
        self.write(writer_net, fields)
        return [writer_net]

    def write_record_ex(
        self, fields: Any, local_init_net: Any, local_finish_net: Any, stop_blob: Any = None
    ) -> list[Any]:
        """``write_ex`` of a record (its blobs) or of a list of blobs."""
        if isinstance(fields, Field):
            self._schema = fields
            fields = fields.field_blobs()
        return self.write_ex(fields, local_init_net, local_finish_net, stop_blob)

    def commit(self, finish_net: Any) -> None:
        """Ops that make what was written final (none by default)."""


class Pipe:
    """A queue or stream with a reader and a writer side (Caffe2's base); counts its ends and
    takes the schema of its first writer."""

    def __init__(self, schema: Field | None = None, obj_key: Any = None) -> None:
        self._num_writers = 0
        self._num_readers = 0
        self._schema = schema
        self._obj_key = obj_key

    def schema(self) -> Field | None:
        return self._schema

    def setup(self, global_init_net: Any) -> None:
        pass

    def reader(self) -> Reader:
        raise NotImplementedError()

    def writer(self) -> Writer:
        raise NotImplementedError()

    def num_readers(self) -> int:
        return self._num_readers

    def num_writers(self) -> int:
        return self._num_writers

    def _new_writer(self, writer_schema: Field | None, writer_init_net: Any) -> None:
        """Count a writer; with an ``obj_key``, attach this pipe to the writer's init net under it
        (queues: ``TaskGroup.LOCAL_SETUP``, so the group creates the queue before its tasks)."""
        if writer_schema is not None and self._schema is None:
            self._schema = writer_schema
        self._num_writers += 1
        if self._obj_key is not None and writer_init_net is not None:
            writer_init_net.add_attribute(self._obj_key, self)

    def _new_reader(self, reader_init_net: Any) -> None:
        self._num_readers += 1
        if self._obj_key is not None and reader_init_net is not None:
            reader_init_net.add_attribute(self._obj_key, self)


from framework.caffe2.python.dataio_composite import (  # noqa: E402  (they subclass Reader)
    CompositeReader,
    CompositeReaderBuilder,
    PipedReaderBuilder,
    ReaderBuilder,
    ReaderWithDelay,
)
from framework.caffe2.python.dataio_limits import (  # noqa: E402  (they subclass Reader)
    CounterReader,
    CountUntil,
    ReaderWithLimit,
    ReaderWithLimitBase,
    ReaderWithTimeLimit,
)

__all__ = [
    "CountUntil", "CounterReader", "Pipe", "Reader", "ReaderWithLimit", "ReaderWithLimitBase", "ReaderWithTimeLimit",
    "Writer", "CompositeReader", "CompositeReaderBuilder", "PipedReaderBuilder", "ReaderBuilder", "ReaderWithDelay",
]  # fmt: skip
