"""LevelDB and RocksDB folders given hostile content never reach the C library where it would hang,
abort or write through a link: a file replaced by a symlink (to /dev/zero, or out of the folder), a FIFO,
a damaged CURRENT are DBErrors naming the file; a folder whose MANIFEST lost its tables converts and
inspects as an error, not as "0 records"; `inspect` says what each format can detect."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from framework import checkpoint
from framework.errors import DBError
from framework.memory.workspace import Workspace

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LIBS = {"leveldb": "plyvel", "rocksdb": "rocksdict"}


@pytest.fixture(params=sorted(LIBS))
def kind(request):
    pytest.importorskip(LIBS[request.param])
    return request.param


def _save(path, kind):
    ws = Workspace()
    for i in range(3):
        ws.feed_blob(f"p{i}", np.arange(500, dtype=np.float32) * (i + 1))
    checkpoint.save(ws, str(path), db_type=kind)
    return sorted(os.listdir(path)) if os.path.isdir(path) else []


_EVERY_FILE_TO_DEV_ZERO = """
import os, shutil, sys
from framework import checkpoint
from framework.errors import DBError
from framework.memory.workspace import Workspace
src, kind = sys.argv[1], sys.argv[2]
for name in sorted(os.listdir(src)):
    d = src + "-" + name
    shutil.copytree(src, d)
    os.remove(os.path.join(d, name))
    os.symlink("/dev/zero", os.path.join(d, name))
    try:
        checkpoint.load(Workspace(), d, db_type=kind)
    except DBError as e:
        assert name in str(e), (name, str(e))
        print("refused", name)
    else:
        print("LOADED", name)
"""


def test_a_file_pointing_at_dev_zero_is_refused_not_read_forever(tmp_path, kind):
    """Each file of the folder in turn is a symlink to /dev/zero (LevelDB and RocksDB read their log,
    MANIFEST, IDENTITY and OPTIONS forever): in a child, so a hang fails the test by its timeout."""
    files = _save(tmp_path / "src", kind)
    env = dict(os.environ, PYTHONPATH=ROOT)
    r = subprocess.run(
        [sys.executable, "-c", _EVERY_FILE_TO_DEV_ZERO, str(tmp_path / "src"), kind],
        capture_output=True,
        text=True,
        timeout=240,
        env=env,
    )
    assert r.returncode == 0, r.stderr[-2000:]
    assert r.stdout.split() == [w for f in files for w in ("refused", f)], r.stdout


def test_a_fifo_in_the_folder_is_refused(tmp_path, kind):
    """A FIFO named as the log blocks the library's open forever: in a child, so a hang is a failure."""
    files = _save(tmp_path / "db", kind)
    log = next(f for f in files if f.endswith(".log"))
    os.remove(tmp_path / "db" / log)
    os.mkfifo(tmp_path / "db" / log)
    code = (
        "import sys\nfrom framework import checkpoint\nfrom framework.errors import DBError\n"
        "from framework.memory.workspace import Workspace\n"
        "try:\n    checkpoint.load(Workspace(), sys.argv[1], db_type=sys.argv[2])\n"
        "except DBError as e:\n    print('refused:', e)\n"
    )
    env = dict(os.environ, PYTHONPATH=ROOT)
    r = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "db"), kind], capture_output=True, text=True, timeout=120, env=env
    )
    assert r.returncode == 0 and "refused:" in r.stdout and "not a regular file" in r.stdout, (r.stdout, r.stderr)


def test_save_refuses_a_symlink_planted_as_the_next_manifest(tmp_path, kind):
    """Opening a folder read-write makes the library write its next MANIFEST: a symlink of that name
    pointing out of the folder would redirect the write. The save is refused; the target is untouched."""
    _save(tmp_path / "db", kind)
    outside = tmp_path / "precious.txt"
    outside.write_text("keep me")
    for k in range(1, 40):
        name = f"MANIFEST-{k:06d}"
        if not (tmp_path / "db" / name).exists():
            os.symlink(outside, tmp_path / "db" / name)
    ws = Workspace()
    ws.feed_blob("q", np.ones(3, np.float32))
    with pytest.raises(DBError, match="symlink"):
        checkpoint.save(ws, str(tmp_path / "db"), db_type=kind)
    assert outside.read_text() == "keep me"


@pytest.mark.parametrize("content", [b"MANIFEST-999999\n", b"../../etc/passwd\n", b"M" * 100_000])
def test_damaged_current_is_refused(tmp_path, kind, content):
    _save(tmp_path / "db", kind)
    (tmp_path / "db" / "CURRENT").write_bytes(content)
    with pytest.raises(DBError, match="CURRENT"):
        checkpoint.load(Workspace(), str(tmp_path / "db"), db_type=kind)


def _cli(*args, cwd):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", PYTHONPATH=ROOT)
    return subprocess.run(
        [sys.executable, "-m", "framework", *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=300
    )


def test_rocksdb_whose_manifest_lost_its_tables_is_an_error_not_zero_records(tmp_path):
    pytest.importorskip("rocksdict")
    files = _save(tmp_path / "db", "rocksdb")
    manifest = tmp_path / "db" / next(f for f in files if f.startswith("MANIFEST-"))
    os.truncate(manifest, manifest.stat().st_size // 2)  # RocksDB then opens it as an empty DB
    r = _cli("convert-db", "db", "out.minidb", "--to", "minidb", cwd=tmp_path)
    assert r.returncode == 2 and "damaged" in r.stderr and "0 records" in r.stderr, r.stderr
    assert not (tmp_path / "out.minidb").exists()
    r = _cli("inspect", "db", cwd=tmp_path)
    assert r.returncode == 2 and "damaged" in r.stderr, (r.stdout, r.stderr)


def test_an_empty_db_still_inspects_as_empty(tmp_path, kind):
    from framework.db import Mode, open_db

    with open_db(kind, str(tmp_path / "db"), Mode.NEW):
        pass
    r = _cli("inspect", "db", cwd=tmp_path)
    assert r.returncode == 0 and "0 records" in r.stdout, r.stderr


@pytest.mark.parametrize("fmt,words", [("minidb", "no checksum of its own"), ("lmdb", "no checksum")])
def test_inspect_says_what_the_format_can_detect(tmp_path, fmt, words):
    _save(tmp_path / "ck", fmt)
    r = _cli("inspect", "ck", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert f"integrity ({fmt}): " in r.stdout and words in r.stdout, r.stdout


def test_lmdb_lock_file_symlinked_out_of_the_folder_is_refused(tmp_path):
    """LMDB opens lock.mdb read-write (also to read, when it exists): a symlink there would be written
    through. Loading and saving refuse it; the target is untouched."""
    pytest.importorskip("lmdb")
    _save(tmp_path / "db", "lmdb")
    outside = tmp_path / "precious.bin"
    outside.write_bytes(b"\0" * 8192)
    os.remove(tmp_path / "db" / "lock.mdb")
    os.symlink(outside, tmp_path / "db" / "lock.mdb")
    with pytest.raises(DBError, match="lock.mdb"):
        checkpoint.load(Workspace(), str(tmp_path / "db"), db_type="lmdb")
    ws = Workspace()
    ws.feed_blob("q", np.ones(3, np.float32))
    with pytest.raises(DBError, match="symlink"):
        checkpoint.save(ws, str(tmp_path / "db"), db_type="lmdb")
    assert outside.read_bytes() == b"\0" * 8192
