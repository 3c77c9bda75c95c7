"""TensorBoard event files, written without TensorBoard or TensorFlow installed.

``SummaryWriter(logdir)`` writes ``events.out.tfevents.<time>.<host>.<pid>`` files that
``tensorboard --logdir DIR`` reads: scalars (``add_scalar``), histograms (``add_histogram``: the
values of a parameter) and the graph of a NetDef (``add_graph``: one node per op, one per external
input, edges from the op that last wrote each input, as Caffe2's TensorBoard exporter drew nets).

The format: a file is a sequence of records ``uint64 length, uint32 masked_crc32c(length), data,
uint32 masked_crc32c(data)`` (little endian; CRC-32C, masked as ``((c >> 15) | (c << 17)) +
0xa282ead8``); each record is a serialized ``tensorflow.Event``. The first event holds
``file_version: "brain.Event:2"``. The few messages needed (Event, Summary, HistogramProto, GraphDef)
are encoded here directly in the protobuf wire format, field numbers as in TensorFlow's event.proto,
summary.proto and graph.proto.

>>> w = SummaryWriter("runs/tb")  # doctest: +SKIP
>>> w.add_scalar("loss", 0.25, step=10); w.close()  # doctest: +SKIP

``framework train --tensorboard DIR`` uses it (``TrainingBoard``).
"""

from __future__ import annotations

import os
import socket
import struct
import time
from typing import Any, Iterable

import numpy as np

__all__ = ["SummaryWriter", "TrainingBoard", "read_events", "crc32c"]


def _crc_table() -> list[int]:
    table = []
    for n in range(256):
        c = n
        for _ in range(8):
            c = (c >> 1) ^ 0x82F63B78 if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc_table()


def crc32c(data: bytes) -> int:
    """CRC-32C (Castagnoli) of ``data``."""
    c = 0xFFFFFFFF
    table = _TABLE
    for b in data:
        c = table[(c ^ b) & 0xFF] ^ (c >> 8)
    return c ^ 0xFFFFFFFF


def _masked(data: bytes) -> int:
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


# -- protobuf wire format ------------------------------------------------------------------------------


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def _len_field(field: int, payload: bytes) -> bytes:
    return _varint(field << 3 | 2) + _varint(len(payload)) + payload


def _str_field(field: int, text: str) -> bytes:
    return _len_field(field, text.encode("utf-8"))


def _double_field(field: int, value: float) -> bytes:
    return _varint(field << 3 | 1) + struct.pack("<d", value)


def _float_field(field: int, value: float) -> bytes:
    return _varint(field << 3 | 5) + struct.pack("<f", value)


def _int_field(field: int, value: int) -> bytes:
    return _varint(field << 3) + _varint(value)


def _packed_doubles(field: int, values: Iterable[float]) -> bytes:
    return _len_field(field, np.asarray(list(values), "<f8").tobytes())


def _event(step: int, **body: bytes) -> bytes:
    """An Event: wall_time (1), step (2), then one of file_version (3), graph_def (4), summary (5)."""
    out = _double_field(1, time.time()) + _int_field(2, step)
    fields = {"file_version": 3, "graph_def": 4, "summary": 5}
    for name, payload in body.items():
        out += _len_field(fields[name], payload)
    return out


def _histogram(values: np.ndarray, bins: int = 30) -> bytes:
    """A HistogramProto: min 1, max 2, num 3, sum 4, sum_squares 5, bucket_limit 6, bucket 7."""
    v = np.asarray(values, np.float64).reshape(-1)
    v = v[np.isfinite(v)]
    if v.size == 0:
        v = np.zeros(1)
    counts, edges = np.histogram(v, bins=bins)
    return (
        _double_field(1, float(v.min()))
        + _double_field(2, float(v.max()))
        + _double_field(3, float(v.size))
        + _double_field(4, float(v.sum()))
        + _double_field(5, float(np.dot(v, v)))
        + _packed_doubles(6, edges[1:])
        + _packed_doubles(7, counts)
    )


