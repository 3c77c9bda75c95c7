"""What every communication op shares: the world from input 0, checked buffers, MPI errors as ours."""

from __future__ import annotations

import hashlib
from typing import Any, Callable, Sequence

import numpy as np

from framework.ops.distributed.world import CommonWorld, DistributedError, mpi
from framework.ops.operator import Operator
from framework.ops.schema import INT, STRING, UNKNOWN, Arg, TensorSpec

# numpy dtypes MPI reduces and moves natively (through mpi4py's buffer typing).
REDUCIBLE = {np.dtype(t) for t in (np.float32, np.float64, np.int32, np.int64, np.uint8, np.int8, np.int16)}

ROOT_ARG = Arg("root", INT, 0, "the rank the data comes from (Broadcast) or goes to (Reduce)")
# Gloo's status_blob: accepted for Caffe2 nets; an MPI failure raises instead (the job ends, see docs).
STATUS_ARG = Arg("status_blob", STRING, "", "accepted for Caffe2 (Gloo) nets; failures raise DistributedError")

# Bytes each rank contributes to the agreement check: an 8-byte digest of what must agree, then as much
# of the readable description (op, blobs, dtypes, shapes) as fits, for the error message.
AGREE_BYTES = 256


class CommOp(Operator):
    """Base of the communication ops: ``world()`` is input 0's open CommonWorld."""

    def world(self) -> CommonWorld:
        obj = self.inputs[0].held
        if not isinstance(obj, CommonWorld):
            raise DistributedError(
                f"{self.describe()}: input 0 ('{self.input_names[0]}') holds "
                f"{'nothing' if obj is None else type(obj).__qualname__}, expected a CommonWorld "
                "(made by CreateCommonWorld or MPICreateCommonWorld)"
            )
        if obj.closed:
            raise DistributedError(f"{self.describe()}: the common world '{self.input_names[0]}' was destroyed")
        return obj

    def buffer(self, i: int, reducible: bool = True) -> np.ndarray:
        """Input ``i`` as a C-contiguous array MPI can use in place."""
        a = self.input(i)
        if a.dtype.kind not in "biufc":
            raise DistributedError(
                f"{self.describe()}: input {i} ('{self.input_names[i]}') holds {a.dtype} elements; "
                "communication ops move numeric tensors"
            )
        if reducible and a.dtype not in REDUCIBLE:
            raise DistributedError(
                f"{self.describe()}: input {i} ('{self.input_names[i]}') is {a.dtype}; collectives take "
                + ", ".join(sorted(d.name for d in REDUCIBLE))
            )
        if not a.flags.c_contiguous:
            raise DistributedError(f"{self.describe()}: input {i} ('{self.input_names[i]}') is not contiguous")
        return a

    def same_layout(self, first: int, last: int) -> tuple[int, np.dtype]:
        """Inputs first..last-1 all have the numel and dtype of input ``first``: (numel, dtype)."""
        a = self.buffer(first)
        for i in range(first + 1, last):
            b = self.buffer(i)
            if b.size != a.size or b.dtype != a.dtype:
                raise DistributedError(
                    f"{self.describe()}: input {i} ('{self.input_names[i]}') is {b.dtype} x {b.size}, "
                    f"input {first} ('{self.input_names[first]}') is {a.dtype} x {a.size}: they must match"
                )
        return a.size, a.dtype

    def layout(self, indices: Sequence[int], extra: str = "") -> np.ndarray:
        """This rank's agreement record for inputs ``indices`` (see ``agree``): what must match across
        ranks is the op type, each input's dtype and shape, and ``extra`` (e.g. argument values)."""
        must = [self.type] + [f"{self.input(i).dtype}{list(self.input(i).shape)}" for i in indices] + [extra]
        shown = ", ".join(f"'{self.input_names[i]}' {self.input(i).dtype} {list(self.input(i).shape)}" for i in indices)
        digest = hashlib.blake2b("|".join(must).encode(), digest_size=8).digest()
        text = f"{self.type} {shown}{' ' + extra if extra else ''}".encode()[: AGREE_BYTES - 8]
        rec = np.zeros(AGREE_BYTES, np.uint8)
        rec[:8] = np.frombuffer(digest, np.uint8)
        rec[8 : 8 + len(text)] = np.frombuffer(text, np.uint8)
        return rec

    def agree(self, world: CommonWorld, record: np.ndarray) -> None:
        """Check, before the collective itself, that every rank runs this op on tensors of the same dtypes
        and shapes (MPI would sum raw bytes of different types, or die in its own error handler on a
        size mismatch). One small Allgather; every rank sees every record, so all of them raise the same
        DistributedError naming the op, the blobs and each rank's dtypes and shapes."""
        if world.size == 1:
            return
        every = np.empty((world.size, AGREE_BYTES), np.uint8)
        self.call(world.comm.Allgather, record, every)
        if (every[:, :8] == every[0, :8]).all():
            return
        lines = []
        for r in range(world.size):
            text = every[r, 8:].tobytes().rstrip(b"\0").decode("utf-8", "replace")
            lines.append(f"rank {r}: {text}")
        raise DistributedError(
            f"{self.describe()}: the ranks disagree on the tensors of this collective (dtype and shape must "
            f"match on every rank): " + "; ".join(lines)
        )

    def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Run an MPI call; an MPI error becomes a DistributedError naming this op."""
        MPI = mpi()
        try:
            return fn(*args, **kwargs)
        except MPI.Exception as e:
            raise DistributedError(f"{self.describe()}: MPI error: {e.Get_error_string()}") from e


def shifted(args: Any, ins: list[TensorSpec]) -> list[TensorSpec]:
    """Output i has input i+1's shape and type (in-place collectives)."""
    return [ins[i + 1] if i + 1 < len(ins) else UNKNOWN for i in range(args.num_outputs)]


def unknown(args: Any, ins: list[TensorSpec]) -> list[TensorSpec]:
    return [UNKNOWN] * args.num_outputs
