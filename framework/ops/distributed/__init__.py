"""Distributed ops: the common world, collectives (Allreduce, Broadcast, Reduce, Allgather, ReduceScatter,
Barrier, and Caffe2's MPI* spellings), point-to-point SendTensor/ReceiveTensor, and Gloo's store
handlers, over MPI through mpi4py.

Each import below registers its module's ops; keep one line per module.
world.py (the CommonWorld blob type) and base.py (the shared op base) register no ops.
"""

from framework.ops.distributed import (  # noqa: F401
    collectives,
    p2p,
    store_handlers,
)
