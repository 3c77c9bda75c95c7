"""Saving is atomic: SIGKILL a saving process at random moments; the previous checkpoint always loads bit-exact."""

import os
import random
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from framework import checkpoint
from framework.memory.workspace import Workspace

N_TENSORS = 16  # x 4 MiB = 64 MiB: the kill window follows the save's measured time, whatever its size
ELEMS = 1 << 20

# A zygote imports the framework once and forks one saving child per request, so each of the
# many kills costs a fork, not an interpreter start. The test SIGKILLs the child mid-save.
ZYGOTE = r"""
import os, sys, numpy as np
from framework import checkpoint
from framework.memory.tensor import Tensor
from framework.memory.workspace import Workspace
path, db_type, n, elems = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
# Made once before forking; a child writes only element 0 of each (copy-on-write: one page).
arrays = [np.arange(elems, dtype=np.float32) + np.float32(j) for j in range(n)]
for line in sys.stdin:
    version = int(line)
    pid = os.fork()
    if pid == 0:
        try:
            ws = Workspace()
            for j, a in enumerate(arrays):
                a[0] = version * 1000 + j
                t = Tensor()
                t.share_external(a)
                ws.create_blob(f"t{j:03d}").reset(t)
            sys.stdout.write(f"ready {os.getpid()}\n")
            sys.stdout.flush()
            checkpoint.save(ws, path, db_type=db_type)
            sys.stdout.write("done\n")
            sys.stdout.flush()
        finally:
            os._exit(0)
    sys.stdin.readline()  # reap only when told: until then the pid cannot be reused
    _, status = os.waitpid(pid, 0)
    sys.stdout.write(f"exit {status}\n")
    sys.stdout.flush()
"""


def saved_version(path, n, elems):
    """The version whose save wrote the checkpoint at ``path``, after checking every tensor bit for bit
    against what the zygote's child writes for it (all ``n`` from one version: a mix is no version)."""
    ws = Workspace()
    names = checkpoint.load(ws, path)
    assert sorted(names) == [f"t{j:03d}" for j in range(n)]
    rest = np.arange(1, elems, dtype=np.float32)  # elements 1: of tensor j are rest + j in every version
    versions = set()
    for j in range(n):
        got = np.ascontiguousarray(ws.get_blob(f"t{j:03d}").get_tensor().data())
        assert got.dtype == np.float32 and got.shape == (elems,), (j, got.dtype, got.shape)
        assert np.array_equal(got[1:].view(np.uint32), (rest + np.float32(j)).view(np.uint32)), j
        version, off = divmod(int(got[0]) - j, 1000)
        assert got[0] == np.float32(version * 1000 + j) and off == 0, (j, got[0])
        versions.add(version)
    assert len(versions) == 1, f"tensors of several saves: {sorted(versions)}"
    return versions.pop()


class Zygote:
    def __init__(self, path, db_type, n, elems):
        env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.getcwd(), *sys.path]))
        self.proc = subprocess.Popen(
            [sys.executable, "-c", ZYGOTE, path, db_type, str(n), str(elems)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            env=env,
            text=True,
        )

    def start_save(self, version):
        """Fork a child that saves ``version``; returns its pid once it starts saving."""
        self.proc.stdin.write(f"{version}\n")
        self.proc.stdin.flush()
        line = self.proc.stdout.readline()
        assert line.startswith("ready "), line
        return int(line.split()[1])

    def wait(self):
        """Reap the child; True if its save finished."""
        self.proc.stdin.write("reap\n")
        self.proc.stdin.flush()
        lines = []
        while not lines or not lines[-1].startswith("exit "):
            lines.append(self.proc.stdout.readline())
            assert lines[-1], "the zygote died"
        return "done\n" in lines

    def close(self):
        self.proc.stdin.close()
        self.proc.wait(timeout=30)


def crash_loop(tmp_path, db_type, kills, n, elems):
    path = str(tmp_path / f"ckpt.{db_type}")
    zygote = Zygote(path, db_type, n, elems)
    try:
        zygote.start_save(0)
        t = time.perf_counter()
        assert zygote.wait()
        save_time = time.perf_counter() - t
        assert saved_version(path, n, elems) == 0
        committed, mid_save, rng = 0, 0, random.Random(1234)
        for version in range(1, kills + 1):
            pid = zygote.start_save(version)
            time.sleep(rng.uniform(0, 1.2 * save_time))
            os.kill(pid, signal.SIGKILL)
            finished = zygote.wait()
            mid_save += not finished
            # Keep the kill window on the save's real duration, which a busy machine changes.
            save_time *= 0.85 if finished else 1.05
            got = saved_version(path, n, elems)
            assert got in (committed, version), f"kill {version}: the checkpoint is neither the old nor the new one"
            committed = got
        # the next save still works (and cleans the killed savers' temporaries)
        zygote.start_save(999)
        assert zygote.wait()
        assert saved_version(path, n, elems) == 999
    finally:
        zygote.close()
    return mid_save, save_time


@pytest.mark.slow
def test_sigkill_while_saving_minidb_never_loses_the_checkpoint(tmp_path):
    kills = 50 if os.environ.get("FRAMEWORK_ADVERSARIAL_FULL") else 20  # the full run: more kills
    mid_save, save_time = crash_loop(tmp_path, "minidb", kills, N_TENSORS, ELEMS)
    # most kills must land before the save finished (the point of the test)
    assert mid_save >= kills * 2 // 5, (mid_save, save_time)
    assert [f for f in os.listdir(tmp_path) if ".tmp-" in f] == []


@pytest.mark.slow
def test_sigkill_while_saving_lmdb_never_loses_the_checkpoint(tmp_path):
    mid_save, save_time = crash_loop(tmp_path, "lmdb", 10, 16, ELEMS)
    assert mid_save >= 2, (mid_save, save_time)


@pytest.mark.slow
@pytest.mark.parametrize("db_type", ["leveldb", "rocksdb"])
def test_sigkill_while_saving_sorted_kv_never_loses_the_checkpoint(tmp_path, db_type):
    # A synced write batch of 16 x 4 MiB: the kills land in the batch build, the log write or the sync.
    mid_save, save_time = crash_loop(tmp_path, db_type, 10, 16, ELEMS)
    assert mid_save >= 2, (mid_save, save_time)
