"""ONNX Slice with run-time starts/ends/axes/steps (values computed in the graph, e.g. from a
loop's iteration count); Caffe2's Slice takes them as arguments or 1-D inputs without axes and steps.

``ONNXSlice(data, starts, ends[, axes[, steps]])``: along each listed axis (negative: from the end;
default the first ``len(starts)`` axes), indices ``start, start + step, ...`` up to ``end``
(excluded). Negative starts/ends count from the end; then with a positive step both are clamped to
[0, d], with a negative step starts to [0, d - 1] and ends to [-1, d - 1] (-1: through index 0).
Steps must be non-zero.

No gradient: this op serves the ONNX backend (inference).
"""

from __future__ import annotations

from framework.errors import ShapeError
from framework.ops.gradient import no_gradient
from framework.ops.onnx.common import MOVABLE
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import TensorSpec
from framework.ops.validation import expect_size


def onnx_slices(shape: tuple, starts: list, ends: list, axes: list, steps: list) -> tuple:
    """The Python slices of ONNX's Slice for ``shape`` (ValueError on bad axes or a zero step)."""
    r = len(shape)
    out = [slice(None)] * r
    seen = set()
    for a, s, e, k in zip(axes, starts, ends, steps):
        if not -r <= a < r or a % r in seen:
            raise ValueError(f"axis {a} is not a distinct dim of rank {r}")
        a %= r
        seen.add(a)
        if k == 0:
            raise ValueError("a step of 0")
        d = shape[a]
        s, e = (s + d if s < 0 else s), (e + d if e < 0 else e)
        if k > 0:
            s, e = min(max(s, 0), d), min(max(e, 0), d)
        else:
            s, e = min(max(s, 0), d - 1), min(max(e, -1), d - 1)
        out[a] = slice(s, None if e < 0 else e, k)
    return tuple(out)


@register_op(
    "ONNXSlice",
    inputs=(3, 5),
    input_docs=[
        ("data", "tensor of rank >= 1"),
        ("starts", "1-D int: first index per axis"),
        ("ends", "1-D int: end (excluded) per axis"),
        ("axes", "optional 1-D int: the axes (default 0 .. len(starts) - 1)"),
        ("steps", "optional 1-D int: the steps (default 1)"),
    ],
    output_docs=[("output", "the slice")],
    input_types={0: MOVABLE, 1: "index", 2: "index", 3: "index", 4: "index"},
    ranks={0: (1, None), 1: 1, 2: 1, 3: 1, 4: 1},
    infer=lambda args, ins: [TensorSpec(None, ins[0].dtype)],
    category="onnx",
)
class ONNXSlice(Operator):
    """ONNX Slice (opsets 10-13) with its starts/ends/axes/steps read at run time."""

    def run(self) -> None:
        x = self.input(0)
        starts = [int(v) for v in self.input(1)]
        n = len(starts)
        ins = [self.input(i) for i in range(2, len(self.inputs))]
        for j, v in enumerate(ins, start=2):
            expect_size(self, j, v, n, "one entry per sliced axis")
        ends = [int(v) for v in ins[0]]
        axes = [int(v) for v in ins[1]] if len(ins) > 1 else list(range(n))
        steps = [int(v) for v in ins[2]] if len(ins) > 2 else [1] * n
        try:
            sl = onnx_slices(x.shape, starts, ends, axes, steps)
        except ValueError as e:
            raise ShapeError(f"{self.describe()}: data '{self.input_names[0]}' {list(x.shape)}: {e}") from e
        y = x[sl]
        self.output(0, y.shape, x.dtype)[...] = y


no_gradient("ONNXSlice")
