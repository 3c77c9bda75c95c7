"""``caffe2.python.cached_reader``: a reader that copies another reader's data into a DB file once, then
reads that file.

``CachedReader(original_reader, db_path, db_type="LevelDB", name=None, batch_size=100, loop_over=False)``
is a ``DBFileReader`` with the original reader's schema. ``build_cache_step(overwrite=False)`` returns an
execution step that, when run, reads everything ``original_reader`` gives (piped into a ``Dataset``) and
saves the columns to ``db_path`` under their field names; when the file exists already (and not
``overwrite``) the step is empty. Reading (``setup_ex``, ``read``) uses only the file: the cache must be
built first.

Caffe2 2018's form is accepted too: ``CachedReader(reader)`` without ``db_path`` (name ``cached_reader``)
and ``build_cache(cache_path, overwrite=False)``, which sets the path (unless a cache file is already set
and exists) and returns ``build_cache_step(overwrite)``.
"""

from __future__ import annotations

import os
from typing import Any

from framework import core
from framework.caffe2.python.db_file_reader import DBFileReader
from framework.caffe2.python.pipeline import pipe
from framework.caffe2.python.task import Cluster, TaskGroup

__all__ = ["CachedReader"]


class CachedReader(DBFileReader):
    """See module doc."""

    default_name_suffix = "cached_reader"
    _path_comes_later = True

    def __init__(
        self,
        original_reader: Any,
        db_path: str | None = None,
        db_type: str = "LevelDB",
        name: str | None = None,
        batch_size: int = 100,
        loop_over: bool = False,
    ) -> None:
        assert original_reader is not None, "original_reader can't be None"
        self.original_reader = original_reader
        if db_path is None:  # Caffe2 2018: the path comes with build_cache
            name = name or "cached_reader"
        super().__init__(db_path, db_type, name, batch_size, loop_over)

    def build_cache(self, cache_path: str, overwrite: bool = False) -> Any:
        """Caffe2 2018's entry: use ``cache_path`` (unless the cache already set exists and not ``overwrite``)
        and return the step that fills it."""
        if not (self.db_path and os.path.exists(self.db_path)) or overwrite:
            self.db_path = os.path.abspath(os.path.expanduser(cache_path))
        return self.build_cache_step(overwrite)

    def _init_reader_schema(self, *args: Any, **kwargs: Any) -> Any:
        return self.original_reader.schema()

    def build_cache_step(self, overwrite: bool = False) -> Any:
        """The step that fills the cache file (empty when it exists and ``overwrite`` is False)."""
        if os.path.exists(self.db_path) and not overwrite:
            return core.execution_step("build_step", [])
        init_net = core.Net("init")
        self._init_field_blobs_as_empty(init_net)
        # no NameScope (Caffe2 opens ``<name>/``): the dataset's blobs are named by the dataset, and a scope
        # would rename them in the copy's ops only
        with Cluster(), TaskGroup() as copy_tg:
            pipe(self.original_reader, self.ds.writer(), num_threads=16)
            copy_step = copy_tg.get_step()  # the local node's tasks in one step (Caffe2: to_task().get_step())
        save_net = core.Net("save")
        self._save_field_blobs_to_db_file(save_net)
        return core.execution_step("build_cache", [init_net, copy_step, save_net])

    def _save_field_blobs_to_db_file(self, net: Any) -> None:
        net.Save(
            self.ds.get_blobs(),
            [],
            db=self.db_path,
            db_type=self.db_type,
            blob_name_overrides=self.ds.field_names(),
            absolute_path=True,
        )
