"""Sequence and row utilities: SplitByLengths, LengthsSplit, ReversePackedSegs,
VariableLengthSequencePadding, BatchPermutation and LastNWindowCollector (Caffe2's
concat_split_op, length_split_op, reverse_packed_segs_op, variable_length_sequence_padding,
batch_permutation_op, last_n_window_collector)."""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.memory.allocator import check_elements
from framework.ops.gradient import gradient, should_not_do_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, INT, STRING, UNKNOWN, Arg, TensorSpec, same_as_input
from framework.ops.training.counters import Mutex, held
from framework.ops.validation import check_indices, expect_in_range, expect_kind, int_scalar, normalize_axis

_I32 = np.dtype(np.int32)


def _int_vector(op: Operator, i: int, what: str) -> np.ndarray:
    x = op.input(i)
    if x.dtype.kind not in "iu" or x.ndim != 1:
        raise TypeMismatchError(
            f"{op.describe()}: {what} '{op.input_names[i]}' must be a 1-D integer tensor, got {x.dtype} {list(x.shape)}"
        )
    return x


def _unknown(args, ins):
    return [UNKNOWN] * args.num_outputs


@register_op(
    "SplitByLengths",
    inputs=2,
    outputs=(1, float("inf")),
    args=[
        Arg("axis", INT, None, "axis to split (default: from order, NCHW -> 1)"),
        Arg("order", STRING, "NCHW", "used when axis is not given"),
        Arg("use_scaling_lengths", BOOL, False, "scale the lengths so they sum to the axis size"),
    ],
    input_docs=[("input", "tensor"), ("lengths", "int32: sizes, len(lengths) a multiple of the outputs")],
    output_docs=[("output_0", "part k: the k-th group of len(lengths)/outputs lengths")],
    infer=_unknown,
    category="shape",
)
class SplitByLengths(Operator):
    """Split along ``axis`` into the outputs; output k takes the sum of the k-th group of
    ``len(lengths) / outputs`` consecutive lengths (times ``axis size / sum(lengths)`` with
    ``use_scaling_lengths``)."""

    def setup(self) -> None:
        a = self.args
        if a.axis is not None and "order" in a.given:
            raise self.arg_error("give either axis or order, not both")
        self._axis = a.axis if a.axis is not None else (1 if str(a.order).upper() == "NCHW" else 3)

    def run(self) -> None:
        x = self.input(0)
        lengths = _int_vector(self, 1, "lengths")
        n_out = len(self.outputs)
        if lengths.size % n_out:
            raise ShapeError(f"{self.describe()}: len(lengths) {lengths.size} should be divisible by {n_out} outputs")
        axis = normalize_axis(self, self._axis, x.ndim)
        if (lengths < 0).any():
            raise ShapeError(f"{self.describe()}: lengths must be >= 0")
        total, channels = int(lengths.sum()), x.shape[axis]
        mult = 1
        if self.args.use_scaling_lengths:
            if channels % (total or 1):
                raise ShapeError(f"{self.describe()}: input channels {channels} should be divisible by {total}")
            mult = channels // total if total else 1
        elif total != channels:
            raise ShapeError(f"{self.describe()}: lengths sum {total} != input channels {channels}")
        per = lengths.size // n_out
        start = 0
        parts = []
        for k in range(n_out):
            size = mult * int(lengths[k * per : (k + 1) * per].sum())
            parts.append(np.take(x, range(start, start + size), axis=axis))
            start += size
        for k, p in enumerate(parts):
            np.copyto(self.output(k, p.shape, x.dtype), p)


@gradient("SplitByLengths")
def _split_by_lengths_grad(g):
    axis = g.arg("axis")
    axis = axis if axis is not None else (1 if str(g.arg("order") or "NCHW").upper() == "NCHW" else 3)
    ops, parts = [], []
    for k in range(len(g.def_.output)):
        go = g.GO(k)
        if go is None:
            go = f"{g.def_.output[k]}_zero_grad"
            ops.append(g.op("ConstantFill", [g.O(k)], [go], value=0.0))
        parts.append(go)
    ops.append(g.op("Concat", parts, [g.GI(0), f"_{g.GI(0)}_dims"], axis=axis))
    return ops


