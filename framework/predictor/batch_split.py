"""Run a predict net on a batch split over the intra-op threads: one copy of the net per thread, each on
a contiguous slice of the images.

At batch >= 2 this is the cheapest way to use several cores with numpy: every op of the net (convs,
but also pooling, Concat, BN, Relu, FC, Softmax...) runs in parallel with no per-op coordination, and
numpy/BLAS release the GIL inside each call. Each copy is a net instance in a child workspace of the
predictor's (so parameters are shared, activations are per copy and sized for its slice; the total
activation memory equals the unsplit net's). The inputs' slices are wrapped without a copy (a batch
slice of a C-contiguous array is contiguous); the outputs are copied into the predictor's output blobs.

Only nets whose every op treats the images of a batch independently are split (an allowlist of op
types, with the batch axis 0 never an op's axis); anything else runs unsplit, as does batch 1 (where
the conv kernels split output channels instead).

A net ending in FC layers with large weights (AlexNet's: 224 MiB) is split only up to the first of
them: every copy would stream all of the weights from memory, two copies twice as many bytes in the
same time. The copies' results at that point are gathered into the predictor's workspace and the
rest of the net runs there once on the whole batch, each FC splitting its output features over the
threads (fc.SPLIT_MIN_BYTES).
"""

from __future__ import annotations

from typing import Any, Sequence

from framework.memory.tensor import Tensor
from framework.memory.workspace import Workspace
from framework.ops.arg_reader import ArgReader
from framework.ops.schema import INT
from framework.runtime.parallel import get_num_threads, run_parallel, split

_PER_IMAGE = {
    "Conv", "Conv2D", "ConvFusion", "ConvTranspose", "SpatialBN", "Relu", "LeakyRelu", "Sigmoid", "Tanh",
    "Elu", "PRelu", "MaxPool", "AveragePool", "MaxPool2D", "AveragePool2D", "LRN", "Dropout", "FC", "Softmax",
    "Sum", "Add", "Mul", "Sub", "Div", "Concat", "Split", "ChannelShuffle", "Flatten", "FlattenToVec",
    "Copy", "Alias", "StopGradient", "Scale", "Clip", "Exp", "Log", "Sqrt", "Abs", "Negative",
    "Upsample", "ResizeNearest", "AffineChannel", "Swish", "Gelu",
    # fused by Caffe2's rewrites or by the inference optimization pass (framework/net/optimize.py)
    "ConvRelu", "SpatialBNRelu", "SumRelu", "ConcatChannelShuffle",
}  # fmt: skip


def _arg(op: Any, name: str, default: Any) -> Any:
    r = ArgReader(op)
    return r.single(name, kind=INT) if r.has_single(name, INT) else default


def splittable(net_def: Any, data_inputs: Sequence[str]) -> bool:
    """Does every op of ``net_def`` handle the images of a batch independently?"""
    if not data_inputs:
        return False
    for op in net_def.op:
        if op.type not in _PER_IMAGE:
            return False
        if op.type in ("Concat", "Split", "Softmax") and _arg(op, "axis", 1) == 0:
            return False
        if op.type == "FC" and _arg(op, "axis", 1) != 1:
            return False
        if op.type in ("SpatialBN", "SpatialBNRelu", "Dropout") and not _arg(op, "is_test", 0):
            return False
    return True


def tail_start(net_def: Any, ws: Workspace) -> int | None:
    """Index of the first FC whose weight (a tensor in ``ws``) has at least fc.SPLIT_MIN_BYTES, if an op
    precedes it: the batch split stops there (see module doc)."""
    from framework.ops.nn.fc import SPLIT_MIN_BYTES

    for k, op in enumerate(net_def.op):
        if op.type != "FC" or k == 0 or len(op.input) < 2 or not ws.has_blob(op.input[1]):
            continue
        obj = ws.get_blob(op.input[1]).held
        if type(obj) is Tensor and obj.is_allocated and obj.nbytes >= SPLIT_MIN_BYTES:
            return k
    return None


