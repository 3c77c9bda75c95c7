"""The character LSTM end to end through the CLI: make-db chars, train, generate."""

import json
import os

import numpy as np
import pytest

from tests.cli.inprocess import run_cli

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _cli(*args, cwd):
    proc = run_cli(*args, cwd=cwd)  # in-process (tests/cli/inprocess.py)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_char_windows_and_entropy():
    from framework.cli.chars import char_windows, decode, encode, unigram_entropy

    ids = encode("abcabcabcé")
    assert decode(ids) == "abcabcabc?"
    p = np.array([3, 3, 3, 1]) / 10
    assert unigram_entropy(ids) == pytest.approx(float(-(p * np.log(p)).sum()))
    x_tr, y_tr, x_te, y_te = char_windows(np.arange(21, dtype=np.int32), 4, 0.25, 0)
    assert x_te.tolist() == [[16, 17, 18, 19]] and y_te.tolist() == [[17, 18, 19, 20]]
    np.testing.assert_array_equal(y_tr, x_tr + 1)


@pytest.mark.slow
def test_char_lstm_trains_below_unigram_entropy_and_generates(tmp_path):
    out = _cli("make-db", "chars", "--out", str(tmp_path / "data"), cwd=tmp_path)
    entropy = float(out.split("unigram entropy ")[1].split()[0])
    _cli(
        "train",
        os.path.join(ROOT, "models", "char_lstm"),
        "--data",
        str(tmp_path / "data"),
        "--iters",
        "150",
        "--checkpoint",
        str(tmp_path / "ck.minidb"),
        "--no-progress",
        "--val-every",
        "1000",
        cwd=tmp_path,
    )
    hist = [json.loads(line) for line in open(tmp_path / "ck.history.jsonl")]
    losses = [h["loss"] for h in hist if "loss" in h]
    assert np.mean(losses[-3:]) < entropy - 0.5, (losses, entropy)
    text = _cli(
        "generate",
        os.path.join(ROOT, "models", "char_lstm"),
        "--checkpoint",
        str(tmp_path / "ck.minidb"),
        "--length",
        "40",
        "--prime",
        "def ",
        cwd=tmp_path,
    )
    assert (
        text.startswith("def ") and len(text.removesuffix("\n")) == 44
    )  # print adds one newline; the text may end in one
    # framework predict: next-character probabilities for every position of a batch of windows
    from framework.cli.chars import encode

    ids = np.asarray(encode("def __init__(self, name):\n        self.name = name\n    def run(self):  "), np.int32)
    x = np.stack([ids[i : i + 32] for i in (0, 16)])
    np.save(tmp_path / "x.npy", x)
    np.save(tmp_path / "y.npy", np.stack([ids[i + 1 : i + 33] for i in (0, 16)]))
    out = _cli(
        "predict",
        os.path.join(ROOT, "models", "char_lstm"),
        "--checkpoint",
        str(tmp_path / "ck.minidb"),
        "--input",
        str(tmp_path / "x.npy"),
        "--labels",
        str(tmp_path / "y.npy"),
        "--save",
        str(tmp_path / "p.npy"),
        cwd=tmp_path,
    )
    probs = np.load(tmp_path / "p.npy")
    assert probs.shape == (64, 128)  # every position of the two windows
    np.testing.assert_allclose(probs.sum(axis=1), 1.0, rtol=1e-4)
    acc = float(out.split("accuracy: ")[1].split()[0])
    assert acc > 1 / 128  # better than chance on Python-like text
