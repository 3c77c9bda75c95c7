"""The ``framework`` command: run, train, predict, inspect, draw, profile, ops, make-db, convert-db,
tune, warmup.

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

# The framework command owns its process: OpenBLAS's kernels for this CPU, before anything loads numpy
# (framework/runtime/blas_kernel.py).
from framework.runtime.blas_kernel import choose as _choose_blas_kernel

_choose_blas_kernel(default="auto")

from framework.cli import (  # noqa: E402  (after the kernel choice)
    convert,
    db_tools,
    draw,
    exec_script,
    export,
    generate,
    inspect,
    launch,
    make_db,
    ops,
    plot,
    predict,
    profile,
    run,
    summary,
    train,
    tune,
    warmup,
)
from framework.distributed import end_job  # noqa: E402
from framework.errors import FrameworkError  # noqa: E402

COMMANDS = (
    run,
    train,
    predict,
    generate,
    inspect,
    draw,
    profile,
    ops,
    make_db,
    db_tools,
    launch,
    plot,
    export,
    summary,
    exec_script,
    convert,
    tune,
    warmup,
)


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
    parser.add_argument(
        "--threads",
        type=int,
        default=None,
        help="intra-op threads: conv and big passes split over N threads, BLAS one thread each "
        "(default: $FRAMEWORK_NUM_THREADS, else 1)",
    )
    parser.add_argument(
        "--root",
        metavar="DIR",
        default=None,
        help="root folder of the workspace: ops of a net (Save, Checkpoint, Print to_file...) write only "
        "inside it (default: the current folder)",
    )
    parser.add_argument(
        "--allow-write",
        metavar="DIR",
        action="append",
        default=[],
        help="also let ops write inside DIR (absolute paths with absolute_path: 1); repeatable",
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
    args = parser.parse_args(_debug_first(list(sys.argv[1:] if argv is None else argv)))
    _limit_blas(args.blas_threads)
    if args.threads is not None:
        if args.threads < 1:
            parser.error(f"--threads must be at least 1, got {args.threads}")
        from framework.runtime.parallel import set_num_threads

        set_num_threads(args.threads)
    from framework.cli import common

    common.set_write_policy(args.root, args.allow_write)
    warmup.start_in_background(args.command)
    try:
        result = args.func(args)
        sys.stdout.flush()
        return int(result or 0)
    except BrokenPipeError:
        # `framework ... | head`: the reader left; say nothing more (stdout to /dev/null so the
        # interpreter's final flush cannot fail again).
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 141
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
    except Exception as e:
        if args.debug:
            traceback.print_exc()
            print("error: internal error (a bug in framework); please report the traceback above", file=sys.stderr)
        else:
            print(f"error: internal error (a bug in framework): {type(e).__name__}: {one_line(e)}", file=sys.stderr)
            print("hint: run again with --debug to see the traceback, and please report it", file=sys.stderr)
        return end_job(1)


def _debug_first(argv: list[str]) -> list[str]:
    """``--debug`` works before or after the subcommand (not inside what `launch` or `exec` pass on)."""
    cut = min([argv.index(c) for c in ("launch", "exec") if c in argv] or [len(argv)])
    if "--debug" in argv[:cut]:
        argv = ["--debug"] + [a for i, a in enumerate(argv) if not (i < cut and a == "--debug")]
    return argv


def _limit_blas(threads: int | None) -> None:
    from framework.runtime.blas import default_blas_threads, set_blas_threads

    set_blas_threads(threads if threads is not None else (default_blas_threads() or _env_threads()))


def _env_threads() -> int:
    env = os.environ.get("OPENBLAS_NUM_THREADS") or os.environ.get("OMP_NUM_THREADS")
    return int(env) if env and env.isdigit() else 1


def one_line(e: BaseException) -> str:
    """The first line of an error's message (the rest goes to --debug)."""
    text = str(e).strip() or type(e).__name__
    if isinstance(e, OSError) and e.filename and e.strerror:
        return f"{e.strerror}: {e.filename}"
    lines = text.splitlines()
    if len(lines) == 1:
        return lines[0]
    more = f"; and {len(lines) - 4} more (--debug shows all)" if len(lines) > 4 else ""
    return lines[0] + " (" + "; ".join(s.strip() for s in lines[1:4]) + more + ")"


def _hint_for(e: BaseException) -> str:
    """A next step for the error at hand."""
    from framework import errors

    hints = (
        (FileNotFoundError, "check the path; relative paths are taken from the current directory"),
        (errors.UnknownOperatorError, "`framework ops` lists every operator type; `framework ops TYPE` shows one"),
        (errors.ProtoParseError, "fix the file at the line and column shown; docs/netdef_format.md shows the format"),
        (errors.BlobNotFoundError, "feed it with --input NAME=FILE.npy, or create it with --init / --checkpoint"),
        (errors.UninitializedError, "feed it with --input NAME=FILE.npy, or create it with --init / --checkpoint"),
        (errors.ShapeError, "check the input shapes: `framework inspect NET --shape NAME=D1,D2` infers them"),
        (errors.ArgumentError, "`framework ops TYPE` lists the op's arguments with their kinds and defaults"),
        (errors.DBError, "`framework inspect PATH` tells what a DB or checkpoint holds"),
        (
            errors.PathNotAllowedError,
            "a net may write only inside --root (default: the current folder); --allow-write DIR allows more",
        ),
        (errors.ResourceLimitError, "FRAMEWORK_MAX_ALLOC_BYTES raises the limit if the request is genuine"),
    )
    causes = [e] + ([e.__cause__] if isinstance(e, errors.OperatorError) and e.__cause__ is not None else [])
    for kind, hint in hints:
        if any(isinstance(c, kind) for c in causes):
            return hint + " (--debug shows the traceback)"
    return "run again with --debug for the full traceback"


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
