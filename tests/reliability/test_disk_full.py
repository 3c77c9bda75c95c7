"""(d) Disk full during a save: with a tiny file-size limit (RLIMIT_FSIZE) a checkpoint save is a
DBError naming the file, the temporary file is removed, and the previous checkpoint stays intact."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SCRIPT = """
import os, resource, signal, sys
import numpy as np
from framework import checkpoint
from framework.errors import DBError
from framework.memory.workspace import Workspace
folder, db_type = sys.argv[1], sys.argv[2]
path = os.path.join(folder, "ckpt")
ws = Workspace()
ws.feed_blob("w", np.arange(100, dtype=np.float32))
checkpoint.save(ws, path, db_type=db_type)
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # writes past the limit fail with EFBIG instead of killing us
resource.setrlimit(resource.RLIMIT_FSIZE, (256 << 10, resource.RLIM_INFINITY))
ws.feed_blob("w", np.ones(1 << 20, np.float32))  # 4 MiB: does not fit
try:
    checkpoint.save(ws, path, db_type=db_type)
except DBError as e:
    print("DBError:", str(e).splitlines()[0])
else:
    print("saved?!")
resource.setrlimit(resource.RLIMIT_FSIZE, (resource.RLIM_INFINITY, resource.RLIM_INFINITY))
print("files:", sorted(os.listdir(folder)))
ws2 = Workspace()
checkpoint.load(ws2, path, db_type=db_type)
print("previous:", ws2.fetch_blob("w").tolist() == list(range(100)))
"""


@pytest.mark.parametrize("db_type", ["minidb", "lmdb"])
def test_disk_full_is_a_db_error_and_keeps_the_previous_checkpoint(tmp_path, db_type):
    if db_type == "lmdb":
        pytest.importorskip("lmdb")
    proc = subprocess.run(
        [sys.executable, "-c", SCRIPT, str(tmp_path), db_type],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        env=dict(os.environ, OPENBLAS_NUM_THREADS="1"),
    )
    assert proc.returncode == 0, proc.stderr
    out = proc.stdout
    assert "DBError:" in out and str(tmp_path / "ckpt") in out, out
    assert "files: ['ckpt']" in out, out  # no temporary file left behind
    assert "previous: True" in out, out
