"""Damaging every file of a checkpoint of each DB kind (leveldb, rocksdb, lmdb): truncated to half,
emptied, bits flipped, replaced by a symlink to /dev/zero. Each load ends in a FrameworkError or in the
exact values saved: never changed values, a raw library error, a crash or a hang (each kind runs in a
child with a timeout). FRAMEWORK_FUZZ_FULL=1 flips bits at 40 seeds per file instead of 3."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
LIBS = {"leveldb": "plyvel", "rocksdb": "rocksdict", "lmdb": "lmdb"}

CHILD = """
import os, random, shutil, sys, tempfile
import numpy as np
from framework import checkpoint
from framework.errors import FrameworkError
from framework.memory.workspace import Workspace
kind, base, seeds = sys.argv[1], sys.argv[2], int(sys.argv[3])
want = {f"p{i}": np.arange(700, dtype=np.float32) * (i + 1) for i in range(4)}
ws = Workspace()
for k, v in want.items():
    ws.feed_blob(k, v)
src = os.path.join(base, "src")
checkpoint.save(ws, src, db_type=kind)
def flips(seed):
    def f(p):
        b = bytearray(open(p, "rb").read())
        rng = random.Random(seed)
        for _ in range(rng.randint(1, 4)):
            if b:
                b[rng.randrange(len(b))] ^= 1 << rng.randrange(8)
        open(p, "wb").write(b)
    return f
def half(p):
    os.truncate(p, os.path.getsize(p) // 2)
def empty(p):
    open(p, "wb").close()
def dev_zero(p):
    os.remove(p); os.symlink("/dev/zero", p)
damages = [("half", half), ("empty", empty), ("dev_zero", dev_zero)] + [(f"flip{s}", flips(s)) for s in range(seeds)]
tried = bad = 0
for name in sorted(os.listdir(src)):
    for label, damage in damages:
        d = os.path.join(base, f"{name}-{label}")
        shutil.copytree(src, d)
        damage(os.path.join(d, name))
        tried += 1
        w = Workspace()
        try:
            checkpoint.load(w, d, db_type=kind)
        except FrameworkError:
            continue
        except Exception as e:
            bad += 1; print("RAW", name, label, type(e).__name__, e); continue
        if sorted(w.blobs()) != sorted(want) or any(not np.array_equal(w.fetch_blob(k), v) for k, v in want.items()):
            bad += 1; print("CHANGED", name, label)
        shutil.rmtree(d)
print("tried", tried, "violations", bad)
"""


@pytest.mark.parametrize("kind", sorted(LIBS))
def test_damaged_files_of_each_db_kind(tmp_path, kind):
    pytest.importorskip(LIBS[kind])
    seeds = 40 if os.environ.get("FRAMEWORK_FUZZ_FULL") == "1" else 3
    env = dict(os.environ, PYTHONPATH=ROOT, OPENBLAS_NUM_THREADS="1")
    r = subprocess.run(
        [sys.executable, "-c", CHILD, kind, str(tmp_path), str(seeds)],
        capture_output=True,
        text=True,
        timeout=600,
        env=env,
    )
    assert r.returncode == 0, r.stderr[-3000:]
    assert "violations 0" in r.stdout, r.stdout[-3000:]
