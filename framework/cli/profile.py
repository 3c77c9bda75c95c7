"""``framework profile``: per-op and per-op-type timings (prof_dag) and memory figures."""

from __future__ import annotations

import argparse

from framework.cli.common import CLIError, load_checkpoint, new_workspace, parse_inputs, read_net


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("profile", help="time every op of a net", description=__doc__)
    p.add_argument("net", help="NetDef file (.pbtxt or .pb)")
    p.add_argument("--init", help="init net to run once first")
    p.add_argument("--checkpoint", help="checkpoint DB to load parameters from")
    p.add_argument("--input", action="append", default=[], metavar="NAME=FILE.npy", help="feed a blob (repeatable)")
    p.add_argument("--iters", type=int, default=20, help="timed runs after one warm-up run (default 20)")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from framework.memory.allocator import memory_reporter

    if args.iters < 1:
        raise CLIError(f"--iters must be at least 1, got {args.iters}")
    net_def = read_net(args.net)
    ws = new_workspace()
    if args.init:
        ws.run_net_once(read_net(args.init))
    if args.checkpoint:
        load_checkpoint(ws, args.checkpoint)
    for name, value in parse_inputs(args.input, list(net_def.external_input)).items():
        ws.feed_blob(name, value)
    net_def.type = "prof_dag"
    net = ws.create_net(net_def)
    rep = memory_reporter()
    net.run()  # warm-up: excluded from the statistics
    before = rep.snapshot()
    rep.reset_peak()
    for _ in range(args.iters):
        net.run()
    after = rep.snapshot()
    print(net.stats().table())
    per_iter = (after["allocations"] - before["allocations"]) / args.iters
    churn = (after["allocated_bytes"] - before["allocated_bytes"]) / args.iters
    print(
        f"\nmemory: {after['current_bytes']:,} bytes live, peak {after['peak_bytes']:,} bytes during timed runs; "
        f"{per_iter:g} allocations ({churn:,.0f} bytes) per iteration in steady state"
    )
    return 0
