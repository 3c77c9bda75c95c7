"""AddPadding, RemovePadding, GatherPadding, PadEmptySamples (caffe2/operators/sequence_ops.cc).

Data is a concatenation of ranges along the outer dimension, ``lengths``
giving each range's size (no lengths: one range spanning everything).
``padding_width`` rows are added at the start of each range and
``end_padding_width`` (default: the same) at its end. Departure: the
lengths must sum to exactly N (Caffe2 only checks <= N and leaves the tail
of the output unwritten).
"""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.ops.gradient import gradient, no_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import INT, UNKNOWN, Arg, TensorSpec
from framework.ops.validation import check_lengths

_MAX_WIDTH = 1 << 16  # a padding wider than this is a malformed file, not a model
_MAX_BYTES = 1 << 32

_PAD_ARGS = [
    Arg("padding_width", INT, 1, "Number of copies of padding to add (or remove) around each range"),
    Arg("end_padding_width", INT, -1, "A different end-padding width (-1: same as padding_width)"),
]


class _Padded(Operator):
    def setup(self) -> None:
        a = self.args
        self.start = a.padding_width
        self.end = a.end_padding_width if a.end_padding_width >= 0 else a.padding_width
        if not 0 <= self.start <= _MAX_WIDTH or self.end > _MAX_WIDTH:
            raise self.arg_error(f"padding widths must be in [0, {_MAX_WIDTH}], got {self.start} and {self.end}")

    def _lengths(self, n: int, idx: int = 1) -> np.ndarray:
        if len(self.inputs) <= idx:
            return np.array([n], np.int64)
        lengths = self.input(idx)
        if lengths.dtype.kind not in "iu" or lengths.ndim != 1:
            raise TypeMismatchError(
                f"{self.describe()}: lengths '{self.input_names[idx]}' must be a 1-D integer tensor, "
                f"found {lengths.dtype} {list(lengths.shape)}"
            )
        check_lengths(self, idx, lengths, n, f"the outer dimension of '{self.input_names[0]}'")
        return lengths.astype(np.int64)

    def _data(self) -> np.ndarray:
        x = self.input(0)
        if x.ndim < 1:
            raise ShapeError(f"{self.describe()}: data '{self.input_names[0]}' must have at least 1 dimension")
        return x

    def _out_lengths(self, lengths: np.ndarray, delta: int) -> None:
        if len(self.outputs) > 1:
            out = self.output(1, lengths.shape, np.int32)
            np.add(lengths, delta, out=out, casting="unsafe")


def _pad_infer(sign):
    def infer(args, ins):
        x = ins[0]
        if x.shape is None:
            return [UNKNOWN] * args.num_outputs
        width = args.padding_width + (args.end_padding_width if args.end_padding_width >= 0 else args.padding_width)
        n_ranges = ins[1].shape[0] if len(ins) > 1 and ins[1].shape is not None else (1 if len(ins) == 1 else None)
        first = None if x.shape[0] is None or n_ranges is None else x.shape[0] + sign * width * n_ranges
        outs = [TensorSpec((first, *x.shape[1:]), x.dtype)]
        if args.num_outputs > 1:
            outs.append(TensorSpec((n_ranges,), np.dtype(np.int32)))
        return outs

    return infer


