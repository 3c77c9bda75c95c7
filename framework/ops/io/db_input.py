"""Data input from DBs, as Caffe2 fed training: CreateDB and TensorProtosDBInput.

A training DB holds one record per example whose value is a serialized
``TensorProtos`` (e.g. features and label). ``CreateDB`` makes a ``DBReader``
blob (a shared cursor, optionally one shard of the DB); ``TensorProtosDBInput``
reads ``batch_size`` records from it per run and stacks the i-th TensorProto of
each record into output i, wrapping around at the end of the DB.

``write_tensor_protos_db`` prepares such a DB from numpy arrays and
``read_tensor_protos_db`` reads one back whole.

>>> write_tensor_protos_db("/tmp/doc_train.minidb", [np.zeros((4, 2), np.float32), np.arange(4)])
4
>>> [a.shape for a in read_tensor_protos_db("/tmp/doc_train.minidb")]
[(4, 2), (4,)]
"""

from __future__ import annotations

import os
from typing import Sequence

import numpy as np
from google.protobuf.message import DecodeError

from framework.db import Mode, detect_db_type, open_db
from framework.db.reader import DBReader
from framework.errors import DBError, SerializationError, ShapeError, TypeMismatchError
from framework.memory.tensor_proto import proto_elements, proto_extent, tensor_to_proto
from framework.ops.gradient import no_gradient
from framework.ops.io.blobs_queue import QueueRecordReader
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import INT, REQUIRED, STRING, UNKNOWN, Arg
from framework.proto.framework_pb2 import TensorProtos


def _unknown(args, ins):
    return [UNKNOWN] * args.num_outputs


@register_op(
    "CreateDB",
    inputs=0,
    outputs=1,
    args=[
        Arg("db", STRING, REQUIRED, "path of the DB (relative paths resolve against the workspace root folder)"),
        Arg("db_type", STRING, "leveldb", "DB backend: leveldb (Caffe2's default), lmdb, rocksdb, minidb, protodb"),
        Arg("num_shards", INT, 1, "split the records between this many readers"),
        Arg("shard_id", INT, 0, "which shard this reader reads: records i with i % num_shards == shard_id"),
    ],
    output_docs=[("reader", "a DBReader blob")],
    infer=_unknown,
    category="data",
)
class CreateDB(Operator):
    """Open a DB for reading and put a DBReader (a shared cursor) into the output blob.

    Reading wraps around at the end of the DB; with ``num_shards`` > 1 this
    reader sees only its shard's records, so readers of different shards never
    overlap.
    """

    def setup(self) -> None:
        a = self.args
        if a.num_shards < 1 or not 0 <= a.shard_id < a.num_shards:
            raise self.arg_error(f"shard_id {a.shard_id} must be in [0, num_shards={a.num_shards})")

    def run(self) -> None:
        a = self.args
        path = self.workspace.resolve_read_path(a.db)
        self.outputs[0].reset(DBReader(path, a.db_type, a.num_shards, a.shard_id, name=self.output_names[0]))


