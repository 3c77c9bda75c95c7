"""``framework tune``: measure the conv kernels on this machine and write its dispatch table.

The thresholds that choose a conv's kernel were measured on the project's machines; this command
measures the ones that depend most on the CPU (framework/kernels/tuning.py: a standard set of conv
shapes, 1 thread, process CPU time) and writes them to the user cache folder, keyed by CPU model (and
its feature flags) and numba / numpy versions (framework/kernels/dispatch_table.py). Later processes on
this machine read it; the shipped defaults stay for everything it does not measure and for machines
never tuned. Run it on an idle machine: other processes share the caches, and slow the kernels unequally.
"""

from __future__ import annotations

import argparse
import json


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "tune",
        help="measure the conv kernels here and write this machine's dispatch table",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--show", action="store_true", help="print the table in use and where it is; measure nothing")
    p.add_argument("--dry-run", action="store_true", help="measure and print, but write nothing")
    p.add_argument("--reset", action="store_true", help="delete this machine's table (back to the shipped defaults)")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from framework.kernels import dispatch_table, machine

    path = dispatch_table.table_path()
    if args.reset:
        path.unlink(missing_ok=True)
        print(f"removed {path}: the shipped defaults apply")
        return 0
    if args.show:
        tuned = dispatch_table.load()
        print(f"machine key: {machine.machine_key()}")
        print(f"table: {path} ({'tuned' if tuned else 'none: shipped defaults'})")
        print(json.dumps(dispatch_table.DEFAULTS | tuned, indent=1, sort_keys=True))
        return 0
    from framework.kernels import tuning, window_jit

    if not window_jit.available():
        print("the compiled kernels are not available (numba missing or FRAMEWORK_NO_JIT set): nothing to tune")
        return 1
    print(f"compiling the kernels ({window_jit.warm_up():.1f} s), then measuring (1 thread, process CPU time)...")
    values, measured = tuning.tune()
    if args.dry_run:
        print(json.dumps(values, sort_keys=True))
        return 0
    written = dispatch_table.write(dispatch_table.load() | values, measured)
    print(f"wrote {written}: {json.dumps(values, sort_keys=True)}")
    return 0
