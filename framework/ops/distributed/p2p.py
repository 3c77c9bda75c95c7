"""Point-to-point: SendTensor / ReceiveTensor (and Caffe2's MPI spellings).

A message is the tensor's TensorProto data type and dims (int64 header) then its
bytes; with ``raw_buffer`` only the bytes go, into a receiver tensor already
shaped and typed. Nothing is pickled. The optional ``dst``/``src`` and ``tag``
inputs (int tensors of one element) override the arguments.
"""

from __future__ import annotations

import numpy as np

from framework.memory.typemeta import TypeMeta
from framework.ops.distributed.base import CommOp, shifted, unknown
from framework.ops.distributed.world import DistributedError, mpi
from framework.ops.gradient import should_not_do_gradient
from framework.ops.registry import register_op
from framework.ops.schema import INT, Arg, TensorSpec

MAX_DIMS = 32


def _scalar_input(op: CommOp, i: int, default: int) -> int:
    if len(op.inputs) <= i:
        return default
    v = op.input(i)
    if v.size != 1 or v.dtype.kind not in "iu":
        raise DistributedError(f"{op.describe()}: input {i} ('{op.input_names[i]}') must be one integer")
    return int(v.reshape(-1)[0])


class _Send(CommOp):
    def run(self) -> None:
        world, x = self.world(), self.buffer(1, reducible=False)
        dst = _scalar_input(self, 2, self.args.dst)
        tag = _scalar_input(self, 3, self.args.tag)
        if not 0 <= dst < world.size or dst == world.rank:
            raise DistributedError(f"{self.describe()}: dst {dst} must be another rank of a world of {world.size}")
        if not self.args.raw_buffer:
            dtype_code = TypeMeta.of(x.dtype).proto_type
            header = np.array([dtype_code, x.ndim, *x.shape], np.int64)
            self.call(world.comm.Send, header, dest=dst, tag=tag)
        self.call(world.comm.Send, x.reshape(-1).view(np.uint8), dest=dst, tag=tag)


class _Receive(CommOp):
    def run(self) -> None:
        world = self.world()
        MPI = mpi()
        src = _scalar_input(self, 2, self.args.src)
        tag = _scalar_input(self, 3, self.args.tag)
        # no message can ever come from this rank itself (SendTensor refuses dst == own rank), from a rank the
        # world lacks, or from "any" other rank of a world of one: such a receive would wait forever
        if src >= world.size or src == world.rank or (src < 0 and world.size == 1):
            who = "any other rank" if src < 0 else f"rank {src}"
            raise DistributedError(
                f"{self.describe()}: nothing can arrive from {who}: this is rank {world.rank} of a world of "
                f"{world.size}, and a rank never receives from itself"
            )
        source = MPI.ANY_SOURCE if src < 0 else src
        any_tag = MPI.ANY_TAG if tag < 0 else tag
        status = MPI.Status()
        if self.args.raw_buffer:
            y = self.output_tensor(0)
            if y.array is None or y.array.size == 0:
                raise DistributedError(f"{self.describe()}: with raw_buffer, Y must be allocated with its shape")
            y = self.output(0, y.array.shape, y.array.dtype)
        else:
            header = np.zeros(2 + MAX_DIMS, np.int64)
            self.call(world.comm.Recv, header, source=source, tag=any_tag, status=status)
            count = status.Get_count(MPI.INT64_T)
            ndim = int(header[1])
            if count < 2 or ndim != count - 2 or (header[2:count] < 0).any():
                raise DistributedError(f"{self.describe()}: a malformed tensor header from rank {status.Get_source()}")
            dtype = TypeMeta.from_proto(int(header[0])).dtype
            source, any_tag = status.Get_source(), status.Get_tag()
            y = self.output(0, tuple(int(d) for d in header[2:count]), dtype)
        self.call(world.comm.Recv, y.reshape(-1).view(np.uint8), source=source, tag=any_tag, status=status)
        self.output(1, (1,), np.int32)[0] = status.Get_source()
        self.output(2, (1,), np.int32)[0] = status.Get_tag()


SEND_DOCS = [
    ("comm_world", "the common world"),
    ("X", "the tensor to send"),
    ("dst", "optional: an int tensor of one element, overriding the dst argument"),
    ("tag", "optional: an int tensor of one element, overriding the tag argument"),
]
RECV_DOCS = [
    ("comm_world", "the common world"),
    ("Y", "in place output (allocated, with raw_buffer)"),
    ("src", "optional: an int tensor of one element, overriding the src argument"),
    ("tag", "optional: an int tensor of one element, overriding the tag argument"),
]
RAW = Arg("raw_buffer", INT, 0, "send only the bytes; the receiver's Y already has the shape and type")

for prefix in ("", "MPI"):
    register_op(
        f"{prefix}SendTensor",
        inputs={2, 3, 4},
        outputs=0,
        args=[Arg("dst", INT, 0, "the rank to send to"), Arg("tag", INT, 0, "the message tag"), RAW],
        input_docs=SEND_DOCS,
        infer=unknown,
        category="distributed",
    )(type(f"{prefix}SendTensor", (_Send,), {"__doc__": "Send a tensor (type, shape and data) to another rank."}))
    register_op(
        f"{prefix}ReceiveTensor",
        inputs={2, 3, 4},
        outputs=3,
        enforce_inplace={(1, 0)},
        allow_inplace={(2, 1), (3, 2)},
        args=[Arg("src", INT, -1, "the rank to receive from; -1: any"), Arg("tag", INT, -1, "the tag; -1: any"), RAW],
        input_docs=RECV_DOCS,
        output_docs=[("Y", "the received tensor"), ("src", "int32 [1]: the sender"), ("tag", "int32 [1]: the tag")],
        infer=lambda args, ins: [
            *shifted(args, ins)[:1],
            TensorSpec((1,), np.dtype(np.int32)),
            TensorSpec((1,), np.dtype(np.int32)),
        ],
        category="distributed",
    )(type(f"{prefix}ReceiveTensor", (_Receive,), {"__doc__": "Receive a tensor from another rank."}))

should_not_do_gradient("SendTensor", "ReceiveTensor", "MPISendTensor", "MPIReceiveTensor")
