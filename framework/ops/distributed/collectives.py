"""Caffe2's collective ops (``communicator_op.cc``, run by Gloo there; by MPI here).

With several tensors, Gloo's algorithms treat them as one set: ``Allreduce``
sums every input on every rank and writes that total into every output;
``Broadcast`` copies the root's first tensor into every tensor on every rank;
``Allgather`` concatenates each rank's inputs, rank by rank, into one 1-D
output. The ops work in place on the tensors' numpy buffers (one input: no copy
at all). Every rank must run the same collectives in the same order.
"""

from __future__ import annotations

import numpy as np

from framework.ops.distributed.base import ROOT_ARG, STATUS_ARG, CommOp, shifted, unknown
from framework.ops.distributed.world import CommonWorld, DistributedError, mpi, world_of_process
from framework.ops.gradient import should_not_do_gradient
from framework.ops.registry import register_op
from framework.ops.schema import INT, STRING, Arg, TensorSpec

WORLD_IN = [("comm_world", "the common world")]


def _shifted_pairs(i: int, o: int) -> bool:
    """output k is input k + 1 (in place)"""
    return i == o + 1


@register_op(
    "CreateCommonWorld",
    inputs=(0, 1),
    outputs=1,
    args=[
        Arg("size", INT, 0, "ranks in the world; checked against the MPI job's size when > 0"),
        Arg("rank", INT, -1, "this process's rank; checked against its MPI rank when >= 0"),
        Arg("transport", STRING, "tcp", "Gloo's transport (accepted; MPI chooses its own)"),
        Arg("interface", STRING, "", "Gloo's network interface (accepted; set MPICH's with MPIR_CVAR_*)"),
        Arg("timeout_ms", INT, -1, "Gloo's timeout (accepted; bound the job with MPIEXEC_TIMEOUT)"),
        Arg("mpi_rendezvous", INT, 0, "accepted: the world always comes from MPI here"),
        STATUS_ARG,
    ],
    input_docs=[("kv_handler", "a store handler for Gloo's rendezvous (optional; accepted, not needed)")],
    output_docs=[("comm_world", "a CommonWorld over the MPI job")],
    infer=unknown,
    category="distributed",
)
class CreateCommonWorld(CommOp):
    """Create the common world of this job's ranks (from MPI; a Gloo store handler input is accepted)."""

    def run(self) -> None:
        world = world_of_process()
        a = self.args
        if (a.size > 0 and a.size != world.size) or (a.rank >= 0 and a.rank != world.rank):
            world.destroy()
            asked = " and ".join(
                f"{k} {v}" for k, v, given in (("rank", a.rank, a.rank >= 0), ("size", a.size, a.size > 0)) if given
            )
            raise DistributedError(
                f"{self.describe()}: the net asks for {asked}, but this process is rank "
                f"{world.rank} of an MPI job of {world.size}: start it with `mpiexec -n {a.size or world.size}`"
            )
        self.outputs[0].reset(world)


@register_op(
    "MPICreateCommonWorld",
    inputs=0,
    outputs=1,
    output_docs=[("comm_world", "a CommonWorld over the MPI job")],
    infer=unknown,
    category="distributed",
)
class MPICreateCommonWorld(CommOp):
    """Create a common world with the topology of the MPI job (Caffe2's caffe2/mpi ops)."""

    def run(self) -> None:
        self.outputs[0].reset(world_of_process())


@register_op(
    "CloneCommonWorld",
    inputs=1,
    outputs=1,
    input_docs=[("existing_comm_world", "the world to clone")],
    output_docs=[("comm_world", "a new world over the same ranks")],
    infer=unknown,
    category="distributed",
)
class CloneCommonWorld(CommOp):
    """A new common world over the same ranks, whose collectives never mix with the original's."""

    def run(self) -> None:
        self.outputs[0].reset(self.call(self.world().clone))


@register_op(
    "DestroyCommonWorld",
    inputs=1,
    outputs=1,
    enforce_inplace={(0, 0)},
    input_docs=[("common_world", "the world to destroy")],
    output_docs=[("common_world", "in place; closed")],
    infer=unknown,
    category="distributed",
)
class DestroyCommonWorld(CommOp):
    """Close the connections of a common world; ops given it afterwards fail clearly."""

    def run(self) -> None:
        obj = self.inputs[0].held
        if isinstance(obj, CommonWorld):
            self.call(obj.destroy)


