"""No crashes from files: a truncated lmdb data.mdb is a DBError before it is mapped (SIGBUS
otherwise), reading an lmdb creates no lock file beside someone else's data, and a DBReader
inside a checkpoint is restored as data only (its source is not opened)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from framework import checkpoint, core
from framework.db.reader import DBReader
from framework.errors import DBError, FrameworkError
from framework.memory.workspace import Workspace

pytest.importorskip("lmdb")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _lmdb_with_data(folder, n=300_000):
    ws = Workspace(str(folder))
    ws.feed_blob("w", np.arange(n, dtype=np.float32))
    ws.run_operator_once(core.CreateOperator("Save", ["w"], [], db="l", db_type="lmdb"))
    return folder / "l"


def test_truncated_lmdb_is_a_db_error_not_sigbus(tmp_path):
    db = _lmdb_with_data(tmp_path)
    os.truncate(db / "data.mdb", 16384)
    code = (
        "import sys\n"
        "from framework import core\n"
        "from framework.memory.workspace import Workspace\n"
        "from framework.errors import FrameworkError\n"
        f"ws = Workspace({str(tmp_path)!r})\n"
        "try:\n"
        "    ws.run_operator_once(core.CreateOperator('Load', [], ['w'], db='l', db_type='lmdb'))\n"
        "except FrameworkError as e:\n"
        "    print('ERR', type(e.__cause__ or e).__name__, str(e).splitlines()[0]); sys.exit(3)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=120)
    assert proc.returncode == 3, (proc.returncode, proc.stderr)  # -7 would be SIGBUS
    assert "DBError" in proc.stdout and "truncated" in proc.stdout and "data.mdb" in proc.stdout


@pytest.mark.parametrize("content", [b"", b"\x00" * 100, b"junk" * 2000])
def test_lmdb_with_a_garbage_data_file_is_a_db_error(tmp_path, content):
    folder = tmp_path / "l"
    folder.mkdir()
    (folder / "data.mdb").write_bytes(content)
    with pytest.raises(DBError, match="data.mdb"):
        DBReader(str(folder), "lmdb")


def test_reading_an_lmdb_without_lock_file_creates_nothing(tmp_path):
    db = _lmdb_with_data(tmp_path, 10)
    os.remove(db / "lock.mdb")
    before = sorted(os.listdir(db))
    reader = DBReader(str(db), "lmdb")
    assert reader.read()[0].startswith("w")
    reader.close()
    assert sorted(os.listdir(db)) == before


def test_a_dbreader_in_a_checkpoint_is_restored_without_opening_its_source(tmp_path):
    db = _lmdb_with_data(tmp_path, 10)
    ws = Workspace(str(tmp_path))
    ws.run_operator_once(core.CreateOperator("CreateDB", [], ["reader"], db="l", db_type="lmdb"))
    ckpt = str(tmp_path / "ckpt.minidb")
    checkpoint.save(ws, ckpt, ["reader"])
    os.rename(db, tmp_path / "moved")  # the source is gone: opening it would fail
    ws2 = Workspace(str(tmp_path))
    checkpoint.load(ws2, ckpt)
    reader = ws2.get_blob("reader").get(DBReader)
    assert not reader.is_open
    with pytest.raises(FrameworkError, match="data only"):
        reader.read()
