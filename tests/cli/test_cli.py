"""Every subcommand driven through ``framework.cli.main`` in-process (tests/cli/inprocess.py: exit code,
stdout and stderr as a subprocess gives them), including bad input; the entry point itself in a subprocess
once, and each subcommand's ``--help``."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import numpy as np
import pytest

from tests.cli.inprocess import run_cli

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
SUBCOMMANDS = ["run", "train", "predict", "inspect", "draw", "profile", "ops", "make-db", "convert-db"]

RELU_NET = """
name: "tiny"
op { input: "x" output: "h" type: "Relu" }
op { input: "h" input: "x" output: "y" type: "Add" }
external_input: "x"
external_output: "y"
"""


def cli(*args: str, cwd: str | None = None) -> subprocess.CompletedProcess:
    return run_cli(*args, cwd=cwd or ROOT)


def entry_point(*args: str, cwd: str | None = None) -> subprocess.CompletedProcess:
    """``python -m framework ARGS`` in a new process: what the installed command runs."""
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    return subprocess.run(
        [sys.executable, "-m", "framework", *args],
        capture_output=True,
        text=True,
        cwd=cwd or ROOT,
        env=env,
        timeout=300,
    )


def assert_user_error(proc: subprocess.CompletedProcess, *needles: str) -> None:
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith("error: "), proc.stderr
    assert "Traceback" not in proc.stderr, proc.stderr
    for n in needles:
        assert n in proc.stderr, f"{n!r} not in {proc.stderr!r}"


def test_a_subcommand_help_through_the_entry_point():
    proc = entry_point("run", "--help")
    assert proc.returncode == 0, proc.stderr
    assert "usage: framework run" in proc.stdout


@pytest.mark.parametrize("cmd", SUBCOMMANDS)
def test_every_subcommand_has_help(cmd, capsys):
    # in-process: argparse prints the help and exits 0 the same way (the entry point is tested above)
    from framework.cli import main

    with pytest.raises(SystemExit) as exit_:
        main([cmd, "--help"])
    assert exit_.value.code in (0, None)
    assert "usage: framework " + cmd in capsys.readouterr().out


@pytest.fixture
def tiny(tmp_path):
    net = tmp_path / "tiny.pbtxt"
    net.write_text(RELU_NET)
    x = np.array([[-1.0, 2.0], [3.0, -4.0]], dtype=np.float32)
    np.save(tmp_path / "x.npy", x)
    return tmp_path, x


def test_run_prints_and_saves_outputs(tiny):
    tmp, x = tiny
    out = tmp / "out.npz"
    proc = cli("run", str(tmp / "tiny.pbtxt"), "--input", f"x={tmp / 'x.npy'}", "--save", str(out))
    assert proc.returncode == 0, proc.stderr
    assert "y: shape [2, 2] float32" in proc.stdout
    np.testing.assert_array_equal(np.load(out, allow_pickle=False)["y"], np.maximum(x, 0) + x)


def test_run_missing_file(tmp_path):
    assert_user_error(cli("run", str(tmp_path / "nope.pbtxt")), "nope.pbtxt")


def test_run_malformed_pbtxt_names_line_and_column(tmp_path):
    bad = tmp_path / "bad.pbtxt"
    bad.write_text('name: "n"\nop {\n  input: "x"\n  outptu: "y"\n}\n')
    proc = cli("run", str(bad))
    assert_user_error(proc, "bad.pbtxt", ":4:")


def test_run_unknown_op_suggests(tmp_path):
    net = tmp_path / "n.pbtxt"
    net.write_text('name: "n" op { input: "x" output: "y" type: "Rellu" } external_input: "x"')
    np.save(tmp_path / "x.npy", np.ones(2, np.float32))
    proc = cli("run", str(net), "--input", f"x={tmp_path / 'x.npy'}")
    assert_user_error(proc, "Rellu", "Relu")


def test_run_missing_input_blob(tiny):
    tmp, _ = tiny
    proc = cli("run", str(tmp / "tiny.pbtxt"))
    assert_user_error(proc, "'x'")


def test_ops_lists_and_describes():
    proc = cli("ops")
    assert proc.returncode == 0 and "FC" in proc.stdout and "Conv" in proc.stdout
    proc = cli("ops", "FC")
    assert proc.returncode == 0 and "axis_w" in proc.stdout
    assert_user_error(cli("ops", "Fc"), "FC")


def test_inspect_and_draw_a_net(tiny):
    tmp, _ = tiny
    proc = cli("inspect", str(tmp / "tiny.pbtxt"), "--shape", "x=2,2")
    assert proc.returncode == 0, proc.stderr
    assert "Relu" in proc.stdout and "y [2,2]" in proc.stdout
    proc = cli("draw", str(tmp / "tiny.pbtxt"), "-o", str(tmp / "g.dot"))
    assert proc.returncode == 0, proc.stderr
    assert (tmp / "g.dot").read_text().startswith('digraph "tiny"')
    assert_user_error(cli("draw", str(tmp / "tiny.pbtxt"), "-o", str(tmp / "g.bmp")), ".bmp")


def test_profile_prints_tables_and_memory(tiny):
    tmp, _ = tiny
    proc = cli("profile", str(tmp / "tiny.pbtxt"), "--input", f"x={tmp / 'x.npy'}", "--iters", "5")
    assert proc.returncode == 0, proc.stderr
    # the profiled net is the inference pass's: the same-shape Add runs as a Sum
    assert "Relu" in proc.stdout and "Sum" in proc.stdout and "Add" not in proc.stdout
    assert "0 allocations" in proc.stdout
    proc = cli("profile", str(tmp / "tiny.pbtxt"), "--input", f"x={tmp / 'x.npy'}", "--iters", "2", "--no-optimize")
    assert proc.returncode == 0, proc.stderr
    assert "Relu" in proc.stdout and "Add" in proc.stdout and "Sum" not in proc.stdout


@pytest.mark.slow
def test_make_db_train_predict_inspect_roundtrip(tmp_path):
    data = tmp_path / "digits"
    proc = cli("make-db", "digits", "--out", str(data))
    assert proc.returncode == 0, proc.stderr
    assert (data / "train.minidb").exists() and (data / "sample.npy").exists()

    ckpt = tmp_path / "mlp.minidb"
    model = os.path.join(ROOT, "models", "mlp_digits")
    args = ["train", model, "--data", str(data), "--iters", "60", "--checkpoint", str(ckpt), "--every", "30"]
    proc = cli(*args, "--no-progress")
    assert proc.returncode == 0, proc.stderr
    assert "test accuracy:" in proc.stdout and ckpt.exists()

    proc = cli(*args[:-4], "--iters", "80", "--checkpoint", str(ckpt), "--resume", "--no-progress")
    assert proc.returncode == 0, proc.stderr
    assert "resumed from" in proc.stdout and "at iteration 60" in proc.stdout

    proc = cli(
        "predict",
        model,
        "--checkpoint",
        str(ckpt),
        "--input",
        str(data / "sample.npy"),
        "--labels",
        str(data / "sample_labels.npy"),
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.count("example ") == 8 and "accuracy:" in proc.stdout

    proc = cli("inspect", str(ckpt))
    assert proc.returncode == 0, proc.stderr
    assert "fc1_w" in proc.stdout and "float32" in proc.stdout

    # The predict net runs through `run` and `profile` with the checkpoint's parameters.
    predict_net = os.path.join(model, "predict_net.pbtxt")
    proc = cli("run", predict_net, "--checkpoint", str(ckpt), "--input", f"data={data / 'sample.npy'}")
    assert proc.returncode == 0, proc.stderr
    assert "softmax: shape [8, 10] float32" in proc.stdout
    proc = cli("profile", predict_net, "--checkpoint", str(ckpt), "--input", f"data={data / 'sample.npy'}")
    assert proc.returncode == 0, proc.stderr
    assert "FC" in proc.stdout and "allocations" in proc.stdout

    # Parameter count from the init net's shapes: 64*128+128 + 128*64+64 + 64*10+10.
    proc = cli("inspect", predict_net, "--init", os.path.join(model, "init_net.pbtxt"), "--shape", "data=8,1,8,8")
    assert proc.returncode == 0, proc.stderr
    assert "parameters: 17,226 in 6 blobs" in proc.stdout
    assert "softmax [8,10]" in proc.stdout

    # A checkpoint that does not match the net is named, with what is missing.
    other = os.path.join(ROOT, "models", "cnn_digits")
    assert_user_error(cli("predict", other, "--checkpoint", str(ckpt), "--input", str(data / "sample.npy")), "conv1_w")


def test_draw_svg_needs_graphviz(tiny):
    tmp, _ = tiny
    proc = cli("draw", str(tmp / "tiny.pbtxt"), "-o", str(tmp / "g.svg"))
    if shutil.which("dot"):
        assert proc.returncode == 0, proc.stderr
        assert "<svg" in (tmp / "g.svg").read_text()
    else:
        assert_user_error(proc, "graphviz")


def test_debug_flag_shows_the_traceback(tmp_path):
    proc = cli("--debug", "run", str(tmp_path / "nope.pbtxt"))
    assert proc.returncode == 2
    assert "Traceback" in proc.stderr and "error: " in proc.stderr


def test_train_without_data_says_how_to_make_it(tmp_path):
    model = os.path.join(ROOT, "models", "mlp_digits")
    proc = cli("train", model, "--data", str(tmp_path / "none"), "--iters", "1")
    assert_user_error(proc, "make-db")