@register_op(
    "Broadcast",
    inputs=lambda n: n >= 2,
    outputs=lambda n: n >= 1,
    enforce_inplace=_shifted_pairs,
    args=[ROOT_ARG, STATUS_ARG],
    input_docs=[*WORLD_IN, ("X", "tensors, pre-created with the same shape and type on every rank")],
    output_docs=[("X", "in place: the root's first tensor")],
    infer=shifted,
    category="distributed",
)
class Broadcast(CommOp):
    """Copy the root rank's first tensor into every tensor on every rank (in place)."""

    def run(self) -> None:
        world, n = self.world(), len(self.inputs)
        if not 0 <= self.args.root < world.size:
            raise self.arg_error(f"root {self.args.root} is not a rank of a world of {world.size}")
        self.same_layout(1, n)
        first = self.buffer(1, reducible=False)
        self.agree(world, self.layout(range(1, n), f"root {self.args.root}"))
        self.call(world.comm.Bcast, first, root=self.args.root)
        for i in range(2, n):
            np.copyto(self.buffer(i, reducible=False), first.reshape(self.input(i).shape))


@register_op(
    "MPIBroadcast",
    inputs=2,
    outputs=1,
    enforce_inplace={(1, 0)},
    args=[ROOT_ARG],
    input_docs=[*WORLD_IN, ("X", "the tensor, already allocated on every rank")],
    output_docs=[("X", "in place: the root's tensor")],
    infer=shifted,
    category="distributed",
)
class MPIBroadcast(CommOp):
    """Broadcast a tensor's bytes from the root rank (in place; the tensor must be allocated)."""

    def run(self) -> None:
        world, x = self.world(), self.buffer(1, reducible=False)
        if x.size == 0:
            raise DistributedError(f"{self.describe()}: MPIBroadcast works in place: allocate '{self.input_names[1]}'")
        self.agree(world, self.layout([1], f"root {self.args.root}"))
        self.call(world.comm.Bcast, x.reshape(-1).view(np.uint8), root=self.args.root)


class _Allreduce(CommOp):
    def compile(self):
        """The in-place one-tensor case as a bound MPI call (the net's fast path)."""
        if len(self.inputs) != 2 or self.outputs[0] is not self.inputs[1]:
            return None
        world, x, MPI = self.world(), self.buffer(1), mpi()
        allreduce, in_place, total, describe = world.comm.Allreduce, MPI.IN_PLACE, MPI.SUM, self.describe
        agree, record = self.agree, self.layout([1])  # the buffer is fixed: its record is too

        def allreduce_in_place() -> None:
            agree(world, record)
            try:
                allreduce(in_place, x, op=total)
            except MPI.Exception as e:
                raise DistributedError(f"{describe()}: MPI error: {e.Get_error_string()}") from e

        return allreduce_in_place

    def run(self) -> None:
        world, n = self.world(), len(self.inputs)
        MPI = mpi()
        if n == 2:  # the common case, kept short: one tensor, usually in place
            x = self.buffer(1)
            self.agree(world, self.layout([1]))
            if self.outputs[0] is self.inputs[1]:
                self.call(world.comm.Allreduce, MPI.IN_PLACE, x, op=MPI.SUM)
            else:
                self.call(world.comm.Allreduce, x, self.output(0, x.shape, x.dtype), op=MPI.SUM)
            return
        self.same_layout(1, n)
        self.agree(world, self.layout(range(1, n)))
        total = np.array(self.buffer(1), copy=True)  # local inputs summed first, as Gloo's algorithms do
        for i in range(2, n):
            total += self.buffer(i).reshape(total.shape)
        self.call(world.comm.Allreduce, MPI.IN_PLACE, total, op=MPI.SUM)
        for k in range(n - 1):
            shape = self.input(k + 1).shape
            np.copyto(self.output(k, shape, total.dtype), total.reshape(shape))


register_op(
    "Allreduce",
    inputs=lambda n: n >= 2,
    outputs=lambda n: n >= 1,
    enforce_inplace=_shifted_pairs,
    args=[STATUS_ARG, Arg("max_concurrent_distributed_ops", INT, 16, "accepted for Caffe2 nets")],
    input_docs=[*WORLD_IN, ("X", "tensors of one numel and type")],
    output_docs=[("Y", "in place: the sum of every input on every rank")],
    infer=shifted,
    category="distributed",
)(type("Allreduce", (_Allreduce,), {"__doc__": "Sum every input tensor over every rank; each output gets the sum."}))

