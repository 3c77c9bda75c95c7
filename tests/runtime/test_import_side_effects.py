"""Importing the package (and Caffe2's workspace module through it) changes nothing about the host process.

Each probe runs in a fresh interpreter that loads numpy (and so its BLAS) first, takes a picture of what a
library could change for its host (environment, BLAS thread counts, signal handlers, threads, numpy's error
and print settings, the recursion limit, the switch interval, warning filters, the umask, the working
folder, import hooks and sys.path), imports, and takes the picture again.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

_PICTURE = """
import json, os, signal, sys, threading, warnings
import numpy as np

def picture():
    try:
        from threadpoolctl import threadpool_info
        pools = sorted((i["internal_api"], i["filepath"], i["num_threads"]) for i in threadpool_info())
    except ImportError:
        pools = []
    handlers = {}
    for s in signal.valid_signals():
        try:
            h = signal.getsignal(s)
        except (ValueError, OSError):
            continue
        handlers[int(s)] = repr(h)
    mask = os.umask(0)
    os.umask(mask)
    return {
        "env": dict(os.environ),
        "blas": [list(p) for p in pools],
        "signals": handlers,
        "threads": threading.active_count(),
        "np_err": np.geterr(),
        "np_print": repr(np.get_printoptions()),
        "recursion": sys.getrecursionlimit(),
        "switch": sys.getswitchinterval(),
        "warnings": repr(warnings.filters),
        "umask": mask,
        "cwd": os.getcwd(),
        "import_hooks": [type(f).__name__ for f in sys.meta_path],  # the Caffe2 hook only on install()
        "sys_path": list(sys.path),
    }

before = picture()
import {module}
after = picture()
print(json.dumps({k: [before[k], after[k]] for k in before if before[k] != after[k]}))
"""


@pytest.mark.parametrize(
    "module", ["framework", "framework.caffe2", "framework.caffe2.python.workspace", "framework.core"]
)
def test_import_changes_nothing_about_the_host(module):
    env = {k: v for k, v in os.environ.items() if k not in ("OPENBLAS_CORETYPE", "FRAMEWORK_BLAS_CORETYPE")}
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    out = subprocess.run(
        [sys.executable, "-c", _PICTURE.replace("{module}", module)],
        capture_output=True,
        text=True,
        env=env,
        timeout=300,
    )
    assert out.returncode == 0, out.stderr
    changed = json.loads(out.stdout.strip().splitlines()[-1])
    assert changed == {}, f"importing {module} changed the host process: {changed}"


def test_the_probe_sees_a_change():
    """The picture notices what a careless import would do (so the test above can fail)."""
    probe = _PICTURE.replace(
        "import {module}",
        "import signal; signal.signal(signal.SIGUSR1, lambda *a: None)\n"
        "os.environ['X_PROBE'] = '1'; np.seterr(all='raise')",
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert set(json.loads(out.stdout.strip().splitlines()[-1])) == {"env", "signals", "np_err"}
