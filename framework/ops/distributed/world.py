"""The common world: the group of processes (ranks) that collective ops work across.

Caffe2 made one with ``CreateCommonWorld`` (Gloo, after a rendezvous through a
store handler) or ``MPICreateCommonWorld``; here both give a ``CommonWorld``
over an MPI communicator from mpi4py (``pip install framework[distributed]``,
which brings the ``mpich`` wheel). A job is started by ``mpiexec -n N`` (or
``framework launch``, or a cluster's ``srun``); every rank runs the same net,
and the collective ops in it meet in the communicator.

A ``CommonWorld`` lives in a blob. It cannot be saved in a checkpoint (a live
connection is not data): checkpointing nets skip it as they skip DB readers.
"""

from __future__ import annotations

from typing import Any

from framework.errors import FrameworkError

_MISSING = (
    "the distributed ops need mpi4py and an MPI library: pip install framework[distributed] "
    "(mpi4py + the mpich wheel), then start the job with `mpiexec -n N ...` or `framework launch -n N ...`"
)


class DistributedError(FrameworkError, RuntimeError):
    """A collective failed, or its inputs do not fit the common world."""


_MPI: Any = None


def mpi() -> Any:
    """The mpi4py ``MPI`` module (imported once), or a DistributedError naming the extra to install."""
    global _MPI
    if _MPI is None:
        try:
            from mpi4py import MPI
        except ImportError as e:
            raise DistributedError(_MISSING) from e
        _MPI = MPI
    return _MPI


class CommonWorld:
    """A communicator, its size and this process's rank; ``closed`` after DestroyCommonWorld."""

    def __init__(self, comm: Any, owned: bool) -> None:
        self.comm = comm
        self.size = comm.Get_size()
        self.rank = comm.Get_rank()
        self._owned = owned  # a duplicate we made, which we free on destroy
        self.closed = False

    def clone(self) -> CommonWorld:
        return CommonWorld(self.comm.Dup(), owned=True)

    def destroy(self) -> None:
        if not self.closed and self._owned:
            self.comm.Free()
        self.closed = True

    def __repr__(self) -> str:
        state = "closed" if self.closed else "open"
        return f"<CommonWorld rank {self.rank} of {self.size}, {state}>"


def world_of_process() -> CommonWorld:
    """A new CommonWorld over a duplicate of MPI's world communicator (collectives of different
    worlds never mix, as Caffe2's separate Gloo contexts did not)."""
    MPI = mpi()
    return CommonWorld(MPI.COMM_WORLD.Dup(), owned=True)