register_op(
    "MPIAllreduce",
    inputs=2,
    outputs=1,
    allow_inplace={(1, 0)},
    input_docs=[*WORLD_IN, ("X", "the tensor")],
    output_docs=[("Y", "the sum of X over every rank (may be X itself)")],
    infer=shifted,
    category="distributed",
)(type("MPIAllreduce", (_Allreduce,), {"__doc__": "Sum a tensor over every rank (MPI_Allreduce, SUM)."}))


class _Reduce(CommOp):
    def run(self) -> None:
        world, x = self.world(), self.buffer(1)
        MPI = mpi()
        if not 0 <= self.args.root < world.size:
            raise self.arg_error(f"root {self.args.root} is not a rank of a world of {world.size}")
        self.agree(world, self.layout([1], f"root {self.args.root}"))
        y = self.output(0, x.shape, x.dtype)
        if self.outputs[0] is self.inputs[1]:
            send = MPI.IN_PLACE if world.rank == self.args.root else x
            self.call(
                world.comm.Reduce, send, x if world.rank == self.args.root else None, op=MPI.SUM, root=self.args.root
            )
        else:
            self.call(
                world.comm.Reduce, x, y if world.rank == self.args.root else None, op=MPI.SUM, root=self.args.root
            )


for _name, _doc in (
    ("Reduce", "Sum a tensor over every rank into the root's output (other ranks' output: shaped, not set)."),
    ("MPIReduce", "Sum a tensor over every rank into the root's output (MPI_Reduce, SUM)."),
):
    register_op(
        _name,
        inputs=2,
        outputs=1,
        allow_inplace={(1, 0)},
        args=[ROOT_ARG] + ([STATUS_ARG] if _name == "Reduce" else []),
        input_docs=[*WORLD_IN, ("X", "the tensor")],
        output_docs=[("Y", "on the root: the sum over ranks")],
        infer=shifted,
        category="distributed",
    )(type(_name, (_Reduce,), {"__doc__": _doc}))


@register_op(
    "Allgather",
    inputs=lambda n: n >= 2,
    outputs=1,
    args=[STATUS_ARG],
    input_docs=[*WORLD_IN, ("X", "tensors of one numel and type")],
    output_docs=[("Y", "1-D: rank 0's inputs, then rank 1's, ... (inputs x numel x ranks elements)")],
    infer=lambda args, ins: [TensorSpec((None,), ins[1].dtype if len(ins) > 1 else None)],
    category="distributed",
)
class Allgather(CommOp):
    """Gather every rank's inputs (concatenated) into one 1-D tensor, the same on every rank."""

    def run(self) -> None:
        world, n = self.world(), len(self.inputs)
        numel, dtype = self.same_layout(1, n)
        self.agree(world, self.layout(range(1, n)))
        mine = np.concatenate([self.buffer(i).reshape(-1) for i in range(1, n)]) if n > 2 else self.buffer(1)
        y = self.output(0, ((n - 1) * numel * world.size,), dtype)
        self.call(world.comm.Allgather, mine.reshape(-1), y)


@register_op(
    "MPIAllgather",
    inputs=2,
    outputs=1,
    input_docs=[*WORLD_IN, ("X", "the tensor (same shape on every rank)")],
    output_docs=[("Y", "the ranks' tensors stacked along axis 0 (first dim x ranks)")],
    infer=lambda args, ins: [
        TensorSpec((None, *ins[1].shape[1:]) if ins[1].shape else None, ins[1].dtype) if len(ins) > 1 else ins[0]
    ],
    category="distributed",
)
class MPIAllgather(CommOp):
    """Concatenate every rank's tensor along axis 0 (MPI_Allgather)."""

    def run(self) -> None:
        world, x = self.world(), self.buffer(1)
        if x.ndim == 0:
            raise DistributedError(f"{self.describe()}: MPIAllgather needs a tensor of rank >= 1")
        self.agree(world, self.layout([1]))
        y = self.output(0, (x.shape[0] * world.size, *x.shape[1:]), x.dtype)
        self.call(world.comm.Allgather, x, y)


