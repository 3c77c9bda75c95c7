"""framework: a Python operator-graph execution framework in the line of Caffe2.

A Workspace owns named Blobs and nets; operators such as FC, Relu and Add
read and write Tensors held in blobs; a NetDef protobuf is compiled into a
validated, topologically ordered net that runs over the blob map.
"""

# First, before anything imports numpy: pick OpenBLAS's kernels for this CPU (framework/runtime/blas_kernel.py).
from framework.runtime.blas_kernel import choose as _choose_blas_kernel

_choose_blas_kernel()

from framework import ops  # noqa: E402, F401  (registers every operator)
from framework.memory import Blob, Tensor, TypeMeta  # noqa: E402
from framework.memory.workspace import Workspace  # noqa: E402
from framework.runtime.blas import set_blas_threads  # noqa: E402
from framework.runtime.parallel import get_num_threads, set_num_threads  # noqa: E402

__version__ = "0.1.0"
__all__ = [
    "Blob",
    "Tensor",
    "TypeMeta",
    "Workspace",
    "__version__",
    "get_num_threads",
    "set_blas_threads",
    "set_num_threads",
]
