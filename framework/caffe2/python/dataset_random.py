"""The random-order dataset reader and helpers of Caffe2's ``dataset`` module
(``framework.caffe2.python.dataset`` re-exports them): ``DatasetRandomReader`` (``Dataset.random_reader``)
reads through ``ReadRandomBatch`` in the order of an ``indices`` blob, made by
``sort_and_shuffle`` (SortAndShuffle) or given, after ``computeoffset`` (ComputeOffset);
``Const(net, value)`` feeds a constant as an external input of ``net``;
``execution_step_with_progress`` runs substeps concurrently, printing rows read every 5 s.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from framework import core, workspace
from framework.caffe2.python.dataio import Reader


class DatasetRandomReader(Reader):
    """Reads ``batch_size`` records at a time in the order of ``indices`` (``loop_over``: again and
    again). Call ``computeoffset(net)`` (and ``sort_and_shuffle(net, ...)`` unless ``indices`` was
    given) in a net run before reading."""

    def __init__(self, dataset: Any, cursor: str, indices: Any, batch_size: int = 1, loop_over: bool = False):
        super().__init__(dataset.schema)
        self.dataset, self.cursor, self.indices = dataset, cursor, indices
        self.batch_size, self.loop_over = batch_size, loop_over
        self.offsets: Any = None

    def reset(self, net: Any) -> None:
        net.ResetCursor([self.cursor], [])

    def computeoffset(self, net: Any) -> None:
        self.reset(net)
        self.offsets = net.ComputeOffset([self.cursor, *self.dataset.get_blobs()], f"{self.cursor}/offsets")

    def sort_and_shuffle(self, net: Any, sort_by_field: str | None = None, shuffle_size: int = 1, batch_size: int = 1):
        names = self.dataset.field_names()
        idx = -1
        if sort_by_field:
            if sort_by_field not in names:
                raise ValueError(f"sort_by_field {sort_by_field!r} is not a field of {names}")
            idx = names.index(sort_by_field)
        self.reset(net)
        self.indices = net.SortAndShuffle(
            [self.cursor, *self.dataset.get_blobs()], f"{self.cursor}/indices", sort_by_field_idx=idx,
            shuffle_size=shuffle_size, batch_size=batch_size,
        )  # fmt: skip

    def read(self, read_net: Any) -> tuple[Any, list[Any]]:
        if self.offsets is None or self.indices is None:
            raise RuntimeError("call computeoffset (and sort_and_shuffle, or give indices) before reading")
        prefix = f"{read_net.Name()}/{self.dataset.name}/random_read"
        names = [f"{prefix}/{n.replace(':', '_')}" for n in self.dataset.field_names()]
        read_net.ReadRandomBatch(
            [self.cursor, self.indices, self.offsets, *self.dataset.get_blobs()], names,
            batch_size=self.batch_size, loop_over=self.loop_over,
        )  # fmt: skip
        return read_net.IsEmpty([names[0]], [f"{prefix}/should_stop"]), names


def Const(net: Any, value: Any, dtype: Any = None, name: str | None = None) -> Any:
    """An external input of ``net`` (a fresh name) fed with ``value`` in the current workspace."""
    value = np.array(value, dtype=dtype)
    blob = net.AddExternalInput(net.NextName(prefix=name))
    workspace.FeedBlob(str(blob), value)
    return blob


def execution_step_with_progress(name: str, init_net: Any, substeps: Any, rows_read: Any) -> Any:
    """``substeps`` run concurrently with a report net printing ``rows_read`` every 5 seconds."""
    report_net = core.Net("report_net")
    report_net.Print([rows_read], [])
    return core.execution_step(name, substeps, report_net=report_net, concurrent_substeps=True, report_interval=5)
