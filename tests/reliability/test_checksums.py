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


def test_lmdb_node_offsets_that_leave_their_page_are_refused_before_lmdb_reads_them(tmp_path):
    """LMDB follows a page's node offsets unchecked: single flipped bits in the first leaf page's node
    pointers sent reads past the map's end and killed the process (SIGBUS). Every bit of that pointer
    array flipped in turn: the check refuses the file, or the file loads exactly what was saved."""
    pytest.importorskip("lmdb")
    import shutil
    import subprocess
    import sys

    from framework.db.lmdb_db import check_data_file

    ws = Workspace()
    w, b = np.arange(-6, 6, dtype=np.float32).reshape(3, 4) / 7, np.arange(5, dtype=np.int64)
    ws.feed_blob("w", w)
    ws.feed_blob("b", b)
    path = str(tmp_path / "ck")
    checkpoint.save(ws, path, db_type="lmdb")
    raw = open(os.path.join(path, "data.mdb"), "rb").read()
    psize = int.from_bytes(raw[40:44], "little")
    leaf = next(pg for pg in range(2, len(raw) // psize) if raw[pg * psize + 10] & 0x02)
    lower = int.from_bytes(raw[leaf * psize + 12 : leaf * psize + 14], "little")
    damaged, accepted = str(tmp_path / "d"), []
    for i in range(leaf * psize + 16, leaf * psize + lower):
        for bit in range(8):
            data = bytearray(raw)
            data[i] ^= 1 << bit
            shutil.rmtree(damaged, ignore_errors=True)
            os.makedirs(damaged)
            open(os.path.join(damaged, "data.mdb"), "wb").write(bytes(data))
            try:
                check_data_file(damaged)
            except DBError:
                continue
            accepted.append(damaged + f"-{i}-{bit}")
            shutil.copytree(damaged, accepted[-1])
    assert accepted, "no flip of the pointer array was harmless: the check refuses valid files?"
    # what the check let through loads in a child (a crash there fails the test, not the run)
    child = (
        "import sys, numpy as np\n"
        "from framework import checkpoint\nfrom framework.errors import FrameworkError\n"
        "from framework.memory.workspace import Workspace\n"
        "for p in sys.argv[1:]:\n"
        "    out = Workspace()\n"
        "    try:\n"
        "        names = checkpoint.load(out, p, db_type='lmdb')\n"
        "    except FrameworkError:\n"
        "        continue\n"
        "    w = np.arange(-6, 6, dtype=np.float32).reshape(3, 4) / 7\n"
        "    assert sorted(names) == ['b', 'w'] and np.array_equal(out.fetch_blob('w'), w), p\n"
        "    assert np.array_equal(out.fetch_blob('b'), np.arange(5)), p\n"
        "print('OK')\n"
    )
    r = subprocess.run([sys.executable, "-c", child, *accepted], capture_output=True, text=True, timeout=300)
    assert r.returncode == 0 and "OK" in r.stdout, (r.returncode, r.stderr[-2000:])
