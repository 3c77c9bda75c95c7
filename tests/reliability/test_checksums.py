"""Our checkpoints carry a checksum per record (a trailing record Caffe2's readers ignore): a
flipped bit anywhere in a tensor's data is a DBError naming the blob, and the workspace is left
as it was."""

from __future__ import annotations

import os

import numpy as np
import pytest

from framework import checkpoint
from framework.db.blobs import CHECKSUM_KEY, record_checksum
from framework.errors import DBError, FrameworkError
from framework.memory.workspace import Workspace


def test_record_checksum_sees_every_single_bit():
    rng = np.random.default_rng(0)
    data = bytearray(rng.integers(0, 256, 37, dtype=np.uint8).tobytes())
    base = record_checksum(bytes(data))
    for i in range(len(data)):
        for bit in range(8):
            data[i] ^= 1 << bit
            assert record_checksum(bytes(data)) != base
            data[i] ^= 1 << bit
    assert record_checksum(b"") != record_checksum(b"\0")  # the length counts too


@pytest.mark.parametrize("db_type", ["minidb", "lmdb"])
def test_a_flipped_bit_is_an_error_naming_the_blob(tmp_path, db_type):
    if db_type == "lmdb":
        pytest.importorskip("lmdb")
    ws = Workspace()
    w = np.linspace(-1, 1, 4096, dtype=np.float32)
    ws.feed_blob("fc_w", w)
    ws.feed_blob("fc_b", np.zeros(8, np.float32))
    path = str(tmp_path / "ckpt")
    checkpoint.save(ws, path, db_type=db_type)
    data_file = path if db_type == "minidb" else os.path.join(path, "data.mdb")
    raw = bytearray(open(data_file, "rb").read())
    needle = w[1000:1004].tobytes()
    at = raw.index(needle)  # inside fc_w's float data
    raw[at + 1] ^= 0x10
    open(data_file, "wb").write(bytes(raw))
    target = Workspace()
    target.feed_blob("fc_w", np.ones(3, np.float32))
    with pytest.raises(DBError) as ei:
        checkpoint.load(target, path, db_type=db_type)
    assert "fc_w" in str(ei.value) and "checksum" in str(ei.value)
    np.testing.assert_array_equal(target.fetch_blob("fc_w"), np.ones(3, np.float32))
    assert not target.has_blob("fc_b")


def test_checkpoints_hold_one_checksum_per_record(tmp_path):
    ws = Workspace()
    ws.feed_blob("a", np.ones(10, np.float32))
    ws.feed_blob("s", b"text")
    path = str(tmp_path / "c.minidb")
    checkpoint.save(ws, path)
    from framework.db import Mode, open_db

    with open_db("minidb", path, Mode.READ) as db:
        keys = [k for k, _ in db.cursor()]
    assert keys[-1] == CHECKSUM_KEY
    out = Workspace()
    assert sorted(checkpoint.load(out, path)) == ["a", "s"]  # the reserved records load as nothing


def test_every_single_bit_flip_of_a_checkpoint_is_an_error_or_changes_nothing(tmp_path):
    """Each of the file's bits flipped in turn: the load raises a FrameworkError, or (a bit the format does
    not read, e.g. padding) loads exactly the blobs saved: names, dtypes and values. A flip in the manifest's
    own key once loaded an extra blob under the damaged name."""
    ws = Workspace()
    saved = {
        "w": np.arange(-6, 6, dtype=np.float32).reshape(3, 4) / 7,
        "b": np.arange(5, dtype=np.int64),
        "s": np.array([b"ab", b"c"], dtype=object),
    }
    for name, value in saved.items():
        ws.feed_blob(name, value)
    path, damaged = str(tmp_path / "c.minidb"), str(tmp_path / "d.minidb")
    checkpoint.save(ws, path)
    raw = open(path, "rb").read()
    changed = []
    for i in range(len(raw)):
        for bit in range(8):
            data = bytearray(raw)
            data[i] ^= 1 << bit
            open(damaged, "wb").write(bytes(data))
            out = Workspace()
            try:
                names = checkpoint.load(out, damaged)
            except FrameworkError:
                continue
            same = sorted(names) == sorted(saved) and all(
                out.fetch_blob(n).dtype == v.dtype and np.array_equal(out.fetch_blob(n), v) for n, v in saved.items()
            )
            if not same:
                changed.append((i, bit))
    assert not changed, f"{len(changed)} single-bit flips loaded changed blobs, first at (byte, bit) {changed[:5]}"
