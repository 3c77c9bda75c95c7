"""Save and load a workspace's blobs: the obvious, safe path.

>>> import numpy as np
>>> from framework.memory.workspace import Workspace
>>> ws = Workspace()
>>> ws.feed_blob("w", np.ones((2, 3), np.float32))
>>> save(ws, "/tmp/doc_ckpt.minidb")
['w']
>>> ws2 = Workspace(); load(ws2, "/tmp/doc_ckpt.minidb")
['w']
>>> list_checkpoint("/tmp/doc_ckpt.minidb")[0]["shape"]
(2, 3)

The files are Caffe2's (minidb records of BlobProtos, tensors chunked as
``name#%k``), so checkpoints written by Caffe2's Save load here and the other
way round. Saving is atomic (a crash leaves the previous checkpoint intact);
loading is all or nothing (a damaged file, or a missing blob with
``strict=True``, raises and leaves the workspace unchanged). This module runs
the same code as the Save and Load operators (``framework.db.blobs``).
"""

from __future__ import annotations

import os
import re
from typing import Any, Iterable

from framework.db import detect_db_type
from framework.db.blobs import list_blobs, read_blobs, save_keys, write_blobs
from framework.errors import BlobNotFoundError, DBError
from framework.memory.serialize import is_serializable
from framework.memory.workspace import Workspace

__all__ = ["CheckpointManager", "list_checkpoint", "load", "save"]


def _resolve(workspace: Workspace, path: str | os.PathLike) -> str:
    return workspace.resolve_path(os.fspath(path))


def save(
    workspace: Workspace,
    path: str | os.PathLike,
    blobs: Iterable[str] | None = None,
    db_type: str = "minidb",
    chunk_size: int | None = None,
    strip_prefix: str = "",
    typed: bool = True,
    manifest: bool = True,
) -> list[str]:
    """Save ``blobs`` (default: every non-empty local blob that can be serialized) to ``path``.

    Relative paths resolve against the workspace root folder. Returns the names
    saved (after ``strip_prefix``). Tensors go in the typed TensorProto fields
    (``float_data``, ``int32_data``...), which every Caffe2 reader reads (no released
    Caffe2 reads ``raw_data``); ``typed=False`` writes the compact ``raw_data`` encoding.
    ``manifest`` (default on) writes a first record listing every record, so
    that a file cut short, even exactly between records, fails to load instead
    of loading fewer blobs (Caffe2 skips this record unless it loads all).
    """
    if blobs is None:
        names = [n for n in workspace.local_blobs() if is_serializable(workspace.get_blob(n))]
    else:
        names = [str(n) for n in blobs]
        missing = [n for n in names if not workspace.has_blob(n)]
        if missing:
            raise BlobNotFoundError(f"cannot save {', '.join(missing)}: not in the workspace")
    keys = save_keys(names, strip_prefix)
    items = [(k, workspace.get_blob(n)) for k, n in zip(keys, names)]
    write_blobs(db_type, _resolve(workspace, path), items, chunk_size, typed, manifest)
    return keys


def load(
    workspace: Workspace,
    path: str | os.PathLike,
    blobs: Iterable[str] | None = None,
    db_type: str | None = None,
    strict: bool = True,
    add_prefix: str = "",
    strip_prefix: str = "",
) -> list[str]:
    """Load blobs from the checkpoint at ``path`` into ``workspace``; returns the names loaded.

    ``blobs``: the names to load (default: everything the checkpoint holds).
    ``db_type``: None detects an lmdb, leveldb or rocksdb folder, else minidb. With ``strict``
    (default) a requested blob the checkpoint lacks is an error naming it and
    listing what the checkpoint holds; either way a damaged file, or one
    holding no blobs, raises and leaves the workspace unchanged.
    """
    full = _resolve(workspace, path)
    if not os.path.exists(full):
        raise DBError(f"checkpoint {full} does not exist")
    db_type = db_type or detect_db_type(full)
    wanted = None if blobs is None else {str(n): str(n) for n in blobs}
    staged = read_blobs(
        [(db_type, full)], wanted, strip_prefix=strip_prefix, add_prefix=add_prefix, allow_incomplete=not strict
    )
    if not staged and wanted is None:
        # An empty DB is not a checkpoint: a 0-byte file, or a LevelDB/RocksDB whose only write was lost.
        raise DBError(f"checkpoint {full} ({db_type}) holds no blobs: it is empty or its content was lost")
    for name, blob in staged.items():
        workspace.create_blob(name).reset(blob.held)
    return list(staged)


def list_checkpoint(path: str | os.PathLike, db_type: str | None = None) -> list[dict[str, Any]]:
    """What a checkpoint holds: one dict per blob with ``name``, ``dtype``, ``shape``, ``bytes`` (and ``type``)."""
    full = os.fspath(path)
    if not os.path.exists(full):
        raise DBError(f"checkpoint {full} does not exist")
    return list_blobs(db_type or detect_db_type(full), full)


class CheckpointManager:
    """Numbered checkpoints in a folder: ``save(ws, iteration)``, ``load_latest(ws)``, keeping the last ``keep``.

    Files are named ``<prefix>_<iteration:08d>.<db_type>``; each save is atomic,
    so the latest file is always complete.
    """

    def __init__(self, folder: str | os.PathLike, prefix: str = "ckpt", db_type: str = "minidb", keep: int = 3):
        self.folder, self.prefix, self.db_type, self.keep = os.fspath(folder), prefix, db_type, keep
        self._pattern = re.compile(rf"^{re.escape(prefix)}_(\d+)\.{re.escape(db_type)}$")

    def path(self, iteration: int) -> str:
        return os.path.join(self.folder, f"{self.prefix}_{iteration:08d}.{self.db_type}")

    def iterations(self) -> list[int]:
        if not os.path.isdir(self.folder):
            return []
        return sorted(int(m.group(1)) for m in map(self._pattern.match, os.listdir(self.folder)) if m)

    def save(self, workspace: Workspace, iteration: int, blobs: Iterable[str] | None = None) -> str:
        os.makedirs(self.folder, exist_ok=True)
        path = self.path(iteration)
        save(workspace, path, blobs, db_type=self.db_type)
        for old in self.iterations()[: -self.keep] if self.keep > 0 else []:
            _remove(self.path(old))
        return path

    def load_latest(self, workspace: Workspace, blobs: Iterable[str] | None = None) -> int | None:
        """Load the newest checkpoint; returns its iteration, or None when there is none."""
        its = self.iterations()
        if not its:
            return None
        load(workspace, self.path(its[-1]), blobs, db_type=self.db_type)
        return its[-1]


def _remove(path: str) -> None:
    import shutil

    if os.path.isdir(path):
        shutil.rmtree(path, ignore_errors=True)
    elif os.path.exists(path):
        os.remove(path)
