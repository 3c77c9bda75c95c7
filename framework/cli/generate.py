"""``framework generate``: sample text from a character language model's checkpoint.

The model folder's predict net maps ``data`` (N x T int32 character ids,
ASCII) to ``softmax`` (N*T x vocab); generation feeds the last ``--window``
characters, samples the next one from the last position's distribution
(``--temperature``), appends it and repeats.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np

from framework.cli.common import CLIError, load_checkpoint, new_workspace
from framework.cli.model_dir import ModelDir


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("generate", help="sample text from a character model's checkpoint", description=__doc__)
    p.add_argument("model_dir", help="model folder (e.g. models/char_lstm)")
    p.add_argument("--checkpoint", required=True, help="checkpoint written by `framework train`")
    p.add_argument("--prime", default="The ", help="text to start from (default 'The ')")
    p.add_argument("--length", type=int, default=200, help="characters to generate (default 200)")
    p.add_argument("--temperature", type=float, default=0.8, help="sampling temperature (default 0.8; 0: greedy)")
    p.add_argument("--window", type=int, default=64, help="context characters fed each step (default 64)")
    p.add_argument("--seed", type=int, default=0, help="sampling seed (default 0)")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from framework.cli.chars import decode, encode

    if args.length < 0 or args.window < 1 or args.temperature < 0:
        raise CLIError("--length must be >= 0, --window >= 1 and --temperature >= 0")
    if not args.prime:
        raise CLIError("--prime must hold at least one character")
    md = ModelDir.load(args.model_dir, need_train=False)
    data_blob, prob_blob = md.data_dims()
    ws = new_workspace()
    load_checkpoint(ws, args.checkpoint)
    missing = [b for b in md.predict_net.external_input[1:] if not ws.has_blob(b)]
    if missing:
        raise CLIError(f"checkpoint {args.checkpoint} lacks {', '.join(missing)}", "was it trained with this model?")
    ids = list(encode(args.prime))
    rng = np.random.default_rng(args.seed)
    net = None
    out = sys.stdout
    out.write(args.prime)
    for _ in range(args.length):
        ctx = np.array(ids[-args.window :], np.int32)[None, :]
        ws.feed_blob(data_blob, ctx)
        if net is None:
            net = ws.create_net(md.predict_net, overwrite=True)
        net.run()
        probs = np.asarray(ws.fetch_blob(prob_blob), np.float64)
        if probs.ndim != 2 or probs.shape[0] != ctx.size:
            raise CLIError(f"predict net output '{prob_blob}' has shape {probs.shape}; expected (T, vocab)")
        p = probs[-1]
        if args.temperature == 0:
            nxt = int(np.argmax(p))
        else:
            logp = np.log(np.maximum(p, 1e-12)) / args.temperature
            q = np.exp(logp - logp.max())
            nxt = int(rng.choice(len(q), p=q / q.sum()))
        ids.append(nxt)
        out.write(decode(np.array([nxt])))
    out.write("\n")
    return 0
