"""What every communication op shares: the world from input 0, checked buffers, MPI errors as ours."""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from framework.ops.distributed.world import CommonWorld, DistributedError, mpi
from framework.ops.operator import Operator
from framework.ops.schema import INT, STRING, UNKNOWN, Arg, TensorSpec

# numpy dtypes MPI reduces and moves natively (through mpi4py's buffer typing).
REDUCIBLE = {np.dtype(t) for t in (np.float32, np.float64, np.int32, np.int64, np.uint8, np.int8, np.int16)}

ROOT_ARG = Arg("root", INT, 0, "the rank the data comes from (Broadcast) or goes to (Reduce)")
# Gloo's status_blob: accepted for Caffe2 nets; an MPI failure raises instead (the job ends, see docs).
STATUS_ARG = Arg("status_blob", STRING, "", "accepted for Caffe2 (Gloo) nets; failures raise DistributedError")


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
