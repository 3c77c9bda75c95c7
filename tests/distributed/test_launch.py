"""`framework launch`, and faults: a rank that fails or dies ends the whole job quickly."""

import os
import re
import subprocess
import sys
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))

NET = """
name: "allreduce"
op {{ output: "cw" type: "CreateCommonWorld" {arg} }}
op {{ input: "cw" input: "x" output: "x" type: "Allreduce" }}
external_input: "x"
external_output: "x"
"""


def framework(*args, cwd, timeout=120):
    env = dict(os.environ, PYTHONPATH=ROOT, OPENBLAS_NUM_THREADS="1")
    return subprocess.run(
        [sys.executable, "-m", "framework", *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=timeout
    )


def test_launch_runs_a_net_on_every_rank(tmp_path):
    (tmp_path / "net.pbtxt").write_text(NET.format(arg=""))
    np.save(tmp_path / "x.npy", np.arange(4, dtype=np.float32))
    p = framework("launch", "-n", "2", "--timeout", "60", "run", "net.pbtxt", "--input", "x=x.npy", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.count("[0., 2., 4., 6.]") == 2, p.stdout


def test_a_failing_rank_ends_the_job_naming_rank_and_op(tmp_path):
    (tmp_path / "net.pbtxt").write_text(NET.format(arg='arg { name: "rank" i: 0 }'))
    np.save(tmp_path / "x.npy", np.arange(4, dtype=np.float32))
    t = time.monotonic()
    p = framework("launch", "-n", "2", "--timeout", "120", "run", "net.pbtxt", "--input", "x=x.npy", cwd=tmp_path)
    took = time.monotonic() - t
    assert p.returncode != 0 and took < 30, (p.returncode, took)
    assert "op #0 CreateCommonWorld" in p.stderr and "rank 1 of 2 failed: ending the job" in p.stderr, p.stderr


def test_a_killed_rank_ends_the_job(run_ranks, tmp_path):
    t = time.monotonic()
    p = run_ranks(
        2,
        os.path.join(HERE, "dpm_rank.py"),
        "16",
        "6",
        "1",
        str(tmp_path / "w.npz"),
        env={"DPM_DIE_AT_STEP": "3"},
        timeout=120,
    )
    took = time.monotonic() - t
    assert p.returncode != 0 and took < 30, (p.returncode, took, p.stdout, p.stderr)
    assert re.search(r"KILLED|signal 9|BAD TERMINATION", p.stdout + p.stderr), p.stdout + p.stderr
    assert not (tmp_path / "w.npz").exists()


def test_launch_refuses_nonsense(tmp_path):
    p = framework("launch", "-n", "0", "ops", cwd=tmp_path)
    assert p.returncode == 2 and "-n must be at least 1" in p.stderr
    p = framework("launch", "-n", "2", cwd=tmp_path)
    assert p.returncode == 2 and "needs a command" in p.stderr
