"""``framework convert MODEL --to onnx -o model.onnx``: a Caffe2 model as an ONNX file;
``framework convert model.onnx --to caffe2 -o DIR``: an ONNX model as Caffe2's deployable pair
(``DIR/init_net.pb`` + ``DIR/predict_net.pb`` of our ops, see ``framework.onnx.backend``).

MODEL is a model folder (``init_net.pbtxt`` + ``predict_net.pbtxt``, or Caffe2's deployable
``init_net.pb`` + ``predict_net.pb``), or a predict NetDef file with ``--init INIT`` or
``--checkpoint DB`` giving the parameters (``--checkpoint`` also works with a folder; a model
folder's own init net makes untrained weights, exported only with ``--untrained``). Input shapes
come from ``--shape NAME=D1,D2,...[:DTYPE]`` or from the net itself (an FC input, or the one image
size a Conv net accepts; see ``framework/onnx/shapes.py``); ``--dynamic-batch`` leaves dim 0 free.
``--opset`` targets an older opset (default: the newest both onnx and onnxruntime support). An op
with no ONNX expression stops the export with a list of every such op; no file is written.
``--check`` then runs the ONNX file in onnxruntime and the net in our engine on the same random
inputs and prints the largest difference.
"""

from __future__ import annotations

import argparse
import os

import numpy as np

from framework.cli.common import MODEL_PATH_HELP, CLIError, load_checkpoint, new_workspace, parse_shapes, read_net


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "convert", help="convert a Caffe2 model to ONNX, or an ONNX model to a Caffe2 pair", description=__doc__
    )
    p.add_argument("model", help=MODEL_PATH_HELP + " (with --to caffe2: an .onnx file)")
    p.add_argument("--to", required=True, choices=["onnx", "caffe2"], help="target format")
    p.add_argument("-o", "--output", required=True, help="file to write (model.onnx), or folder (--to caffe2)")
    p.add_argument("--init", help="init NetDef creating the parameters")
    p.add_argument("--checkpoint", help="checkpoint holding the parameters (instead of running the init net)")
    p.add_argument(
        "--shape",
        action="append",
        default=[],
        metavar="NAME=D1,D2,...[:DTYPE]",
        help="an input's shape and element type (default float32), e.g. ids=8,16:int32; a name given here is "
        "an input even where the init net fills a placeholder for it",
    )
    p.add_argument(
        "--dynamic-batch",
        action="store_true",
        help="leave the batch axis (dim 0) of the inputs and outputs free, as torch.onnx.export's dynamic_axes",
    )
    p.add_argument(
        "--untrained",
        action="store_true",
        help="export a model folder's freshly initialized (random) weights without --checkpoint",
    )
    p.add_argument("--opset", type=int, help="ONNX opset to target (default: newest supported)")
    p.add_argument("--check", action="store_true", help="compare onnxruntime with our engine on random inputs")
    p.add_argument("--overwrite", action="store_true", help="replace an existing output file")
    p.set_defaults(func=main)


def _nets(args: argparse.Namespace) -> tuple:
    from framework.cli.sources import need_net, open_source

    src = open_source(args.model)
    return need_net(src, "convert"), (read_net(args.init) if args.init else src.init), src


def _param_workspace(args, predict, init):
    from framework.onnx.exporter import needed_init_ops

    ws = new_workspace()
    if args.checkpoint:
        load_checkpoint(ws, args.checkpoint)
    elif init is not None:
        for op in needed_init_ops(init, predict):
            ws.run_operator_once(op)
    return ws


def to_caffe2(args: argparse.Namespace) -> int:
    from framework.cli.common import read_onnx
    from framework.cli.model_dir import PAIR
    from framework.proto.io import write_binary

    if not str(args.model).endswith(".onnx"):
        raise CLIError("--to caffe2 converts an ONNX file (model.onnx)", "for Caffe2 models use --to onnx")
    targets = [os.path.join(args.output, f) for f in PAIR]
    if any(os.path.exists(t) for t in targets) and not args.overwrite:
        raise CLIError(f"{args.output} already holds {' and '.join(PAIR)}", "pass --overwrite to replace them")
    init, predict = read_onnx(args.model)
    os.makedirs(args.output, exist_ok=True)
    write_binary(init, targets[0])
    write_binary(predict, targets[1])
    print(f"wrote {targets[0]} ({len(init.op)} initializers) and {targets[1]} ({len(predict.op)} ops)")
    return 0