@register_op(
    "AddPadding",
    inputs=(1, 4),
    outputs=(1, 2),
    input_docs=[
        ("data_in", "Input data T<N, D1, ..., Dn>"),
        ("lengths", "int Number of elements in each range; sum(lengths) = N (optional)"),
        ("start_padding", "Padding data for range start T<D1, ..., Dn> (optional; default zeros)"),
        ("end_padding", "Padding for range end (optional; default start_padding)"),
    ],
    output_docs=[("data_out", "Padded data"), ("lengths_out", "Lengths for each padded range (optional)")],
    args=_PAD_ARGS,
    infer=_pad_infer(+1),
    category="rnn",
)
class AddPadding(_Padded):
    """Given a partitioned tensor T<N, D_1, ..., D_n>, where the partitions are defined as ranges
    on its outer-most (slowest varying) dimension N, return a tensor T<(N + 2 * padding_width),
    D_1, ..., D_n> with paddings added to the start and end of each range. Optionally, different
    paddings can be provided for beginning and end. Paddings provided must be a tensor
    T<D_1, ..., D_n>. If no padding is provided, add zero padding. If no lengths vector is
    provided, add padding only once, at the start and end of data."""

    def run(self) -> None:
        x = self._data()
        lengths = self._lengths(x.shape[0])
        block = x.shape[1:]
        pads = []
        for k in (2, 3):
            if len(self.inputs) > k:
                p = self.input(k)
                if p.size != int(np.prod(block, dtype=np.int64)) or p.dtype != x.dtype:
                    raise ShapeError(
                        f"{self.describe()}: padding '{self.input_names[k]}' must be {x.dtype} with "
                        f"{int(np.prod(block, dtype=np.int64))} elements (shape {list(block)}), "
                        f"found {p.dtype} {list(p.shape)}"
                    )
                pads.append(p.reshape(block))
        start_pad = pads[0] if pads else np.zeros(block, x.dtype)
        end_pad = pads[1] if len(pads) > 1 else start_pad
        s, e = self.start, self.end
        rows = x.shape[0] + (s + e) * len(lengths)
        if rows * max(x[:1].nbytes, x.itemsize) > _MAX_BYTES:
            raise self.arg_error(f"the padded output would take {rows} rows of {list(block)}: over the 4 GiB limit")
        out = self.output(0, (rows, *block), x.dtype)
        src = dst = 0
        for n in lengths.tolist():
            out[dst : dst + s] = start_pad
            out[dst + s : dst + s + n] = x[src : src + n]
            out[dst + s + n : dst + s + n + e] = end_pad
            src += n
            dst += s + n + e
        self._out_lengths(lengths, s + e)


@register_op(
    "RemovePadding",
    inputs=(1, 2),
    outputs=(1, 2),
    input_docs=[
        ("data_in", "Input tensor T<N, D1, ..., Dn>"),
        ("lengths", "int Number of elements in each range; sum(lengths) = N (optional)"),
    ],
    output_docs=[("data_out", "Data without the paddings"), ("lengths_out", "Lengths for each range (optional)")],
    args=_PAD_ARGS,
    infer=_pad_infer(-1),
    category="rnn",
)
class RemovePadding(_Padded):
    """Remove padding around the edges of each segment of the input data. This is the reverse
    operation of AddPadding, and uses the same arguments and conventions for input and output
    data format. Every range must be at least as long as the paddings."""

    def run(self) -> None:
        x = self._data()
        lengths = self._lengths(x.shape[0])
        s, e = self.start, self.end
        if len(lengths) and lengths.min() < s + e:
            raise ShapeError(
                f"{self.describe()}: a range of length {int(lengths.min())} is shorter than the paddings ({s} + {e})"
            )
        out = self.output(0, (x.shape[0] - (s + e) * len(lengths), *x.shape[1:]), x.dtype)
        src = dst = 0
        for n in lengths.tolist():
            m = n - s - e
            out[dst : dst + m] = x[src + s : src + s + m]
            src += n
            dst += m
        self._out_lengths(lengths, -(s + e))


@register_op(
    "GatherPadding",
    inputs=(1, 2),
    outputs=(1, 2),
    input_docs=[
        ("data_in", "T<N, D1..., Dn> Padded input data"),
        ("lengths", "Num of elements in each range. sum(lengths) = N (optional: one range)"),
    ],
    output_docs=[
        ("padding_sum", "Sum of all start paddings, or of all paddings if end_padding_sum is not provided"),
        ("end_padding_sum", "T<D1..., Dn> Sum of all end paddings, if provided"),
    ],
    args=_PAD_ARGS,
    infer=lambda args, ins: (
        [TensorSpec(tuple(ins[0].shape[1:]), ins[0].dtype) if ins[0].shape else UNKNOWN] * args.num_outputs
    ),
    category="rnn",
)
class GatherPadding(_Padded):
    """Gather the sum of start and end paddings in a padded input sequence. Used in order to
    compute the gradients of AddPadding w.r.t the padding tensors."""

    def run(self) -> None:
        x = self._data()
        if x.dtype.kind not in "iuf":
            raise TypeMismatchError(f"{self.describe()}: GatherPadding sums numbers, found {x.dtype} data")
        lengths = self._lengths(x.shape[0])
        s, e = self.start, self.end
        if len(lengths) and lengths.min() < s + e:
            raise ShapeError(f"{self.describe()}: a range is shorter than the paddings ({s} + {e})")
        start_sum = self.output(0, x.shape[1:], x.dtype)
        end_sum = self.output(1, x.shape[1:], x.dtype) if len(self.outputs) > 1 else start_sum
        start_sum[...] = 0
        if end_sum is not start_sum:
            end_sum[...] = 0
        pos = 0
        for n in lengths.tolist():
            start_sum += x[pos : pos + s].sum(axis=0)
            end_sum += x[pos + n - e : pos + n].sum(axis=0)
            pos += n


