"""The DLRM-style click model end to end: make-db clicks (planted logistic truth), train with row-wise sparse
Adagrad, predict; AUC close to the planted optimum; a training step touches only the rows looked up."""

import os

import numpy as np
import pytest

from framework import checkpoint
from framework.cli.clicks import make_clicks, roc_auc
from framework.cli.data import read_examples
from framework.cli.model_dir import ModelDir
from framework.memory.workspace import Workspace
from tests.cli.inprocess import run_cli

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODEL = os.path.join(ROOT, "models", "dlrm_clicks")


def cli(*args, cwd=None):
    return run_cli(*args, cwd=cwd)  # in-process (tests/cli/inprocess.py)


def test_roc_auc_against_pair_counting():
    rng = np.random.default_rng(0)
    y = rng.random(60) < 0.4
    s = rng.integers(0, 5, 60).astype(float)  # many ties
    pos, neg = s[y], s[~y]
    pairs = sum(1.0 if p > n else 0.5 if p == n else 0.0 for p in pos for n in neg)
    assert roc_auc(y, s) == pytest.approx(pairs / (len(pos) * len(neg)))


def test_planted_truth_is_deterministic_and_learnable_shape():
    x, y, p = make_clicks(500, seed=3)
    x2, y2, p2 = make_clicks(500, seed=3)
    assert np.array_equal(x, x2) and np.array_equal(y, y2) and np.array_equal(p, p2)
    assert x.shape == (500, 7) and x.dtype == np.float32 and y.shape == (500, 1)
    assert np.array_equal(x[:, 4:], np.round(x[:, 4:])) and x[:, 4:].max() < 1000  # ids fit the 1000-row tables


@pytest.mark.slow
def test_train_reaches_the_planted_auc_and_predict_scores(tmp_path):
    data = tmp_path / "clicks"
    r = cli("make-db", "clicks", "--out", str(data))
    assert r.returncode == 0, r.stderr
    assert "best possible test AUC" in r.stdout
    ckpt = tmp_path / "run" / "dlrm.minidb"
    r = cli(
        "train",
        MODEL,
        "--data",
        str(data),
        "--epochs",
        "2",
        "--checkpoint",
        str(ckpt),
        "--no-progress",
        "--val-every",
        "100000",
    )
    assert r.returncode == 0, r.stderr
    printed_auc = float(r.stdout.split("test AUC: ")[1].split()[0])
    md = ModelDir.load(MODEL, need_train=False)
    ws = Workspace()
    checkpoint.load(ws, str(ckpt))
    x, y = read_examples(str(data / "test.minidb"))[:2]
    ws.feed_blob("data", x)
    ws.run_net_once(md.predict_net)
    probs = np.asarray(ws.fetch_blob("softmax"))
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-5)
    best = roc_auc(y, np.load(data / "test_probabilities.npy"))
    auc = roc_auc(y, probs[:, 1])
    assert auc > best - 0.02, f"model AUC {auc:.4f}, planted optimum {best:.4f}"
    assert printed_auc == pytest.approx(auc, abs=1e-4)  # what `framework train` reports
    r = cli("predict", MODEL, "--checkpoint", str(ckpt), "--input", str(data / "sample.npy"))
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip()
    # the deployable pair scores the same examples (the click probabilities come first among its outputs)
    r = cli("export", MODEL, "--checkpoint", str(ckpt), "--out", str(tmp_path / "pair"))
    assert r.returncode == 0, r.stderr
    r2 = cli("predict", str(tmp_path / "pair"), "--input", str(data / "sample.npy"))
    assert r2.returncode == 0, r2.stderr
    assert (
        r2.stdout.splitlines()[-8:]
        == cli("predict", MODEL, "--checkpoint", str(ckpt), "--input", str(data / "sample.npy")).stdout.splitlines()[
            -8:
        ]
    )


def test_a_training_step_touches_only_the_rows_looked_up(tmp_path):
    from framework.ops.io.db_input import write_tensor_protos_db

    x, y, _ = make_clicks(256, seed=1)
    write_tensor_protos_db(str(tmp_path / "train.minidb"), [x, y])
    md = ModelDir.load(MODEL)
    md.point_readers_at(str(tmp_path))
    ws = Workspace()
    ws.run_net_once(md.init_net)
    net = ws.create_net(md.train_net)
    tables = [f"emb_{f}" for f in range(3)]
    buffers = {t: ws.get_blob(t)._obj._array for t in tables}
    net.run()  # the first step: compare the second against it
    before = {t: ws.fetch_blob(t) for t in tables + [f"{t}_avg_squared_sum" for t in tables]}
    net.run()
    ids = np.asarray(ws.fetch_blob("ids"))
    for f, t in enumerate(tables):
        assert ws.get_blob(t)._obj._array is buffers[t], "the table was copied"
        looked_up = np.zeros(1000, bool)
        looked_up[ids[:, f]] = True
        after, h_after = ws.fetch_blob(t), ws.fetch_blob(f"{t}_avg_squared_sum")
        assert np.array_equal(after[~looked_up], before[t][~looked_up])
        assert np.array_equal(h_after[~looked_up], before[f"{t}_avg_squared_sum"][~looked_up])
        assert (h_after[looked_up] > before[f"{t}_avg_squared_sum"][looked_up]).all()
        assert ws.fetch_blob(t).shape == (1000, 8)
