"""framework/kernels/cached_jit.py: a process whose kernels all come from numba's on-disk cache loads them
without numba's compiler set-up (its linear-algebra registry is never imported) and computes what a
numpy reference computes."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import framework

ROOT = Path(framework.__file__).resolve().parents[1]

CODE = textwrap.dedent(
    """
    import json, sys
    import numpy as np
    from framework.core import CreateOperator
    from framework.memory.workspace import Workspace
    from framework.kernels import kernel_support

    rng = np.random.default_rng(0)
    x = rng.standard_normal((1, 16, 20, 20)).astype(np.float32)
    w = rng.standard_normal((32, 16, 3, 3)).astype(np.float32)
    b = rng.standard_normal(32).astype(np.float32)
    ws = Workspace()
    for k, v in dict(x=x, w=w, b=b).items():
        ws.feed_blob(k, v)
    ws.run_operator_once(CreateOperator("Conv", ["x", "w", "b"], ["y"], kernel=3, pad=1))
    y = ws.fetch_blob("y")
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    ref = np.zeros((1, 32, 20, 20))
    for i in range(3):
        for j in range(3):
            ref += np.einsum("nchw,mc->nmhw", xp[:, :, i : i + 20, j : j + 20], w[:, :, i, j].astype(np.float64))
    ref += b[None, :, None, None]
    print(json.dumps({
        "err": float(np.abs(y - ref).max()),
        "kernels": len(kernel_support._COMPILED),
        "hits": sum(sum(f._cache_hits.values()) for f in kernel_support._COMPILED if hasattr(f, "_cache_hits")),
        "misses": sum(sum(f._cache_misses.values()) for f in kernel_support._COMPILED if hasattr(f, "_cache_misses")),
        "registries": "numba.np.arraymath" in sys.modules,
    }))
    """
)


def _run() -> dict:
    out = subprocess.run([sys.executable, "-c", CODE], capture_output=True, text=True, cwd=ROOT, timeout=600)
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_cached_kernels_load_without_the_compiler_and_compute_the_same():
    pytest.importorskip("numba")
    first = _run()  # compiles what the cache lacks (numba's own path) and fills the cache
    if not first["kernels"]:
        pytest.skip("no compiled kernel runs a conv on this machine")
    assert first["err"] < 1e-3
    again = _run()
    assert again["err"] == first["err"]  # the same machine code
    assert again["kernels"] == first["kernels"] and again["hits"] >= 1 and again["misses"] == 0
    assert not again["registries"]


def test_processes_starting_together_compile_each_kernel_once(tmp_path):
    """Two processes on an empty cache: each kernel is compiled by one of them (the compile lock), the
    other loads it; both compute the same numbers."""
    pytest.importorskip("numba")
    env = dict(__import__("os").environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"), PYTHONPATH=str(ROOT))
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", CODE], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
        )
        for _ in range(2)
    ]
    outs = []
    for p in procs:
        stdout, stderr = p.communicate(timeout=600)
        assert p.returncode == 0, stderr[-3000:]
        outs.append(json.loads(stdout.strip().splitlines()[-1]))
    a, b = outs
    if not a["kernels"]:
        pytest.skip("no compiled kernel runs a conv on this machine")
    assert a["err"] == b["err"] and a["err"] < 1e-3
    assert a["kernels"] == b["kernels"]
    assert a["misses"] + b["misses"] == a["kernels"], (a, b)  # without the lock: each process compiles all
    assert a["hits"] + b["hits"] == a["kernels"]


# one small plain-numba kernel (ReluGradient's pass), so the three processes below compile little
RELU_GRAD = textwrap.dedent(
    """
    import json
    import numpy as np
    from framework.core import CreateOperator
    from framework.memory.workspace import Workspace
    from framework.kernels import kernel_support

    rng = np.random.default_rng(0)
    y = np.maximum(rng.standard_normal((4, 8, 5, 5)), 0).astype(np.float32)
    dy = rng.standard_normal(y.shape).astype(np.float32)
    ws = Workspace()
    ws.feed_blob("y", y)
    ws.feed_blob("dy", dy)
    ws.run_operator_once(CreateOperator("ReluGradient", ["y", "dy"], ["dx"]))
    print(json.dumps({
        "err": float(np.abs(ws.fetch_blob("dx") - np.where(y > 0, dy, 0)).max()),
        "kernels": len(kernel_support._COMPILED),
        "misses": sum(sum(f._cache_misses.values()) for f in kernel_support._COMPILED if hasattr(f, "_cache_misses")),
    }))
    """
)


def test_a_change_elsewhere_in_the_kernels_package_recompiles(tmp_path):
    """A kernel's cache entry is stamped with every module of framework/kernels, not only its own file: with
    another module changed (here: a different package stamp), the cached kernel is not reused."""
    pytest.importorskip("numba")
    env = dict(__import__("os").environ, NUMBA_CACHE_DIR=str(tmp_path / "numba"), PYTHONPATH=str(ROOT))

    def run(prefix: str = "") -> dict:
        out = subprocess.run(
            [sys.executable, "-c", prefix + RELU_GRAD], capture_output=True, text=True, cwd=ROOT, timeout=600, env=env
        )
        assert out.returncode == 0, out.stderr[-3000:]
        return json.loads(out.stdout.strip().splitlines()[-1])

    first = run()
    if not first["kernels"]:
        pytest.skip("no compiled kernel runs ReluGradient on this machine")
    assert first["err"] == 0 and first["misses"] >= 1  # compiled into the empty cache
    assert run()["misses"] == 0  # unchanged package: every kernel from the cache
    changed = run("import framework.kernels.cached_jit as c; c._STAMP.append(('simd_ir.py', 1, 2))\n")
    assert changed["misses"] >= 1 and changed["err"] == 0
