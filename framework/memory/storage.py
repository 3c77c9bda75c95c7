"""Storage: a buffer that one or more tensors share.

A Storage owns a flat buffer from the CPU allocator: uint8 bytes for plain
element types, an object array for strings and Python objects. Tensors hold a
reference to it; ``Tensor.share_data`` makes two tensors hold the same one.
The allocator reports the free when the last holder lets go.
"""

from __future__ import annotations

import numpy as np

from framework.memory.allocator import get_cpu_allocator


class Storage:
    __slots__ = ("buffer", "is_object", "external")

    def __init__(self, buffer: np.ndarray, *, external: bool = False) -> None:
        self.buffer = buffer
        self.is_object = buffer.dtype == object
        # External storages wrap caller memory (share_external); not ours to report.
        self.external = external

    @property
    def capacity(self) -> int:
        """Capacity in bytes (object storages count one pointer per element)."""
        return self.buffer.nbytes

    @classmethod
    def allocate(cls, nbytes: int, zero_fill: bool = True) -> Storage:
        return cls(get_cpu_allocator().allocate(nbytes, zero_fill))

    @classmethod
    def allocate_objects(cls, count: int, fill: object = b"") -> Storage:
        buf = get_cpu_allocator().allocate_objects(count)
        buf.fill(fill)
        return cls(buf)

    def view(self, dtype: np.dtype | None, numel: int, dims: tuple[int, ...]) -> np.ndarray:
        """A numpy view of the first ``numel`` elements, shaped ``dims``. Never a copy. Object storage
        ignores ``dtype``; a byte storage needs one."""
        if self.is_object:
            return self.buffer[:numel].reshape(dims)
        assert dtype is not None, "a byte storage is viewed through a numpy dtype"
        return self.buffer[: numel * dtype.itemsize].view(dtype).reshape(dims)
