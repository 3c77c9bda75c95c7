"""(b) Memory follows the input: loading a checkpoint peaks at ~1.2x its size plus a fixed overhead,
and a tiny hostile checkpoint (dims promising terabytes, a shape-only tensor, a huge chunk) is an
error that allocates nothing big. Measured in subprocesses with ru_maxrss."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np

from framework.db.minidb import encode_record
from framework.proto.framework_pb2 import BlobProto, TensorProto

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

PEAK = """
import resource, sys
import numpy as np
from framework import checkpoint
from framework.errors import FrameworkError
from framework.memory.workspace import Workspace
path = sys.argv[1]
warm = Workspace()
warm.feed_blob("z", np.ones(10, np.float32))
checkpoint.save(warm, path + ".warm")
checkpoint.load(Workspace(), path + ".warm")
base = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
ws = Workspace()
try:
    checkpoint.load(ws, path)
    status = "loaded"
except FrameworkError as e:
    status = "error " + type(e).__name__
peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
print(status, peak - base)
"""


def _peak(path: str) -> tuple[str, int]:
    proc = subprocess.run(
        [sys.executable, "-c", PEAK, path],
        capture_output=True,
        text=True,
        cwd=ROOT,
        timeout=300,
        env=dict(os.environ, OPENBLAS_NUM_THREADS="1"),
    )
    assert proc.returncode == 0, proc.stderr
    status, grown = proc.stdout.split("\n")[-2].rsplit(" ", 1)
    return status, int(grown)


def test_loading_a_checkpoint_peaks_near_its_size(tmp_path):
    from framework import checkpoint
    from framework.memory.workspace import Workspace

    ws = Workspace()
    rng = np.random.default_rng(0)
    for i in range(12):
        ws.feed_blob(f"p{i}", rng.standard_normal(1 << 20).astype(np.float32))
    path = str(tmp_path / "big.minidb")
    checkpoint.save(ws, path)
    size = os.path.getsize(path)
    status, grown = _peak(path)
    assert status == "loaded"
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
