"""Run a script or module with the caffe2 import hook installed (``python -m framework.caffe2``,
``framework exec``). The script is the user's own program, run as ``__main__`` with its own
``sys.argv``; exit codes and exceptions are the script's."""

from __future__ import annotations

import os
import runpy
import sys

USAGE = (
    "usage: python -m framework.caffe2 [--legacy] script.py [args...]  |  "
    "python -m framework.caffe2 [--legacy] -m module [args...]\n"
    "  --legacy  also restore the numpy/hypothesis/scipy APIs old Caffe2 scripts use (framework.caffe2.legacy)"
)


def run(target: str, args: list[str], module: bool = False, legacy: bool | None = None) -> None:
    """Install the hook and run ``target`` (a path, or a module name with ``module``) as __main__;
    ``legacy`` as ``framework.caffe2.install``'s."""
    from framework.caffe2 import install

    install(legacy=legacy)
    if module:
        sys.argv = [target, *args]
        if os.getcwd() not in sys.path:  # as `python -m`: modules are found from the current folder
            sys.path.insert(0, os.getcwd())
        runpy.run_module(target, run_name="__main__", alter_sys=True)
        return
    if not os.path.isfile(target):
        raise FileNotFoundError(f"framework.caffe2: no script {target!r}")
    sys.argv = [target, *args]
    sys.path.insert(0, os.path.dirname(os.path.abspath(target)))
    runpy.run_path(target, run_name="__main__")


def main(argv: list[str]) -> int:
    legacy = None
    if argv and argv[0] == "--legacy":
        legacy, argv = True, argv[1:]
    if not argv or argv[0] in ("-h", "--help"):
        print(USAGE, file=sys.stderr if not argv else sys.stdout)
        return 2 if not argv else 0
    if argv[0] == "-m":
        if len(argv) < 2:
            print(USAGE, file=sys.stderr)
            return 2
        run(argv[1], argv[2:], module=True, legacy=legacy)
        return 0
    try:
        run(argv[0], argv[1:], legacy=legacy)
    except FileNotFoundError as e:
        if str(e).startswith("framework.caffe2:"):
            print(e, file=sys.stderr)
            return 2
        raise
    return 0
