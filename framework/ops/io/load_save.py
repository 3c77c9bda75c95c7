"""Checkpoint operators: Save, Load, DBExists, Checkpoint (alias Snapshot).

Arguments and semantics as Caffe2's ``load_save_op`` (reference/caffe2.md §4).
The work is done by ``framework.db.blobs`` (shared with ``framework.checkpoint``):
saving is atomic, and a failed Load leaves the workspace exactly as it was.
Relative paths resolve against the workspace root folder unless
``absolute_path`` is set.
"""

from __future__ import annotations

import re

import numpy as np

from framework.db import db_exists
from framework.db.blobs import read_blobs, save_keys, write_blobs
from framework.db.reader import DBReader
from framework.errors import ArgumentError, TypeMismatchError
from framework.ops.gradient import no_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, INT, REQUIRED, STRING, STRINGS, UNKNOWN, Arg, scalar_of


def _no_outputs(args, ins):
    return []


def _unknown_outputs(args, ins):
    return [UNKNOWN] * args.num_outputs


_DB_ARGS = [
    Arg("db", STRING, REQUIRED, "path of the DB (relative to the workspace root folder unless absolute_path)"),
    Arg("db_type", STRING, REQUIRED, "DB backend: minidb (default format), lmdb, leveldb, rocksdb"),
    Arg("absolute_path", INT, 0, "1: use db as given; 0: join it to the workspace root folder"),
]


@register_op(
    "Save",
    inputs=(1, float("inf")),
    outputs=0,
    args=[
        *_DB_ARGS,
        Arg("strip_prefix", STRING, "", "drop everything up to and including this prefix from each saved name"),
        Arg("blob_name_overrides", STRINGS, [], "names to save the inputs under (one per input)"),
        Arg("chunk_size", INT, -1, "elements per chunk of a tensor: -1 the default (1,000,000), 0 no chunking"),
        Arg(
            "typed",
            INT,
            1,
            "1 (default, as Caffe2 writes): tensors in the typed TensorProto fields (float_data, int32_data...), "
            "which every Caffe2 version reads; 0: raw_data bytes (compact; read here and by readers that know "
            "field 13)",
        ),
    ],
    input_docs=[("blobs", "the blobs to save (tensors, strings, DB readers)")],
    infer=_no_outputs,
    category="checkpoint",
)
class Save(Operator):
    """Save the input blobs into a new DB (replacing any DB at that path, atomically).

    Each tensor is stored as BlobProto records ``name#%k`` of at most
    ``chunk_size`` elements; other blobs as one record ``name``. The DB appears
    complete or not at all: a crash while saving leaves the previous DB intact.
    """

    def setup(self) -> None:
        a = self.args
        try:
            self.keys = save_keys(self.input_names, a.strip_prefix, a.blob_name_overrides)
        except Exception as e:
            raise self.arg_error(str(e)) from None
        if a.chunk_size < -1:
            raise self.arg_error(f"chunk_size must be -1 (default), 0 (no chunking) or > 0, got {a.chunk_size}")

    def run(self) -> None:
        path = self.workspace.resolve_write_path(
            self.args.db, bool(self.args.absolute_path), f"{self.describe()}: argument 'db'"
        )
        write_blobs(self.args.db_type, path, zip(self.keys, self.inputs), self.args.chunk_size, bool(self.args.typed))


@register_op(
    "Load",
    inputs=(0, float("inf")),
    outputs=(0, float("inf")),
    args=[
        Arg("db", STRING, "", "path of the DB to read (ignored when dbs or DBReader inputs are given)"),
        Arg("dbs", STRINGS, [], "paths of several DBs to read (unique); wins over db"),
        Arg("db_type", STRING, "", "DB backend (required without DBReader inputs)"),
        Arg("absolute_path", INT, 0, "1: use the paths as given; 0: join them to the workspace root folder"),
        Arg("add_prefix", STRING, "", "prepended to every DB key after stripping; outputs must include it"),
        Arg("strip_prefix", STRING, "", "drop everything up to and including this prefix from each DB key"),
        Arg("keep_device", INT, 0, "1: keep the serialized device (everything runs on the CPU here)"),
        Arg("load_all", INT, 0, "1: load every blob of the DB under its own name; named outputs must be among them"),
        Arg("allow_incomplete", BOOL, False, "tolerate outputs that the DBs do not hold"),
        Arg("source_blob_names", STRINGS, [], "DB names to load into the outputs, position by position"),
    ],
    input_docs=[("readers", "optional DBReader blobs to load from (then db/dbs/db_type are ignored)")],
    output_docs=[("blobs", "the blobs to load (named as in the DB, after the prefix options)")],
    infer=_unknown_outputs,
    category="checkpoint",
)
class Load(Operator):
    """Load blobs from one or more DBs (reassembling chunked tensors in any order).

    Caffe2's algorithm: each DB key is cut at ``#%``, stripped of
    ``strip_prefix`` and given ``add_prefix``; keys not among the outputs are
    skipped (unless ``load_all``); a key in two DBs is an error; a blob whose
    chunks do not add up is "Data size mismatch". Missing outputs are an error
    (naming them and listing what the DB holds) unless ``allow_incomplete``.
    Everything is read into staging blobs first: on any error the workspace is
    left unchanged.
    """

    def setup(self) -> None:
        a = self.args
        if a.source_blob_names:
            if a.strip_prefix or a.load_all:
                raise self.arg_error("source_blob_names cannot be combined with strip_prefix or load_all")
            if len(a.source_blob_names) != len(self.output_names):
                raise self.arg_error(
                    f"source_blob_names has {len(a.source_blob_names)} names for {len(self.output_names)} outputs"
                )
            self.wanted = dict(zip(a.source_blob_names, self.output_names))
        else:
            self.wanted = {n: n for n in self.output_names}
        if len(self.wanted) != len(self.output_names):
            raise self.arg_error(f"the output names are not unique: {self.output_names}")
        if a.dbs and len(set(a.dbs)) != len(a.dbs):
            raise self.arg_error(f"dbs must be unique, got {a.dbs}")
        if not self.input_names:
            if not a.db_type:
                raise self.arg_error("db_type is required when there are no DBReader inputs")
            if not a.db and not a.dbs:
                raise self.arg_error("one of db or dbs is required when there are no DBReader inputs")

    def sources(self) -> list[tuple[str, str]]:
        if self.input_names:
            out = []
            for i, blob in enumerate(self.inputs):
                reader = blob.held
                if not isinstance(reader, DBReader):
                    raise TypeMismatchError(
                        f"{self.describe()}: input {i} ('{self.input_names[i]}') holds "
                        f"{blob.type_name}, expected a DBReader (made by CreateDB)"
                    )
                out.append((reader.db_type, reader.source))
            return out
        a = self.args
        paths = a.dbs or [a.db]
        return [(a.db_type, self.workspace.resolve_path(p, bool(a.absolute_path))) for p in paths]

    def run(self) -> None:
        a = self.args
        staged = read_blobs(
            self.sources(),
            None if a.load_all else self.wanted,
            strip_prefix=a.strip_prefix,
            add_prefix=a.add_prefix,
            allow_incomplete=bool(a.allow_incomplete),
        )
        if a.load_all:
            # Caffe2: with load_all, every named output must be one of the loaded blobs (checked before
            # anything is written here)
            missing = [n for n in self.output_names if n not in staged]
            if missing:
                raise self.arg_error(f"Output blob name {missing[0]!r} does not exist in the db(s)")
            for name, blob in staged.items():
                self.workspace.create_blob(name).reset(blob.held)
        else:
            for blob, name in zip(self.outputs, self.output_names):
                new = staged.get(name)
                if new is not None:
                    blob.reset(new.held)


