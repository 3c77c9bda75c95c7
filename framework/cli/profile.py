"""``framework profile``: per-op and per-op-type timings (prof_dag) and memory figures."""

from __future__ import annotations

import argparse

from framework.cli.common import add_net_arguments, optimized, prepare, run_net


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("profile", help="time every op of a net", description=__doc__)
    add_net_arguments(p, default_iters=20)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from framework.memory.allocator import memory_reporter

    src, ws = prepare(args)
    if src.plan is not None:  # every network of the plan timed, the plan run as written
        plan = type(src.plan)()
        plan.CopyFrom(src.plan)
        for n in plan.network:
            n.type = "prof_dag"
        run, nets = (lambda: ws.run_plan(plan)), lambda: [ws.get_net(n.name) for n in plan.network]
    else:
        net_def = optimized(args, src.net, ws, list(src.net.external_output))
        written = None if net_def is src.net else src.net
        net_def.type = "prof_dag"
        net = ws.create_net(net_def)
        run, nets = (lambda: run_net(ws, net, written)), lambda: [net]
    rep = memory_reporter()
    run()  # warm-up: excluded from the statistics
    before = rep.snapshot()
    rep.reset_peak()
    for _ in range(args.iters):
        run()
    after = rep.snapshot()
    print("\n\n".join(n.stats().table() for n in nets()))
    per_iter = (after["allocations"] - before["allocations"]) / args.iters
    churn = (after["allocated_bytes"] - before["allocated_bytes"]) / args.iters
    print(
        f"\nmemory: {after['current_bytes']:,} bytes live, peak {after['peak_bytes']:,} bytes during timed runs; "
        f"{per_iter:g} allocations ({churn:,.0f} bytes) per iteration in steady state"
    )
    return 0
