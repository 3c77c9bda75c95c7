"""framework run on a net with control flow (If, While), a nested-net error with its path,
and framework draw showing nested nets as clusters."""

import os

import numpy as np

from tests.cli.inprocess import run_cli

NET = """
name: "ctl"
op {
  input: "c" input: "x" output: "y" type: "If"
  arg { name: "then_net" n { name: "then" op { input: "x" output: "y" type: "Relu" } } }
  arg { name: "else_net" n { name: "else" op { input: "x" output: "y" type: "Negative" } } }
}
op {
  input: "go" type: "While"
  arg { name: "cond_net" n { name: "cond" op { input: "i" input: "n" output: "go" type: "LT" } } }
  arg { name: "loop_net" n { name: "body" op { input: "i" input: "one" output: "i" type: "Add" }
                                          op { input: "y" input: "y" output: "y" type: "Add" } } }
}
external_input: "c" external_input: "x" external_input: "go" external_input: "i" external_input: "n"
external_input: "one"
external_output: "y"
"""


def cli(*args, cwd):
    return run_cli(*args, cwd=cwd)  # in-process (tests/cli/inprocess.py)


def _inputs(tmp_path, cond):
    feeds = {
        "c": np.array(cond),
        "x": np.array([-1.0, 2.0], np.float32),
        "go": np.array(False),
        "i": np.array([0], np.int32),
        "n": np.array([3], np.int32),
        "one": np.array([1], np.int32),
    }
    args = []
    for k, v in feeds.items():
        np.save(tmp_path / f"{k}.npy", v)
        args += ["--input", f"{k}={tmp_path / f'{k}.npy'}"]
    return args


def test_run_net_with_if_and_while(tmp_path):
    (tmp_path / "net.pbtxt").write_text(NET)
    for cond, want in ((True, [0.0, 16.0]), (False, [8.0, -16.0])):
        out = tmp_path / f"y_{cond}.npz"
        proc = cli("run", "net.pbtxt", *_inputs(tmp_path, cond), "--save", str(out), cwd=tmp_path)
        assert proc.returncode == 0, proc.stderr
        np.testing.assert_allclose(np.load(out)["y"], want)


def test_run_reports_a_nested_error_with_its_path(tmp_path):
    (tmp_path / "bad.pbtxt").write_text(NET.replace('type: "Negative"', 'type: "Negativ"'))
    proc = cli("run", "bad.pbtxt", *_inputs(tmp_path, True), cwd=tmp_path)
    assert proc.returncode == 2
    assert "op #0 If / else_net / op #0 Negativ" in proc.stderr and "Traceback" not in proc.stderr


def test_draw_shows_nested_nets_as_clusters(tmp_path):
    (tmp_path / "net.pbtxt").write_text(NET)
    proc = cli("draw", "net.pbtxt", "-o", "net.dot", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    dot = (tmp_path / "net.dot").read_text()
    for label in ("If / then_net (then)", "If / else_net (else)", "While / cond_net (cond)", "While / loop_net (body)"):
        assert f'label="{label}"' in dot
    assert dot.count("subgraph cluster_") == 4


def test_draw_shows_a_recurrent_step_net_as_a_cluster(tmp_path):
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    net = os.path.join(root, "models", "char_lstm", "predict_net.pbtxt")
    proc = cli("draw", net, "-o", "rnn.dot", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    dot = (tmp_path / "rnn.dot").read_text()
    assert dot.count("subgraph cluster_") == 1 and 'label="RecurrentNetwork / step_net' in dot
    assert 'label="LSTMUnit"' in dot  # the step's ops are drawn inside it