@register_op(
    "DBExists",
    inputs=0,
    outputs=1,
    args=[
        Arg("db_name", STRING, REQUIRED, "path of the DB"),
        Arg("db_type", STRING, REQUIRED, "DB backend: minidb, lmdb, leveldb, rocksdb"),
        Arg("absolute_path", INT, 0, "1: use db_name as given; 0: join it to the workspace root folder"),
    ],
    output_docs=[("exists", "bool scalar: whether the DB exists")],
    infer=scalar_of(np.bool_),
    category="checkpoint",
)
class DBExists(Operator):
    """Output a bool scalar telling whether a DB exists at ``db_name``."""

    def run(self) -> None:
        path = self.workspace.resolve_path(self.args.db_name, bool(self.args.absolute_path))
        self.output(0, (), np.dtype(np.bool_))[...] = db_exists(self.args.db_type, path)


@register_op(
    "Checkpoint",
    inputs=(1, float("inf")),
    outputs=0,
    args=[
        Arg("db", STRING, REQUIRED, "printf-style path pattern taking the iteration, e.g. ckpt_%08d.minidb"),
        Arg("db_type", STRING, REQUIRED, "DB backend: minidb, lmdb, leveldb, rocksdb"),
        Arg("absolute_path", INT, 0, "1: use the path as given; 0: join it to the workspace root folder"),
        Arg("every", INT, 1, "save only when the iteration is a multiple of this"),
        Arg(
            "typed",
            INT,
            1,
            "1 (default, as Caffe2 writes): tensors in the typed TensorProto fields (float_data, int32_data...), "
            "which every Caffe2 version reads; 0: raw_data bytes (compact; read here and by readers that know "
            "field 13)",
        ),
    ],
    input_docs=[("iter", "int64 scalar: the current iteration"), ("blobs", "the blobs to save")],
    infer=_no_outputs,
    category="checkpoint",
    aliases=("Snapshot",),
)
class Checkpoint(Operator):
    """Save the blobs after input 0 every ``every`` iterations to ``db % iter`` (atomically)."""

    def setup(self) -> None:
        if self.args.every < 1:
            raise self.arg_error(f"every must be >= 1, got {self.args.every}")
        check_pattern(self, self.args.db)
        self.keys = save_keys(self.input_names[1:])

    def run(self) -> None:
        it = int(np.asarray(self.input(0)).reshape(-1)[0])
        if it % self.args.every:
            return
        path = self.workspace.resolve_write_path(
            self.args.db % it, bool(self.args.absolute_path), f"{self.describe()}: argument 'db'"
        )
        write_blobs(self.args.db_type, path, zip(self.keys, self.inputs[1:]), typed=bool(self.args.typed))


_FIELD = re.compile(r"%[-+ #0]*(\d*)(?:\.(\d*))?[a-zA-Z%]")


def check_pattern(op: Operator, pattern: str) -> None:
    """ArgumentError unless ``pattern`` takes one integer and formats to a bounded length
    (a field width like %0999999999d would allocate gigabytes)."""
    for m in _FIELD.finditer(pattern):
        for width in m.groups():
            if width and int(width) > 64:
                raise ArgumentError(f"{op.describe()}: db pattern {pattern!r}: field width {width} is over 64")
    if len(pattern) > 4096:
        raise ArgumentError(f"{op.describe()}: db pattern is {len(pattern)} characters long (at most 4096)")
    try:
        pattern % 0
    except (TypeError, ValueError, OverflowError) as e:
        raise ArgumentError(f"{op.describe()}: db pattern {pattern!r} must take one integer: {e}") from None


no_gradient("Save", "Load", "DBExists", "Checkpoint", "Snapshot")
