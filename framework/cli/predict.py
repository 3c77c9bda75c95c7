"""``framework predict``: load a trained checkpoint into the predict net and print predictions."""

from __future__ import annotations

import argparse
import os

import numpy as np

from framework.cli.common import CLIError, load_checkpoint, new_workspace, parse_inputs, read_net
from framework.cli.model_dir import ModelDir
from framework.cli.outputs import check_suffix


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("predict", help="predict with a trained checkpoint", description=__doc__)
    p.add_argument(
        "model_dir",
        nargs="?",
        help="model folder (its predict_net.pbtxt, with --checkpoint), or a folder with the deployable pair "
        "init_net.pb + predict_net.pb (from `framework export`)",
    )
    p.add_argument("--checkpoint", help="checkpoint written by `framework train` (for a model folder)")
    p.add_argument("--init", help="init net of a deployable pair (with --net, instead of MODEL_DIR)")
    p.add_argument("--net", help="predict net of a deployable pair (with --init)")
    p.add_argument(
        "--save",
        metavar="PREDS.csv|.npy",
        help="save the predictions: .csv (example, top-k classes "
        "and probabilities) or .npy (the probabilities, examples x classes)",
    )
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
    p.add_argument(
        "--no-optimize", action="store_true", help="run the predict net as written (no inference optimization pass)"
    )
    p.set_defaults(func=main)


def _model(args: argparse.Namespace) -> ModelDir:
    if args.init or args.net:
        if not (args.init and args.net) or args.model_dir:
            raise CLIError(
                "give either MODEL_DIR or both --init and --net", "e.g. --init init_net.pb --net predict_net.pb"
            )
        return ModelDir(os.path.dirname(args.net), read_net(args.init), None, read_net(args.net), deployable=True)
    if not args.model_dir:
        raise CLIError("predict needs MODEL_DIR (or --init and --net)")
    return ModelDir.load(args.model_dir, need_train=False)


def main(args: argparse.Namespace) -> int:
    if args.save:
        check_suffix(args.save)
    md = _model(args)
    data_blob, prob_blob = md.data_dims()
    ws = new_workspace()
    if md.deployable:
        from framework.net.base import instantiate

        instantiate(md.init_net, ws, owned=True).run()  # our own parse: no second copy of the weights
    elif not args.checkpoint:
        raise CLIError("--checkpoint is required with a model folder", "or predict with an exported pair")
    else:
        load_checkpoint(ws, args.checkpoint)
    inputs = parse_inputs(args.input, [data_blob])
    # the first input and any blob fed with --input (a net with several inputs, e.g. the dense and
    # sparse features of a ranking model) need not come from the init net
    missing = [b for b in md.predict_net.external_input[1:] if not ws.has_blob(b) and b not in inputs]
    if missing:
        source = "the init net" if md.deployable else f"checkpoint {args.checkpoint}"
        raise CLIError(
            f"{source} does not create {', '.join(missing)} needed by the predict net",
            "export the pair again with `framework export`"
            if md.deployable
            else "was it written by training this model folder?",
        )
    for name, value in inputs.items():
        if value.dtype == np.float64:
            value = value.astype(np.float32)
        ws.feed_blob(name, value)
    net = md.predict_net
    if not args.no_optimize:
        from framework.net.optimize import optimize_inference

        net = optimize_inference(net, ws, outputs=[prob_blob])
    ws.run_net_once(net)
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
    if args.save:
        print(_save(args.save, probs, order))
    return 0


def _save(path: str, probs: np.ndarray, order: np.ndarray) -> str:
    if check_suffix(path) == ".npy":
        np.save(path, probs)
        return f"saved the probabilities {list(probs.shape)} to {path}"
    k = order.shape[1]
    header = ["example"] + [f"{w}_{j + 1}" for j in range(k) for w in ("class", "probability")]
    with open(path, "w", encoding="utf-8") as f:
        f.write(",".join(header) + "\n")
        for i, row in enumerate(order):
            f.write(",".join([str(i)] + [f"{c},{probs[i, c]:.6g}" for c in row]) + "\n")
    return f"saved {len(order)} predictions (top {k}) to {path}"
