"""The ``framework`` command: run, train, predict, inspect, draw, profile, ops, make-db, convert-db.

Each subcommand lives in its own module and registers itself with
``add_parser(subparsers)``; ``main`` turns user mistakes (FrameworkError,
missing files, bad arguments) into one clear line plus a hint, exit code 2,
and shows the traceback only with ``--debug``.
"""

from __future__ import annotations

import argparse
import os
import sys
import traceback
from typing import Sequence

from framework.cli import db_tools, draw, inspect, launch, make_db, ops, predict, profile, run, train
from framework.distributed import end_job
from framework.errors import FrameworkError

COMMANDS = (run, train, predict, inspect, draw, profile, ops, make_db, db_tools, launch)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="framework",
        description="Run, train, inspect and profile Caffe2-style nets (protobuf text or binary) on numpy.",
    )
    parser.add_argument("--debug", action="store_true", help="show Python tracebacks for errors")
    parser.add_argument(
        "--blas-threads",
        type=int,
        default=None,
        help="BLAS threads (default: $OPENBLAS_NUM_THREADS, else 1: small GEMMs run faster on one thread, "
        "and several threads collapse when the cores are shared)",
    )
    parser.add_argument("--version", action="version", version=_version())
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for cmd in COMMANDS:
        cmd.add_parser(sub)
    return parser


def _version() -> str:
    from framework import __version__

    return f"framework {__version__}"


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    _limit_blas(args.blas_threads)
    try:
        result = args.func(args)
        return int(result or 0)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        return 130
    except (FrameworkError, OSError, ValueError) as e:
        if args.debug:
            traceback.print_exc()
        print(f"error: {one_line(e)}", file=sys.stderr)
        hint = getattr(e, "hint", "") or _hint_for(e)
        if hint:
            print(f"hint: {hint}", file=sys.stderr)
        return end_job(2)
    except Exception:
        traceback.print_exc()
        print("error: internal error (a bug in framework); please report the traceback above", file=sys.stderr)
        return end_job(1)


def _limit_blas(threads: int | None) -> None:
    if threads is None:
        env = os.environ.get("OPENBLAS_NUM_THREADS") or os.environ.get("OMP_NUM_THREADS")
        threads = int(env) if env and env.isdigit() else 1
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover - a core dependency
        return
    threadpool_limits(max(1, threads), user_api="blas")


def one_line(e: BaseException) -> str:
    """The first line of an error's message (the rest goes to --debug)."""
    text = str(e).strip() or type(e).__name__
    if isinstance(e, OSError) and e.filename and e.strerror:
        return f"{e.strerror}: {e.filename}"
    lines = text.splitlines()
    return lines[0] if len(lines) == 1 else lines[0] + " (" + "; ".join(s.strip() for s in lines[1:4]) + ")"


def _hint_for(e: BaseException) -> str:
    if isinstance(e, FileNotFoundError):
        return "check the path; relative paths are taken from the current directory"
    return "run again with --debug for the full traceback"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
