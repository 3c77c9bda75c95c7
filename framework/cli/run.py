"""``framework run``: run a net on numpy inputs and print or save its outputs."""

from __future__ import annotations

import argparse

from framework.cli.common import CLIError, add_net_arguments, optimized, prepare_net, summarize
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
    plan = read_plan_if_plan(args.net)
    if plan is not None:
        return run_plan_file(args, plan)
    net_def, ws = prepare_net(args)
    net = ws.create_net(optimized(args, net_def, ws, list(args.output or net_def.external_output)))
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


def read_plan_if_plan(path: str):
    """The PlanDef in ``path`` if the file holds one (it has ``network``/``execution_step``), else None."""
    import os

    from framework.errors import ProtoParseError
    from framework.proto.io import read_plan

    if not os.path.isfile(path):
        return None
    with open(path, "rb") as f:
        data = f.read()
    if b"execution_step" not in data and b"network" not in data:
        return None
    try:
        plan = read_plan(path)
    except ProtoParseError:
        return None
    return plan if len(plan.execution_step) else None


def run_plan_file(args: argparse.Namespace, plan) -> int:
    """Run a PlanDef (its nets and execution steps) on the inputs; print --output blobs."""
    from framework.cli.common import new_workspace, parse_inputs, read_net

    ws = new_workspace()
    if args.init:
        ws.run_net_once(read_net(args.init))
    if args.checkpoint:
        from framework.cli.common import load_checkpoint

        load_checkpoint(ws, args.checkpoint)
    reads = [i for net in plan.network for i in [*net.external_input, *(x for op in net.op for x in op.input)]]
    for name, value in parse_inputs(args.input, None, known=reads).items():
        ws.feed_blob(name, value)
    for _ in range(args.iters):
        ws.run_plan(plan)
    steps = len(plan.execution_step)
    print(f"ran plan '{plan.name}': {len(plan.network)} nets, {steps} execution steps")
    outputs = {}
    for name in args.output or [o for net in plan.network for o in net.external_output]:
        if not ws.has_blob(name):
            raise CLIError(f"plan '{plan.name}' made no blob '{name}'")
        outputs[name] = ws.fetch_blob(name)
        print(summarize(name, outputs[name]))
    if args.save:
        print(save_arrays(args.save, numeric(outputs)))
    return 0
