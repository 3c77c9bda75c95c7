"""A Caffe2 user's second day: zoo-shaped models, one CLI for every model path, honest errors.

Commands run in-process (tests/cli/inprocess.py); ``exec`` runs as the installed script in a new process
(it installs the caffe2 import hook and runs the user's module there)."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from tests.cli.inprocess import run_cli

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = os.path.join(ROOT, "models", "mlp_digits")
FRAMEWORK = os.path.join(os.path.dirname(sys.executable), "framework")


def fw(*args, cwd):
    return run_cli(*args, cwd=cwd)


def fw_process(*args, cwd, **kw):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1")
    return subprocess.run([FRAMEWORK, *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=300, **kw)


RNG = np.random.default_rng(38)
W = RNG.standard_normal((3, 4)).astype(np.float32)
B = RNG.standard_normal(3).astype(np.float32)
X = RNG.standard_normal((5, 4)).astype(np.float32)


def _softmax_fc(x):
    z = x.astype(np.float64) @ W.T.astype(np.float64) + B
    e = np.exp(z - z.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def _zoo_pair(folder, with_init=True):
    """A pair shaped as Caffe2's model zoo ships it: ``data`` is the predict net's LAST external input and
    the init net does not create it."""
    from framework.proto.framework_pb2 import NetDef
    from framework.proto.io import write_binary

    os.makedirs(folder, exist_ok=True)
    init = NetDef(name="zoo_init")
    for name, value in (("fc_w", W), ("fc_b", B)):
        op = init.op.add(type="GivenTensorFill", output=[name])
        op.arg.add(name="shape", ints=list(value.shape))
        op.arg.add(name="values", floats=value.reshape(-1).tolist())
    pred = NetDef(name="zoo")
    pred.op.add(type="FC", input=["data", "fc_w", "fc_b"], output=["fc"])
    pred.op.add(type="Softmax", input=["fc"], output=["prob"])
    pred.external_input.extend(["fc_w", "fc_b", "data"])
    pred.external_output.append("prob")
    if with_init:
        write_binary(init, os.path.join(folder, "init_net.pb"))
    write_binary(pred, os.path.join(folder, "predict_net.pb"))
    return init


def test_zoo_pair_with_data_last_predicts(tmp_path):
    _zoo_pair(tmp_path / "zoo")
    np.save(tmp_path / "x.npy", X)
    p = fw("predict", "zoo", "--input", "x.npy", "--save", "p.npy", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    np.testing.assert_allclose(np.load(tmp_path / "p.npy"), _softmax_fc(X), rtol=1e-5, atol=1e-6)
    p = fw("predict", "zoo", "--input", "data=x.npy", "--no-optimize", "--save", "q.npy", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    np.testing.assert_allclose(np.load(tmp_path / "q.npy"), _softmax_fc(X), rtol=1e-5, atol=1e-6)


def test_a_folder_with_only_a_predict_net_predicts_with_a_checkpoint(tmp_path):
    from framework import checkpoint
    from framework.memory.workspace import Workspace

    init = _zoo_pair(tmp_path / "zoo", with_init=False)
    ws = Workspace(root_folder=str(tmp_path))
    ws.run_net_once(init)
    checkpoint.save(ws, "c.minidb")
    np.save(tmp_path / "x.npy", X)
    p = fw("predict", "zoo", "--checkpoint", "c.minidb", "--input", "x.npy", "--save", "p.npy", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    np.testing.assert_allclose(np.load(tmp_path / "p.npy"), _softmax_fc(X), rtol=1e-5, atol=1e-6)
    p = fw("predict", "zoo", "--input", "x.npy", cwd=tmp_path)
    assert p.returncode == 2 and "--checkpoint is required" in p.stderr
    # a typo in an input name gets a did-you-mean, not "input 0 is empty"
    p = fw("predict", "zoo", "--checkpoint", "c.minidb", "--input", "dta=x.npy", cwd=tmp_path)
    assert p.returncode == 2 and "no blob 'dta'" in p.stderr and "data" in p.stderr, p.stderr


PLAN = (
    'name: "count"\nnetwork {\n  name: "step"\n  op { input: "c" input: "one" output: "c" type: "Add" }\n'
    '  external_input: "c"\n  external_input: "one"\n  external_output: "c"\n}\n'
    'execution_step { name: "loop" network: "step" num_iter: 5 }\n'
)


@pytest.mark.parametrize("binary", [False, True])
def test_every_command_takes_a_plan(tmp_path, binary):
    from framework.proto.framework_pb2 import PlanDef
    from framework.proto.io import parse_text, write_binary

    name = "plan.pb" if binary else "plan.pbtxt"
    if binary:
        write_binary(parse_text(PLAN, PlanDef), tmp_path / name)
    else:
        (tmp_path / name).write_text(PLAN)
    np.save(tmp_path / "c.npy", np.zeros(3, np.float32))
    np.save(tmp_path / "one.npy", np.ones(3, np.float32))
    feeds = ["--input", "c=c.npy", "--input", "one=one.npy"]
    p = fw("run", name, *feeds, "--save", "out.npy", cwd=tmp_path)
    assert p.returncode == 0 and "ran plan 'count'" in p.stdout, p.stderr
    assert np.load(tmp_path / "out.npy").tolist() == [5, 5, 5]
    p = fw("inspect", name, "--shape", "c=3", "--shape", "one=3", cwd=tmp_path)
    assert p.returncode == 0 and "plan 'count'" in p.stdout and "c [3]" in p.stdout, p.stderr
    p = fw("summary", name, "--shape", "c=3", "--shape", "one=3", cwd=tmp_path)
    assert p.returncode == 0 and "Add" in p.stdout and "[3]" in p.stdout, p.stderr
    p = fw("draw", name, "-o", "g.dot", cwd=tmp_path)
    assert p.returncode == 0 and "Add" in (tmp_path / "g.dot").read_text(), p.stderr
    p = fw("profile", name, *feeds, "--iters", "2", cwd=tmp_path)
    assert p.returncode == 0 and "prof_dag 'step'" in p.stdout and "#0 Add" in p.stdout, p.stderr


def test_every_command_takes_a_model_folder_and_a_pair_folder(tmp_path):
    _zoo_pair(tmp_path / "zoo")
    np.save(tmp_path / "x.npy", X)
    for path in ("zoo", MODEL):
        p = fw("inspect", path, cwd=tmp_path)
        assert p.returncode == 0 and "parameters:" in p.stdout and "FC" in p.stdout, p.stderr
        p = fw("draw", path, "-o", "g.dot", cwd=tmp_path)
        assert p.returncode == 0 and "FC" in (tmp_path / "g.dot").read_text(), p.stderr
    p = fw("summary", "zoo", "--shape", "data=5,4", cwd=tmp_path)
    assert p.returncode == 0 and "total: 15 parameters" in p.stdout, p.stdout + p.stderr
    p = fw("summary", MODEL, "--shape", "data=1,1,8,8", cwd=tmp_path)
    assert p.returncode == 0 and "total: 17,226 parameters" in p.stdout, p.stdout + p.stderr
    p = fw("run", "zoo", "--input", "x.npy", "--save", "p.npy", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    np.testing.assert_allclose(np.load(tmp_path / "p.npy"), _softmax_fc(X), rtol=1e-5, atol=1e-6)
    p = fw("profile", "zoo", "--input", "x.npy", "--iters", "2", cwd=tmp_path)
    assert p.returncode == 0 and "FC" in p.stdout, p.stderr


def test_shape_names_are_checked(tmp_path):
    p = fw("inspect", os.path.join(MODEL, "predict_net.pbtxt"), "--shape", "dta=1,64", cwd=tmp_path)
    assert p.returncode == 2 and "no blob 'dta'" in p.stderr and "Did you mean: data" in p.stderr, p.stderr
    p = fw("summary", MODEL, "--shape", "xx=4,3", cwd=tmp_path)
    assert p.returncode == 2 and "no blob 'xx'" in p.stderr, p.stderr


INSPECT_GAPS = {
    "storage order": (
        'op { input: "x" input: "w" output: "y" type: "Conv" arg { name: "kernel" i: 3 } '
        'arg { name: "order" s: "NCWH" } }\nexternal_input: "w"',
        "'order' = 'NCWH'",
    ),
    "unknown argument": (
        'op { input: "x" output: "y" type: "Softmax" arg { name: "axsi" i: 1 } }',
        "unknown argument 'axsi'. Did you mean: axis?",
    ),
    "dag writers": (
        'type: "dag"\nop { input: "x" output: "y" type: "Relu" }\nop { input: "x" output: "y" type: "Sigmoid" }',
        "both write 'y'",
    ),
}


@pytest.mark.parametrize("case", sorted(INSPECT_GAPS))
def test_inspect_closes_validation_gaps(tmp_path, case):
    body, needle = INSPECT_GAPS[case]
    (tmp_path / "n.pbtxt").write_text(f'name: "n"\n{body}\nexternal_input: "x"\n')
    p = fw("inspect", "n.pbtxt", cwd=tmp_path)
    assert p.returncode == 2 and needle in p.stderr and "Traceback" not in p.stderr, p.stderr


def test_a_shape_given_for_an_undeclared_input_counts_as_feeding_it(tmp_path):
    (tmp_path / "n.pbtxt").write_text(
        'name: "n"\nop { input: "a" output: "y" type: "Relu" }\nop { input: "y" input: "s" output: "z" type: "Mul" }\n'
        'external_input: "a"\n'
    )
    p = fw("inspect", "n.pbtxt", "--shape", "a=2,3", "--shape", "s=", cwd=tmp_path)
    assert p.returncode == 0 and "z [2,3]" in p.stdout, p.stderr
    p = fw("inspect", "n.pbtxt", "--shape", "a=2,3", cwd=tmp_path)
    assert p.returncode == 2 and "'s'" in p.stderr


DATA = os.path.join(os.path.dirname(os.path.abspath(__file__)), "data_h38")


def test_errors_after_the_inference_pass_name_the_users_ops_and_blobs(tmp_path):
    """Conv+BN+Relu fold into one ConvFusion and the FC reads a shared buffer in the optimized net; the
    error must name the FC as the user wrote it: op #4, input 'r2'."""
    np.save(tmp_path / "x.npy", np.ones((2, 2, 5, 5), np.float32))
    init, net = os.path.join(DATA, "bn_fc_init.pbtxt"), os.path.join(DATA, "bn_fc_bad.pbtxt")
    for cmd in ("run", "profile"):
        p = fw(cmd, net, "--init", init, "--input", "data=x.npy", cwd=tmp_path)
        assert p.returncode == 2 and "op #4 FC" in p.stderr and "'r2'" in p.stderr, p.stderr
        assert "__m" not in p.stderr and "ConvFusion" not in p.stderr and "check the input shapes" in p.stderr


