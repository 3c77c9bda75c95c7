"""A day with the `framework` command (no lost models, honest output). Commands run in-process
(tests/cli/inprocess.py); the installed command runs in a new process where the process is the point:
Ctrl-C during training (SIGINT) and a reader that leaves the pipe (``framework ops | head -1``)."""

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

from tests.cli.inprocess import run_cli

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = os.path.join(ROOT, "models", "mlp_digits")
FRAMEWORK = os.path.join(os.path.dirname(sys.executable), "framework")


def fw(*args, cwd):
    return run_cli(*args, cwd=cwd)


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
    # 16: the parameters, their optimizer state, the iteration and its mutex (AtomicIter, as Caffe2 builds it)
    p = fw("train", MODEL, "--iters", "50", "--resume", "--checkpoint", "c.minidb", "--no-progress", cwd=tmp_path)
    assert "saved checkpoint c.minidb (16 blobs) at iteration 50" in p.stdout, p.stdout


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
        # a runner started in the background ignores SIGINT, and children inherit that: restore it
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
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


BAD_NETS = {
    "unknown op": ('op { input: "x" output: "y" type: "Relux" }', "Did you mean: Relu"),
    "bad argument": ('op { input: "x" output: "y" type: "Softmax" arg { name: "axis" s: "one" } }', "axis"),
    "cycle": ('op { input: "a" output: "b" type: "Relu" }\nop { input: "b" output: "a" type: "Relu" }', "cycle"),
    "undefined blob": ('op { input: "nope" output: "y" type: "Relu" }', "nope"),
}


@pytest.mark.parametrize("case", sorted(BAD_NETS))
def test_inspect_validates_like_createnet(tmp_path, case):
    body, needle = BAD_NETS[case]
    (tmp_path / "n.pbtxt").write_text(f'name: "n"\n{body}\nexternal_input: "x"\n')
    p = fw("inspect", "n.pbtxt", cwd=tmp_path)
    assert p.returncode == 2 and needle in p.stderr and "Traceback" not in p.stderr, p.stderr


def test_inspect_catches_shape_mismatches_and_counts_only_parameters(data, tmp_path):
    (tmp_path / "fc.pbtxt").write_text(
        'name: "fc"\nop { input: "x" input: "w" input: "b" output: "y" type: "FC" }\n'
        'external_input: "x"\nexternal_input: "w"\nexternal_input: "b"\n'
    )
    p = fw("inspect", "fc.pbtxt", "--shape", "x=4,3", "--shape", "w=5,2", "--shape", "b=5", cwd=tmp_path)
    assert p.returncode == 2 and "ShapeError" in p.stderr
    p = fw("inspect", "fc.pbtxt", "--shape", "x=4,3", "--shape", "w=5,3", "--shape", "b=5", cwd=tmp_path)
    assert p.returncode == 0 and "parameters: 20 in 2 blobs" in p.stdout
    p = fw(
        "inspect", os.path.join(MODEL, "train_net.pbtxt"), "--init", os.path.join(MODEL, "init_net.pbtxt"), cwd=tmp_path
    )
    assert p.returncode == 0 and "parameters: 17,226 in 6 blobs" in p.stdout  # no momenta, no constants
    shutil.copytree(data / "data", tmp_path / "data")
    assert fw("train", MODEL, "--iters", "3", "--checkpoint", "c.minidb", "--no-progress", cwd=tmp_path).returncode == 0
    p = fw("inspect", os.path.join(MODEL, "predict_net.pbtxt"), "--checkpoint", "c.minidb", cwd=tmp_path)
    assert p.returncode == 0 and "parameters: 17,226 in 6 blobs" in p.stdout, p.stdout + p.stderr


def test_a_checkpoint_cut_between_records_is_not_listed_as_valid(tmp_path):
    import struct

    from framework import checkpoint
    from framework.memory.workspace import Workspace

    ws = Workspace()
    ws.feed_blob("a", np.ones(3, np.float32))
    ws.feed_blob("b", np.ones(5, np.float32))
    checkpoint.save(ws, str(tmp_path / "m.minidb"))
    data = (tmp_path / "m.minidb").read_bytes()
    pos, ends = 0, []
    while pos < len(data):
        k, v = struct.unpack("<ii", data[pos : pos + 8])
        pos += 8 + k + v
        ends.append(pos)
    (tmp_path / "cut.minidb").write_bytes(data[: ends[-2]])
    p = fw("inspect", "cut.minidb", cwd=tmp_path)
    assert p.returncode == 2 and "manifest lists are missing" in p.stderr


