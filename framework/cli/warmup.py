"""``framework warmup``: compile the kernels ahead of use, into the user cache folder.

The first use of the compiled kernels in a process without a cache compiles them (tens of seconds);
after this command every later process loads them from numba's cache in the user cache folder
(``$FRAMEWORK_CACHE_DIR``, else ``$XDG_CACHE_HOME/framework``, else ``~/.cache/framework``; numba's
``$NUMBA_CACHE_DIR`` wins), which works for a read-only install too. Kernels this CPU cannot run are
skipped; one whose compile fails is reported (the numpy kernel runs in its place).

The first ``framework`` command on a machine (no warm-up recorded for this CPU and these numba and
numpy versions) starts this command in the background, at low priority, and goes on without waiting;
``FRAMEWORK_NO_AUTO_WARMUP=1`` turns that off.
"""

from __future__ import annotations

import argparse
import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

# A background warm-up that has not finished after this long is taken as dead (killed, machine rebooted).
_STALE_LOCK_SECONDS = 3600.0
# Commands that compile the kernels themselves.
_NO_AUTO = ("warmup", "tune")


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser(
        "warmup",
        help="compile the kernels ahead of use (into the user cache folder)",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument("--background", action="store_true", help=argparse.SUPPRESS)
    p.set_defaults(func=main)


def main(args: argparse.Namespace) -> int:
    from framework.kernels import catalog, machine, window_jit

    if getattr(args, "background", False):
        _lower_priority()
    try:
        if not window_jit.available():
            print("the compiled kernels are not available (numba missing or FRAMEWORK_NO_JIT set): nothing to compile")
            return 0
        seconds = window_jit.warm_up()
        t = time.perf_counter()
        others = warm_others()
        seconds += time.perf_counter() - t
        print(f"kernels ready in {seconds:.1f} s; cache: {machine.numba_cache_dir()}")
        for op, strategy in catalog.strategies():
            state = catalog.status(strategy)
            if state not in ("numpy", "ready"):
                state += "; the next strategy that fits runs"
            print(f"  {op} {strategy.name}: {state}")
        for family, ops, module in others:
            state = catalog.other_status(family, module)
            if state != "ready":
                state += "; the numpy path runs"
            print(f"  {family} ({ops}): {state}")
        _record_done()
        return 0
    finally:
        if getattr(args, "background", False):
            _lock_path().unlink(missing_ok=True)


def warm_others() -> list:
    """Compile the families outside the conv and pool strategies (catalog.OTHERS), each through its
    module's ``warm_up()``; (family, its ops, the module) for each."""
    from framework.kernels import catalog

    done = []
    for family, ops, name in catalog.OTHERS:
        module = importlib.import_module(name)
        module.warm_up()
        done.append((family, ops, module))
    return done


def done_path() -> Path:
    """The file a finished warm-up leaves in the user cache folder: one per machine key (CPU model and
    flags, numba and numpy versions), so a new numba or another CPU warms up again."""
    machine = _machine()
    return machine.cache_dir() / "warmup" / f"{machine.machine_key()}.done"


def _machine():
    """framework.kernels.machine (the kernels package imports nothing on its own: no op registers and
    numba stays unloaded for this check)."""
    from framework.kernels import machine

    return machine


def _lock_path() -> Path:
    return done_path().with_suffix(".running")


def _record_done() -> None:
    path = done_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(time.strftime("%Y-%m-%dT%H:%M:%SZ\n", time.gmtime()))
    except OSError:  # a cache folder nothing may write to: the kernels were not cached either
        pass


def _lower_priority() -> None:
    try:
        os.nice(10)
    except (AttributeError, OSError):  # not on this platform
        pass


def start_in_background(command: str) -> bool:
    """Start ``framework warmup`` in a detached low-priority process when this machine has never
    warmed up (no ``done_path()``), numba is installed, and no other background warm-up runs; True if
    one was started. The caller does not wait: its own first kernels compile (or load what the
    background process has cached already) as before. Never raises for a cache folder it cannot write."""
    if command in _NO_AUTO or _env_on("FRAMEWORK_NO_AUTO_WARMUP") or _env_on("FRAMEWORK_NO_JIT"):
        return False
    if importlib.util.find_spec("numba") is None:
        return False
    try:
        if done_path().exists() or not _take_lock():
            return False
    except OSError:
        return False
    log = done_path().with_suffix(".log")
    try:
        with open(log, "w") as out:
            child = subprocess.Popen(
                [sys.executable, "-m", "framework", "warmup", "--background"],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                env=_child_env(),
            )
        _lock_path().write_text(f"{child.pid}\n")
    except OSError:
        _lock_path().unlink(missing_ok=True)
        return False
    print(f"note: compiling the kernels in the background, once (framework warmup; log: {log})", file=sys.stderr)
    return True


def _env_on(name: str) -> bool:
    return os.environ.get(name, "") not in ("", "0")


def _take_lock() -> bool:
    """Create the lock file (``<key>.running``; it will hold the background process's id); False if a
    live one exists (another command started a warm-up)."""
    lock = _lock_path()
    lock.parent.mkdir(parents=True, exist_ok=True)
    try:
        if time.time() - lock.stat().st_mtime > _STALE_LOCK_SECONDS:
            lock.unlink(missing_ok=True)
    except FileNotFoundError:
        pass
    try:
        fd = os.open(lock, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o644)
    except FileExistsError:
        return False
    os.close(fd)
    return True


def _child_env() -> dict[str, str]:
    """This environment, with the folder this ``framework`` package was imported from first on the
    path: the child imports the same package whatever its working folder."""
    import framework

    root = str(Path(framework.__file__).resolve().parent.parent)
    path = os.environ.get("PYTHONPATH", "")
    return dict(os.environ, PYTHONPATH=root + (os.pathsep + path if path else ""))
