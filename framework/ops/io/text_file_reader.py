"""Text file reading ops (Caffe2's text_file_reader.cc and feed_blob_op.cc): CreateTextFileReader,
TextFileReaderRead and FeedBlob.

A text file reader streams a file of rows (lines) of tab-separated fields, ``num_passes`` times
over; each field is read as a string (STRING) or a float (FLOAT, parsed like C's ``strtof``: a
leading number, the rest ignored), the only types Caffe2 supports. Relative paths resolve against
the workspace's root folder. The reader has no serializer (as in Caffe2).
"""

from __future__ import annotations

import re
import threading

import numpy as np

from framework.errors import DBError, ShapeError, TypeMismatchError
from framework.ops.gradient import no_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import INT, INTS, REQUIRED, STRING, UNKNOWN, Arg
from framework.proto.framework_pb2 import TensorProto

_FLOAT_PREFIX = re.compile(rb"\s*[-+]?(?:inf(?:inity)?|nan|(?:\d+\.?\d*|\.\d+)(?:[eE][-+]?\d+)?)", re.IGNORECASE)
_DTYPES = {TensorProto.STRING: np.dtype(object), TensorProto.FLOAT: np.dtype(np.float32)}


class TextFileReader:
    """Rows of tab-separated fields of a file, over ``num_passes`` passes, thread-safe."""

    def __init__(self, path: str, num_passes: int, field_types: list[int]) -> None:
        self.path, self.num_passes, self.field_types = path, num_passes, list(field_types)
        self.rows_read = 0
        self._passes_done = 0
        self._f = None
        self._lock = threading.Lock()
        self._open()

    def _open(self) -> None:
        try:
            self._f = open(self.path, "rb")
        except OSError as e:
            raise DBError(f"text file reader: cannot open {self.path}: {e}") from None

    def _next_line(self) -> bytes | None:
        while self._f is not None:
            line = self._f.readline()
            if line:
                return line[:-1] if line.endswith(b"\n") else line
            self._f.close()
            self._passes_done += 1
            self._f = None
            if self._passes_done < self.num_passes:
                self._open()
        return None

    def read(self, n: int) -> list[list[bytes]]:
        """Up to ``n`` rows (fewer at the end of the last pass), each a list of field bytes."""
        with self._lock:
            rows = []
            while len(rows) < n:
                line = self._next_line()
                if line is None:
                    break
                fields = line.split(b"\t")
                if len(fields) != len(self.field_types):
                    raise ShapeError(
                        f"text file {self.path}: invalid number of columns at row {self.rows_read + len(rows) + 1}: "
                        f"{len(fields)}, expected {len(self.field_types)}"
                    )
                rows.append(fields)
            self.rows_read += len(rows)
            return rows

    def __repr__(self) -> str:
        return f"TextFileReader({self.path!r}, {self.rows_read} rows read)"


def _unknown(args, ins):
    return [UNKNOWN] * args.num_outputs


@register_op(
    "CreateTextFileReader",
    inputs=0,
    args=[
        Arg("filename", STRING, REQUIRED, "path of the file (relative: against the workspace root)"),
        Arg("num_passes", INT, 1, "how many times to read the file"),
        Arg(
            "field_types",
            INTS,
            REQUIRED,
            "TensorProto DataType of each field: STRING (4) or FLOAT (1)",
            dtype_name=True,
        ),
    ],
    output_docs=[("handler", "the TextFileReader")],
    infer=_unknown,
    category="data",
)
class CreateTextFileReader(Operator):
    """Open a text file of tab-separated fields for TextFileReaderRead."""

    def setup(self) -> None:
        a = self.args
        if not a.field_types:
            raise self.arg_error("field_types arg must be non-empty")
        bad = [t for t in a.field_types if t not in _DTYPES]
        if bad:
            raise self.arg_error(f"unsupported field types {bad}: only STRING (4) and FLOAT (1)")
        if a.num_passes < 0:
            raise self.arg_error(f"num_passes must be >= 0, got {a.num_passes}")

    def run(self) -> None:
        a = self.args
        path = self.workspace.resolve_read_path(a.filename)
        self.outputs[0].reset(TextFileReader(path, a.num_passes, a.field_types))


def _parse_float(raw: bytes, where: str) -> float:
    m = _FLOAT_PREFIX.match(raw)
    if not m:
        raise ShapeError(f"{where}: invalid float: {raw[:40]!r}")
    return float(m.group(0))


@register_op(
    "TextFileReaderRead",
    outputs=(1, float("inf")),
    args=[Arg("batch_size", INT, 1, "maximum rows to read")],
    input_docs=[("handler", "a TextFileReader")],
    output_docs=[("field_0", "1-D: field values of the rows read (empty at the end)")],
    infer=_unknown,
    category="data",
)
class TextFileReaderRead(Operator):
    """Read up to ``batch_size`` rows; output i holds field i of each row (empty tensors at the end)."""

    def setup(self) -> None:
        if self.args.batch_size < 0:
            raise self.arg_error(f"batch_size must be >= 0, got {self.args.batch_size}")

    def run(self) -> None:
        reader = self.inputs[0].held
        if not isinstance(reader, TextFileReader):
            held = "nothing" if reader is None else type(reader).__qualname__
            raise TypeMismatchError(
                f"{self.describe()}: input 0 ('{self.input_names[0]}') holds {held}, expected a TextFileReader"
            )
        if len(reader.field_types) != len(self.outputs):
            raise ShapeError(
                f"{self.describe()}: invalid number of outputs: expected {len(reader.field_types)}, "
                f"got {len(self.outputs)}"
            )
        rows = reader.read(self.args.batch_size)
        cols = []
        for i, t in enumerate(reader.field_types):
            if t == TensorProto.FLOAT:
                cols.append(np.array([_parse_float(r[i], self.describe()) for r in rows], np.float32))
            else:
                col = np.empty(len(rows), dtype=object)
                col[:] = [r[i] for r in rows]
                cols.append(col)
        for i, col in enumerate(cols):
            np.copyto(self.output(i, col.shape, col.dtype), col)


@register_op(
    "FeedBlob",
    inputs=0,
    args=[Arg("value", STRING, REQUIRED, "the string to store")],
    output_docs=[("output", "a string blob holding value")],
    infer=_unknown,
    category="data",
)
class FeedBlob(Operator):
    """Store the string ``value`` in the output blob (a string blob, as Caffe2's std::string)."""

    def run(self) -> None:
        self.outputs[0].reset(self.args.value.encode("utf-8"))


no_gradient("CreateTextFileReader", "TextFileReaderRead", "FeedBlob")
