"""``framework predict``: load a trained checkpoint into the predict net and print predictions."""

from __future__ import annotations

import argparse

import numpy as np

from framework.cli.common import CLIError, load_checkpoint, new_workspace, parse_inputs
from framework.cli.model_dir import ModelDir


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("predict", help="predict with a trained checkpoint", description=__doc__)
    p.add_argument("model_dir", help="model folder (its predict_net.pbtxt is used)")
    p.add_argument("--checkpoint", required=True, help="checkpoint written by `framework train`")
    p.add_argument(
        "--input",
        action="append",
        default=[],
        required=True,
        metavar="[NAME=]FILE.npy",
        help="input batch; NAME defaults to the predict net's first external input",
    )
    p.add_argument("--labels", metavar="FILE.npy", help="true labels, to print the accuracy")
    p.add_argument("--top", type=int, default=1, help="show the top K classes per example")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    md = ModelDir.load(args.model_dir, need_train=False)
    data_blob, prob_blob = md.data_dims()
    ws = new_workspace()
    load_checkpoint(ws, args.checkpoint)
    missing = [b for b in md.predict_net.external_input[1:] if not ws.has_blob(b)]
    if missing:
        raise CLIError(
            f"checkpoint {args.checkpoint} does not hold {', '.join(missing)} needed by the predict net",
            "was it written by training this model folder?",
        )
    inputs = parse_inputs(args.input, [data_blob])
    for name, value in inputs.items():
        if value.dtype == np.float64:
            value = value.astype(np.float32)
        ws.feed_blob(name, value)
    ws.run_net_once(md.predict_net)
    probs = np.asarray(ws.fetch_blob(prob_blob))
    if probs.ndim != 2:
        raise CLIError(f"predict net output '{prob_blob}' has shape {probs.shape}; expected (batch, classes)")
    order = np.argsort(-probs, axis=1)[:, : max(1, args.top)]
    for i, row in enumerate(order):
        shown = ", ".join(f"{c} ({probs[i, c]:.3f})" for c in row)
        print(f"example {i}: class {shown}")
    if args.labels:
        labels = np.load(args.labels, allow_pickle=False).reshape(-1)
        if len(labels) != len(probs):
            raise CLIError(f"--labels has {len(labels)} entries for {len(probs)} examples")
        acc = float(np.mean(order[:, 0] == labels))
        print(f"accuracy: {acc:.4f} ({int(round(acc * len(labels)))}/{len(labels)})")
    return 0
