"""A day with the `framework` command (issue: no lost models, honest output): through the installed command."""

from __future__ import annotations

import hashlib
import os
import shutil
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = os.path.join(ROOT, "models", "mlp_digits")
FRAMEWORK = os.path.join(os.path.dirname(sys.executable), "framework")


def fw(*args, cwd, **kw):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    return subprocess.run([FRAMEWORK, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=300, **kw)


@pytest.fixture(scope="module")
def data(tmp_path_factory):
    d = tmp_path_factory.mktemp("day")
    p = fw("make-db", "digits", "--out", os.path.join("data", "digits"), cwd=d)
    assert p.returncode == 0, p.stderr
    return d


def test_an_existing_checkpoint_is_never_overwritten_silently(data, tmp_path):
    shutil.copytree(data / "data", tmp_path / "data")
    assert (
        fw("train", MODEL, "--iters", "30", "--checkpoint", "c.minidb", "--no-progress", cwd=tmp_path).returncode == 0
    )
    before = (tmp_path / "c.minidb").read_bytes()
    p = fw("train", MODEL, "--iters", "5", "--checkpoint", "c.minidb", "--no-progress", cwd=tmp_path)
    assert p.returncode == 2 and "already exists" in p.stderr and "--resume" in p.stderr and "--overwrite" in p.stderr
    assert (tmp_path / "c.minidb").read_bytes() == before
    p = fw("train", MODEL, "--iters", "5", "--checkpoint", "c.minidb", "--overwrite", "--no-progress", cwd=tmp_path)
    assert p.returncode == 0 and "at iteration 5" in p.stdout


def test_resume_reports_the_true_iteration_and_when_nothing_is_left(data, tmp_path):
    shutil.copytree(data / "data", tmp_path / "data")
    assert (
        fw("train", MODEL, "--iters", "40", "--checkpoint", "c.minidb", "--no-progress", cwd=tmp_path).returncode == 0
    )
    p = fw("train", MODEL, "--epochs", "1", "--resume", "--checkpoint", "c.minidb", "--no-progress", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "resumed from c.minidb at iteration 40" in p.stdout and "nothing left to train" in p.stdout
    p = fw("train", MODEL, "--iters", "50", "--resume", "--checkpoint", "c.minidb", "--no-progress", cwd=tmp_path)
    assert "saved checkpoint c.minidb (15 blobs) at iteration 50" in p.stdout, p.stdout


def test_ctrl_c_saves_a_checkpoint_and_says_how_to_resume(data, tmp_path):
    shutil.copytree(data / "data", tmp_path / "data")
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    proc = subprocess.Popen(
        [FRAMEWORK, "train", MODEL, "--iters", "1000000", "--checkpoint", "c.minidb", "--no-progress"],
        cwd=tmp_path,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.monotonic() + 60
    line = ""
    while "iter " not in line and time.monotonic() < deadline:
        line = proc.stdout.readline()
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "interrupted at iteration" in err and "--resume" in err and "Traceback" not in err
    p = fw("train", MODEL, "--iters", "1", "--resume", "--checkpoint", "c.minidb", "--no-progress", cwd=tmp_path)
    assert "resumed from c.minidb at iteration" in p.stdout


def _dropout_dag_model(tmp_path):
    model = tmp_path / "model"
    shutil.copytree(MODEL, model)
    train = (model / "train_net.pbtxt").read_text()
    first_op_end = train.index("\nop {", train.index("op {") + 1)
    dropout = (
        '\nop {\n  input: "data"\n  output: "data"\n  output: "drop_mask"\n  type: "Dropout"\n'
        '  arg {\n    name: "ratio"\n    f: 0.3\n  }\n}'
    )
    train = train[:first_op_end] + dropout + train[first_op_end:] + 'type: "dag"\nnum_workers: 2\n'
    (model / "train_net.pbtxt").write_text(train)
    return str(model)


def test_same_seed_gives_bit_identical_checkpoints_with_dropout_and_dag(data, tmp_path):
    shutil.copytree(data / "data", tmp_path / "data")
    model = _dropout_dag_model(tmp_path)
    digests = []
    for run in ("a", "b", "c"):
        seed = "7" if run != "c" else "8"
        p = fw(
            "train",
            model,
            "--iters",
            "25",
            "--seed",
            seed,
            "--checkpoint",
            f"{run}.minidb",
            "--no-progress",
            cwd=tmp_path,
        )
        assert p.returncode == 0, p.stderr
        digests.append(hashlib.sha256((tmp_path / f"{run}.minidb").read_bytes()).hexdigest())
    assert digests[0] == digests[1] and digests[0] != digests[2]


def test_run_saves_what_the_suffix_says(tmp_path):
    (tmp_path / "net.pbtxt").write_text(
        'name: "n"\nop { input: "x" output: "y" type: "Relu" }\nop { input: "x" output: "z" type: "Sigmoid" }\n'
        'external_input: "x"\nexternal_output: "y"\nexternal_output: "z"\n'
    )
    x = np.array([[-1.0, 2.0], [3.0, -4.0]], np.float32)
    np.save(tmp_path / "x.npy", x)
    p = fw("run", "net.pbtxt", "--input", "x=x.npy", "--save", "out.npz", cwd=tmp_path)
    assert p.returncode == 0 and sorted(np.load(tmp_path / "out.npz").files) == ["y", "z"]
    assert not (tmp_path / "out.npz.npz").exists()
    p = fw("run", "net.pbtxt", "--input", "x=x.npy", "--output", "y", "--save", "y.npy", cwd=tmp_path)
    np.testing.assert_array_equal(np.load(tmp_path / "y.npy"), np.maximum(x, 0))
    p = fw("run", "net.pbtxt", "--input", "x=x.npy", "--output", "y", "--save", "y.csv", cwd=tmp_path)
    assert p.returncode == 0
    assert (tmp_path / "y.csv").read_text().splitlines() == ["y_0,y_1", "0,2", "3,0"]
    p = fw("run", "net.pbtxt", "--input", "x=x.npy", "--save", "both.csv", cwd=tmp_path)
    assert p.returncode == 2 and "holds one array" in p.stderr and "--output" in p.stderr
    p = fw("run", "net.pbtxt", "--input", "x=x.npy", "--save", "out.txt", cwd=tmp_path)
    assert p.returncode == 2 and "unknown suffix" in p.stderr
    assert ".csv" in fw("run", "--help", cwd=tmp_path).stdout
