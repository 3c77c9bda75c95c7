"""``framework profile``: per-op and per-op-type timings (prof_dag) and memory figures."""

from __future__ import annotations

import argparse

from framework.cli.common import add_net_arguments, optimized, prepare_net


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("profile", help="time every op of a net", description=__doc__)
    add_net_arguments(p, default_iters=20)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from framework.memory.allocator import memory_reporter

    net_def, ws = prepare_net(args)
    net_def = optimized(args, net_def, ws, list(net_def.external_output))
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
