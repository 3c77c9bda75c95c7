import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))


def mpiexec_path() -> str:
    path = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if not os.path.exists(path):
        pytest.fail(f"no mpiexec beside {sys.executable}: install the test extra (mpi4py + the mpich wheel)")
    return path


def mpirun(n, *args, timeout=120, env=None, **kw):
    """Run ``python ARGS`` on n ranks; returns the CompletedProcess."""
    # HYDRA_IFACE=lo: the launcher's own connections stay on loopback (one machine).
    e = dict(os.environ, PYTHONPATH=ROOT, OPENBLAS_NUM_THREADS="1", MPIEXEC_TIMEOUT=str(timeout), HYDRA_IFACE="lo")
    e.update(env or {})
    return subprocess.run(
        [mpiexec_path(), "-n", str(n), sys.executable, *args],
        capture_output=True,
        text=True,
        timeout=timeout + 30,
        env=e,
        **kw,
    )


@pytest.fixture
def run_ranks():
    return mpirun
