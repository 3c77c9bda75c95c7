"""Beyond one process: the MPI job as Caffe2's rendezvous, and the launcher (``framework launch``).

- ``rendezvous()``: Caffe2's rendezvous dict for ``data_parallel_model.Parallelize`` from the MPI job
  this process runs in (``shard_id`` = rank, ``num_shards`` = size).
- ``launcher``: runs ``mpiexec -n N`` from the installed MPI with a timeout, so a dead or stuck rank
  ends the whole job instead of hanging it.
"""

from __future__ import annotations

import os
import sys
import time
from typing import Any


def rank_and_size() -> tuple[int, int]:
    """(rank, size) of this process in its MPI job; (0, 1) when mpi4py is missing or not under mpiexec."""
    try:
        from mpi4py import MPI
    except ImportError:
        return 0, 1
    return MPI.COMM_WORLD.Get_rank(), MPI.COMM_WORLD.Get_size()


def rendezvous(engine: str = "GLOO") -> dict[str, Any] | None:
    """Caffe2's rendezvous dict for this MPI job, or None for a job of one process."""
    rank, size = rank_and_size()
    if size == 1:
        return None
    return {
        "kv_handler": None,
        "shard_id": rank,
        "num_shards": size,
        "engine": engine,
        "transport": "tcp",
        "interface": "",
        "mpi_rendezvous": True,
        "exit_nets": None,
    }


def _launched_size() -> int:
    """How many ranks the launcher (mpiexec) started this process among; 1 when not launched by one."""
    for var in ("PMI_SIZE", "OMPI_COMM_WORLD_SIZE"):
        try:
            return int(os.environ.get(var, "1"))
        except ValueError:
            continue
    return 1


def end_job(code: int) -> int:
    """On a failed rank of a job of several processes, end the whole job now (MPI_Abort) so the other
    ranks do not wait forever in a collective; otherwise return ``code``.

    A rank that fails before it initialised MPI (a bad net file, a missing input) initialises it now
    only to abort: mpiexec does not end the job when a process exits before MPI_Init, and the other
    ranks would wait for it in their first collective until the launcher's timeout."""
    MPI = sys.modules.get("mpi4py.MPI")
    if code and MPI is None and _launched_size() > 1:
        try:
            from mpi4py import MPI  # initialises MPI (mpi4py's default)
        except ImportError:
            MPI = None
    if code and MPI is not None and MPI.Is_initialized() and not MPI.Is_finalized():
        world = MPI.COMM_WORLD
        if world.Get_size() > 1:
            print(f"rank {world.Get_rank()} of {world.Get_size()} failed: ending the job", file=sys.stderr, flush=True)
            # MPI_Abort tears down mpiexec's output forwarding at once: lines written just before it were
            # lost under load (the full test suite on 2 cores); give them a moment to pass.
            time.sleep(0.3)
            world.Abort(code)
    return code


__all__ = ["end_job", "rank_and_size", "rendezvous"]
