"""The per-machine dispatch table (framework/kernels/dispatch_table.py, written by ``framework tune``)
and the kernels' cache in the user cache folder (``framework warmup``, machine.py)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from framework.kernels import dispatch_table, machine, tuning
from framework.kernels.dispatch_table import THRESHOLDS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

# conv_kind of a 3x3 stride-1 conv 16 -> 16 channels onto 20x20 (too few outputs for the channel-lane
# kernel, too few channels for Winograd): direct from DIRECT_OW = 5 columns on, im2col below
_KIND = """
from framework.kernels import conv_nchw
from framework.kernels.geometry import Geometry
from framework.kernels.dispatch_table import THRESHOLDS
geo = Geometry((20, 20), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1), (20, 20))
print(THRESHOLDS["DIRECT_OW"], conv_nchw.conv_kind(geo, 16, 16, 1))
"""


def _python(code: str, cache, path=ROOT, **env) -> str:
    """stdout of ``code`` in a fresh process importing framework from ``path``, with the user cache
    folder ``cache`` (numba's own cache setting removed: the kernels cache under it)."""
    base = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR", "FRAMEWORK_NO_TUNED")}
    env = dict(base, FRAMEWORK_CACHE_DIR=str(cache), PYTHONPATH=str(path), **env)
    out = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=str(path), capture_output=True, text=True, timeout=600
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return out.stdout


def _write(cache, key: str, file_key: str | None = None, **values) -> None:
    path = cache / "dispatch" / f"{file_key or key}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"key": key, "thresholds": values}))


def test_a_tuned_table_is_read_and_changes_dispatch(tmp_path):
    pytest.importorskip("numba")
    assert _python(_KIND, tmp_path).split() == ["5", "direct"]  # no table: the shipped default
    key = _python("from framework.kernels import machine; print(machine.machine_key())", tmp_path).strip()
    _write(tmp_path, key, DIRECT_OW=32)
    assert _python(_KIND, tmp_path).split() == ["32", "im2col"]
    assert _python(_KIND, tmp_path, FRAMEWORK_NO_TUNED="1").split() == ["5", "direct"]


def test_a_table_for_another_machine_is_ignored(tmp_path):
    pytest.importorskip("numba")
    key = _python("from framework.kernels import machine; print(machine.machine_key())", tmp_path).strip()
    other = key.replace("numba", "numba0.1-") + "-other-cpu"
    _write(tmp_path, other, DIRECT_OW=32)  # its own file
    _write(tmp_path, other, file_key=key, DIRECT_OW=32)  # copied under this machine's name
    assert _python(_KIND, tmp_path).split() == ["5", "direct"]


def test_load_keeps_known_non_negative_integers(tmp_path, monkeypatch):
    monkeypatch.setenv("FRAMEWORK_CACHE_DIR", str(tmp_path))
    key = machine.machine_key()
    _write(tmp_path, key, DIRECT_OW=7, BLOCK_P=-1, THIN_M=2.5, CHANNEL_OW="9", NOT_A_THRESHOLD=3, WINOGRAD_T=True)
    assert dispatch_table.load() == {"DIRECT_OW": 7}
    (tmp_path / "dispatch" / f"{key}.json").write_text("{not json")
    assert dispatch_table.load() == {}
    written = dispatch_table.write({"CHANNEL_OW": 10}, {"CHANNEL_OW": [[7, "a", 1.0, "b", 2.0]]})
    assert written == dispatch_table.table_path() and dispatch_table.load() == {"CHANNEL_OW": 10}
    assert dispatch_table.thresholds()["CHANNEL_OW"] == 10 and dispatch_table.thresholds()["BLOCK_P"] == 128
    with pytest.raises(ValueError, match="unknown dispatch thresholds"):
        dispatch_table.write({"NOPE": 1})


def test_cache_folder_follows_xdg(monkeypatch, tmp_path):
    monkeypatch.delenv("FRAMEWORK_CACHE_DIR", raising=False)
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path))
    assert machine.cache_dir() == tmp_path / "framework"
    monkeypatch.delenv("XDG_CACHE_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert machine.cache_dir() == tmp_path / "home" / ".cache" / "framework"


def test_crossover_rules():
    """The threshold that runs the sweep's shapes fastest by the sum of log time ratios."""
    axis = (32, 64, 96, 128)
    rows = [(32, "a", 1.0, "b", 2.0), (64, "a", 1.0, "b", 1.5), (96, "a", 2.0, "b", 1.0), (128, "a", 1.0, "b", 1.1)]
    assert tuning.crossover(rows, "last_first", axis) == 64
    assert tuning.crossover(rows, "first_second", axis) == 96
    noisy = [(7, "a", 1.0, "b", 1.1), (10, "a", 1.2, "b", 1.0), (14, "a", 1.0, "b", 2.0), (20, "a", 1.0, "b", 2.0)]
    assert tuning.crossover(noisy, "last_first", (7, 10, 14, 20)) == 20  # one lost point does not end the run
    lose = [(32, "a", 3.0, "b", 2.0)]
    assert tuning.crossover(lose, "last_first", (32,)) == 0
    assert tuning.crossover(lose, "first_second", (32,)) == 32
    win = [(32, "a", 1.0, "b", 2.0)]
    assert tuning.crossover(win, "first_second", (32,)) == 33
    assert tuning.crossover(win, "last_first", (32,)) == 32


@pytest.mark.parametrize("sweep", tuning.SWEEPS, ids=[s.name for s in tuning.SWEEPS])
def test_each_sweep_separates_its_kernels(sweep):
    """Along the whole axis the two sides of a sweep give every shape different kernels."""
    from framework.kernels import kernel_support, window_jit

    if not (window_jit.available() and all(kernel_support.usable(f) for f in sweep.needs)):
        pytest.skip("its kernels are not usable here")
    got = [tuning.kinds(sweep, v) for v in sweep.axis]
    assert all(a != b for a, b in got), got


def test_a_sweep_measures_both_kernels(monkeypatch):
    """Each side of a sweep really runs the kernel it names (conv_nchw's constants forced, then restored)."""
    from framework.kernels import kernel_support, window_jit

    if not (window_jit.available() and kernel_support.usable("pointwise")):
        pytest.skip("the micro-kernel is not usable here")
    before = THRESHOLDS["POINTWISE_MK_C"]
    sweep = tuning.SWEEPS[0]._replace(axis=(16, 32))
    got, rows = tuning.run_sweep(sweep, log=lambda *_: None)
    assert [r[1] for r in rows] == ["pointwise-mk"] * 2 and [r[3] for r in rows] == ["pointwise"] * 2
    assert all(r[2] > 0 and r[4] > 0 for r in rows) and got in (0, 16, 32)
    assert THRESHOLDS["POINTWISE_MK_C"] == before


_WARM = """
import numpy as np
from framework.kernels import machine, window_jit
assert window_jit.available()
x = np.ones((1, 2, 3, 3), np.float32)
y = np.empty_like(x)
assert window_jit.scale_shift(x, np.full(2, 2, np.float32), np.ones(2, np.float32), y, 1)
assert (y == 3).all()
print(window_jit._kernels._scale_shift.stats.cache_hits.most_common(1))
print(machine.numba_cache_dir())
"""


def test_a_read_only_install_caches_kernels_in_the_user_cache_folder(tmp_path):
    """The package copied to a folder nothing may be written to (the kernels' numba cache must not go
    there): the first process compiles into <cache>/numba, the second loads from it."""
    pytest.importorskip("numba")
    install = tmp_path / "site"
    shutil.copytree(
        os.path.join(ROOT, "framework"), install / "framework", ignore=shutil.ignore_patterns("__pycache__")
    )
    for d, _, files in os.walk(install):
        os.chmod(d, 0o555)
        for f in files:
            os.chmod(os.path.join(d, f), 0o444)
    cache = tmp_path / "cache"
    try:
        first = _python(_WARM, cache, install, PYTHONDONTWRITEBYTECODE="1")
        second = _python(_WARM, cache, install, PYTHONDONTWRITEBYTECODE="1")
    finally:
        for d, _, _ in os.walk(install):
            os.chmod(d, 0o755)
    assert first.splitlines()[0] == "[]" and "(" in second.splitlines()[0], (first, second)  # compiled, then a hit
    assert first.splitlines()[1] == str(cache / "numba")
    cached = [f for _, _, files in os.walk(cache / "numba") for f in files]
    assert any(f.endswith(".nbi") for f in cached) and any(f.endswith(".nbc") for f in cached), cached
    in_package = [f for _, _, files in os.walk(install) for f in files if f.endswith((".nbi", ".nbc"))]
    assert in_package == []


def test_predictor_reports_compile_time_once(caplog):
    pytest.importorskip("numba")
    from framework.core import CreateOperator
    from framework.kernels import window_jit
    from framework.predictor.predictor import Predictor
    from framework.proto import framework_pb2 as pb

    init, net = pb.NetDef(), pb.NetDef()
    net.name = "bn"
    net.op.append(CreateOperator("SpatialBN", ["X", "s", "o", "mu", "var"], ["Y"], is_test=1))
    net.external_input.extend(["X", "s", "o", "mu", "var"])
    net.external_output.append("Y")
    p = Predictor(init, net, optimize=False)
    feeds = {"X": np.ones((1, 3, 2, 2), np.float32)} | {k: np.ones(3, np.float32) for k in ("s", "o", "mu", "var")}
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(window_jit, "_CALLED", set())  # as in a fresh process: the first call loads the kernel
        with caplog.at_level("INFO", logger="framework.predictor"):
            p.run(feeds)
            p.run(feeds)
    lines = [r.getMessage() for r in caplog.records if r.name == "framework.predictor"]
    assert len(lines) == 1 and "Predictor 'bn': the first run spent" in lines[0], lines


def test_tune_show_and_reset_commands(tmp_path):
    """`framework tune --show` prints the table in use (defaults, then a tuned one); --reset removes it;
    `framework warmup` and `framework tune` have their help."""
    show = "import sys; from framework.cli import main; sys.exit(main(sys.argv[1:]))"

    def cli(*args):
        return _python(f"import sys; sys.argv[1:] = {list(args)!r}; " + show, tmp_path)

    out = cli("tune", "--show")
    assert "none: shipped defaults" in out and '"DIRECT_OW": 5' in out
    key = machine.machine_key()
    _write(tmp_path, key, DIRECT_OW=9)
    out = cli("tune", "--show")
    assert f"{key}.json (tuned)" in out and '"DIRECT_OW": 9' in out
    assert "removed" in cli("tune", "--reset") and not (tmp_path / "dispatch" / f"{key}.json").exists()
    for cmd in ("tune", "warmup"):
        proc = subprocess.run(
            [sys.executable, "-m", "framework", cmd, "--help"], capture_output=True, text=True, cwd=ROOT
        )
        assert proc.returncode == 0 and f"usage: framework {cmd}" in proc.stdout, proc.stderr
