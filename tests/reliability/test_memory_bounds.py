"""(b) Memory follows the input: loading a checkpoint peaks at ~1.2x its size plus a fixed overhead,
and a tiny hostile checkpoint (dims promising terabytes, a shape-only tensor, a huge chunk) is an
error that allocates nothing big. Measured in subprocesses: the growth of the peak resident set over
the load (Linux: VmHWM reset through /proc/self/clear_refs after the warm-up, since a forked child
inherits the high-water mark of the parent it was forked from, here pytest's; elsewhere ru_maxrss)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from framework.db.minidb import encode_record
from framework.proto.framework_pb2 import BlobProto, TensorProto

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PEAK = """
import os, resource, sys
import numpy as np
from framework import checkpoint
from framework.errors import FrameworkError
from framework.memory.workspace import Workspace
path, db_type = sys.argv[1], sys.argv[2]
warm = Workspace()
warm.feed_blob("z", np.ones(10, np.float32))
checkpoint.save(warm, path + ".warm", db_type=db_type)
checkpoint.load(Workspace(), path + ".warm")


def status_bytes(field):
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024


try:
    with open("/proc/self/clear_refs", "w") as f:
        f.write("5")  # the peak (VmHWM) restarts from the current RSS
    base, peak_of = status_bytes("VmRSS"), lambda: status_bytes("VmHWM")
except OSError:
    base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    peak_of = lambda: resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
ws = Workspace()
try:
    checkpoint.load(ws, path)
    status = "loaded"
except FrameworkError as e:
    status = "error " + type(e).__name__
peak = peak_of()
print(status, peak - base)
"""


def _peak(path: str, db_type: str = "minidb") -> tuple[str, int]:
    proc = subprocess.run(
        [sys.executable, "-c", PEAK, path, db_type],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        env=dict(os.environ, OPENBLAS_NUM_THREADS="1"),
    )
    assert proc.returncode == 0, proc.stderr
    status, grown = proc.stdout.split("\n")[-2].rsplit(" ", 1)
    return status, int(grown)


@pytest.mark.parametrize("db_type", ["minidb", "lmdb"])
def test_loading_a_checkpoint_peaks_near_its_size(tmp_path, db_type):
    """lmdb: the pages of LMDB's map a read touched would stay resident beside the tensors built
    from them (~2.2x); its cursor releases each value's pages once copied out."""
    from framework import checkpoint
    from framework.memory.workspace import Workspace

    if db_type == "lmdb":
        pytest.importorskip("lmdb")
    ws = Workspace()
    rng = np.random.default_rng(0)
    for i in range(12):
        ws.feed_blob(f"p{i}", rng.standard_normal(1 << 20).astype(np.float32))
    path = str(tmp_path / f"big.{db_type}")
    checkpoint.save(ws, path, db_type=db_type)
    if os.path.isdir(path):
        size = sum(os.path.getsize(os.path.join(path, f)) for f in os.listdir(path))
    else:
        size = os.path.getsize(path)
    status, grown = _peak(path, db_type)
    assert status == "loaded"
    print(f"{db_type}: loading {size} bytes grew the peak by {grown} bytes ({grown / size:.2f}x)")
    assert grown <= 1.2 * size + (24 << 20), f"loading {size} bytes grew the peak by {grown} bytes"


def _write(path, records) -> int:
    data = b"".join(encode_record(k, v) for k, v in records)
    with open(path, "wb") as f:
        f.write(data)
    return len(data)


def test_tiny_hostile_checkpoints_allocate_nothing_big(tmp_path):
    huge = TensorProto(dims=[1 << 20, 1 << 20], data_type=TensorProto.FLOAT)
    huge.segment.begin, huge.segment.end = 0, 1
    huge.float_data.append(1.0)
    shape_only = TensorProto(dims=[1 << 40], data_type=TensorProto.FLOAT, storage_type=TensorProto.NO_CONTENT)
    strings = TensorProto(dims=[1 << 40], data_type=TensorProto.STRING)
    cases = {
        "chunk": [("w#%0", BlobProto(name="w", type="Tensor", tensor=huge).SerializeToString())],
        "shape-only": [("w", BlobProto(name="w", type="Tensor", tensor=shape_only).SerializeToString())],
        "strings": [("w", BlobProto(name="w", type="Tensor", tensor=strings).SerializeToString())],
    }
    for label, records in cases.items():
        path = str(tmp_path / f"{label}.minidb")
        size = _write(path, records)
        assert size < 100
        status, grown = _peak(path)
        assert grown < (16 << 20), f"{label}: a {size}-byte file grew the peak by {grown} bytes ({status})"
        assert status in ("loaded", "error DBError", "error SerializationError"), (label, status)
