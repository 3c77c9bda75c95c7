"""``framework launch -n N COMMAND ...``: run a framework command on N ranks with the installed MPI.

It runs ``mpiexec -n N python -m framework COMMAND ...`` with the ``mpiexec`` of the MPI that mpi4py
uses (the mpich wheel's, beside this Python, when installed from the ``distributed`` extra), always
with ``MPIEXEC_TIMEOUT`` so a stuck job ends. MPICH ends the whole job when one rank dies or exits
with an error, so a failure never leaves the other ranks waiting in a collective. On one machine the
launcher's connections stay on loopback (``HYDRA_IFACE=lo``); with ``--hostfile`` MPI picks the network.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from typing import Sequence

from framework.errors import FrameworkError

DEFAULT_TIMEOUT = 24 * 3600


def find_mpiexec() -> str:
    """The mpiexec beside this Python (the mpich wheel's), else the first on PATH."""
    beside = os.path.join(os.path.dirname(sys.executable), "mpiexec")
    if os.path.exists(beside):
        return beside
    found = shutil.which("mpiexec")
    if found is None:
        raise FrameworkError(
            "no mpiexec found: pip install framework[distributed] (mpi4py + the mpich wheel), "
            "or put your cluster MPI's mpiexec on PATH"
        )
    return found


def launch_command(
    n: int, argv: Sequence[str], timeout: int = DEFAULT_TIMEOUT, hostfile: str | None = None
) -> tuple[list[str], dict[str, str]]:
    """The mpiexec command line and environment that run ``framework ARGV`` on ``n`` ranks."""
    if n < 1:
        raise FrameworkError(f"launch: -n must be at least 1, got {n}")
    if timeout < 1:
        raise FrameworkError(f"launch: --timeout must be at least 1 second, got {timeout}")
    cmd = [find_mpiexec(), "-n", str(n)]
    env = dict(os.environ, MPIEXEC_TIMEOUT=str(timeout))
    if hostfile:
        cmd += ["-f", hostfile]
    else:
        env.setdefault("HYDRA_IFACE", "lo")
    cmd += [sys.executable, "-m", "framework", *argv]
    return cmd, env


def launch(n: int, argv: Sequence[str], timeout: int = DEFAULT_TIMEOUT, hostfile: str | None = None) -> int:
    """Run ``framework ARGV`` on ``n`` ranks; returns the job's exit status."""
    cmd, env = launch_command(n, argv, timeout, hostfile)
    return subprocess.call(cmd, env=env)
