"""``TextFileReader`` (Caffe2's ``caffe2.python.text_file_reader``): a ``dataio.Reader`` over a
tab-separated text file, with CreateTextFileReader/TextFileReaderRead; ``should_stop`` is true
once a read returns no rows. The schema is a Struct of Scalars of str (STRING) or float32 (FLOAT).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.caffe2.python.dataio import Reader
from framework.caffe2.python.schema import Struct
from framework.proto.framework_pb2 import TensorProto

_TYPES = {np.dtype(object): TensorProto.STRING, np.dtype(np.float32): TensorProto.FLOAT}


class TextFileReader(Reader):
    """Reads ``batch_size`` rows per read from ``filename`` (``num_passes`` passes)."""

    def __init__(self, init_net: Any, filename: str, schema: Struct, num_passes: int = 1, batch_size: int = 1) -> None:
        if not isinstance(schema, Struct):
            raise TypeError("schema must be a Struct")
        super().__init__(schema)
        types = []
        for name, dt in zip(schema.field_names(), schema.field_types()):
            if np.dtype(dt) not in _TYPES:
                raise TypeError(f"field {name}: only str and float32 fields can be read from text, got {dt}")
            types.append(_TYPES[np.dtype(dt)])
        self._reader = init_net.CreateTextFileReader([], filename=filename, num_passes=num_passes, field_types=types)
        self._batch_size = batch_size

    def read(self, read_net: Any) -> tuple[Any, list[Any]]:
        n = len(self.schema().field_names())
        blobs = read_net.TextFileReaderRead([self._reader], n, batch_size=self._batch_size)
        blobs = [blobs] if n == 1 else list(blobs)
        return read_net.IsEmpty([blobs[0]], 1), blobs
