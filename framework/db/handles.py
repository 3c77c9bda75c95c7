"""One open handle per database folder per process, shared by every DB object on it.

LMDB (one ``Environment`` per database per process) and LevelDB/RocksDB (a
``LOCK`` file that refuses a second open, even from the same process) cannot be
opened twice at once, while several DB objects on one path are ordinary here (a
reader cursor and a Load of the same checkpoint). ``SharedHandles`` counts the
users of each path's handle and closes it when the last one leaves.
"""

from __future__ import annotations

import os
import threading
from typing import Any, Callable


class SharedHandles:
    """``acquire(path, create)`` -> the handle for ``path``; ``release(path)`` when done.

    ``opener(path, create)`` makes a new handle (raising ``DBError`` on failure);
    ``closer(handle)`` closes it once nobody uses it. With ``per_mode``, readers
    (``create=False``) and writers (``create=True``) get separate handles (RocksDB
    opens read-only handles beside a writer's).
    """

    def __init__(
        self, opener: Callable[[str, bool], Any], closer: Callable[[Any], None], per_mode: bool = False
    ) -> None:
        self._opener, self._closer, self._per_mode = opener, closer, per_mode
        self._entries: dict[tuple[str, bool], list] = {}  # (realpath, writer) -> [handle, users]
        self._lock = threading.Lock()

    def _key(self, path: str, create: bool) -> tuple[str, bool]:
        return os.path.realpath(path), create and self._per_mode

    def acquire(self, path: str, create: bool) -> Any:
        key = self._key(path, create)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                entry = self._entries[key] = [self._opener(path, create), 0]
            entry[1] += 1
            return entry[0]

    def release(self, path: str, create: bool = False) -> None:
        key = self._key(path, create)
        with self._lock:
            entry = self._entries.get(key)
            if entry is None:
                return
            entry[1] -= 1
            if entry[1] <= 0:
                del self._entries[key]
                self._closer(entry[0])
