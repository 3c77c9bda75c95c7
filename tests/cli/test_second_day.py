"""A Caffe2 user's second day: zoo-shaped models, one CLI for every model path, honest errors."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = os.path.join(ROOT, "models", "mlp_digits")
FRAMEWORK = os.path.join(os.path.dirname(sys.executable), "framework")


def fw(*args, cwd, **kw):
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
