"""Shared pieces of the digits examples: data, batches, the training loop, evaluation,
and the command line both examples share.

The data is scikit-learn's bundled digits set (1,797 8x8 images, loaded offline),
scaled to [0, 1] and split 80/20 with a fixed seed (stratified).
"""

from __future__ import annotations

import argparse
import time
from dataclasses import dataclass
from typing import Callable

import numpy as np

from framework.memory.workspace import Workspace
from framework.predictor.export_pair import extract_predict_net
from framework.proto.framework_pb2 import NetDef


@dataclass
class Digits:
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray


def load_digits_split(seed: int = 0, image: bool = False) -> Digits:
    """Features in [0, 1] (``[N, 64]``, or ``[N, 1, 8, 8]`` with ``image``) and int32 labels."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    d = load_digits()
    x = (d.data / 16.0).astype(np.float32)
    if image:
        x = x.reshape(-1, 1, 8, 8)
    y = d.target.astype(np.int32)
    xtr, xte, ytr, yte = train_test_split(x, y, test_size=0.2, random_state=seed, stratify=y)
    return Digits(np.ascontiguousarray(xtr), ytr, np.ascontiguousarray(xte), yte)


def train(
    ws: Workspace,
    init_net: NetDef,
    train_net: NetDef,
    data: Digits,
    epochs: float,
    batch_size: int = 64,
    seed: int = 0,
    log_every: int = 0,
) -> list[float]:
    """Run ``init_net`` once, then ``train_net`` over shuffled batches; returns the loss per iteration.

    The train net reads blobs ``data`` and ``label`` and writes ``loss``.
    """
    rng = np.random.default_rng(seed)
    ws.run_net_once(init_net)
    n = data.x_train.shape[0]
    steps = int(epochs * (n // batch_size))
    order = rng.permutation(n)
    pos = 0
    ws.feed_blob("data", data.x_train[:batch_size])
    ws.feed_blob("label", data.y_train[:batch_size])
    net = ws.create_net(train_net, overwrite=True)
    losses = []
    t0 = time.perf_counter()
    for it in range(steps):
        if pos + batch_size > n:
            order = rng.permutation(n)
            pos = 0
        idx = order[pos : pos + batch_size]
        pos += batch_size
        ws.feed_blob("data", data.x_train[idx])
        ws.feed_blob("label", data.y_train[idx])
        net.run()
        losses.append(float(np.asarray(ws.fetch_blob("loss")).reshape(-1)[0]))
        if log_every and (it + 1) % log_every == 0:
            print(f"  iter {it + 1:5d}  loss {np.mean(losses[-log_every:]):.4f}  ({time.perf_counter() - t0:.1f} s)")
    return losses


def evaluate(ws: Workspace, train_net: NetDef, data: Digits, output: str = "pred") -> float:
    """Test accuracy of the inference net cut out of ``train_net`` (weights from ``ws``)."""
    predict, _ = extract_predict_net(train_net, ["data"], [output])
    ws.feed_blob("data", data.x_test)
    ws.run_net_once(predict)
    scores = np.asarray(ws.fetch_blob(output))
    return float(np.mean(scores.argmax(axis=1) == data.y_test))


def train_and_evaluate(
    init_net: NetDef, train_net: NetDef, data: Digits, epochs: float, log_every: int = 0
) -> tuple[float, float, list[float]]:
    """Train in a fresh workspace; returns (test accuracy, seconds of training, losses)."""
    ws = Workspace()
    t0 = time.perf_counter()
    losses = train(ws, init_net, train_net, data, epochs=epochs, log_every=log_every)
    seconds = time.perf_counter() - t0
    return evaluate(ws, train_net, data), seconds, losses


def main(doc: str, model: str, run: Callable[..., tuple[float, float, list[float]]]) -> None:
    """``--mode brew|text|both`` and ``--epochs N``; ``run(mode, epochs, log_every=...)`` trains one way."""
    p = argparse.ArgumentParser(description=doc.splitlines()[0])
    p.add_argument("--mode", choices=["brew", "text", "both"], default="both")
    p.add_argument("--epochs", type=float, default=30)
    args = p.parse_args()
    for mode in ["brew", "text"] if args.mode == "both" else [args.mode]:
        acc, seconds, losses = run(mode, args.epochs, log_every=200)
        print(f"{model} ({mode}): test accuracy {acc:.4f}, {len(losses)} iterations in {seconds:.1f} s")