def test_make_db_npy_converts_or_refuses_and_train_finds_any_kind(tmp_path):
    rng = np.random.default_rng(0)
    np.save(tmp_path / "X.npy", rng.random((100, 1, 8, 8)))  # float64
    np.save(tmp_path / "Y.npy", rng.integers(0, 10, 100))  # int64
    np.save(tmp_path / "Yf.npy", rng.random(100))
    p = fw(
        "make-db", "npy", "--features", "X.npy", "--labels", "Y.npy", "--out", "d", "--db-type", "lmdb", cwd=tmp_path
    )
    assert p.returncode == 0 and "converted to float32" in p.stdout and "converted to int32" in p.stdout
    p = fw("make-db", "npy", "--features", "X.npy", "--labels", "Yf.npy", "--out", "e", cwd=tmp_path)
    assert p.returncode == 2 and "cannot be converted to int32" in p.stderr
    p = fw("train", MODEL, "--data", "d", "--iters", "3", "--no-progress", cwd=tmp_path)
    assert p.returncode == 0 and "test accuracy" in p.stdout, p.stderr


def test_input_names_are_checked(tmp_path):
    (tmp_path / "n.pbtxt").write_text(
        'name: "n"\nop { input: "data" output: "y" type: "Relu" }\nexternal_input: "data"\nexternal_output: "y"\n'
    )
    np.save(tmp_path / "x.npy", np.ones(2, np.float32))
    p = fw("run", "n.pbtxt", "--input", "dta=x.npy", cwd=tmp_path)
    assert p.returncode == 2 and "Did you mean: data" in p.stderr
    p = fw("run", "n.pbtxt", "--input", "data=x.npy", "--input", "data=x.npy", cwd=tmp_path)
    assert p.returncode == 2 and "given twice" in p.stderr
    (tmp_path / "t.npy").write_text("1,2,3\n")
    p = fw("run", "n.pbtxt", "--input", "data=t.npy", cwd=tmp_path)
    assert p.returncode == 2 and "is not a .npy file" in p.stderr and "pickled" not in p.stderr


def test_papercuts(tmp_path):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    p = subprocess.run(f"'{FRAMEWORK}' ops | head -1", shell=True, capture_output=True, text=True, env=env)
    assert p.stderr == "" and p.stdout.strip()
    (tmp_path / "miss.pbtxt").write_text('name: "x"\nop {\n  input: "a"\n  output: "b"\n  type: "Relu"\n')
    p = fw("inspect", "miss.pbtxt", cwd=tmp_path)
    assert "block opened at line 2" in p.stderr and "binary" not in p.stderr
    p = fw("inspect", "miss.pbtxt", "--debug", cwd=tmp_path)
    assert "Traceback" in p.stderr
    (tmp_path / "n.pbtxt").write_text(
        'name: "n"\nop { input: "x" output: "h" type: "Relu" }\n'
        'op { input: "h" output: "y" type: "Sigmoid" }\nexternal_input: "x"\n'
    )
    np.save(tmp_path / "x.npy", np.ones(2, np.float32))
    p = fw("run", "n.pbtxt", "--input", "x=x.npy", cwd=tmp_path)
    assert p.returncode == 0 and "it wrote h, y" in p.stdout and "--output" in p.stdout


def test_plans_run_from_the_command_line(tmp_path):
    (tmp_path / "plan.pbtxt").write_text(
        'name: "count"\nnetwork {\n  name: "step"\n  op { input: "c" output: "c" type: "Iter" }\n'
        '  external_input: "c"\n  external_output: "c"\n}\n'
        'execution_step { name: "loop" network: "step" num_iter: 5 }\n'
    )
    np.save(tmp_path / "c.npy", np.array([0], np.int64))
    p = fw("run", "plan.pbtxt", "--input", "c=c.npy", "--save", "c_out.npy", cwd=tmp_path)
    assert p.returncode == 0 and "ran plan 'count'" in p.stdout, p.stderr
    assert np.load(tmp_path / "c_out.npy").tolist() == [5]


