"""``framework predict``: load a trained checkpoint into the predict net and print predictions."""

from __future__ import annotations

import argparse

import numpy as np

from framework.cli.common import CLIError, load_checkpoint, load_npy, new_workspace, parse_inputs, read_net, run_net
from framework.cli.outputs import check_suffix
from framework.cli.sources import Source, data_inputs, need_net, open_source
from framework.memory.workspace import Workspace


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("predict", help="predict with a trained checkpoint", description=__doc__)
    p.add_argument(
        "model_dir",
        nargs="?",
        help="a folder with the deployable pair init_net.pb + predict_net.pb (`framework export`, Caffe2's "
        "model zoo), a model folder or a folder with only a predict net (with --checkpoint), a predict NetDef "
        "file (with --checkpoint) or an .onnx file",
    )
    p.add_argument("--checkpoint", help="checkpoint written by `framework train` (the parameters)")
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
        help="input batch; NAME defaults to the predict net's data input (the external input that neither "
        "the init net nor the checkpoint creates)",
    )
    p.add_argument("--labels", metavar="FILE.npy", help="true labels, to print the accuracy")
    p.add_argument("--top", type=int, default=1, help="show the top K classes per example")
    p.add_argument(
        "--no-optimize", action="store_true", help="run the predict net as written (no inference optimization pass)"
    )
    p.set_defaults(func=main)


def _source(args: argparse.Namespace) -> Source:
    if args.init or args.net:
        if not (args.init and args.net) or args.model_dir:
            raise CLIError(
                "give either MODEL_DIR or both --init and --net", "e.g. --init init_net.pb --net predict_net.pb"
            )
        return Source(args.net, "pair", net=read_net(args.net), init=read_net(args.init))
    if not args.model_dir:
        raise CLIError("predict needs MODEL_DIR (or --init and --net)")
    return open_source(args.model_dir)


def _parameters(src: Source, args: argparse.Namespace) -> Workspace:
    """A workspace holding the predict net's parameters: the pair's init net, then --checkpoint."""
    ws = new_workspace()
    if src.kind in ("pair", "onnx"):
        from framework.net.base import instantiate

        instantiate(src.init, ws, owned=True).run()  # our own parse: no second copy of the weights
    elif not args.checkpoint:
        raise CLIError(
            f"--checkpoint is required with {src.path} (its predict net has no parameters of its own)",
            "pass the checkpoint written by `framework train`, or predict with an exported pair",
        )
    if args.checkpoint:
        load_checkpoint(ws, args.checkpoint)
    return ws


def main(args: argparse.Namespace) -> int:
    if args.save:
        check_suffix(args.save)
    src = _source(args)
    net = need_net(src, "predict")
    if not net.external_output:
        raise CLIError(f"the predict net of {src.path} declares no external_output (the probabilities)")
    prob_blob = net.external_output[0]
    ws = _parameters(src, args)
    data = data_inputs(net, ws.has_blob)
    reads = list(net.external_input) + [i for op in net.op for i in op.input]
    inputs = parse_inputs(args.input, data, known=reads)
    for name, value in inputs.items():
        if value.dtype == np.float64:
            value = value.astype(np.float32)
        ws.feed_blob(name, value)
    missing = [b for b in net.external_input if not ws.has_blob(b)]
    if missing:
        given = {"pair": "the init net", "onnx": "the ONNX initializers"}
        source = given.get(src.kind, f"checkpoint {args.checkpoint}")
        raise CLIError(
            f"the predict net reads {', '.join(missing)}, which neither --input nor {source} gives",
            f"feed the data with --input NAME=FILE.npy (the data input{'s' if len(data) > 1 else ''}: "
            f"{', '.join(data) or 'none'})",
        )
    written = net
    if not args.no_optimize:
        from framework.net.optimize import optimize_inference

        net = optimize_inference(net, ws, outputs=[prob_blob])
    run_net(ws, ws.create_net(net), None if net is written else written)
    probs = np.asarray(ws.fetch_blob(prob_blob))
    if probs.ndim != 2:
        raise CLIError(f"predict net output '{prob_blob}' has shape {probs.shape}; expected (batch, classes)")
    order = np.argsort(-probs, axis=1)[:, : max(1, args.top)]
    for i, row in enumerate(order):
        shown = ", ".join(f"{c} ({probs[i, c]:.3f})" for c in row)
        print(f"example {i}: class {shown}")
    if args.labels:
        labels = load_npy(args.labels).reshape(-1)
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