def _graph_def(net: Any) -> bytes:
    """A GraphDef (node 1, versions 4) of NetDef ``net``: NodeDef name 1, op 2, input 3."""
    nodes = b""
    producer: dict[str, str] = {}
    for b in net.external_input:
        name = f"input/{b}"
        producer[b] = name
        nodes += _len_field(1, _str_field(1, name) + _str_field(2, "ExternalInput"))
    for i, op in enumerate(net.op):
        name = f"{i:03d}_{op.type}" + (f"_{op.name}" if op.name else "")
        node = _str_field(1, name) + _str_field(2, op.type)
        for b in dict.fromkeys(op.input):
            if b in producer:
                node += _str_field(3, producer[b])
        nodes += _len_field(1, node)
        for b in op.output:
            producer[b] = name
    return nodes + _len_field(4, _int_field(1, 27))


class SummaryWriter:
    """Writes one event file in ``logdir`` (created if needed); see module doc. ``flush()`` makes what
    was written visible to TensorBoard; ``close()`` ends the file."""

    def __init__(self, logdir: str) -> None:
        os.makedirs(logdir, exist_ok=True)
        name = f"events.out.tfevents.{int(time.time())}.{socket.gethostname()}.{os.getpid()}"
        self.path = os.path.join(logdir, name)
        self._f = open(self.path, "ab")
        self._write(_event(0, file_version=b"brain.Event:2"))
        self.flush()

    def _write(self, data: bytes) -> None:
        head = struct.pack("<Q", len(data))
        self._f.write(head + struct.pack("<I", _masked(head)) + data + struct.pack("<I", _masked(data)))

    def add_scalar(self, tag: str, value: float, step: int) -> None:
        """Scalar ``value`` under ``tag`` (a Summary.Value: tag 1, simple_value 2)."""
        val = _str_field(1, tag) + _float_field(2, float(value))
        self._write(_event(int(step), summary=_len_field(1, val)))

    def add_histogram(self, tag: str, values: Any, step: int, bins: int = 30) -> None:
        """The distribution of ``values`` under ``tag`` (Summary.Value: tag 1, histo 5)."""
        val = _str_field(1, tag) + _len_field(5, _histogram(values, bins))
        self._write(_event(int(step), summary=_len_field(1, val)))

    def add_graph(self, net: Any, step: int = 0) -> None:
        """The op graph of NetDef ``net`` (TensorBoard's Graphs tab)."""
        self._write(_event(int(step), graph_def=_graph_def(net)))

    def flush(self) -> None:
        self._f.flush()

    def close(self) -> None:
        if not self._f.closed:
            self._f.close()

    def __enter__(self) -> SummaryWriter:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class TrainingBoard:
    """The training hook of ``framework train --tensorboard DIR``: the train net's graph once, then per
    ``log(step, metrics)`` the scalars, and per ``histograms(step)`` every parameter's values."""

    def __init__(self, logdir: str, train_net: Any, ws: Any, params: Iterable[str]) -> None:
        self.writer = SummaryWriter(logdir)
        self.ws = ws
        self.params = list(params)
        self.writer.add_graph(train_net)

    def log(self, step: int, metrics: dict) -> None:
        for k, v in metrics.items():
            if v is not None:
                self.writer.add_scalar(k, v, step)
        self.writer.flush()

    def histograms(self, step: int) -> None:
        for p in self.params:
            if self.ws.has_blob(p):
                value = self.ws.fetch_blob(p)
                if isinstance(value, np.ndarray) and value.dtype.kind == "f":
                    self.writer.add_histogram(p, value, step)
        self.writer.flush()

    def close(self) -> None:
        self.writer.close()


def read_events(path: str) -> list[bytes]:
    """The serialized Event records of file ``path``, every length and data CRC checked (ValueError)."""
    out = []
    with open(path, "rb") as f:
        data = f.read()
    i = 0
    while i < len(data):
        if i + 12 > len(data):
            raise ValueError(f"{path}: truncated record header at byte {i}")
        head = data[i : i + 8]
        (n,) = struct.unpack("<Q", head)
        if struct.unpack("<I", data[i + 8 : i + 12])[0] != _masked(head):
            raise ValueError(f"{path}: bad length CRC at byte {i}")
        body = data[i + 12 : i + 12 + n]
        if len(body) != n or struct.unpack("<I", data[i + 12 + n : i + 16 + n])[0] != _masked(body):
            raise ValueError(f"{path}: bad or truncated record at byte {i}")
        out.append(body)
        i += 16 + n
    return out
