"""``framework export MODEL_DIR --checkpoint X --out DIR``: Caffe2's deployable pair.

Writes ``DIR/init_net.pb`` (one ``GivenTensor*Fill`` per parameter, typed values: what a Caffe2 C++
predictor reads) and ``DIR/predict_net.pb`` (the model folder's predict net), both binary NetDefs
written atomically. ``framework predict DIR`` and ``framework run DIR`` take the folder; Caffe2's
``workspace.Predictor(init_net, predict_net)`` takes the two files.
"""

from __future__ import annotations

import argparse
import os

from framework.cli.common import CLIError, load_checkpoint, new_workspace
from framework.cli.model_dir import PAIR, ModelDir


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("export", help="write the deployable init_net.pb + predict_net.pb", description=__doc__)
    p.add_argument("model_dir", help="model folder (init/train/predict nets)")
    p.add_argument("--checkpoint", required=True, help="checkpoint written by `framework train`")
    p.add_argument("--out", required=True, help="folder to write init_net.pb and predict_net.pb into")
    p.add_argument("--overwrite", action="store_true", help="replace an existing pair in --out")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from framework.predictor.mobile_exporter import Export
    from framework.proto.io import write_binary

    md = ModelDir.load(args.model_dir, need_train=False)
    targets = [os.path.join(args.out, f) for f in PAIR]
    if any(os.path.exists(t) for t in targets) and not args.overwrite:
        raise CLIError(f"{args.out} already holds {' and '.join(PAIR)}", "pass --overwrite to replace them")
    ws = new_workspace()
    load_checkpoint(ws, args.checkpoint)
    params = list(md.predict_net.external_input[1:])
    missing = [p for p in params if not ws.has_blob(p)]
    if missing:
        raise CLIError(f"checkpoint {args.checkpoint} does not hold {', '.join(missing)} needed by the predict net")
    init, predict = Export(ws, md.predict_net, params)
    # Caffe2's Export lists every blob nothing reads (a Reshape's old_shape...); the model's declared outputs
    # come first, since `framework predict` scores the first one
    declared = [b for b in md.predict_net.external_output]
    rest = [b for b in predict.external_output if b not in declared]
    del predict.external_output[:]
    predict.external_output.extend(declared + rest)
    os.makedirs(args.out, exist_ok=True)
    write_binary(init, targets[0])
    write_binary(predict, targets[1])
    n = sum(1 for op in init.op if op.output and op.output[0] in params)
    print(f"wrote {targets[0]} ({n} parameters) and {targets[1]} ({len(predict.op)} ops)")
    return 0