def test_predictor_errors_name_the_users_ops_and_optimize_false_is_accepted():
    from framework import workspace
    from framework.errors import FrameworkError
    from framework.proto.io import read_net

    init, net = read_net(os.path.join(DATA, "bn_fc_init.pbtxt")), read_net(os.path.join(DATA, "bn_fc_bad.pbtxt"))
    x = np.ones((2, 2, 5, 5), np.float32)
    for optimize in (True, False):
        pred = workspace.Predictor(init, net, optimize=optimize)
        with pytest.raises(FrameworkError, match=r"(?s)op #4 FC.*'r2'"):
            pred.run({"data": x})


def test_convert_declared_inputs_dynamic_batch_dtypes_and_untrained_weights(tmp_path):
    import onnxruntime as ort

    from framework.proto.io import read_net, write_binary

    init = _zoo_pair(tmp_path / "zoo")
    placeholder = init.op.add(type="GivenTensorFill", output=["data"])  # as Caffe2's exporters write it
    placeholder.arg.add(name="shape", ints=[1, 1])
    placeholder.arg.add(name="values", floats=[0.0])
    write_binary(init, tmp_path / "zoo" / "init_net.pb")
    p = fw("convert", "zoo", "--to", "onnx", "-o", "m.onnx", "--shape", "data=2,4", "--dynamic-batch", cwd=tmp_path)
    assert p.returncode == 0 and "inputs data[batch,4]" in p.stdout, p.stdout + p.stderr
    sess = ort.InferenceSession(str(tmp_path / "m.onnx"), providers=["CPUExecutionProvider"])
    x7 = RNG.standard_normal((7, 4)).astype(np.float32)
    np.testing.assert_allclose(sess.run(None, {"data": x7})[0], _softmax_fc(x7), rtol=1e-5, atol=1e-6)
    # a model folder without --checkpoint would export random weights: refused unless asked for
    p = fw("convert", MODEL, "--to", "onnx", "-o", "r.onnx", cwd=tmp_path)
    assert p.returncode == 2 and "untrained" in p.stderr and not (tmp_path / "r.onnx").exists()
    p = fw("convert", MODEL, "--to", "onnx", "-o", "r.onnx", "--untrained", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    # --shape gives the dtype of integer inputs
    (tmp_path / "emb.pbtxt").write_text(
        'name: "emb"\nop { input: "table" input: "ids" output: "e" type: "Gather" }\n'
        'external_input: "table"\nexternal_input: "ids"\nexternal_output: "e"\n'
    )
    (tmp_path / "emb_init.pbtxt").write_text(
        'name: "i"\nop { output: "table" type: "ConstantFill" arg { name: "shape" ints: 10 ints: 3 } }\n'
    )
    args = ("convert", "emb.pbtxt", "--init", "emb_init.pbtxt", "--to", "onnx", "-o", "e.onnx")
    p = fw(*args, "--shape", "ids=5:int32", "--check", cwd=tmp_path)
    assert p.returncode == 0, p.stdout + p.stderr
    import onnx

    assert onnx.load(str(tmp_path / "e.onnx")).graph.input[0].type.tensor_type.elem_type == onnx.TensorProto.INT32
    p = fw(*args, "--overwrite", "--shape", "ids=5:int33", cwd=tmp_path)
    assert p.returncode == 2 and "unknown dtype 'int33'" in p.stderr
    assert read_net(str(tmp_path / "zoo" / "init_net.pb")).op[-1].output[0] == "data"


def test_exec_m_finds_modules_from_the_current_folder_and_files_get_the_usual_mode(tmp_path):
    from framework.proto.framework_pb2 import NetDef
    from framework.proto.io import write_binary

    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "mod.py").write_text(
        "import sys\nfrom caffe2.python import workspace\nprint('ran', sys.argv[1:], workspace.HasBlob('x'))\n"
    )
    p = fw_process("exec", "-m", "pkg.mod", "a1", cwd=tmp_path)
    assert p.returncode == 0 and "ran ['a1'] False" in p.stdout, p.stderr
    mask = os.umask(0o022)
    os.umask(mask)
    write_binary(NetDef(name="n"), tmp_path / "n.pb")
    assert os.stat(tmp_path / "n.pb").st_mode & 0o777 == 0o666 & ~mask


