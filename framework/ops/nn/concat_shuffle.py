"""ConcatChannelShuffle: Concat over the channels, ChannelShuffle, and optionally Split of the result
over the channels, in one pass (this framework's op; the inference optimization pass writes it in
place of ShuffleNet's Concat -> ChannelShuffle -> Split, framework/net/optimize.py).

Caffe2 runs them as three ops, three full copies of the unit's activations; here each output channel
is copied once from the input channel it comes from. Shuffled channel q * G + p (G = ``group``) is
concatenated channel p * (C / G) + q. Where the inputs are the G groups themselves (G inputs of C / G
channels each, as ShuffleNet's two branches) and every part starts and ends on a multiple of G, each
(part, input) pair is one strided copy; otherwise the channels are gathered through an index.
"""

from __future__ import annotations

import math

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.ops.gradient import should_not_do_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import INT, INTS, Arg, TensorSpec


def _parts(args, c: int, n: int) -> list[int]:
    return list(args.split) if args.split else [c // n] * n


def _infer(args, ins):
    if not all(s.known and len(s.shape) >= 2 for s in ins):
        return [TensorSpec(None, ins[0].dtype)] * args.num_outputs
    c = sum(s.shape[1] for s in ins)
    rest = ins[0].shape[2:]
    return [TensorSpec((ins[0].shape[0], k, *rest), ins[0].dtype) for k in _parts(args, c, args.num_outputs)]


@register_op(
    "ConcatChannelShuffle",
    inputs=(1, float("inf")),
    outputs=(1, float("inf")),
    args=[
        Arg("group", INT, 1, "ChannelShuffle's number of channel groups"),
        Arg("split", INTS, [], "channels of each output (Split's argument); default: equal parts"),
    ],
    input_docs=[("X1, X2, ...", "NCHW (N, C_i, ...) tensors, equal but for the channels")],
    output_docs=[("Y1, Y2, ...", "consecutive channel ranges of ChannelShuffle(Concat(X...), group)")],
    infer=_infer,
    category="image",
    ranks={0: (2, None)},
)
class ConcatChannelShuffle(Operator):
    """Split(ChannelShuffle(Concat(X1, X2, ..., axis=1), group), axis=1) in one copy per channel
    (with one output: no Split). Written by the inference optimization pass; see the module doc."""

    def setup(self) -> None:
        self._key = None

    def run(self) -> None:
        xs = [self.input(i) for i in range(len(self.inputs))]
        key = tuple((x.shape, x.dtype) for x in xs)
        if key != self._key:
            self._plan(xs)
            self._key = key
        outs = [self.output(k, shape, xs[0].dtype) for k, shape in enumerate(self._shapes)]
        if self._copies is not None:
            g, hw = self._g, self._inner
            for k, p, src, q1 in self._copies:
                y = outs[k]
                y4 = y.reshape(y.shape[0], y.shape[1] // g, g, hw)
                x = xs[p]
                np.copyto(y4[:, :, p, :], x[:, src:q1].reshape(x.shape[0], q1 - src, hw))
            return
        cat = np.concatenate(xs, axis=1)
        for y, idx in zip(outs, self._index):
            np.take(cat, idx, axis=1, out=y)

    def _plan(self, xs: list) -> None:
        x0, g = xs[0], self.args.group
        for i, x in enumerate(xs):
            if x.ndim != x0.ndim or x.shape[0] != x0.shape[0] or x.shape[2:] != x0.shape[2:]:
                raise ShapeError(
                    f"{self.describe()}: input {i} '{self.input_names[i]}' {x.shape} does not match input 0 "
                    f"'{self.input_names[0]}' {x0.shape} outside the channel axis"
                )
            if x.dtype != x0.dtype:
                raise TypeMismatchError(
                    f"{self.describe()}: input {i} '{self.input_names[i]}' is {x.dtype}, input 0 is {x0.dtype}"
                )
        c = sum(x.shape[1] for x in xs)
        if g < 1 or c % g:
            raise ShapeError(f"{self.describe()}: {c} concatenated channels are not divisible by group {g}")
        sizes = _parts(self.args, c, len(self.outputs))
        if len(sizes) != len(self.outputs) or sum(sizes) != c or min(sizes) < 0:
            raise ShapeError(
                f"{self.describe()}: output channels {sizes} do not split the {c} concatenated channels "
                f"into {len(self.outputs)} outputs"
            )
        self._g, self._inner = g, math.prod(x0.shape[2:])
        self._shapes = [(x0.shape[0], k, *x0.shape[2:]) for k in sizes]
        starts = np.cumsum([0] + sizes)
        grouped = len(xs) == g and all(x.shape[1] == c // g for x in xs)
        if grouped and all(s % g == 0 for s in sizes):
            # part k holds shuffled channels s0:s1 = input p's channels s0/G:s1/G at stride G, offset p
            self._copies = [
                (k, p, int(starts[k]) // g, int(starts[k + 1]) // g)
                for k in range(len(sizes))
                for p in range(g)
                if sizes[k]
            ]
            return
        self._copies = None
        j = np.arange(c)
        source = (j % g) * (c // g) + j // g  # concatenated channel of shuffled channel j
        self._index = [source[starts[k] : starts[k + 1]] for k in range(len(sizes))]


should_not_do_gradient("ConcatChannelShuffle")  # inference-only rewrite
