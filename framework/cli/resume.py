"""What ``framework train --resume`` needs beyond the parameters to continue exactly where a run stopped.

A straight run of N iterations and a run of K iterations resumed to N give bit-identical weights only
if the resumed run reads the same batches and draws the same random numbers. So the checkpoint also
holds, as ordinary tensors under the ``__resume__/`` prefix:

- ``__resume__/reader/<blob>``: for every data reader the init net creates (``CreateDB``), the key of
  the record it reads next (uint8 bytes; empty: the next read starts over at the first record);
- ``__resume__/rng/<k>/key`` and ``.../pos``: the MT19937 state of the k-th op of the train net that
  has drawn random numbers (Dropout...).

Loading restores them into the created train net (``restore``); a checkpoint without them (older
runs, Caffe2's) resumes as before: parameters only.
"""

from __future__ import annotations

from typing import Any

import numpy as np

PREFIX = "__resume__/"


def capture(ws: Any, net: Any, readers: set[str]) -> list[str]:
    """Write the reader positions and the random states of ``net``'s ops into ``ws``; their blob names."""
    from framework.db.reader import DBReader

    names = []
    for r in sorted(readers):
        reader = ws.get_blob(r).get() if ws.has_blob(r) else None
        if isinstance(reader, DBReader):
            name = f"{PREFIX}reader/{r}"
            ws.feed_blob(name, np.frombuffer(reader.current_key().encode("utf-8", "surrogateescape"), np.uint8))
            names.append(name)
    for k, op in enumerate(net.ops):
        rng = op._rng
        if rng is None or not isinstance(rng.bit_generator, np.random.MT19937):
            continue
        state = rng.bit_generator.state["state"]
        # int64: Caffe2's TensorProto has no uint32
        ws.feed_blob(f"{PREFIX}rng/{k}/key", np.asarray(state["key"], np.int64))
        ws.feed_blob(f"{PREFIX}rng/{k}/pos", np.array([state["pos"]], np.int64))
        names += [f"{PREFIX}rng/{k}/key", f"{PREFIX}rng/{k}/pos"]
    return names


def restore(ws: Any, net: Any, readers: set[str]) -> int:
    """Put the reader positions and random states held in ``ws`` (loaded from a checkpoint) back into the
    readers and ``net``'s ops; returns how many were restored."""
    from framework.db.reader import DBReader

    n = 0
    for r in sorted(readers):
        name = f"{PREFIX}reader/{r}"
        reader = ws.get_blob(r).get() if ws.has_blob(r) else None
        if ws.has_blob(name) and isinstance(reader, DBReader):
            key = np.asarray(ws.fetch_blob(name), np.uint8).tobytes().decode("utf-8", "surrogateescape")
            if key:
                reader.seek(key)
            n += 1
    for k, op in enumerate(net.ops):
        key, pos = f"{PREFIX}rng/{k}/key", f"{PREFIX}rng/{k}/pos"
        if ws.has_blob(key) and ws.has_blob(pos):
            state = {"key": np.asarray(ws.fetch_blob(key)).astype(np.uint32), "pos": int(ws.fetch_blob(pos)[0])}
            op.rng.bit_generator.state = {"bit_generator": "MT19937", "state": state}
            n += 1
    return n


def held(path: str) -> list[str]:
    """The ``__resume__/`` blobs a checkpoint holds."""
    from framework.checkpoint import list_checkpoint

    return [r["name"] for r in list_checkpoint(path) if r["name"].startswith(PREFIX)]
