"""``framework plot HISTORY -o curves.png``: loss and accuracy curves of a training history."""

from __future__ import annotations

import argparse

from framework.cli.common import CLIError
from framework.cli.history import read_history


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plot", help="draw loss and accuracy curves from a NAME.history.jsonl", description=__doc__)
    p.add_argument("history", help="a NAME.history.jsonl written by `framework train --checkpoint NAME.minidb`")
    p.add_argument("-o", "--out", default="curves.png", help="image to write (.png, .svg, .pdf)")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    records = read_history(args.history)
    train = [r for r in records if "loss" in r]
    val = [r for r in records if "val_accuracy" in r]
    if not train and not val:
        raise CLIError(f"{args.history} holds no training records")
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError as e:
        raise CLIError("plot needs matplotlib", 'pip install "framework[plot]" (or pip install matplotlib)') from e
    fig, (ax_loss, ax_acc) = plt.subplots(1, 2, figsize=(11, 4))
    if train:
        ax_loss.plot([r["iteration"] for r in train], [r["loss"] for r in train], label="train loss")
    ax_loss.set_xlabel("iteration")
    ax_loss.set_ylabel("loss")
    ax_loss.set_yscale("log")
    ax_loss.legend()
    if any("accuracy" in r for r in train):
        ax_acc.plot(
            [r["iteration"] for r in train if "accuracy" in r],
            [r["accuracy"] for r in train if "accuracy" in r],
            label="train accuracy (batch)",
            alpha=0.6,
        )
    if val:
        ax_acc.plot([r["iteration"] for r in val], [r["val_accuracy"] for r in val], "o-", label="validation accuracy")
    ax_acc.set_xlabel("iteration")
    ax_acc.set_ylabel("accuracy")
    ax_acc.set_ylim(0, 1.02)
    ax_acc.legend()
    fig.tight_layout()
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out} ({len(train)} training and {len(val)} validation records)")
    return 0
