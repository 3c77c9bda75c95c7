"""``framework run``: run a net on numpy inputs and print or save its outputs."""

from __future__ import annotations

import argparse

from framework.cli.common import CLIError, add_net_arguments, optimized, prepare, run_net, summarize
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
    p.add_argument(
        "--progress-every",
        type=float,
        default=5.0,
        metavar="SECONDS",
        help="while a plan runs, report its time and net runs on stderr every SECONDS (0: never; default 5)",
    )
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    if args.save:
        check_suffix(args.save)
    src, ws = prepare(args)
    if src.plan is not None:
        return run_plan_file(args, src.plan, ws)
    net_def = src.net
    opt = optimized(args, net_def, ws, list(args.output or net_def.external_output))
    run_net(ws, ws.create_net(opt), written=None if opt is net_def else net_def, iters=args.iters)
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


def run_plan_file(args: argparse.Namespace, plan, ws) -> int:
    """Run a PlanDef (its nets and execution steps) on the prepared workspace; print --output blobs."""
    with _PlanProgress(ws, plan, args.progress_every):
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


class _PlanProgress:
    """Reports a running plan's elapsed time and how often each of its nets ran, on stderr every
    ``seconds`` (a thread; nothing for plans that end sooner)."""

    def __init__(self, ws, plan, seconds: float) -> None:
        import threading

        self.ws, self.plan, self.seconds = ws, plan, seconds
        self.done = threading.Event()
        self.thread = threading.Thread(target=self._report, daemon=True) if seconds > 0 else None

    def _report(self) -> None:
        import sys
        import time

        t0 = time.perf_counter()
        while not self.done.wait(self.seconds):
            runs = [
                f"{n.name} {self.ws.get_net(n.name).run_count}" for n in self.plan.network if self.ws.has_net(n.name)
            ]
            print(
                f"plan '{self.plan.name}': {time.perf_counter() - t0:.1f} s, net runs: {', '.join(runs) or 'none yet'}",
                file=sys.stderr,
                flush=True,
            )

    def __enter__(self):
        if self.thread is not None:
            self.thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self.done.set()
        if self.thread is not None:
            self.thread.join()
