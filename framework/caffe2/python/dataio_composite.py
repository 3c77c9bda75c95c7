"""Reader builders and readers made of other readers (Caffe2's ``caffe2.python.dataio``, re-exported there).

- ``ReaderBuilder``: the interface of a reader made in a distributed job: ``schema()``, ``setup(**kwargs)``
  (once; returns a dict of "data finished" blobs), ``new_reader(**kwargs)``.
- ``PipedReaderBuilder(builder, piper)``: each new reader is ``piper(reader=..., **kwargs)`` (or its
  ``.reader()`` when the piper returns a pipe).
- ``ReaderWithDelay(reader, delay)``: sleeps ``delay`` seconds (a Python op) before each batch.
- ``CompositeReader(names, readers)``: reads one batch from each reader per step; its schema is
  ``Struct((name, reader.schema()), ...)`` and its fields are the readers' fields in that order. It stops as
  soon as any reader stops (after every reader's read, the last reader's stop blob is or-ed with the others').
- ``CompositeReaderBuilder(names, builders)``: sets the builders up (a ``limiter`` goes to the last one, so
  a batch counts only when every reader has data; the builders' "data finished" blobs must not overlap) and
  makes a ``CompositeReader`` of their new readers.
"""

from __future__ import annotations

import time
from typing import Any, Callable, Sequence

from framework import core
from framework.caffe2.python.dataio import Reader
from framework.caffe2.python.schema import Struct


class ReaderBuilder:
    """Makes readers, possibly one per node or thread of a job (see module doc)."""

    def schema(self) -> Any:
        raise NotImplementedError()

    def setup(self, **kwargs: Any) -> dict[str, Any]:
        raise NotImplementedError()

    def new_reader(self, **kwargs: Any) -> Any:
        raise NotImplementedError()


class PipedReaderBuilder(ReaderBuilder):
    """``builder``'s readers, each passed through ``piper`` (e.g. ``lambda reader, **kw: pipe(reader, proc)``)."""

    def __init__(self, builder: ReaderBuilder, piper: Callable[..., Any]) -> None:
        self._builder = builder
        self._piper = piper

    def schema(self) -> Any:
        return self._builder.schema()

    def setup(self, **kwargs: Any) -> dict[str, Any]:
        return self._builder.setup(**kwargs)

    def new_reader(self, **kwargs: Any) -> Reader:
        out = self._piper(reader=self._builder.new_reader(**kwargs), **kwargs)
        return out if isinstance(out, Reader) else out.reader()


class ReaderWithDelay(Reader):
    """``reader`` with a sleep of ``delay`` seconds before each batch (a test aid, as in Caffe2)."""

    def __init__(self, reader: Reader, delay: float) -> None:
        super().__init__(schema=reader.schema())
        self.reader = reader
        self.delay = delay

    def setup_ex(self, global_init_net: Any, global_finish_net: Any) -> None:
        self.reader.setup_ex(global_init_net, global_finish_net)

    def read_ex(self, local_init_net: Any, local_finish_net: Any) -> tuple[list[Any], Any, list[Any]]:
        read_net = core.Net("reader_body")
        delay = self.delay
        read_net.Python(lambda inputs, outputs: time.sleep(delay))([], [])
        should_stop, fields = self.reader.read(read_net)
        return [read_net], should_stop, fields


class CompositeReader(Reader):
    """One batch from each of ``readers`` per step, under ``names`` (see module doc)."""

    def __init__(self, names: Sequence[str], readers: Sequence[Reader]) -> None:
        if len(names) != len(readers):
            raise ValueError(f"CompositeReader: {len(names)} names for {len(readers)} readers")
        super().__init__(schema=Struct(*[(name, reader.schema()) for name, reader in zip(names, readers)]))
        self._names = list(names)
        self._readers = list(readers)

    def setup_ex(self, init_net: Any, finish_net: Any) -> None:
        for reader in self._readers:
            reader.setup_ex(init_net, finish_net)

    def read_ex(self, local_init_net: Any, local_finish_net: Any) -> tuple[list[Any], Any, list[Any]]:
        parts = [reader.read_record_ex(local_init_net, local_finish_net) for reader in self._readers]
        fields: list[Any] = []
        for _, _, record in parts:
            fields.extend(record.field_blobs() if hasattr(record, "field_blobs") else record)
        should_stop = parts[-1][1]
        # every reader reads before the stop blobs are or-ed (Caffe2 interleaves them, which reads the last
        # reader's stop blob before its first read has written it)
        nets: list[Any] = [net for sub_nets, _, _ in parts for net in sub_nets]
        for name, (_, stop, _) in zip(self._names, parts):
            if str(stop) != str(should_stop):  # Or of a blob with itself is refused by its schema
                stop_net = core.Net(f"{name}_stop")
                stop_net.Or([should_stop, stop], should_stop)
                nets.append(stop_net)
        return nets, should_stop, fields

    def reset(self, net: Any) -> None:
        for reader in self._readers:
            reader.reset(net)


class CompositeReaderBuilder(ReaderBuilder):
    """A ``CompositeReader`` of the readers of ``reader_builders`` (see module doc)."""

    def __init__(self, names: Sequence[str], reader_builders: Sequence[ReaderBuilder]) -> None:
        self._names = list(names)
        self._reader_builders = list(reader_builders)
        self._schema = Struct(*[(name, b.schema()) for name, b in zip(names, reader_builders)])

    def schema(self) -> Any:
        return self._schema

    def setup(self, **kwargs: Any) -> dict[str, Any]:
        limiter = kwargs.pop("limiter", None)
        finished: dict[str, Any] = {}
        for i, builder in enumerate(self._reader_builders):
            if limiter is not None and i == len(self._reader_builders) - 1:
                kwargs["limiter"] = limiter  # counts a batch only when every reader had one
            blobs = builder.setup(**kwargs) or {}
            same_keys = set(finished) & set(blobs)
            same_values = {str(v) for v in finished.values()} & {str(v) for v in blobs.values()}
            if same_keys or same_values:
                raise ValueError(
                    f"CompositeReaderBuilder: readers share data-finished blobs: {sorted(same_keys | same_values)}"
                )
            finished.update(blobs)
        return finished

    def new_reader(self, **kwargs: Any) -> CompositeReader:
        readers = []
        for builder in self._reader_builders:
            reader = builder.new_reader(**kwargs)
            if not isinstance(reader, Reader):
                if not hasattr(reader, "reader"):
                    raise ValueError("reader must be an instance of Reader or Pipe")
                reader = reader.reader()
            readers.append(reader)
        return CompositeReader(self._names, readers)
