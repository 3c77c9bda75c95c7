"""``framework run``: run a net on numpy inputs and print or save its outputs."""

from __future__ import annotations

import argparse

from framework.cli.common import CLIError, add_net_arguments, prepare_net, summarize
from framework.cli.outputs import HELP, check_suffix, numeric, save_arrays


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("run", help="run a net on .npy inputs", description=__doc__)
    add_net_arguments(p, default_iters=1)
    p.add_argument(
        "--output",
        action="append",
        default=[],
        metavar="NAME",
        help="blob to print (default: the net's external outputs)",
    )
    p.add_argument("--save", metavar="OUT.npz|.npy|.csv", help=HELP)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    if args.save:
        check_suffix(args.save)
    net_def, ws = prepare_net(args)
    net = ws.create_net(net_def)
    for _ in range(args.iters):
        net.run()
    names = args.output or list(net_def.external_output)
    if not names:
        written = [o for op in net_def.op for o in op.output]
        names = list(net_def.op[-1].output) if net_def.op else []
        print(
            f"net '{net_def.name}' declares no external_output: showing its last op's outputs; it wrote "
            f"{', '.join(dict.fromkeys(written))} (pick with --output NAME)"
        )
    outputs = {}
    for name in names:
        if not ws.has_blob(name):
            raise CLIError(f"net '{net_def.name}' has no blob '{name}'", "list blobs with `framework inspect NET`")
        outputs[name] = ws.fetch_blob(name)
        print(summarize(name, outputs[name]))
    if args.save:
        print(save_arrays(args.save, numeric(outputs)))
    return 0
