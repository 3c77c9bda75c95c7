"""Save and Load throughput: 100 tensors of 4 MiB (400 MiB) through every DB kind that holds
checkpoints (minidb, lmdb, leveldb, rocksdb), against an atomic plain-file write/read of the
same bytes (the floor). protodb holds TensorProtos, not checkpoints, so it is not a contender.

    python -m bench.save_load [--rounds 5] [--dir /tmp] [--kinds minidb,lmdb,leveldb,rocksdb] [--no-memory]

Every contender is atomic: the plain file is written to a temporary file,
fsynced, renamed over the target and the directory fsynced, exactly as minidb
does. Reported: median GB/s (1 GB = 2**30 bytes) over interleaved rounds, and
each ratio to the plain file. Target: minidb >= 0.8 GB/s both ways; a checkpoint with
per-record checksums (as framework.checkpoint writes) loads, checks included, at >= 1.2 GB/s.

Memory: each kind's load also runs once in a fresh subprocess, reporting how much its peak resident
set grows over the load (Linux VmHWM, reset after the imports) against the checkpoint's size on disk.
Target: <= 1.2x; lmdb's cursor copies each value out and releases the mapped pages it read, which
would otherwise stay resident beside the tensors built from them.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile

import numpy as np

from bench.common import markdown_table, pin_blas_threads, time_round_robin
from framework.db.blobs import read_blobs, write_blobs
from framework.memory.tensor import Tensor

N_TENSORS = 100
ELEMS = (4 << 20) // 4  # 4 MiB of float32 each


def make_tensors() -> list[tuple[str, Tensor]]:
    rng = np.random.default_rng(0)
    out = []
    for i in range(N_TENSORS):
        t = Tensor()
        t.share_external(rng.standard_normal(ELEMS, dtype=np.float32))
        out.append((f"param_{i:03d}", t))
    return out


def plain_save(path: str, tensors: list[tuple[str, Tensor]]) -> None:
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        for _, t in tensors:
            f.write(memoryview(t.data()).cast("B"))
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(os.path.dirname(path), os.O_RDONLY)
    os.fsync(fd)
    os.close(fd)


def plain_load(path: str) -> list[np.ndarray]:
    out = []
    with open(path, "rb") as f:
        for _ in range(N_TENSORS):
            buf = np.empty(ELEMS, dtype=np.float32)
            f.readinto(memoryview(buf).cast("B"))
            out.append(buf)
    return out


PEAK = """
import sys
from framework.db.blobs import read_blobs

def status(field):
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) * 1024 for line in f if line.startswith(field + ":"))

kind, path = sys.argv[1], sys.argv[2]
with open("/proc/self/clear_refs", "w") as f:
    f.write("5")
base = status("VmRSS")
staged = read_blobs([(kind, path)], None)
print(status("VmHWM") - base)
"""


def disk_size(path: str) -> int:
    if os.path.isdir(path):
        return sum(os.path.getsize(os.path.join(d, f)) for d, _, files in os.walk(path) for f in files)
    return os.path.getsize(path)


def load_peak(kind: str, path: str) -> int | None:
    """Growth of the peak resident set of a fresh process loading ``path`` (None off Linux)."""
    if not os.path.exists("/proc/self/clear_refs"):
        return None
    proc = subprocess.run(
        [sys.executable, "-c", PEAK, kind, path],
        capture_output=True,
        text=True,
        env=dict(os.environ, OPENBLAS_NUM_THREADS="1"),
        check=True,
    )
    return int(proc.stdout.split()[-1])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--dir", default=None, help="folder for the files (default: a temporary folder)")
    p.add_argument("--kinds", default="minidb,lmdb,leveldb,rocksdb", help="DB kinds, comma-separated")
    p.add_argument("--no-memory", action="store_true", help="skip the load peak-memory measurement")
    args = p.parse_args(argv)
    pin_blas_threads(1)
    folder = tempfile.mkdtemp(prefix="bench_save_load_", dir=args.dir)
    try:
        tensors = make_tensors()
        nbytes = N_TENSORS * ELEMS * 4
        kinds = [k for k in args.kinds.split(",") if k]
        plain = os.path.join(folder, "plain.bin")
        paths = {k: os.path.join(folder, f"ckpt.{k}") for k in kinds}
        wanted = {n: n for n, _ in tensors}

        saves_fns = {"plain file save": lambda: plain_save(plain, tensors)}
        loads_fns = {"plain file load": lambda: plain_load(plain)}
        for k in kinds:
            saves_fns[f"{k} save"] = lambda k=k: write_blobs(k, paths[k], tensors)
            loads_fns[f"{k} load"] = lambda k=k: read_blobs([(k, paths[k])], wanted)
        if "minidb" in kinds:  # a checkpoint as framework.checkpoint writes it: manifest + per-record checksums
            checked = os.path.join(folder, "ckpt.checked.minidb")
            saves_fns["minidb save (checksums)"] = lambda: write_blobs("minidb", checked, tensors, manifest=True)
            loads_fns["minidb load (checksums)"] = lambda: read_blobs([("minidb", checked)], wanted)
        saves = time_round_robin(saves_fns, rounds=args.rounds, inner=1, warmup=1)
        loads = time_round_robin(loads_fns, rounds=args.rounds, inner=1, warmup=1)
        # sanity: what was saved loads back bit-exact
        for k in kinds:
            staged = read_blobs([(k, paths[k])], wanted)
            assert all(np.array_equal(staged[n].get_tensor().data(), t.data()) for n, t in tensors), k

        rows = []
        for kind, timings in (("save", saves), ("load", loads)):
            floor = timings[f"plain file {kind}"]
            for name, sec in timings.items():
                rows.append([name, f"{sec * 1e3:.0f} ms", f"{nbytes / sec / 2**30:.2f}", f"{sec / floor:.2f}x"])
        print(f"{N_TENSORS} tensors x 4 MiB = {nbytes / 2**20:.0f} MiB, median of {args.rounds} rounds")
        print(markdown_table(rows, ["contender", "median", "GB/s", "time vs plain file"]))
        if not args.no_memory:
            mem_rows = []
            for k in kinds:
                size, grown = disk_size(paths[k]), load_peak(k, paths[k])
                if grown is not None:
                    mem_rows.append(
                        [
                            f"{k} load",
                            f"{size / 2**20:.0f} MiB",
                            f"{grown / 2**20:.0f} MiB",
                            f"{grown / nbytes:.2f}x",
                            f"{grown / size:.2f}x",
                        ]
                    )
            if mem_rows:
                print("\nload peak memory (fresh process; growth of the peak RSS over the load; target <= 1.2x)")
                print(markdown_table(mem_rows, ["contender", "on disk", "peak growth", "vs tensor bytes", "vs disk"]))
        if "minidb" in kinds:
            mini = min(nbytes / saves["minidb save"], nbytes / loads["minidb load"]) / 2**30
            print(f"minidb slowest direction: {mini:.2f} GB/s (target >= 0.8)")
            checked_load = nbytes / loads["minidb load (checksums)"] / 2**30
            print(f"minidb load with checksums checked: {checked_load:.2f} GB/s (target >= 1.2)")
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
