"""``Blob.tensor()``: Caffe2's Python handle on the tensor a blob holds (pybind's ``TensorCPU``).

``data`` is a numpy view of the tensor's memory, so writes through it change the blob; ``init(dims,
data_type)`` makes the blob hold a zero-filled tensor of those dims and TensorProto data type (strings
cannot be made this way, as in Caffe2: a RuntimeError); ``feed(value)`` copies a value in (as
``Blob.feed``); ``fetch()`` returns a copy; ``_shape`` is the dims. The handle follows its blob, so it
still sees the tensor after ``feed`` or ``init`` replace it.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.errors import TypeMismatchError
from framework.memory.tensor import Tensor
from framework.memory.typemeta import STRING, TypeMeta


class TensorHandle:
    def __init__(self, blob: Any) -> None:
        self._blob = blob

    def _tensor(self) -> Tensor:
        return self._blob.get_mutable(Tensor)

    @property
    def data(self) -> np.ndarray:
        tensor = self._tensor()
        return tensor.mutable_data() if tensor.is_allocated else np.empty(tensor.dims or (0,), np.float32)

    @property
    def _shape(self) -> list[int]:
        return list(self._tensor().dims)

    def init(self, dims: Any, data_type: int) -> None:
        meta = TypeMeta.from_proto(int(data_type))
        if meta is STRING or meta.dtype is None or meta.dtype.kind == "O":
            raise TypeMismatchError(f"Tensor.init: cannot initialize a tensor of type {meta.name} from Python")
        tensor = Tensor([int(d) for d in dims], meta.dtype)
        tensor.mutable_data()[...] = 0
        self._blob.reset(tensor)

    def feed(self, value: Any, device_option: Any = None) -> bool:
        return self._blob.feed(value, device_option)

    def fetch(self) -> Any:
        return self._blob.fetch()

    def __repr__(self) -> str:
        return f"TensorHandle({self._blob.name!r}, dims={self._shape})"
