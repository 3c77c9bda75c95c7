"""``TextFileReader`` (Caffe2's ``caffe2.python.text_file_reader``): a ``dataio.Reader`` over a
tab-separated text file, with CreateTextFileReader/TextFileReaderRead; ``should_stop`` is true
once a read returns no rows. The schema is a Struct of Scalars; each field's TensorProto type is
``schema.data_type_for_dtype`` of its dtype, as in Caffe2 (``str`` and ``np.str_`` are STRING), and
CreateTextFileReader refuses the types it cannot parse.
"""

from __future__ import annotations

from typing import Any

from framework.caffe2.python.dataio import Reader
from framework.caffe2.python.schema import Scalar, Struct, data_type_for_dtype


class TextFileReader(Reader):
    """Reads ``batch_size`` rows per read from ``filename`` (``num_passes`` passes)."""

    def __init__(self, init_net: Any, filename: str, schema: Struct, num_passes: int = 1, batch_size: int = 1) -> None:
        if not isinstance(schema, Struct):
            raise TypeError("schema must be a Struct")
        for name, child in schema.get_children():
            if not isinstance(child, Scalar):
                raise TypeError(f"field {name}: only scalar fields can be read from text")
        super().__init__(schema)
        types = [data_type_for_dtype(dt) for dt in schema.field_types()]
        self._reader = init_net.CreateTextFileReader([], filename=filename, num_passes=num_passes, field_types=types)
        self._batch_size = batch_size

    def read(self, read_net: Any) -> tuple[Any, list[Any]]:
        n = len(self.schema().field_names())
        blobs = read_net.TextFileReaderRead([self._reader], n, batch_size=self._batch_size)
        blobs = [blobs] if n == 1 else list(blobs)
        return read_net.IsEmpty([blobs[0]], 1), blobs
