"""The ``framework`` command: run, train, predict, inspect, draw, profile, ops, make-db, convert-db,
tune, warmup.

Each subcommand lives in its own module and registers itself with
``add_parser(subparsers)``; ``main`` turns user mistakes (FrameworkError,
missing files, bad arguments) into one clear line plus a hint, exit code 2,
and shows the traceback only with ``--debug``.
"""

from __future__ import annotations

import argparse
import importlib
import os
import sys
import traceback
from typing import Sequence

# The framework command owns its process: OpenBLAS's kernels for this CPU, before anything loads numpy
# (framework/runtime/blas_kernel.py).
from framework.runtime.blas_kernel import choose as _choose_blas_kernel

_choose_blas_kernel(default="auto")

from framework.cli import warmup  # noqa: E402  (after the kernel choice)
from framework.distributed import end_job  # noqa: E402
from framework.errors import FrameworkError  # noqa: E402

# Each subcommand: its name, its module (framework/cli/<module>.py, whose ``add_parser`` builds its arguments)
# and the one-line help ``framework --help`` lists. Only the module of the subcommand that runs is imported
# (the others' imports - DB back ends, ONNX, drawing - cost every start-up); tests/cli/test_cli_commands.py
# checks these lines against the modules.
COMMANDS = (
    ("run", "run", "run a net on .npy inputs"),
    ("train", "train", "train a model folder (init/train/predict nets)"),
    ("predict", "predict", "predict with a trained checkpoint"),
    ("generate", "generate", "sample text from a character model's checkpoint"),
    ("inspect", "inspect", "describe a NetDef or a checkpoint"),
    ("draw", "draw", "draw a net's graph (dot, svg, png)"),
    ("profile", "profile", "time every op of a net"),
    ("ops", "ops", "list operators, or describe one"),
    ("make-db", "make_db", "write a data set into train/test DBs"),
    ("convert-db", "db_tools", "copy a DB into another kind (minidb, lmdb, leveldb, rocksdb, protodb)"),
    ("launch", "launch", "run a framework command on N ranks (MPI)"),
    ("plot", "plot", "draw loss and accuracy curves from a NAME.history.jsonl"),
    ("export", "export", "write the deployable init_net.pb + predict_net.pb"),
    ("summary", "summary", "per-layer output shapes, parameters and FLOPs"),
    ("exec", "exec_script", "run a Caffe2 Python script unchanged (caffe2.python -> framework)"),
    ("convert", "convert", "convert a Caffe2 model to ONNX, or an ONNX model to a Caffe2 pair"),
    ("tune", "tune", "measure the conv kernels here and write this machine's dispatch table"),
    ("warmup", "warmup", "compile the kernels ahead of use (into the user cache folder)"),
)

# Options of the top-level parser that take a value (the pre-scan for the subcommand skips their values).
_VALUE_OPTIONS = ("--blas-threads", "--threads", "--root", "--allow-write")


def build_parser(command: str | None = None) -> argparse.ArgumentParser:
    """The ``framework`` parser. Given ``command``, only the subcommand of that name (none for "") has its
    module imported and its arguments built; the others are listed by name and help, each taking any
    arguments and giving no ``func`` (``main`` then parses again with every subcommand built)."""
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
    for name, module, help_text in COMMANDS:
        if command is None or name == command:
            importlib.import_module(f"framework.cli.{module}").add_parser(sub)
        else:
            stand_in = sub.add_parser(name, help=help_text, add_help=False, prefix_chars="\0")
            stand_in.add_argument("rest", nargs="*")
            stand_in.set_defaults(func=None)
    return parser


def _command_in(argv: list[str]) -> str | None:
    """The subcommand ``argv`` names: its first word that is neither an option nor an option's value (None
    when there is none or it names no subcommand)."""
    names = {name for name, _module, _help in COMMANDS}
    i = 0
    while i < len(argv):
        word = argv[i]
        if not word.startswith("-"):
            return word if word in names else None
        if "=" not in word and len(word) > 2 and any(o.startswith(word) for o in _VALUE_OPTIONS):
            i += 1  # its value follows (argparse takes unambiguous prefixes of long options too)
        i += 1
    return None


def _parse(argv: list[str]) -> tuple[argparse.ArgumentParser, argparse.Namespace]:
    """The parser and ``argv`` parsed, importing only the module of the subcommand named (none for
    ``--help``, ``--version`` or a mistake); every module when the pre-scan missed the subcommand."""
    parser = build_parser(_command_in(argv) or "")
    args = parser.parse_args(argv)
    if getattr(args, "func", None) is None:
        parser = build_parser()
        args = parser.parse_args(argv)
    return parser, args


def _version() -> str:
    from framework import __version__

    return f"framework {__version__}"


def main(argv: Sequence[str] | None = None) -> int:
    parser, args = _parse(_debug_first(list(sys.argv[1:] if argv is None else argv)))
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