def test_launching_train_on_several_ranks_makes_it_data_parallel():
    from framework.cli.launch import rank_argv

    argv, note = rank_argv(["train", MODEL, "--checkpoint", "c.minidb"], 2)
    assert argv[-1] == "--distributed" and "data-parallel" in note
    assert rank_argv(["train", MODEL, "--distributed"], 2) == (["train", MODEL, "--distributed"], "")
    assert rank_argv(["train", MODEL], 1) == (["train", MODEL], "")
    assert rank_argv(["run", "n.pbtxt"], 2) == (["run", "n.pbtxt"], "")


@pytest.fixture(scope="module")
def digits(tmp_path_factory):
    d = tmp_path_factory.mktemp("digits")
    p = fw("make-db", "digits", "--out", os.path.join("data", "digits"), cwd=d)
    assert p.returncode == 0, p.stderr
    return d / "data"


def _with_dropout(tmp_path):
    import shutil

    model = tmp_path / "model"
    shutil.copytree(MODEL, model)
    train = (model / "train_net.pbtxt").read_text()
    first_op_end = train.index("\nop {", train.index("op {") + 1)
    dropout = (
        '\nop {\n  input: "data"\n  output: "data"\n  output: "mask"\n  type: "Dropout"\n'
        '  arg { name: "ratio" f: 0.3 }\n}'
    )
    (model / "train_net.pbtxt").write_text(train[:first_op_end] + dropout + train[first_op_end:])
    return str(model)


