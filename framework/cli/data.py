"""Datasets for the CLI: the digits data set into TensorProtos DBs, and reading them back."""

from __future__ import annotations

import os
from collections import OrderedDict

import numpy as np

from framework.cli.common import CLIError
from framework.runtime.state import RUNTIME

# DB path -> its records, the last _KEEP paths read (recently used last)
_EXAMPLES: OrderedDict[str, list[np.ndarray]] = RUNTIME.held("cli.data.examples", OrderedDict)
_KEEP = 4


def read_examples(path: str) -> list[np.ndarray]:
    """All records of a TensorProtos DB as arrays stacked along a new first axis.

    Read once per path and kept (the last few paths; ``RUNTIME.reset()`` forgets them), so validation reads the
    test split once per run, not once per epoch.
    """
    got = _EXAMPLES.get(path)
    if got is not None:
        _EXAMPLES.move_to_end(path)
        return got
    from framework.ops.io.db_input import read_tensor_protos_db

    if not os.path.exists(path):
        raise CLIError(f"data DB not found: {path}", "prepare it with `framework make-db digits --out DIR`")
    got = _EXAMPLES[path] = read_tensor_protos_db(path)
    while len(_EXAMPLES) > _KEEP:
        _EXAMPLES.popitem(last=False)
    return got


KINDS = ("minidb", "lmdb", "leveldb", "rocksdb")


def find_split(data_dir: str, split: str) -> tuple[str, str] | None:
    """(path, db_type) of ``<data_dir>/<split>.<kind>`` for the first kind present (make-db's names)."""
    for kind in KINDS:
        path = os.path.join(data_dir, f"{split}.{kind}")
        if os.path.exists(path):
            return path, kind
    return None


def count_records(path: str) -> int:
    return len(read_examples(path)[0])


def load_digits_split(
    test_fraction: float = 0.2, seed: int = 0
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """scikit-learn's bundled digits as float32 (N, 1, 8, 8) in [0, 1] and int32 labels, split."""
    try:
        from sklearn.datasets import load_digits
    except ImportError as e:
        raise CLIError(
            "the digits data set comes with scikit-learn, which is not installed",
            'pip install "framework[examples]" (or scikit-learn)',
        ) from e
    digits = load_digits()
    x = (digits.images.astype(np.float32) / 16.0).reshape(-1, 1, 8, 8)
    y = digits.target.astype(np.int32)
    order = np.random.default_rng(seed).permutation(len(x))
    n_test = int(round(len(x) * test_fraction))
    test, train = order[:n_test], order[n_test:]
    return x[train], y[train], x[test], y[test]


def evaluate_accuracy(ws, md, test_db: str, batch: int = 256) -> tuple[float, int]:
    """Accuracy of the model's predict net on every record of ``test_db``."""
    x, y = read_examples(test_db)[:2]
    data_blob, prob_blob = md.data_dims()
    net = None
    correct = total = 0
    for start in range(0, len(x), batch):
        ws.feed_blob(data_blob, x[start : start + batch])
        if net is None:
            eval_def = type(md.predict_net)()
            eval_def.CopyFrom(md.predict_net)
            eval_def.name = f"{md.predict_net.name or 'predict'}_eval"
            net = ws.create_net(eval_def, overwrite=True)
        net.run()
        probs = np.asarray(ws.fetch_blob(prob_blob))
        labels = y[start : start + batch].reshape(-1)  # sequence models predict every position
        correct += int(np.sum(np.argmax(probs, axis=1) == labels))
        total += labels.size
    return correct / max(total, 1), len(x)
