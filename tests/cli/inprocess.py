"""Run the ``framework`` command in the test's own process, as a subprocess would run it.

``run_cli(*args, cwd=..., env=...)`` calls ``framework.cli.main`` with ``args`` from folder ``cwd``, with
``env`` added to the environment, and returns a ``subprocess.CompletedProcess`` (``returncode``,
``stdout``, ``stderr`` as text): what ``python -m framework ARGS`` gives, without the 0.2-0.4 s of CPU a
fresh interpreter spends importing numpy, protobuf and the framework. Everything the command may change
for the process is put back afterwards: the folder, the environment, ``sys.argv``, the warning filters,
the signal handlers, the CLI's write policy and the runtime's thread decisions.

What it cannot stand in for, and the tests that keep a real process: a crash or a kill (SIGKILL, a
segfault, ``os._exit``), output written to the file descriptors by native code or child processes
(``launch``, MPI), import-time effects of a fresh interpreter (the OpenBLAS kernel choice, the import
hook of ``exec``), and the entry-point script itself (tests/cli/test_cli.py runs it once).
"""

from __future__ import annotations

import contextlib
import io
import os
import signal
import subprocess
import sys
import warnings

_SIGNALS = [s for s in (signal.SIGINT, signal.SIGTERM, getattr(signal, "SIGHUP", None)) if s is not None]
_RUNTIME_FIELDS = ("threads", "pool", "blas_threads", "blas_decided", "fp_exceptions")


def run_cli(*args: str, cwd: str | os.PathLike | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
    """``framework ARGS`` run in this process from ``cwd`` with ``env`` added; see the module doc."""
    from framework.cli import common, main
    from framework.runtime.state import RUNTIME

    args = [str(a) for a in args]
    out, err = io.StringIO(), io.StringIO()
    saved_env = dict(os.environ)
    saved_cwd = os.getcwd()
    saved_argv = sys.argv[:]
    saved_signals = {s: signal.getsignal(s) for s in _SIGNALS}
    saved_policy = list(common._WRITE_POLICY)
    saved_runtime = {f: getattr(RUNTIME, f) for f in _RUNTIME_FIELDS}
    try:
        os.environ.update({k: str(v) for k, v in (env or {}).items()})
        if cwd is not None:
            os.chdir(cwd)
        sys.argv = ["framework", *args]
        with warnings.catch_warnings(), contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            warnings.simplefilter("default")  # a new process shows each warning once
            try:
                code = main(args)
            except SystemExit as e:  # argparse's usage errors and --help
                code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
                if isinstance(e.code, str):
                    print(e.code, file=sys.stderr)
    finally:
        os.chdir(saved_cwd)
        os.environ.clear()
        os.environ.update(saved_env)
        sys.argv = saved_argv
        for s, handler in saved_signals.items():
            signal.signal(s, handler)
        common._WRITE_POLICY[:] = saved_policy
        for f, value in saved_runtime.items():
            setattr(RUNTIME, f, value)
    return subprocess.CompletedProcess(["framework", *args], code, out.getvalue(), err.getvalue())
