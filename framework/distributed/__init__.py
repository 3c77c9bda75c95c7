"""Beyond one process: the MPI job as Caffe2's rendezvous, and the launcher (``framework launch``).

- ``rendezvous()``: Caffe2's rendezvous dict for ``data_parallel_model.Parallelize`` from the MPI job
  this process runs in (``shard_id`` = rank, ``num_shards`` = size).
- ``launcher``: runs ``mpiexec -n N`` from the installed MPI with a timeout, so a dead or stuck rank
  ends the whole job instead of hanging it.
"""

from __future__ import annotations

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


__all__ = ["rank_and_size", "rendezvous"]
