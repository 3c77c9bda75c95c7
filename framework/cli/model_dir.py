"""A model folder: ``init_net.pbtxt``, ``train_net.pbtxt``, ``predict_net.pbtxt``, README.

Conventions the CLI relies on (documented in docs/cli.md):
- the init net creates parameters, optimizer state, the iteration counter and,
  with ``CreateDB``, the training data reader; a relative ``db`` path is taken
  from the data folder (``--data``);
- the train net reads batches with ``TensorProtosDBInput`` and names its loss
  ``loss`` (and, optionally, ``accuracy``); the iteration counter is the
  first output of its ``Iter`` op;
- the predict net's first external input is the data blob and its first
  external output the class probabilities.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

from framework.cli.common import CLIError, read_net
from framework.ops.arg_reader import ArgReader
from framework.ops.schema import INT

FILES = ("init_net.pbtxt", "train_net.pbtxt", "predict_net.pbtxt")
PAIR = ("init_net.pb", "predict_net.pb")  # Caffe2's deployable pair (`framework export` writes it)


def pair_in(path: str) -> tuple[str, str] | None:
    """(init, predict) paths of a deployable pair in folder ``path``, or None."""
    files = tuple(os.path.join(path, f) for f in PAIR)
    return files if os.path.isdir(path) and all(os.path.isfile(f) for f in files) else None


@dataclass
class ModelDir:
    path: str
    init_net: Any
    train_net: Any
    predict_net: Any

    deployable: bool = False  # init_net.pb + predict_net.pb: parameters in the init net, no checkpoint

    @classmethod
    def load(cls, path: str, need_train: bool = True) -> ModelDir:
        pair = pair_in(path)
        if pair is not None and not need_train and not os.path.exists(os.path.join(path, "predict_net.pbtxt")):
            return cls(path, read_net(pair[0]), None, read_net(pair[1]), deployable=True)
        if not os.path.isdir(path):
            raise CLIError(f"model folder not found: {path}", f"a model folder holds {', '.join(FILES)}")
        wanted = FILES if need_train else ("init_net.pbtxt", "predict_net.pbtxt")
        missing = [f for f in wanted if not os.path.exists(os.path.join(path, f))]
        if missing:
            raise CLIError(
                f"model folder {path} lacks {', '.join(missing)}", f"a model folder holds {', '.join(FILES)}"
            )
        nets = {f: read_net(os.path.join(path, f)) if f in wanted else None for f in FILES}
        return cls(path, nets["init_net.pbtxt"], nets["train_net.pbtxt"], nets["predict_net.pbtxt"])

    def point_readers_at(self, data_dir: str) -> None:
        """Resolve relative ``db`` paths of CreateDB ops in the init net against ``data_dir``."""
        for op in self.init_net.op:
            if op.type != "CreateDB":
                continue
            for arg in op.arg:
                if arg.name == "db" and not os.path.isabs(arg.s.decode()):
                    path = os.path.join(data_dir, arg.s.decode())
                    if not os.path.exists(path):
                        path = self._other_kind(op, data_dir, arg.s.decode(), path)
                    arg.s = path.encode()

    @staticmethod
    def _other_kind(op: Any, data_dir: str, name: str, path: str) -> str:
        """The same split written as another DB kind (``make-db --db-type``): point the reader at it."""
        from framework.cli.data import find_split

        found = find_split(data_dir, os.path.splitext(name)[0])
        if found is None:
            raise CLIError(
                f"training data not found: {path} (nor as lmdb, leveldb or rocksdb)",
                f"prepare it with `framework make-db digits --out {data_dir}` (any --db-type)",
            )
        for a in op.arg:
            if a.name == "db_type":
                a.s = found[1].encode()
                break
        else:
            op.arg.add(name="db_type", s=found[1].encode())
        return found[0]

    def reader_blobs(self) -> set[str]:
        return {o for op in self.init_net.op if op.type == "CreateDB" for o in op.output}

    def state_blobs(self) -> list[str]:
        """Blobs the init net creates that a checkpoint must hold (all but DB readers and common worlds)."""
        readers = self.reader_blobs()
        seen: list[str] = []
        for op in self.init_net.op:
            if op.type in ("CreateCommonWorld", "CloneCommonWorld", "MPICreateCommonWorld"):
                continue
            for o in op.output:
                if o not in readers and o not in seen:
                    seen.append(o)
        return seen

    def iteration_blob(self) -> str | None:
        for op in self.train_net.op:
            if op.type in ("Iter", "AtomicIter"):
                return op.output[0]
        return None

    def batch_size(self) -> int | None:
        for op in self.train_net.op:
            if op.type == "TensorProtosDBInput":
                args = ArgReader(op)
                if args.has("batch_size"):
                    return args.single("batch_size", kind=INT)
        return None

    def set_batch_size(self, batch: int) -> None:
        found = False
        for op in self.train_net.op:
            if op.type == "TensorProtosDBInput":
                for arg in op.arg:
                    if arg.name == "batch_size":
                        arg.i = batch
                        found = True
        if not found:
            raise CLIError("--batch-size: the train net has no TensorProtosDBInput op with a batch_size")

    def data_dims(self) -> tuple[str, str]:
        """(data blob, probabilities blob) of the predict net."""
        p = self.predict_net
        if not p.external_input or not p.external_output:
            raise CLIError("predict_net.pbtxt must declare external_input (data first) and external_output")
        return p.external_input[0], p.external_output[0]