@gradient("AddPadding")
def _add_padding_grad(g):
    ins = [g.GO(0)] + ([g.O(1)] if len(g.def_.input) > 1 else [])
    ops = [g.op("RemovePadding", ins, [g.GI(0)])]
    if len(g.def_.input) >= 3:
        outs = [g.GI(2)] + ([g.GI(3)] if len(g.def_.input) == 4 else [])
        ops.append(g.op("GatherPadding", ins, outs))
    return ops


@gradient("RemovePadding")
def _remove_padding_grad(g):
    ins = [g.GO(0)] + ([g.O(1)] if len(g.def_.input) > 1 else [])
    return [g.op("AddPadding", ins, [g.GI(0)])]


@register_op(
    "PadEmptySamples",
    inputs=(1, float("inf")),
    outputs=(1, float("inf")),
    input_docs=[
        ("lengths", "A blob containing the lengths of the samples"),
        ("features", "Tensors holding the data of each field (first dimension sum(lengths))"),
    ],
    output_docs=[
        ("out_lengths", "Tensor containing lengths with empty sample padded"),
        ("padded_features", "Each field with a zero row inserted for every empty sample"),
    ],
    infer=lambda args, ins: [ins[0]] + [UNKNOWN] * (args.num_outputs - 1),
    category="rnn",
)
class PadEmptySamples(Operator):
    """Pad empty field given lengths and index features. Input(0) is a blob pointing to the
    lengths of samples in one batch, [Input(1),... Input(num_fields)] a list of tensors
    containing the data for each field of the features. Every sample of length 0 gets length 1
    and one zero row in every field."""

    def setup(self) -> None:
        if len(self.outputs) != len(self.inputs):
            raise self.arg_error(f"takes as many outputs as inputs, got {len(self.inputs)} and {len(self.outputs)}")

    def run(self) -> None:
        lengths = self.input(0)
        if lengths.ndim != 1 or lengths.dtype.kind not in "iu" or (lengths < 0).any():
            raise ShapeError(f"{self.describe()}: LENGTH '{self.input_names[0]}' should be 1-D non-negative integers")
        total = int(lengths.sum())
        feats = []
        for k in range(1, len(self.inputs)):
            f = self.input(k)
            if f.ndim < 1 or f.shape[0] != total:
                raise ShapeError(
                    f"{self.describe()}: FEATURE '{self.input_names[k]}' and LENGTH should be consistent: "
                    f"first dimension {list(f.shape)[:1]}, lengths sum to {total}"
                )
            feats.append(f)
        empty = lengths == 0
        out_len = self.output(0, lengths.shape, np.int32)
        np.copyto(out_len, np.where(empty, 1, lengths), casting="unsafe")
        starts = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64) if len(lengths) else lengths
        for k, f in enumerate(feats, start=1):
            out = self.output(k, (total + int(empty.sum()), *f.shape[1:]), f.dtype)
            dst = 0
            for i, n in enumerate(lengths.tolist()):
                if n == 0:
                    out[dst] = 0
                    dst += 1
                else:
                    out[dst : dst + n] = f[starts[i] : starts[i] + n]
                    dst += n


no_gradient("GatherPadding", "PadEmptySamples")
