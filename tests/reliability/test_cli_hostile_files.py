"""The CLI on hostile files: a history nested 100,000 deep, a .npy header declaring 2^40 floats (as
--input and as predict's --labels), a net asking for 100,000 workers all end in one line (a user
error, exit 2, naming the file) or run capped, never in a traceback or an internal error; Ctrl-C stops
`framework run` of a dag net whose worker loops inside a While."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NET = 'name: "n" op { input: "x" output: "y" type: "Relu" } external_input: "x" external_output: "y"'


def _env():
    return dict(os.environ, OPENBLAS_NUM_THREADS="1", PYTHONPATH=ROOT, FRAMEWORK_MAX_ALLOC_BYTES=str(1 << 30))


def _cli(*args, cwd):
    return subprocess.run(
        [sys.executable, "-m", "framework", *args], capture_output=True, text=True, cwd=cwd, env=_env(), timeout=300
    )


def _user_error(r, *words):
    assert r.returncode == 2, (r.returncode, r.stderr)
    assert "internal error" not in r.stderr and "Traceback" not in r.stderr, r.stderr
    for w in words:
        assert w in r.stderr, (w, r.stderr)


@pytest.mark.parametrize("deep", ["[" * 100_000 + "]" * 100_000, '{"a":' * 100_000 + "1" + "}" * 100_000])
def test_plot_of_deeply_nested_history(tmp_path, deep):
    (tmp_path / "h.history.jsonl").write_text(deep + "\n")
    _user_error(_cli("plot", "h.history.jsonl", "-o", "c.png", cwd=tmp_path), "h.history.jsonl:1", "nested too deep")


def test_plot_of_history_whose_record_is_not_an_object(tmp_path):
    (tmp_path / "h.history.jsonl").write_text("[1, 2]\n")
    _user_error(_cli("plot", "h.history.jsonl", "-o", "c.png", cwd=tmp_path), "h.history.jsonl:1", "not an object")


def _huge_npy(path):
    np.save(path, np.zeros(3, np.float32))
    data = path.read_bytes()
    assert b"(3,)" in data
    path.write_bytes(data.replace(b"(3,)", b"(1099511627776,)", 1))  # same header length after padding
    return path


def test_run_input_npy_declaring_2_40_floats(tmp_path):
    (tmp_path / "net.pbtxt").write_text(NET)
    _huge_npy(tmp_path / "x.npy")
    _user_error(_cli("run", "net.pbtxt", "--input", "x=x.npy", cwd=tmp_path), "x.npy")


def test_predict_labels_npy_declaring_2_40_floats(tmp_path):
    """predict's --labels went to np.load unchecked (numpy tried to allocate 4 TiB first)."""
    from framework.cli.common import CLIError, load_npy

    with pytest.raises(CLIError, match="labels.npy"):
        load_npy(str(_huge_npy(tmp_path / "labels.npy")))
    src = open(os.path.join(ROOT, "framework", "cli", "predict.py")).read()
    assert "np.load(" not in src, "predict reads a .npy around load_npy's checks"


def test_wide_net_num_workers_capped_without_traceback(tmp_path):
    (tmp_path / "w.pbtxt").write_text(
        'name: "w" type: "dag" num_workers: 100000 '
        'op { type: "ConstantFill" output: "a" arg { name: "shape" ints: 2 } arg { name: "value" f: 1.0 } } '
        'op { type: "Relu" input: "a" output: "b" } op { type: "Relu" input: "a" output: "c" } '
        'external_output: "b"'
    )
    r = _cli("run", "w.pbtxt", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert "capped at" in r.stderr and "Traceback" not in r.stderr


WHILE_NET = """
name: "w" type: "dag" num_workers: 2
op { type: "ConstantFill" output: "cond" arg { name: "shape" ints: 1 } arg { name: "value" i: 1 }
     arg { name: "dtype" i: 5 } }
op { type: "ConstantFill" output: "x" arg { name: "shape" ints: 2 } arg { name: "value" f: 1.0 } }
op { type: "While" input: "cond" output: "cond" output: "x"
     arg { name: "loop_net" n { name: "body" op { type: "Relu" input: "x" output: "x" } } } }
"""


@pytest.mark.parametrize("nested", [False, True])
def test_ctrl_c_stops_a_dag_worker_looping_in_while(tmp_path, nested):
    """The While never ends by itself (its condition stays true); SIGINT must end the run. Nested: the
    While sits in a dag net run by an If inside the outer dag net's worker."""
    net = WHILE_NET
    if nested:
        inner = WHILE_NET.replace('name: "w"', 'name: "inner"')
        net = (
            'name: "outer" type: "dag" num_workers: 2 op { type: "ConstantFill" output: "go" arg { name: "shape" '
            'ints: 1 } arg { name: "value" i: 1 } arg { name: "dtype" i: 5 } } '
            f'op {{ type: "If" input: "go" arg {{ name: "then_net" n {{ {inner} }} }} }}'
        )
    (tmp_path / "w.pbtxt").write_text(net)
    p = subprocess.Popen(
        [sys.executable, "-m", "framework", "run", "w.pbtxt"],
        cwd=tmp_path,
        env=_env(),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # a background job ignores SIGINT
    )
    try:
        time.sleep(4)
        assert p.poll() is None, p.communicate()
        p.send_signal(signal.SIGINT)
        _, err = p.communicate(timeout=20)
    except subprocess.TimeoutExpired:
        p.kill()
        p.communicate()
        pytest.fail("framework run kept running after Ctrl-C")
    assert p.returncode == 130, (p.returncode, err)
    assert "Traceback" not in err
