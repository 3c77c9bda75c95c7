"""`framework launch -n 2 train --distributed`: trains, a SIGKILLed rank ends the job with the last checkpoint
intact, and `--resume` finishes the run."""

import os
import re
import signal
import subprocess
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
MODEL = os.path.join(ROOT, "models", "mlp_digits")
ENV = dict(os.environ, PYTHONPATH=ROOT, OPENBLAS_NUM_THREADS="1")


def framework(*args, cwd, **kw):
    return [sys.executable, "-m", "framework", *args], dict(cwd=cwd, env=ENV, text=True, **kw)


def rank_pids(marker):
    """Pids of `python -m framework train ...` rank processes whose command line holds ``marker``."""
    out = []
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            argv = open(f"/proc/{pid}/cmdline", "rb").read().decode(errors="replace").split("\0")
        except OSError:
            continue
        if argv[1:4] == ["-m", "framework", "train"] and any(marker in a for a in argv):
            out.append(int(pid))
    return out


def test_two_ranks_train_like_one_process_with_the_global_batch(tmp_path):
    """2 ranks x batch 32 (each reads every other record) == 1 process x batch 64, same seed."""
    import numpy as np

    from framework import checkpoint
    from framework.memory.workspace import Workspace

    cmd, kw = framework("make-db", "digits", "--out", "data", cwd=tmp_path, capture_output=True)
    assert subprocess.run(cmd, **kw).returncode == 0
    common = ["train", MODEL, "--data", "data", "--iters", "15", "--seed", "3", "--no-progress"]
    cmd, kw = framework(*common, "--batch-size", "64", "--checkpoint", "one.minidb", cwd=tmp_path, capture_output=True)
    p = subprocess.run(cmd, **kw)
    assert p.returncode == 0, p.stderr
    cmd, kw = framework(
        "launch",
        "-n",
        "2",
        "--timeout",
        "120",
        *common,
        "--batch-size",
        "32",
        "--distributed",
        "--checkpoint",
        "two.minidb",
        cwd=tmp_path,
        capture_output=True,
    )
    p = subprocess.run(cmd, **kw)
    assert p.returncode == 0, p.stdout + p.stderr
    one, two = Workspace(), Workspace()
    names = checkpoint.load(one, str(tmp_path / "one.minidb"))
    assert sorted(checkpoint.load(two, str(tmp_path / "two.minidb"))) == sorted(names)
    tensors = [n for n in names if isinstance(one.fetch_blob(n), np.ndarray)]  # not the iteration's mutex
    assert "optimizer_iteration" in tensors
    for n in tensors:
        np.testing.assert_allclose(two.fetch_blob(n), one.fetch_blob(n), rtol=1e-4, atol=1e-5, err_msg=n)


@pytest.mark.slow
def test_kill_a_rank_then_resume(tmp_path):
    cmd, kw = framework("make-db", "digits", "--out", "data", cwd=tmp_path, capture_output=True)
    assert subprocess.run(cmd, **kw).returncode == 0
    ckpt = str(tmp_path / "runs" / "mlp.minidb")
    train = [
        "train",
        MODEL,
        "--data",
        "data",
        "--epochs",
        "100",  # about 1,100 iterations on 2 ranks: the kill lands long before the end
        "--distributed",
        "--every",
        "100",
        "--checkpoint",
        ckpt,
        "--no-progress",
        "--seed",
        "1",
    ]
    cmd, kw = framework(
        "launch", "-n", "2", "--timeout", "300", *train, cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE
    )
    job = subprocess.Popen(cmd, **kw)
    deadline = time.monotonic() + 120
    while not os.path.exists(ckpt) and time.monotonic() < deadline and job.poll() is None:
        time.sleep(0.05)
    assert os.path.exists(ckpt), "no checkpoint was written"
    time.sleep(0.3)
    victims = rank_pids(str(tmp_path))
    assert len(victims) == 2, victims
    killed_at = time.monotonic()
    os.kill(max(victims), signal.SIGKILL)
    out, err = job.communicate(timeout=60)
    assert job.returncode != 0 and time.monotonic() - killed_at < 30, (job.returncode, err)
    # the last checkpoint is intact; --resume finishes the run on 2 ranks
    cmd, kw = framework("launch", "-n", "2", "--timeout", "300", *train, "--resume", cwd=tmp_path, capture_output=True)
    p = subprocess.run(cmd, **kw)
    assert p.returncode == 0, p.stdout + p.stderr
    resumed = int(re.search(r"resumed from .* at iteration (\d+)", p.stdout).group(1))
    assert resumed >= 100 and resumed % 100 == 0
    accuracy = float(re.search(r"test accuracy: ([0-9.]+)", p.stdout).group(1))
    assert accuracy > 0.93, p.stdout