@register_op(
    "LengthsSplit",
    inputs=(1, 2),
    args=[Arg("n_split", INT, 0, "parts per length (or input 1)")],
    input_docs=[("LENGTHS", "1-D int32"), ("n_split", "optional int32 scalar")],
    output_docs=[("Y", "int32 [len * n_split]: each length split into n_split near-equal parts")],
    infer=lambda args, ins: [TensorSpec(None, _I32)],
    category="shape",
)
class LengthsSplit(Operator):
    """Split each length L into ``n_split`` parts ``L // n + (1 if i < L % n)``, e.g. [9, 4] with 3 ->
    [3, 3, 3, 2, 1, 1]."""

    def run(self) -> None:
        lengths = _int_vector(self, 0, "LENGTHS")
        n = self.args.n_split
        if len(self.inputs) > 1:
            n = int_scalar(self, 1, "n_split")
        if n <= 0:
            raise ShapeError(f"{self.describe()}: n_split must be > 0, got {n}")
        if (lengths < 0).any():
            raise ShapeError(f"{self.describe()}: lengths must be >= 0")
        check_elements((max(lengths.size, 1), n), 8, f"{self.describe()}: {n} parts per length")
        base = (lengths // n).astype(np.int64)[:, None]
        extra = (np.arange(n)[None, :] < (lengths % n)[:, None]).astype(np.int64)
        out = self.output(0, (lengths.size * n,), _I32)
        out[:] = (base + extra).reshape(-1)


@register_op(
    "ReversePackedSegs",
    inputs=2,
    input_docs=[("data", "[max_length, batch, ...]"), ("lengths", "[batch] int32/int64")],
    output_docs=[("reversed data", "each sequence's first lengths[b] steps reversed")],
    infer=same_as_input(0),
    category="shape",
)
class ReversePackedSegs(Operator):
    """Reverse the first ``lengths[b]`` time steps of each sequence b (the rest are copied)."""

    def run(self) -> None:
        x = self.input(0)
        lengths = _int_vector(self, 1, "lengths")
        if x.ndim < 2 or lengths.size != x.shape[1]:
            raise ShapeError(
                f"{self.describe()}: data must be [T, batch, ...] with batch = len(lengths), got {list(x.shape)}"
            )
        if lengths.size and (lengths.min() < 0 or lengths.max() > x.shape[0]):
            raise ShapeError(f"{self.describe()}: lengths must be within [0, {x.shape[0]}]")
        out = self.output(0, x.shape, x.dtype)
        np.copyto(out, x)
        for b, n in enumerate(lengths.tolist()):
            out[:n, b] = x[:n, b][::-1]


@gradient("ReversePackedSegs")
def _reverse_grad(g):
    return [g.op("ReversePackedSegs", [g.GO(0), g.I(1)], [g.GI(0)])]


@register_op(
    "VariableLengthSequencePadding",
    inputs=2,
    enforce_inplace={(0, 0)},
    input_docs=[("INPUT", "[N, B, M] (in place)"), ("SEQ_LENGTHS", "[B] int32")],
    output_docs=[("OUTPUT", "steps >= SEQ_LENGTHS[b] set to 0")],
    infer=same_as_input(0),
    category="shape",
)
class VariableLengthSequencePadding(Operator):
    """Zero the steps at and after each sequence's length, in place."""

    def run(self) -> None:
        x = self.input(0)
        lengths = _int_vector(self, 1, "SEQ_LENGTHS")
        if x.ndim != 3 or lengths.size != x.shape[1]:
            raise ShapeError(
                f"{self.describe()}: INPUT must be [N, B, M] with B = len(SEQ_LENGTHS), got {list(x.shape)}"
            )
        if (lengths < 0).any():
            raise ShapeError(f"{self.describe()}: SEQ_LENGTHS must be >= 0")
        for b, n in enumerate(lengths.tolist()):
            x[n:, b] = 0
        self.output_tensor(0).version += 1


@register_op(
    "BatchPermutation",
    inputs=2,
    input_docs=[("X", "[N, ...]"), ("indices", "[N] int32 permutation")],
    output_docs=[("Y", "Y[i] = X[indices[i]]")],
    infer=same_as_input(0),
    category="shape",
)
class BatchPermutation(Operator):
    """Reorder the first dimension: ``Y[i] = X[indices[i]]``."""

    def run(self) -> None:
        x, idx = self.input(0), _int_vector(self, 1, "indices")
        if x.ndim == 0 or idx.size != x.shape[0]:
            raise ShapeError(f"{self.describe()}: indices must hold one index per row of X {list(x.shape)}")
        check_indices(self, 1, idx, x.shape[0], what="rows of X")
        np.take(x, idx, axis=0, out=self.output(0, x.shape, x.dtype))


@register_op(
    "BatchPermutationGradient",
    inputs=2,
    input_docs=[("indices", "the forward permutation"), ("dY", "gradient of Y")],
    output_docs=[("dX", "dX[indices[i]] = dY[i]")],
    infer=lambda args, ins: [ins[1] if len(ins) > 1 else UNKNOWN],
    private=True,
    category="shape",
)
class BatchPermutationGradient(Operator):
    """Gradient of BatchPermutation: scatter dY back, ``dX[indices[i]] += dY[i]``."""

    def run(self) -> None:
        idx, dy = _int_vector(self, 0, "indices"), self.input(1)
        if dy.ndim == 0 or idx.size != dy.shape[0] or (idx.size and (idx.min() < 0 or idx.max() >= dy.shape[0])):
            raise ShapeError(f"{self.describe()}: indices do not fit dY {list(dy.shape)}")
        out = self.output(0, dy.shape, dy.dtype)
        out[...] = 0
        np.add.at(out, idx, dy)


@gradient("BatchPermutation")
def _batch_permutation_grad(g):
    return [g.op("BatchPermutationGradient", [g.I(1), g.GO(0)], [g.GI(0)])]


@register_op(
    "LastNWindowCollector",
    inputs={3, 4, 5},
    outputs=(2, 3),
    enforce_inplace={(0, 0), (1, 1), (4, 2)},
    args=[Arg("num_to_collect", INT, -1, "rows to keep (> 0)")],
    input_docs=[
        ("last-N buffer", "the buffer (start empty)"),
        ("next cursor", "int32 scalar: the next position to replace (start 0)"),
        ("DATA", "rows to collect"),
        ("MUTEX", "optional Mutex"),
        ("NUM_VISITED", "optional int64 [1]: rows seen"),
    ],
    output_docs=[
        ("last-N buffer", "the last num_to_collect rows (ring order)"),
        ("next cursor", "int32 scalar: the next position to replace"),
        ("NUM_VISITED", "int64 [1]: rows seen so far"),
    ],
    infer=_unknown,
    category="shape",
)
class LastNWindowCollector(Operator):
    """Keep the last ``num_to_collect`` rows seen, as a ring buffer (Caffe2's LastNWindowCollector):
    more new rows than the window replaces it with their last rows (cursor 0)."""

    def setup(self) -> None:
        if self.args.num_to_collect <= 0:
            raise self.arg_error(f"num_to_collect must be > 0, got {self.args.num_to_collect}")

    def run(self) -> None:
        if len(self.inputs) > 3:
            with held(self, 3, Mutex, "CreateMutex").lock:
                self._collect()
        else:
            self._collect()

    def _collect(self) -> None:
        k = self.args.num_to_collect
        x = self.input(2)
        if x.ndim < 1:
            raise ShapeError(f"{self.describe()}: DATA needs at least one dimension")
        buf_t = self.input_tensor(0) if self.inputs[0].held is not None else None
        initialized = buf_t is not None and buf_t.is_allocated and buf_t.numel > 0
        buf = self.input(0) if initialized else None
        if initialized and (buf.ndim != x.ndim or buf.shape[1:] != x.shape[1:] or buf.dtype != x.dtype):
            raise ShapeError(f"{self.describe()}: buffer {list(buf.shape)} does not fit DATA {list(x.shape)}")
        cur = int_scalar(self, 1, "the next position") if initialized else 0  # checked before NUM_VISITED moves
        size = min(k, (buf.shape[0] if initialized else 0) + min(x.shape[0], k))
        if x.shape[0]:
            expect_in_range(self.describe(), "next cursor", cur, 0, max(size, 1), of=f"a buffer of {size} rows")
        if len(self.outputs) > 2:
            nv = self.input(4)
            expect_kind(self, 4, nv, "int")
            if nv.size != 1:
                raise ShapeError(f"{self.describe()}: NUM_VISITED must hold one value")
            visited = 0 if not initialized else int(nv.reshape(-1)[0])
            if visited < 0:
                raise ShapeError(f"{self.describe()}: NUM_VISITED is negative")
            nv.reshape(-1)[0] = visited + x.shape[0]
        n = x.shape[0]
        if n == 0:
            if not initialized:
                np.copyto(self.output(0, x.shape, x.dtype), x)
            return
        old = buf if initialized else x[:0]
        new = np.empty((size, *x.shape[1:]), x.dtype)
        new[: old.shape[0]] = old[:size]
        if n > k:
            new[:] = x[n - k :]
            cur = 0
        else:
            first = min(n + cur, k) - cur
            new[cur : cur + first] = x[:first]
            new[: n - first] = x[first:]
            cur = (cur + n) % k
        np.copyto(self.output(0, new.shape, x.dtype), new)
        self.output(1, (), _I32)[...] = cur


should_not_do_gradient("LengthsSplit", "VariableLengthSequencePadding", "LastNWindowCollector")
