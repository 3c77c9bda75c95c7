"""``framework exec [--legacy] script.py [args...]``: run a Caffe2 Python script unchanged, with
``caffe2.python.*`` / ``caffe2.proto.*`` mapped onto this framework (``framework.caffe2``).
Same as ``python -m framework.caffe2 [--legacy] script.py [args...]``; ``--legacy`` also restores the
numpy/hypothesis/scipy APIs old scripts use (``framework.caffe2.legacy``)."""

from __future__ import annotations

import argparse
import sys
import traceback

from framework.cli.common import CLIError


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "exec", help="run a Caffe2 Python script unchanged (caffe2.python -> framework)", description=__doc__
    )
    p.add_argument("-m", dest="module", action="store_true", help="SCRIPT is a module name (as python -m)")
    p.add_argument(
        "--legacy",
        action="store_true",
        default=None,
        help="also restore APIs numpy/hypothesis/scipy removed since Caffe2's scripts were written (np.float...)",
    )
    p.add_argument("script", help="the script (or, with -m, the module) to run as __main__")
    p.add_argument("args", nargs=argparse.REMAINDER, help="arguments given to the script as sys.argv[1:]")
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from framework.caffe2.runner import run

    try:
        run(args.script, list(args.args), module=args.module, legacy=args.legacy)
    except FileNotFoundError as e:
        if str(e).startswith("framework.caffe2:"):
            raise CLIError(str(e)) from None
        traceback.print_exc()
        return 1
    except SystemExit as e:  # the script's own exit code
        return e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
    except Exception:  # the script's error: its traceback, exit 1, as python would
        traceback.print_exc()
        sys.stderr.flush()
        return 1
    return 0