@register_op(
    "ReduceScatter",
    inputs=lambda n: n >= 3,
    outputs=lambda n: n >= 1,
    allow_inplace=_shifted_pairs,
    args=[STATUS_ARG],
    input_docs=[*WORLD_IN, ("X", "tensors of one numel and type"), ("recv_counts", "int32, one count per rank")],
    output_docs=[("Y", "in place: this rank's segment holds the sum over inputs and ranks")],
    infer=shifted,
    category="distributed",
)
class ReduceScatter(CommOp):
    """Sum the inputs over every rank and give each rank its segment: rank r's outputs hold the sum in
    elements [sum(recv_counts[:r]), sum(recv_counts[:r + 1])); the rest of each output keeps its input."""

    def run(self) -> None:
        world, n = self.world(), len(self.inputs)
        MPI = mpi()
        numel, dtype = self.same_layout(1, n - 1)
        counts = self.input(n - 1)
        if counts.size != world.size or counts.dtype.kind not in "iu" or (counts < 0).any() or counts.sum() != numel:
            raise DistributedError(
                f"{self.describe()}: recv_counts ('{self.input_names[n - 1]}') must be {world.size} non-negative "
                f"integers summing to {numel}, got {counts.tolist()}"
            )
        self.agree(world, self.layout(range(1, n - 1), f"recv_counts {counts.tolist()}"))
        total = np.array(self.buffer(1), copy=True).reshape(-1)
        for i in range(2, n - 1):
            total += self.buffer(i).reshape(-1)
        start = int(counts[: world.rank].sum())
        mine = np.empty(int(counts[world.rank]), dtype)
        self.call(world.comm.Reduce_scatter, total, mine, recvcounts=[int(c) for c in counts], op=MPI.SUM)
        for k in range(n - 2):
            x = self.input(k + 1)
            y = self.output(k, x.shape, dtype)
            if y is not x:
                np.copyto(y, x)
            y.reshape(-1)[start : start + mine.size] = mine


@register_op(
    "Barrier",
    inputs=1,
    outputs=0,
    args=[STATUS_ARG],
    input_docs=WORLD_IN,
    infer=unknown,
    category="distributed",
)
class Barrier(CommOp):
    """Wait until every rank of the world has reached this op."""

    def run(self) -> None:
        world = self.world()
        self.call(world.comm.Barrier)


should_not_do_gradient(
    "CreateCommonWorld",
    "MPICreateCommonWorld",
    "CloneCommonWorld",
    "DestroyCommonWorld",
    "Broadcast",
    "MPIBroadcast",
    "Allreduce",
    "MPIAllreduce",
    "Reduce",
    "MPIReduce",
    "Allgather",
    "MPIAllgather",
    "ReduceScatter",
    "Barrier",
)


BUCKET_DIRECT_BYTES = 64 << 10  # tensors this big are reduced in place on their own; smaller ones share a buffer


@register_op(
    "AllreduceBuckets",
    inputs=lambda n: n >= 2,
    outputs=lambda n: n >= 1,
    enforce_inplace=_shifted_pairs,
    input_docs=[*WORLD_IN, ("X", "tensors, each summed over the ranks on its own")],
    output_docs=[("X", "in place: each tensor's sum over the ranks")],
    infer=shifted,
    category="distributed",
)
class AllreduceBuckets(CommOp):
    """Sum each input tensor over the ranks, separately (unlike Allreduce, which sums the inputs together).

    Tensors of 64 KiB or more are reduced in place one by one; the smaller ones of each dtype are packed
    into one buffer and reduced by a single MPI call, so a net with many small gradients pays the
    per-call latency once (``train --distributed`` and ``data_parallel_model`` use it for gradients).
    The packing buffers are kept between runs: no allocation after the first.
    """

    def setup(self) -> None:
        self._scratch: dict[np.dtype, np.ndarray] = {}

    def run(self) -> None:
        world, MPI = self.world(), mpi()
        for i in range(1, len(self.inputs)):
            self.buffer(i)  # dtype checks first, then the ranks' agreement, then any MPI call
        self.agree(world, self.layout(range(1, len(self.inputs))))
        small: dict[np.dtype, list[np.ndarray]] = {}
        for i in range(1, len(self.inputs)):
            x = self.buffer(i)
            if x.nbytes >= BUCKET_DIRECT_BYTES:
                self.call(world.comm.Allreduce, MPI.IN_PLACE, x, op=MPI.SUM)
            else:
                small.setdefault(x.dtype, []).append(x)
        for dtype, arrays in small.items():
            total = sum(a.size for a in arrays)
            buf = self._scratch.get(dtype)
            if buf is None or buf.size != total:
                buf = self._scratch[dtype] = np.empty(total, dtype)
            pos = 0
            for a in arrays:
                buf[pos : pos + a.size] = a.reshape(-1)
                pos += a.size
            self.call(world.comm.Allreduce, MPI.IN_PLACE, buf, op=MPI.SUM)
            pos = 0
            for a in arrays:
                a.reshape(-1)[:] = buf[pos : pos + a.size]
                pos += a.size


should_not_do_gradient("AllreduceBuckets")