def main(args: argparse.Namespace) -> int:
    if args.to == "caffe2":
        return to_caffe2(args)
    try:
        import onnx  # noqa: F401  (a clear error when onnx is missing)
    except ImportError as e:
        raise CLIError("framework convert --to onnx needs the onnx package", "pip install 'framework[onnx]'") from e
    from onnx import helper

    from framework.net.inference import specs_from_workspace
    from framework.onnx import OnnxExportError, export
    from framework.onnx.shapes import guess_input_shapes

    if os.path.exists(args.output) and not args.overwrite:
        raise CLIError(f"{args.output} exists", "pass --overwrite to replace it")
    predict, init, src = _nets(args)
    if src.kind == "model" and not (args.checkpoint or args.init or args.untrained):
        raise CLIError(
            f"{args.model} is a model folder: its init net makes random, untrained weights",
            "pass --checkpoint (written by `framework train`), or --untrained to export the random weights",
        )
    ws = _param_workspace(args, predict, init)
    reads = [*predict.external_input, *(b for op in predict.op for b in op.input)]
    given = parse_shapes(args.shape, known=reads)
    for b in given:  # a declared input replaces the init net's placeholder
        if ws.has_blob(b):
            ws.remove_blob(b)
    shapes = {b: dims for b, (dims, _) in given.items()}
    inputs = [b for b in predict.external_input if not ws.has_blob(b)]
    missing = [b for b in inputs if b not in shapes]
    if missing:
        guessed = guess_input_shapes(predict, missing, specs_from_workspace(ws))
        for b, s in guessed.items():
            print(f"input '{b}': shape {list(s)} (from the net; --shape {b}=... to change it)")
        shapes.update(guessed)
    value_info = {
        b: (helper.np_dtype_to_tensor_dtype(given.get(b, ((), None))[1] or np.dtype(np.float32)), tuple(d))
        for b, d in shapes.items()
    }
    dynamic = {b: {0: "batch"} for b in inputs if b in shapes} if args.dynamic_batch else None
    try:
        model = export(predict, value_info=value_info, workspace=ws, opset=args.opset, dynamic_axes=dynamic)
    except OnnxExportError as e:
        raise CLIError(str(e), "no file was written") from None
    from framework.proto.io import _atomic_write

    # a fresh O_EXCL temp file in the target folder, renamed over the output: no fixed name, no symlink followed
    _atomic_write(args.output, model.SerializeToString())
    print(
        f"wrote {args.output}: opset {model.opset_import[0].version}, {len(model.graph.node)} nodes, "
        f"{len(model.graph.initializer)} initializers, inputs "
        + ", ".join(f"{i.name}{_dims(i)}" for i in model.graph.input)
    )
    if args.check:
        return _check(model, predict, ws)
    return 0


def _dims(vi) -> str:
    return "[" + ",".join(d.dim_param or str(d.dim_value) for d in vi.type.tensor_type.shape.dim) + "]"


def _check(model, predict, ws) -> int:
    try:
        import onnxruntime as ort
    except ImportError as e:
        raise CLIError("--check needs onnxruntime", "pip install onnxruntime") from e
    from onnx import helper

    rng = np.random.default_rng(0)
    feeds = {}
    for i in model.graph.input:
        dt = helper.tensor_dtype_to_np_dtype(i.type.tensor_type.elem_type)
        shape = [3 if d.dim_param else d.dim_value for d in i.type.tensor_type.shape.dim]  # a free batch: 3
        feeds[i.name] = rng.standard_normal(shape).astype(dt) if dt.kind == "f" else np.zeros(shape, dt)
    sess = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    got = sess.run(None, feeds)
    for k, v in feeds.items():
        ws.feed_blob(k, v)
    ws.run_net_once(predict)
    worst = 0.0
    for o, g in zip(model.graph.output, got):
        want = np.asarray(ws.fetch_blob(o.name))
        diff = float(np.max(np.abs(g.astype(np.float64) - want.astype(np.float64)))) if want.size else 0.0
        worst = max(worst, diff)
        print(f"check {o.name}: shape {list(want.shape)}, largest difference onnxruntime vs framework {diff:.3g}")
    print(f"check: largest difference {worst:.3g}")
    return 0