def _part(net_def: Any, ops: Sequence[Any], name: str, outputs: Sequence[str]) -> Any:
    """A NetDef of ``ops`` (a slice of ``net_def``'s) declaring ``outputs``."""
    from framework.proto.framework_pb2 import NetDef

    part = NetDef()
    part.CopyFrom(net_def)
    part.name = name
    del part.op[:], part.external_input[:], part.external_output[:]
    part.op.extend(ops)
    made: set = set()
    for op in ops:
        part.external_input.extend(b for b in op.input if b not in made and b not in part.external_input)
        made.update(op.output)
    part.external_output.extend(outputs)
    return part


class BatchSplitRunner:
    """Runs ``net_def`` in ``ws`` split over the threads when that applies (see module doc)."""

    def __init__(self, ws: Workspace, net_def: Any, data_inputs: Sequence[str], outputs: Sequence[str]) -> None:
        self.ws, self.net_def = ws, net_def
        self.data_inputs, self.outputs = list(data_inputs), list(outputs)
        self.ok = splittable(net_def, self.data_inputs)
        self._key: tuple | None = None  # (threads, the input arrays, their shapes) the copies were set up for
        self._copies: list = []
        self._head, self._gather, self._tail = net_def, list(outputs), None
        k = tail_start(net_def, ws) if self.ok else None
        if k is not None:
            head, tail = list(net_def.op[:k]), list(net_def.op[k:])
            made = {b for op in head for b in op.output}
            tail_made = {b for op in tail for b in op.output}
            tail_def = _part(net_def, tail, f"{net_def.name}_split_tail", [b for b in outputs if b in tail_made])
            # what the copies hand over: what the tail reads before writing it, and the outputs only the head writes
            self._gather = [b for b in tail_def.external_input if b in made]
            self._gather += [b for b in outputs if b in made and b not in tail_made]
            self._head = _part(net_def, head, f"{net_def.name}_split_head", self._gather)
            self._tail = ws.create_net(tail_def, overwrite=True)

    def run(self, full_net: Any) -> None:
        threads = get_num_threads()
        arrays = [self._array(n) for n in self.data_inputs] if self.ok and threads > 1 else None
        if not arrays or any(a is None for a in arrays):
            full_net.run()
            return
        batch = arrays[0].shape[0]
        if batch < 2 or any(a.ndim == 0 or a.shape[0] != batch for a in arrays):
            full_net.run()
            return
        if not self._same_inputs(threads, arrays):
            self._setup(arrays, threads)
            self._key = (threads, tuple(arrays), tuple(a.shape for a in arrays))
        run_parallel([c[1].run for c in self._copies])
        self._collect()
        if self._tail is not None:
            self._tail.run()

    def _same_inputs(self, threads: int, arrays: list) -> bool:
        """The copies were set up for these very input arrays (held, compared by identity) and shapes."""
        if self._key is None:
            return False
        k_threads, k_arrays, k_shapes = self._key
        return (
            k_threads == threads
            and len(k_arrays) == len(arrays)
            and all(a is b for a, b in zip(k_arrays, arrays))
            and k_shapes == tuple(a.shape for a in arrays)
        )

    def _collect(self) -> None:
        """The copies' slices of the gathered blobs, joined into the predictor's workspace."""
        for name in self._gather:
            parts = [c[0].get_blob(name).held.data() for c in self._copies]
            shape = (sum(p.shape[0] for p in parts), *parts[0].shape[1:])
            t = self.ws.create_blob(name).get_mutable(Tensor)
            arr = t.array
            if arr is None or arr.shape != shape or arr.dtype != parts[0].dtype:
                t.resize(shape)
                arr = t.mutable_data(parts[0].dtype)
            else:
                t.version += 1
            for (lo, hi), p in zip(self._ranges, parts):
                arr[lo:hi] = p

    def _array(self, name: str):
        if not self.ws.has_blob(name):
            return None
        obj = self.ws.get_blob(name).held
        return obj.array if type(obj) is Tensor else None

    def _setup(self, arrays, threads: int) -> None:
        batch = arrays[0].shape[0]
        self._ranges = split(batch, threads)
        written = {o for op in self._head.op for o in op.output}
        self._copies = []
        for k, (lo, hi) in enumerate(self._ranges):
            child = Workspace(parent=self.ws, name=f"split{k}")
            for name in written | set(self.data_inputs):
                child.create_local_blob(name)
            for name, a in zip(self.data_inputs, arrays):
                child.get_blob(name).get_mutable(Tensor).share_external(a[lo:hi])
            self._copies.append((child, child.create_net(self._head)))