def test_resume_equals_a_straight_run_bit_for_bit(digits, tmp_path):
    import shutil

    from framework import checkpoint
    from framework.memory.workspace import Workspace

    shutil.copytree(digits, tmp_path / "data")
    model = _with_dropout(tmp_path)
    common = ("--seed", "5", "--no-progress", "--batch-size", "40")
    assert fw("train", model, "--iters", "30", "--checkpoint", "s.minidb", *common, cwd=tmp_path).returncode == 0
    assert fw("train", model, "--iters", "13", "--checkpoint", "r.minidb", *common, cwd=tmp_path).returncode == 0
    p = fw("train", model, "--iters", "30", "--checkpoint", "r.minidb", "--resume", *common, cwd=tmp_path)
    assert p.returncode == 0 and "resumed from r.minidb at iteration 13" in p.stdout, p.stderr
    straight, resumed = Workspace(root_folder=str(tmp_path)), Workspace(root_folder=str(tmp_path))
    checkpoint.load(straight, "s.minidb")
    checkpoint.load(resumed, "r.minidb")
    # every tensor (parameters, optimizer state, iteration); objects such as the iteration's mutex carry no value
    params = [
        b
        for b in straight.blobs()
        if not b.startswith("__resume__/")
        and isinstance(straight.fetch_blob(b), np.ndarray)
        and straight.fetch_blob(b).dtype != object
    ]
    assert "fc1_w" in params and "optimizer_iteration" in params
    for b in params:
        np.testing.assert_array_equal(resumed.fetch_blob(b), straight.fetch_blob(b), err_msg=b)


