"""framework: a Python operator-graph execution framework in the line of Caffe2.

A Workspace owns named Blobs and nets; operators such as FC, Relu and Add
read and write Tensors held in blobs; a NetDef protobuf is compiled into a
validated, topologically ordered net that runs over the blob map.

Importing the package changes nothing about the host process and loads no numpy: the names below
load their modules on first use (operators register by family as they are first needed).
"""

# Before anything imports numpy: OpenBLAS's kernels, only if the environment asks for a choice
# (framework/runtime/blas_kernel.py).
from framework.runtime import parallel as _parallel
from framework.runtime.blas_kernel import choose as _choose_blas_kernel
from framework.runtime.services import NET as _NET

_choose_blas_kernel()


def _load_net_layer() -> None:
    """Load the net layer, which hands its services to the layers below (framework/runtime/services.py)."""
    import framework.net  # noqa: F401


# The package root names the layer that provides what the lower layers ask of nets (Workspace.create_net...).
_NET.set_loader(_load_net_layer)


def _make_pool(workers: int):
    """The intra-op threads: the kernels layer's pool where numba runs (framework/runtime/parallel.py)."""
    from framework.kernels import native_pool

    return native_pool.make(workers)


_parallel.set_pool_maker(_make_pool)

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

_LAZY = {
    "Blob": "framework.memory",
    "Tensor": "framework.memory",
    "TypeMeta": "framework.memory",
    "Workspace": "framework.memory.workspace",
    "set_blas_threads": "framework.runtime.blas",
    "get_num_threads": "framework.runtime.parallel",
    "set_num_threads": "framework.runtime.parallel",
}


def __getattr__(name: str):
    import importlib

    where = _LAZY.get(name)
    if where is not None:
        value = getattr(importlib.import_module(where), name)
    else:
        try:
            value = importlib.import_module(f"{__name__}.{name}")  # a subpackage: framework.ops, ...
        except ModuleNotFoundError as e:
            if e.name != f"{__name__}.{name}":
                raise
            raise AttributeError(f"module 'framework' has no attribute {name!r}") from None
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
