"""(b) Fuzzing LMDB checkpoints (bit flips in data.mdb) in a subprocess, so a crash shows as a
failure instead of killing the test run: only DBErrors (checksums, damaged pages), never a raw
lmdb error, never a crash. Plus the silent-wrong-load cases: an unknown data_type and a 0-byte
file are errors."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from framework import checkpoint
from framework.db.minidb import encode_record
from framework.errors import FrameworkError
from framework.memory.workspace import Workspace
from framework.proto.framework_pb2 import BlobProto, TensorProto

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

FUZZ = """
import os, random, sys, tempfile
import numpy as np
from framework import checkpoint
from framework.errors import FrameworkError
from framework.memory.workspace import Workspace
d = tempfile.mkdtemp(dir=sys.argv[2])
ws = Workspace()
for i in range(5):
    ws.feed_blob(f"p{i}", np.arange(3000, dtype=np.float32) * i)
src = os.path.join(d, "src")
checkpoint.save(ws, src, db_type="lmdb")
raw = open(os.path.join(src, "data.mdb"), "rb").read()
rng = random.Random(int(sys.argv[1]))
for trial in range(40):
    b = bytearray(raw)
    for _ in range(rng.randint(1, 8)):
        p = rng.randrange(len(b))
        b[p] ^= 1 << rng.randrange(8)
    dst = os.path.join(d, f"t{trial}")
    os.makedirs(dst)
    open(os.path.join(dst, "data.mdb"), "wb").write(bytes(b))
    try:
        checkpoint.load(Workspace(), dst, db_type="lmdb")
    except FrameworkError:
        pass
    except Exception as e:
        print("RAW", type(e).__name__, e)
print("done")
"""


@pytest.mark.parametrize("seed", [1, 2])
def test_bit_flipped_lmdb_checkpoints_give_db_errors_only(tmp_path, seed):
    pytest.importorskip("lmdb")
    proc = subprocess.run(
        [sys.executable, "-c", FUZZ, str(seed), str(tmp_path)],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        env=dict(os.environ, OPENBLAS_NUM_THREADS="1"),
    )
    assert proc.returncode == 0, f"the process died ({proc.returncode}): {proc.stderr[-2000:]}"
    assert "RAW" not in proc.stdout and "done" in proc.stdout, proc.stdout


def test_unknown_data_type_is_an_error(tmp_path):
    t = TensorProto(dims=[2], data_type=TensorProto.INT32, int32_data=[1, 2])
    raw = bytearray(BlobProto(name="w", type="Tensor", tensor=t).SerializeToString())
    at = raw.index(bytes([0x10, TensorProto.INT32]))  # field 2 (data_type), varint
    raw[at + 1] = 99  # not a DataType: protobuf would read the tensor as FLOAT (the default)
    path = tmp_path / "u.minidb"
    path.write_bytes(encode_record("w", bytes(raw)))
    with pytest.raises(FrameworkError, match="data_type"):
        checkpoint.load(Workspace(), str(path))


def test_zero_byte_checkpoint_is_an_error(tmp_path):
    path = tmp_path / "empty.minidb"
    path.write_bytes(b"")
    ws = Workspace()
    ws.feed_blob("keep", np.ones(2, np.float32))
    with pytest.raises(FrameworkError, match="no blobs|empty"):
        checkpoint.load(ws, str(path))
    assert ws.blobs() == ["keep"]
