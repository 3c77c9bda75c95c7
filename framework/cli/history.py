"""Training history: one JSON object per line in ``<checkpoint name>.history.jsonl`` beside the checkpoint.

Training records (every 10 iterations and the last): ``iteration``, ``epoch``, ``loss``, ``accuracy``
(train batch), ``lr``, ``seconds`` since the run started. Validation records (``--val-every``
iterations, default once per epoch, and at the end): ``iteration``, ``epoch``, ``val_accuracy``
on the held-out (test) split. A resumed run appends; an overwriting run starts a new file.
``framework plot history.jsonl -o curves.png`` draws them.
"""

from __future__ import annotations

import json
import os
from typing import Any

import numpy as np


class History:
    """Appends records to ``path`` (None: keeps nothing); ``fresh`` truncates it first."""

    def __init__(self, path: str | None, fresh: bool) -> None:
        self.path = path
        if path is not None:
            if os.path.dirname(path):
                os.makedirs(os.path.dirname(path), exist_ok=True)
            self._f = open(path, "w" if fresh else "a", encoding="utf-8")

    def write(self, record: dict[str, Any]) -> None:
        if self.path is None:
            return
        clean = {k: (round(v, 6) if isinstance(v, float) else v) for k, v in record.items() if v is not None}
        self._f.write(json.dumps(clean) + "\n")
        self._f.flush()

    def close(self) -> None:
        if self.path is not None:
            self._f.close()


def history_path(checkpoint: str | None) -> str | None:
    """The history of checkpoint ``runs/mlp.minidb`` is ``runs/mlp.history.jsonl``: each checkpoint
    keeps its own, so two models trained into one folder, and a later --resume, never mix."""
    if not checkpoint:
        return None
    return os.path.splitext(os.path.normpath(checkpoint))[0] + ".history.jsonl"


def learning_rate(ws: Any, train_net: Any) -> float | None:
    """The current learning rate: the first LearningRate op's output, sign flipped (Caffe2 keeps it negative
    so that the update adds lr * grad)."""
    for op in train_net.op:
        if op.type == "LearningRate" and ws.has_blob(op.output[0]):
            try:
                return abs(float(np.asarray(ws.fetch_blob(op.output[0])).reshape(-1)[0]))
            except Exception:  # not computed yet
                return None
    return None


def read_history(path: str) -> list[dict[str, Any]]:
    """The records of a history file (a CLIError naming the line if one is not JSON)."""
    from framework.cli.common import CLIError

    if not os.path.exists(path):
        raise CLIError(
            f"history file not found: {path}",
            "train with --checkpoint DIR/NAME.minidb: it writes DIR/NAME.history.jsonl",
        )
    out = []
    with open(path, encoding="utf-8") as f:
        for number, line in enumerate(f, 1):
            if line.strip():
                try:
                    out.append(json.loads(line))
                except json.JSONDecodeError as e:
                    raise CLIError(f"{path}:{number}: not a JSON record ({e.msg})") from None
                except RecursionError:  # nesting deeper than the parser's stack: not a history record
                    raise CLIError(f"{path}:{number}: not a history record (JSON nested too deep)") from None
                if not isinstance(out[-1], dict):
                    kind = type(out[-1]).__name__
                    raise CLIError(f"{path}:{number}: not a history record (a JSON {kind}, not an object)")
    return out
