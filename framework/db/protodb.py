"""protodb: Caffe2's single-file DB holding one ``TensorProtos`` message (``caffe2/db/protodb.cc``).

Each record is one ``TensorProto``: its key is the tensor's ``name`` and its
value the serialized ``TensorProto``. A ``put`` therefore needs a value that
parses as a ``TensorProto`` whose name equals the key, and a key may appear
only once (Caffe2 aborts the process on either; here they are ``DBError``s).
Records are read in file order. Caffe2 reads the file as binary, or as text
when it is not binary; it writes binary. Registered as "protodb" and "ProtoDB".

The file is written when the DB is closed, atomically: a temporary file in the
same folder, fsynced, renamed over the target, folder fsynced. ``Save`` and
checkpoints write ``BlobProto`` records, which are not ``TensorProto``s: for a
protodb they store each record's tensor named by its key, and read it back as a
tensor record (``framework/db/blobs.py``); blobs that are not tensors are refused.
"""

from __future__ import annotations

import os
import secrets

from google.protobuf import message as pb_message
from google.protobuf import text_format

from framework.db.base import DB, Cursor, Mode, Transaction, register_db
from framework.db.minidb import _fsync_dir, decode_key, encode_key
from framework.errors import DBError
from framework.proto import framework_pb2 as pb


def _read(path: str) -> pb.TensorProtos:
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as e:
        raise DBError(f"protodb {path}: cannot read: {e}") from e
    protos = pb.TensorProtos()
    try:
        protos.ParseFromString(data)
        return protos
    except pb_message.DecodeError:
        pass
    try:
        return text_format.Parse(data.decode("utf-8"), pb.TensorProtos())
    except (UnicodeDecodeError, text_format.ParseError) as e:
        raise DBError(f"protodb {path}: neither a binary nor a text TensorProtos message: {e}") from None


class ProtoDBCursor(Cursor):
    def __init__(self, db: ProtoDB) -> None:
        self._db = db
        self._i = 0

    def seek_to_first(self) -> None:
        self._i = 0

    def next(self) -> None:
        self._i += 1

    def valid(self) -> bool:
        return self._i < len(self._db._protos.protos)

    def _current(self) -> pb.TensorProto:
        if not self.valid():
            raise DBError(f"protodb {self._db.path}: cursor is past the last record")
        return self._db._protos.protos[self._i]

    def key(self) -> str:
        return self._current().name

    def value(self) -> bytes:
        return self._current().SerializeToString()


class ProtoDBTransaction(Transaction):
    def __init__(self, db: ProtoDB) -> None:
        self._db = db

    def put(self, key: str | bytes, value: bytes) -> None:
        name = decode_key(encode_key(key))
        where = f"protodb {self._db.path}: key {name!r}"
        if not name:
            raise DBError(f"protodb {self._db.path}: empty key (keys are tensor names)")
        if name in self._db._names:
            raise DBError(f"{where} already exists (a protodb holds each tensor name once)")
        tensor = pb.TensorProto()
        try:
            tensor.ParseFromString(bytes(value))
        except pb_message.DecodeError as e:
            raise DBError(f"{where}: the value is not a serialized TensorProto ({e})") from None
        if tensor.name != name:
            raise DBError(f"{where}: the TensorProto's name is {tensor.name!r}; protodb keys are tensor names")
        self._db._protos.protos.append(tensor)
        self._db._names.add(name)

    def commit(self) -> None:
        """Nothing to do: the file is written when the DB is closed (as in Caffe2)."""


class ProtoDB(DB):
    """Caffe2's protodb (see module doc). Registered as "protodb" and "ProtoDB"."""

    db_type = "protodb"

    def __init__(self, path: str, mode: Mode) -> None:
        super().__init__(path, mode)
        self._closed = False
        if mode is Mode.NEW:
            self._protos = pb.TensorProtos()
        elif os.path.isfile(path):
            self._protos = _read(path)
        elif mode is Mode.WRITE:
            self._protos = pb.TensorProtos()
        else:
            raise DBError(f"protodb {path}: no such file")
        self._names = {t.name for t in self._protos.protos}

    def cursor(self) -> ProtoDBCursor:
        self._require(Mode.READ)
        return ProtoDBCursor(self)

    def new_transaction(self) -> ProtoDBTransaction:
        self._require(Mode.NEW, Mode.WRITE)
        return ProtoDBTransaction(self)

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if self.mode is Mode.READ:
            return
        directory = os.path.dirname(os.path.abspath(self.path))
        tmp = os.path.join(directory, f".{os.path.basename(self.path)}.tmp-{os.getpid()}-{secrets.token_hex(4)}")
        try:
            with open(tmp, "wb") as f:
                f.write(self._protos.SerializeToString())
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.path)
            _fsync_dir(directory)
        except OSError as e:
            try:
                os.remove(tmp)
            except OSError:
                pass
            raise DBError(f"protodb {self.path}: could not write (the previous file is intact): {e}") from e

    def abort(self) -> None:
        self._closed = True


register_db(("protodb", "ProtoDB"), ProtoDB, os.path.isfile)
