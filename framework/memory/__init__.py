"""Memory core: TypeMeta, allocator and reporter, Storage, Tensor, Blob, Workspace."""

from framework.memory.allocator import (
    Allocator,
    CPUAllocator,
    MemoryReporter,
    allocation_limit,
    check_allocation,
    get_cpu_allocator,
    memory_reporter,
    set_allocation_limit,
    set_cpu_allocator,
)
from framework.memory.blob import Blob
from framework.memory.int8_tensor import Int8TensorCPU
from framework.memory.storage import Storage
from framework.memory.tensor import Tensor, TensorOptions
from framework.memory.typemeta import TypeMeta

__all__ = [
    "Allocator",
    "Blob",
    "CPUAllocator",
    "Int8TensorCPU",
    "MemoryReporter",
    "Storage",
    "Tensor",
    "TensorOptions",
    "TypeMeta",
    "allocation_limit",
    "check_allocation",
    "get_cpu_allocator",
    "memory_reporter",
    "set_allocation_limit",
    "set_cpu_allocator",
]
