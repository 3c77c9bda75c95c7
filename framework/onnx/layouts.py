"""Rewrites of the op chains torch's exporter emits for one operation into that operation's op.

Run on a translated top-level op list, where every blob has one writer (ONNX names are SSA) and the
import context knows the shapes. Each rewrite applies only where the blobs it removes are read by
nothing else and are not graph outputs, so every graph output keeps its value:

- ShuffleNet's channel shuffle, ``Reshape(x, [N, g, C/g, H, W]) -> Transpose(0, 2, 1, 3, 4) ->
  Reshape([N, C, H, W])`` on an (N, C, H, W) tensor, becomes ``ChannelShuffle(x, group=g)`` (one
  copy instead of three; the inference pass then fuses it with the Concat before it and the Split
  after it into ConcatChannelShuffle);
- ``torch.chunk`` / ``split`` over one axis, Slices of one tensor whose ranges differ on that axis
  only and cover it exactly, become one ``Split``;
- SiLU as torch exports it, ``Mul(x, Sigmoid(x))`` (either operand order), becomes ``Swish(x)``;
- a Concat repeating an earlier Concat's inputs as its leading ones reads that Concat's output instead
  (DenseNet's layers each concatenate all the features so far: a chain the inference pass can hold in
  one buffer). This one removes nothing, so it applies whatever is observed.
"""

from __future__ import annotations

from collections import defaultdict
from typing import Any

from framework.ops.arg_reader import ArgReader
from framework.proto.args import make_argument
from framework.proto.framework_pb2 import OperatorDef

__all__ = ["rewrite_layouts"]


class _Ops:
    """The op list with its single writers and readers; rewrites mark ops replaced or dropped."""

    def __init__(self, ops: list[OperatorDef], observable: set[str]) -> None:
        self.ops = ops
        self.observable = observable
        self.readers: dict[str, list[int]] = defaultdict(list)
        self.writers: dict[str, list[int]] = defaultdict(list)
        for i, op in enumerate(ops):
            for b in op.input:
                self.readers[b].append(i)
            for b in op.output:
                self.writers[b].append(i)
        self.dropped: set[int] = set()
        self.new: dict[int, OperatorDef] = {}

    def only_reader(self, blob: str) -> int | None:
        """The one op reading ``blob``, if it is the only one and ``blob`` is no graph output."""
        rd = self.readers.get(blob, [])
        if blob in self.observable or len(rd) != 1 or len(self.writers.get(blob, [])) != 1:
            return None
        return rd[0] if rd[0] not in self.dropped else None

    def unread(self, blob: str) -> bool:
        return blob not in self.observable and not self.readers.get(blob)

    def single(self, blob: str) -> bool:
        return len(self.writers.get(blob, [])) <= 1

    def free(self, i: int) -> bool:
        return i not in self.dropped and i not in self.new

    def result(self) -> list[OperatorDef]:
        return [self.new.get(i, op) for i, op in enumerate(self.ops) if i not in self.dropped]


def _op(op_type: str, inputs: list[str], outputs: list[str], like: OperatorDef, **args: Any) -> OperatorDef:
    op = OperatorDef(type=op_type, input=inputs, output=outputs, name=like.name)
    op.device_option.CopyFrom(like.device_option)
    for k, v in args.items():
        op.arg.append(make_argument(k, v))
    return op


def _ints(op: OperatorDef, name: str) -> list[int] | None:
    args = ArgReader(op)
    return [int(v) for v in args.repeated(name)] if args.has(name) else None


def _static(shape: Any) -> bool:
    return shape is not None and all(isinstance(d, int) and d >= 0 for d in shape)