def test_history_plot_export_pair_predict_save_and_summary(data, tmp_path):
    import json

    shutil.copytree(data / "data", tmp_path / "data")
    p = fw("train", MODEL, "--epochs", "2", "--checkpoint", "runs/m.minidb", "--no-progress", cwd=tmp_path)
    assert p.returncode == 0 and "val " in p.stdout, p.stdout + p.stderr
    records = [json.loads(line) for line in (tmp_path / "runs" / "m.history.jsonl").read_text().splitlines()]
    train = [r for r in records if "loss" in r]
    val = [r for r in records if "val_accuracy" in r]
    assert train and {"iteration", "epoch", "loss", "accuracy", "lr", "seconds"} <= set(train[0])
    assert len(val) >= 2 and 0 <= val[-1]["val_accuracy"] <= 1 and train[-1]["lr"] == pytest.approx(0.1)
    p = fw("plot", "runs/m.history.jsonl", "-o", "curves.png", cwd=tmp_path)
    if p.returncode == 0:
        assert (tmp_path / "curves.png").read_bytes()[:4] == b"\x89PNG"
    else:  # matplotlib is an optional extra: the error says how to get it
        assert "pip install" in p.stderr and "plot" in p.stderr
    p = fw("export", MODEL, "--checkpoint", "runs/m.minidb", "--out", "deploy", cwd=tmp_path)
    assert p.returncode == 0 and "6 parameters" in p.stdout, p.stderr
    assert fw("export", MODEL, "--checkpoint", "runs/m.minidb", "--out", "deploy", cwd=tmp_path).returncode == 2
    sample = os.path.join("data", "digits", "sample.npy")
    labels = os.path.join("data", "digits", "sample_labels.npy")
    a = fw("predict", MODEL, "--checkpoint", "runs/m.minidb", "--input", sample, "--save", "a.npy", cwd=tmp_path)
    b = fw("predict", "deploy", "--input", sample, "--labels", labels, "--top", "2", "--save", "b.csv", cwd=tmp_path)
    assert a.returncode == 0 and b.returncode == 0, a.stderr + b.stderr
    probs = np.load(tmp_path / "a.npy")
    lines = (tmp_path / "b.csv").read_text().splitlines()
    assert lines[0] == "example,class_1,probability_1,class_2,probability_2" and len(lines) == 1 + len(probs)
    assert [int(line.split(",")[1]) for line in lines[1:]] == probs.argmax(axis=1).tolist()
    c = fw("run", "deploy", "--input", sample, "--save", "c.npy", cwd=tmp_path)
    assert c.returncode == 0, c.stderr
    # (each process picks its own OpenBLAS kernels (framework/runtime/blas_kernel.py): the same sums may round
    # differently between this process and the CLI's, ~1e-8 on these probabilities)
    np.testing.assert_allclose(np.load(tmp_path / "c.npy"), probs, rtol=1e-5, atol=1e-7)
    # the pair is what Caffe2's workspace.Predictor reads: typed GivenTensorFill values
    from framework import workspace
    from framework.proto.io import read_net

    init = read_net(str(tmp_path / "deploy" / "init_net.pb"))
    assert all(
        any(a.name == "values" and len(a.floats) for a in op.arg) for op in init.op if op.type == "GivenTensorFill"
    )
    predictor = workspace.Predictor(init, read_net(str(tmp_path / "deploy" / "predict_net.pb")))
    np.testing.assert_allclose(predictor.run([np.load(tmp_path / sample)])[0], probs, rtol=1e-5, atol=1e-7)
    s = fw(
        "summary",
        os.path.join(MODEL, "predict_net.pbtxt"),
        "--checkpoint",
        "runs/m.minidb",
        "--shape",
        "data=1,1,8,8",
        cwd=tmp_path,
    )
    assert s.returncode == 0 and "total: 17,226 parameters" in s.stdout and "FLOPs" in s.stdout, s.stderr


def test_library_use_caps_blas_threads_like_the_cli(tmp_path):
    # while a net runs (the Python op looks), not for the process: after the run BLAS is as it was
    code = (
        "import os; from threadpoolctl import threadpool_info\n"
        "from framework import core, workspace\n"
        "def blas(): return max([i['num_threads'] for i in threadpool_info() if i['user_api'] == 'blas'] or [1])\n"
        "seen = []\n"
        "n = core.Net('n'); n.Relu('x', 'y'); n.Python(lambda i, o: seen.append(blas()))([], [])\n"
        "import numpy as np; workspace.FeedBlob('x', np.ones(2)); before = blas()\n"
        "workspace.CreateNet(n); workspace.RunNet('n')\n"
        "assert blas() == before, (blas(), before)\n"
        "print(seen[0])\n"
    )
    env = {
        k: v for k, v in os.environ.items() if k not in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS")
    }
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert p.returncode == 0 and p.stdout.strip() == "1", p.stderr
    env["FRAMEWORK_BLAS_THREADS"] = "2"
    p = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=tmp_path)
    assert p.stdout.strip() in ("1", "2"), p.stderr  # 2 where the BLAS build allows it


def test_workspace_objects_take_caffe2_method_names():
    from framework import Workspace

    ws = Workspace()
    ws.FeedBlob("x", np.ones(3, np.float32))
    assert ws.HasBlob("x") and ws.Blobs() == ["x"]
    np.testing.assert_array_equal(ws.FetchBlob("x"), np.ones(3))
