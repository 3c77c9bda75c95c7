"""``caffe2.python.db_file_reader``: a Reader over the columns of a record saved to a DB file.

``DBFileReader(db_path, db_type, name=None, batch_size=100, loop_over=False, field_names=None)`` reads a DB
whose blobs are the columns of a record (as ``Save`` with the field names as ``blob_name_overrides`` writes
them: ``CachedReader`` does). Its schema comes from ``field_names`` (``schema.from_column_list``) or, without
them, from the blob names in the DB, loaded once into the current workspace under the prefix ``<name>/``
(they come back in sorted order, so the record's fields must be sorted too). ``setup_ex`` loads the columns
into a ``Dataset`` called ``<name>_dataset`` and makes a random reader over it (``batch_size`` rows a read,
in a random order; endlessly with ``loop_over``). ``name`` defaults to ``<db file name without
extension>_db_file_reader``. ``db_path`` is absolute or relative to the working directory (``~`` expanded);
``db_type`` must be a registered DB type (``C.registered_dbs()``).
"""

from __future__ import annotations

import os
from typing import Any

from framework import core, workspace
from framework.caffe2 import c_extension as C
from framework.caffe2.python import scope
from framework.caffe2.python.dataio import Reader
from framework.caffe2.python.dataset import Dataset
from framework.caffe2.python.schema import from_column_list

__all__ = ["DBFileReader"]


class DBFileReader(Reader):
    """See module doc."""

    default_name_suffix = "db_file_reader"
    # a subclass whose file is named after construction (CachedReader's Caffe2 2018 form)
    _path_comes_later = False

    def __init__(
        self,
        db_path: str,
        db_type: str,
        name: str | None = None,
        batch_size: int = 100,
        loop_over: bool = False,
        field_names: list[str] | None = None,
    ) -> None:
        assert db_path is not None or self._path_comes_later, "db_path can't be None."
        assert db_type in C.registered_dbs(), (
            f"db_type [{db_type}] is not available. \nChoose one of these: {C.registered_dbs()}."
        )
        self.db_path = None if db_path is None else os.path.abspath(os.path.expanduser(db_path))
        self.db_type = db_type
        self.name = name or f"{self._extract_db_name_from_db_path()}_{self.default_name_suffix}"
        self.batch_size = batch_size
        self.loop_over = loop_over
        super().__init__(self._init_reader_schema(field_names))
        self.ds = Dataset(self._schema, self.name + "_dataset")
        self.ds_reader: Any = None

    def _init_reader_schema(self, field_names: list[str] | None = None) -> Any:
        """The record's schema: from ``field_names``, else from the blob names stored in the DB."""
        if field_names:
            return from_column_list(field_names)
        with core.NameScope(self.name):
            prefix = scope.CurrentNameScope()
        load = core.CreateOperator(
            "Load", [], [], absolute_path=True, db=self.db_path, db_type=self.db_type, load_all=True, add_prefix=prefix
        )
        workspace.RunOperatorOnce(load)
        return from_column_list([b[len(prefix) :] for b in workspace.Blobs() if b.startswith(prefix)])

    def setup_ex(self, init_net: Any, finish_net: Any) -> None:
        """Add the loading of the columns and the random reader's set-up to ``init_net`` (once)."""
        assert self.db_path is not None, "build_cache must be called first (no DB file yet)"
        if self.ds_reader is not None:
            self.ds_reader.setup_ex(init_net, finish_net)
            return
        self._init_field_blobs_as_empty(init_net)
        self._feed_field_blobs_from_db_file(init_net)
        self.ds_reader = self.ds.random_reader(init_net, batch_size=self.batch_size, loop_over=self.loop_over)
        self.ds_reader.sort_and_shuffle(init_net)
        self.ds_reader.computeoffset(init_net)

    def read(self, read_net: Any) -> tuple[Any, list[Any]]:
        assert self.ds_reader is not None, "setup_ex must be called first"
        return self.ds_reader.read(read_net)

    def _init_field_blobs_as_empty(self, init_net: Any) -> None:
        # the dataset's blobs are already named after the reader (``<name>_dataset:<field>``); Caffe2 also
        # opens the NameScope ``<name>``, which would rename them here only
        self.ds.init_empty(init_net)

    def _feed_field_blobs_from_db_file(self, net: Any) -> None:
        net.Load(
            [],
            self.ds.get_blobs(),
            db=self.db_path,
            db_type=self.db_type,
            absolute_path=True,
            source_blob_names=self.ds.field_names(),
        )

    def _extract_db_name_from_db_path(self) -> str:
        """``/tmp/sample.db`` -> ``sample``."""
        return os.path.basename(self.db_path).rsplit(".", 1)[0]