def test_each_checkpoint_keeps_its_own_history_and_training_says_what_it_saves(digits, tmp_path):
    import json
    import shutil

    shutil.copytree(digits, tmp_path / "data")
    logreg = os.path.join(ROOT, "models", "logreg_digits")
    p = fw("train", MODEL, "--iters", "20", "--checkpoint", "runs/mlp.minidb", "--no-progress", cwd=tmp_path)
    assert p.returncode == 0 and "data/digits (the default" in p.stdout, p.stderr
    assert fw("train", logreg, "--iters", "30", "--checkpoint", "runs/lr.minidb", cwd=tmp_path).returncode == 0
    p = fw("train", MODEL, "--iters", "40", "--checkpoint", "runs/mlp.minidb", "--resume", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    # stderr is a pipe here: log lines, not a tqdm bar redrawn with carriage returns
    assert "\r" not in p.stderr and "iter 40" in p.stdout
    mlp = [json.loads(x) for x in (tmp_path / "runs" / "mlp.history.jsonl").read_text().splitlines()]
    lr = [json.loads(x) for x in (tmp_path / "runs" / "lr.history.jsonl").read_text().splitlines()]
    assert [r["iteration"] for r in mlp if "loss" in r] == [10, 20, 30, 40]
    assert [r["iteration"] for r in lr if "loss" in r] == [10, 20, 30]
    assert not (tmp_path / "runs" / "history.jsonl").exists()
    p = fw("train", MODEL, "--iters", "5", "--no-progress", cwd=tmp_path)
    assert p.returncode == 0 and "will not be saved" in p.stdout
    p = fw("train", os.path.join(ROOT, "models", "dlrm_clicks"), "--iters", "5", "--no-progress", cwd=tmp_path)
    assert p.returncode == 2 and "--data" in p.stderr and "default data folder" in p.stderr, p.stdout + p.stderr


def test_a_long_plan_reports_progress(tmp_path):
    (tmp_path / "plan.pbtxt").write_text(PLAN.replace("num_iter: 5", "num_iter: 100000"))
    np.save(tmp_path / "c.npy", np.zeros(1, np.float32))
    np.save(tmp_path / "one.npy", np.ones(1, np.float32))
    feeds = ["--input", "c=c.npy", "--input", "one=one.npy"]
    p = fw("run", "plan.pbtxt", *feeds, "--progress-every", "0.05", cwd=tmp_path)
    assert p.returncode == 0 and "c: shape [1]" in p.stdout, p.stderr
    assert "plan 'count':" in p.stderr and "net runs: step " in p.stderr, p.stderr
    p = fw("run", "plan.pbtxt", *feeds, "--progress-every", "0", cwd=tmp_path)
    assert p.returncode == 0 and p.stderr == ""


def test_a_long_error_says_how_many_lines_the_one_line_form_cut():
    from framework.cli import one_line

    text = "export: 5 op(s) have no ONNX expression:\n  a\n  b\n  c\n  d\n  e"
    line = one_line(RuntimeError(text))
    assert line.startswith("export: 5 op(s)") and "a; b; c" in line and "and 2 more" in line
    assert one_line(RuntimeError("x\n  y")) == "x (y)"