def _channel_shuffles(ops: _Ops, shape_of: Any) -> int:
    n = 0
    for i, first in enumerate(ops.ops):
        if first.type != "Reshape" or len(first.input) != 1 or not ops.free(i):
            continue
        x = first.input[0]
        xs = shape_of(x)
        split = _ints(first, "shape")
        if not _static(xs) or len(xs) != 4 or split is None or len(split) != 5 or not ops.single(x):
            continue
        nb, c, h, w = xs
        g = split[1]
        if g <= 0 or c % g or split != [nb, g, c // g, h, w] or not all(ops.unread(b) for b in first.output[1:]):
            continue
        j = ops.only_reader(first.output[0])
        mid = ops.ops[j] if j is not None and ops.free(j) else None
        if mid is None or mid.type != "Transpose" or _ints(mid, "axes") != [0, 2, 1, 3, 4]:
            continue
        k = ops.only_reader(mid.output[0])
        last = ops.ops[k] if k is not None and ops.free(k) else None
        if last is None or last.type != "Reshape" or len(last.input) != 1 or _ints(last, "shape") != [nb, c, h, w]:
            continue
        if not all(ops.unread(b) for b in last.output[1:]):
            continue
        ops.new[i] = _op("ChannelShuffle", [x], [last.output[0]], last, group=g, order="NCHW")
        ops.dropped |= {j, k}
        n += 1
    return n


def _slice_range(op: OperatorDef, shape: tuple) -> list[tuple[int, int]] | None:
    """Per-axis [start, end) of a Caffe2 Slice with its starts/ends arguments (ends count from dim + 1
    when negative), or None for anything else (negative starts, steps, inputs)."""
    starts, ends = _ints(op, "starts"), _ints(op, "ends")
    if len(op.input) != 1 or starts is None or ends is None or len(starts) != len(ends) or len(starts) > len(shape):
        return None
    out = []
    for d, dim in enumerate(shape):
        s, e = (starts[d], ends[d]) if d < len(starts) else (0, -1)
        e = dim + 1 + e if e < 0 else e
        if s < 0 or not s <= e <= dim:
            return None
        out.append((s, e))
    return out


def _splits(ops: _Ops, shape_of: Any) -> int:
    groups: dict[tuple[str, int], list[tuple[int, tuple[int, int]]]] = defaultdict(list)
    for i, op in enumerate(ops.ops):
        if op.type != "Slice" or not ops.free(i) or len(op.output) != 1 or not ops.single(op.output[0]):
            continue
        shape = shape_of(op.input[0])
        rng = _slice_range(op, shape) if _static(shape) and ops.single(op.input[0]) else None
        if rng is None:
            continue
        cut = [d for d, (s, e) in enumerate(rng) if (s, e) != (0, shape[d])]
        if len(cut) == 1:
            groups[(op.input[0], cut[0])].append((i, rng[cut[0]]))
    n = 0
    for (x, axis), parts in groups.items():
        parts.sort(key=lambda p: p[1])
        bounds = [r for _, r in parts]
        if len(parts) < 2 or bounds[0][0] != 0 or bounds[-1][1] != shape_of(x)[axis]:
            continue
        if any(a[1] != b[0] or a[0] == a[1] for a, b in zip(bounds, bounds[1:])) or bounds[-1][0] == bounds[-1][1]:
            continue
        first = min(i for i, _ in parts)
        outs = [ops.ops[i].output[0] for i, _ in parts]
        sizes = [e - s for s, e in bounds]
        ops.new[first] = _op("Split", [x], outs, ops.ops[first], axis=axis, split=sizes)
        ops.dropped |= {i for i, _ in parts if i != first}
        n += 1
    return n


def _swishes(ops: _Ops) -> int:
    n = 0
    for i, sig in enumerate(ops.ops):
        if sig.type != "Sigmoid" or len(sig.input) != 1 or not ops.free(i):
            continue
        x, s = sig.input[0], sig.output[0]
        j = ops.only_reader(s)
        mul = ops.ops[j] if j is not None and ops.free(j) else None
        if mul is None or mul.type != "Mul" or sorted(mul.input) != sorted([x, s]) or x == s or mul.arg:
            continue
        if not ops.single(x) or x in mul.output:
            continue
        ops.new[j] = _op("Swish", [x], [mul.output[0]], mul)
        ops.dropped.add(i)
        n += 1
    return n


def _concat_prefixes(ops: _Ops) -> int:
    """A Concat whose leading inputs are those of an earlier Concat with the same arguments reads that
    Concat's output instead (values unchanged): torch's DenseNet concatenates all the block's features
    so far in every layer, and as a chain h_k = Concat(h_(k-1), t_k) the inference pass keeps the whole
    block in one buffer (its ``concat_chains``) instead of copying the features again in each layer."""
    seen: dict[tuple, tuple[int, str]] = {}
    n = 0
    for i, op in enumerate(ops.ops):
        if op.type != "Concat" or not ops.free(i) or len(op.input) < 2:
            continue
        args = tuple(a.SerializeToString(deterministic=True) for a in op.arg)
        ins = tuple(op.input)
        if not all(ops.single(b) for b in (*ins, op.output[0])):
            continue
        for k in range(len(ins) - 1, 1, -1):
            hit = seen.get((args, ins[:k]))
            if hit is not None and hit[0] < i and ops.single(hit[1]):
                new = OperatorDef()
                new.CopyFrom(op)
                del new.input[:]
                new.input.extend([hit[1], *ins[k:]])
                ops.new[i] = new
                n += 1
                break
        seen.setdefault((args, ins), (i, op.output[0]))
    return n


def rewrite_layouts(ops: list[OperatorDef], observable: set[str], shape_of: Any) -> tuple[list[OperatorDef], dict]:
    """(the rewritten op list, counts per rewrite) for the translated ``ops``; ``observable``: the graph
    outputs; ``shape_of(blob)``: its static shape (a tuple of ints) or None."""
    state = _Ops(list(ops), observable)
    counts = {"channel_shuffles": _channel_shuffles(state, shape_of), "splits": _splits(state, shape_of)}
    counts["swishes"] = _swishes(state)
    counts["concat_prefixes"] = _concat_prefixes(state)
    return state.result(), counts