@register_op(
    "TensorProtosDBInput",
    inputs=1,
    outputs=(1, float("inf")),
    args=[
        Arg(
            "batch_size",
            INT,
            0,
            "records per batch, stacked along a new first axis; 0 reads one record without a batch axis",
        )
    ],
    input_docs=[("reader", "a DBReader (from CreateDB) over records of serialized TensorProtos")],
    output_docs=[("blobs", "output i: the i-th TensorProto of each record, batched")],
    infer=_unknown,
    category="data",
)
class TensorProtosDBInput(Operator):
    """Read ``batch_size`` records of TensorProtos; output i stacks the i-th TensorProto of each.

    Every record must hold one TensorProto per output, of the same shape and type
    as in the first record read. The reader wraps around at the end of the DB.
    """

    def setup(self) -> None:
        if self.args.batch_size < 0:
            raise self.arg_error(f"batch_size must be >= 0, got {self.args.batch_size}")

    def run(self) -> None:
        reader = self.inputs[0].held
        if not isinstance(reader, (DBReader, QueueRecordReader)):
            raise TypeMismatchError(
                f"{self.describe()}: input 0 ('{self.input_names[0]}') holds {self.inputs[0].type_name}, "
                "expected a DBReader (made by CreateDB)"
            )
        batch = self.args.batch_size
        n_out = len(self.outputs)
        outs: list[np.ndarray] = []
        for b in range(max(batch, 1)):
            key, value = reader.read()
            # A fresh message per record: protobuf's upb runtime never frees the arena of a message that is
            # parsed into again, so one reused message grew the process by ~40 KB per training step.
            protos = TensorProtos()
            try:
                protos.ParseFromString(value)
            except (DecodeError, RuntimeError, ValueError) as e:
                raise SerializationError(
                    f"{self.describe()}: record '{key}' of {reader.db_type} {reader.source} is not a TensorProtos: {e}"
                ) from e
            if len(protos.protos) != n_out:
                raise ShapeError(
                    f"{self.describe()}: record '{key}' holds {len(protos.protos)} TensorProtos, "
                    f"the op has {n_out} outputs"
                )
            for i, tp in enumerate(protos.protos):
                dims = proto_extent(tp)[0]
                meta, vals = proto_elements(tp)
                if b == 0:
                    shape = (batch, *dims) if batch else dims
                    outs.append(self.output(i, shape, meta.dtype))
                # outs[i][b, ...] is a view even where outs[i][b] would be one element (a 1-D output: a record
                # without dims, e.g. one string)
                dst = outs[i][b, ...] if batch else outs[i]
                if dst.shape != dims or dst.dtype != meta.dtype:
                    raise ShapeError(
                        f"{self.describe()}: record '{key}' tensor {i} is {meta.name} {list(dims)}, "
                        f"but earlier records in the batch were {dst.dtype} {list(dst.shape)}"
                    )
                dst[...] = vals.reshape(dims)


no_gradient("CreateDB", "TensorProtosDBInput")


def write_tensor_protos_db(
    path: str | os.PathLike,
    arrays: Sequence[np.ndarray],
    db_type: str = "minidb",
    typed: bool = False,
    key_format: str = "{:08d}",
) -> int:
    """Write one record per example: record i holds ``TensorProtos`` of ``arrays[k][i]`` for each k.

    All arrays must share their first dimension (e.g. ``[features, labels]``).
    Keys are ``key_format.format(i)`` (zero-padded, so lmdb keeps file order).
    The DB appears atomically when complete. Returns the number of records.
    """
    arrays = [np.asarray(a) for a in arrays]
    if not arrays:
        raise ShapeError("write_tensor_protos_db: give at least one array")
    n = len(arrays[0]) if arrays[0].ndim else -1
    for k, a in enumerate(arrays):
        if a.ndim == 0 or len(a) != n:
            raise ShapeError(
                f"write_tensor_protos_db: every array needs the same first dimension; array 0 has "
                f"{n} rows, array {k} has shape {a.shape}"
            )
    with open_db(db_type, os.fspath(path), Mode.NEW) as db:
        txn = db.new_transaction()
        for i in range(n):
            rec = TensorProtos()
            for a in arrays:
                rec.protos.append(tensor_to_proto(a[i], typed=typed))
            txn.put(key_format.format(i), rec.SerializeToString())
            if i % 1024 == 1023:
                txn.commit()
        txn.commit()
    return n


def read_tensor_protos_db(path: str | os.PathLike, db_type: str | None = None) -> list[np.ndarray]:
    """Every record of a TensorProtos DB, tensor k of each record stacked into array k."""
    path = os.fspath(path)
    if not os.path.exists(path):
        raise DBError(f"data DB {path} does not exist")
    db_type = db_type or detect_db_type(path)
    columns: list[list[np.ndarray]] = []
    with open_db(db_type, path, Mode.READ) as db:
        cursor = db.cursor()
        try:
            for index, (key, value) in enumerate(cursor):
                rec = TensorProtos()
                try:
                    rec.ParseFromString(value)
                except (DecodeError, RuntimeError, ValueError) as e:
                    raise SerializationError(
                        f"{db_type} {path}: record {index} key '{key}' is not a TensorProtos"
                    ) from e
                if not columns:
                    columns = [[] for _ in rec.protos]
                if len(rec.protos) != len(columns):
                    raise ShapeError(
                        f"{db_type} {path}: record {index} key '{key}' holds {len(rec.protos)} tensors, "
                        f"the first record {len(columns)}"
                    )
                for k, tp in enumerate(rec.protos):
                    meta, vals = proto_elements(tp)
                    columns[k].append(vals.reshape(proto_extent(tp)[0]))
        finally:
            cursor.close()
    return [np.stack(c) for c in columns]
