"""Caffe2's range segment reductions ``SortedSegmentRange<Reducer>`` (``segment_reduction_op.h``,
``AbstractSortedSegmentRangeOp``): one table, one forward class, one gradient class.

SEGMENT_IDS must be sorted, start at 0 and have no gaps (every segment is a non-empty run of rows; K =
last id + 1). Reducers (``reducer_functions.h``, the ``*RangeReducer`` functors):

========== ====================================== ===========================================
reducer    OUTPUT[k]                              dDATA of a row x of segment k
========== ====================================== ===========================================
Sum        sum of the rows                        dY[k]
Mean       sum / n                                dY[k] / n
Max        elementwise max                        dY[k] where x == Y[k] (every tie), else 0
LogSumExp  log(sum(exp(x - m))) + m, m = max      dY[k] * exp(x - Y[k])
LogMeanExp log(mean(exp(x - m))) + m              dY[k] * exp(x - Y[k]) / n
========== ====================================== ===========================================

The gradient op is ``SortedSegmentRange<Reducer>Gradient(DATA, OUTPUT, dOUTPUT, SEGMENT_IDS) -> dDATA``
(Caffe2's maker and inputs).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.ops.gradient import gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import UNKNOWN, TensorSpec

REDUCERS = ("Sum", "Mean", "Max", "LogSumExp", "LogMeanExp")


def range_starts(op: Operator, i: int, rows: int) -> tuple[np.ndarray, np.ndarray]:
    """(start row of each segment, rows per segment) from sorted gap-free SEGMENT_IDS input ``i``."""
    seg, name = op.input(i), op.input_names[i]
    if seg.ndim != 1 or seg.dtype.kind not in "iu":
        raise TypeMismatchError(f"{op.describe()}: SEGMENT_IDS '{name}' must be a 1-D integer tensor")
    if len(seg) != rows:
        raise ShapeError(f"{op.describe()}: SEGMENT_IDS '{name}' has {len(seg)} entries for {rows} rows of DATA")
    if rows == 0:
        return np.zeros(0, np.int64), np.zeros(0, np.int64)
    steps = np.diff(seg)
    if seg[0] != 0 or ((steps != 0) & (steps != 1)).any():
        raise ShapeError(
            f"{op.describe()}: SEGMENT_IDS '{name}' must be sorted, start at 0 and have no gaps, "
            f"got {seg[:8].tolist()}{'...' if rows > 8 else ''}"
        )
    starts = np.flatnonzero(np.r_[True, steps != 0])
    return starts, np.diff(np.r_[starts, rows])


def _reduce(reducer: str, x: np.ndarray, starts: np.ndarray, counts: np.ndarray, out: np.ndarray) -> None:
    if reducer in ("Sum", "Mean"):
        np.add.reduceat(x, starts, axis=0, out=out)
        if reducer == "Mean":
            out /= counts.reshape((-1,) + (1,) * (x.ndim - 1)).astype(x.dtype)
        return
    np.maximum.reduceat(x, starts, axis=0, out=out)
    if reducer == "Max":
        return
    m = np.repeat(out, counts, axis=0)
    with np.errstate(invalid="ignore", over="ignore"):
        e = np.exp(x - m)  # -inf - -inf (a segment of -inf) is NaN in Caffe2 too
    s = np.add.reduceat(e, starts, axis=0)
    if reducer == "LogMeanExp":
        s /= counts.reshape((-1,) + (1,) * (x.ndim - 1)).astype(x.dtype)
    with np.errstate(divide="ignore"):
        out += np.log(s)


class SegmentRangeReduction(Operator):
    """Forward of every ``SortedSegmentRange<Reducer>`` (see module doc)."""

    reducer = ""

    def run(self) -> None:
        x = self.input(0)
        if x.ndim < 1 or x.dtype.kind != "f":
            raise TypeMismatchError(
                f"{self.describe()}: DATA '{self.input_names[0]}' must be a float tensor of at least one "
                f"dimension, got {x.dtype} {list(x.shape)}"
            )
        starts, counts = range_starts(self, 1, x.shape[0])
        out = self.output(0, (len(starts), *x.shape[1:]), x.dtype)
        if len(starts):
            _reduce(self.reducer, x, starts, counts, out)


class SegmentRangeReductionGradient(Operator):
    """dDATA of ``SortedSegmentRange<Reducer>`` from (DATA, OUTPUT, dOUTPUT, SEGMENT_IDS)."""

    reducer = ""

    def run(self) -> None:
        x, y, dy = self.input(0), self.input(1), self.input(2)
        starts, counts = range_starts(self, 3, x.shape[0] if x.ndim else 0)
        k = len(starts)
        for name, t in ((self.input_names[1], y), (self.input_names[2], dy)):
            if t.shape != (k, *x.shape[1:]):
                raise ShapeError(f"{self.describe()}: '{name}' has shape {list(t.shape)}, expected {[k, *x.shape[1:]]}")
        d = self.output(0, x.shape, x.dtype)
        d[...] = np.repeat(dy, counts, axis=0)
        per_row = np.repeat(counts, counts).reshape((-1,) + (1,) * (x.ndim - 1)).astype(x.dtype)
        if self.reducer == "Mean":
            d /= per_row
        elif self.reducer == "Max":
            d *= x == np.repeat(y, counts, axis=0)
        elif self.reducer in ("LogSumExp", "LogMeanExp"):
            d *= np.exp(x - np.repeat(y, counts, axis=0))
            if self.reducer == "LogMeanExp":
                d /= per_row


def _infer(args: Any, ins: list[TensorSpec]) -> list[TensorSpec]:
    return [TensorSpec(None, ins[0].dtype)] if ins[0].dtype is not None else [UNKNOWN]


def _grad_infer(args: Any, ins: list[TensorSpec]) -> list[TensorSpec]:
    return [ins[0]]


WHAT = {
    "Sum": "sum",
    "Mean": "average",
    "Max": "elementwise maximum",
    "LogSumExp": "log of the sum of exponentials",
    "LogMeanExp": "log of the mean of exponentials",
}

for _r in REDUCERS:
    _name = f"SortedSegmentRange{_r}"
    register_op(
        _name,
        inputs=2,
        input_docs=[("DATA", "float tensor"), ("SEGMENT_IDS", "sorted ids 0..K-1 without gaps, one per row")],
        output_docs=[("OUTPUT", "K x DATA.shape[1:]")],
        infer=_infer,
        category="sparse",
    )(
        type(
            _name,
            (SegmentRangeReduction,),
            {
                "reducer": _r,
                "__doc__": f"The {WHAT[_r]} of each segment of rows of DATA; segments are the runs of sorted, "
                "gap-free SEGMENT_IDS (K = last id + 1).",
            },
        )
    )
    register_op(
        f"{_name}Gradient",
        inputs=4,
        input_docs=[
            ("DATA", "forward DATA"),
            ("OUTPUT", "forward OUTPUT"),
            ("dOUTPUT", "its gradient"),
            ("SEGMENT_IDS", "forward SEGMENT_IDS"),
        ],
        output_docs=[("dDATA", "gradient of DATA")],
        infer=_grad_infer,
        category="sparse",
        private=True,
        input_types=["float", "float", "float", "int"],
        same_type=[(0, 1, 2)],
        ranks={0: (1, None), 3: 1},
    )(type(f"{_name}Gradient", (SegmentRangeReductionGradient,), {"reducer": _r, "__doc__": f"Gradient of {_name}."}))

    def _make(g, _name=_name):
        return [g.op(f"{_name}Gradient", [g.I(0), g.O(0), g.GO(0), g.I(1)], [g.GI(0)])]

    gradient(_name)(_make)


# -- LengthsMax: the max reducer over LENGTHS segments (empty segments give 0, Caffe2's MaxReducer) ------
@register_op(
    "LengthsMax",
    inputs=2,
    input_docs=[("DATA", "float tensor"), ("LENGTHS", "rows per segment")],
    output_docs=[("OUTPUT", "len(LENGTHS) x DATA.shape[1:]")],
    infer=lambda args, ins: [
        TensorSpec((ins[1].shape[0] if ins[1].shape else None, *ins[0].shape[1:]), ins[0].dtype)
        if ins[0].shape is not None
        else UNKNOWN
    ],
    category="sparse",
)
class LengthsMax(Operator):
    """Elementwise maximum of each segment of rows (an empty segment gives 0)."""

    def run(self) -> None:
        from framework.ops.sparse.lengths import lengths_of

        x, lengths = self.input(0), lengths_of(self, 1)
        if x.ndim < 1 or x.shape[0] != int(lengths.sum()) or x.dtype.kind != "f":
            raise ShapeError(f"{self.describe()}: DATA must be float with sum(LENGTHS) = {int(lengths.sum())} rows")
        out = self.output(0, (len(lengths), *x.shape[1:]), x.dtype)
        out.fill(0)
        full = np.flatnonzero(lengths > 0)
        if full.size:
            starts = (np.cumsum(lengths) - lengths)[full]
            out[full] = np.maximum.reduceat(x, starts, axis=0)


@register_op(
    "LengthsMaxWithMainInputAndForwardOutputGradient",
    inputs=4,
    input_docs=[
        ("dOUTPUT", "gradient"),
        ("LENGTHS", "forward LENGTHS"),
        ("DATA", "forward DATA"),
        ("OUTPUT", "forward OUTPUT"),
    ],
    output_docs=[("dDATA", "dOUTPUT at every row equal to its segment's max (ties all get it)")],
    infer=lambda args, ins: [ins[2]],
    category="sparse",
    private=True,
    input_types=["float", "int", "float", "float"],
    same_type=[(0, 2, 3)],
    ranks={1: 1, 2: (1, None)},
)
class LengthsMaxGradient(Operator):
    """Gradient of LengthsMax (Caffe2's name and inputs)."""

    def run(self) -> None:
        from framework.ops.sparse.lengths import lengths_of

        dy, lengths, x, y = self.input(0), lengths_of(self, 1), self.input(2), self.input(3)
        if x.shape[0] != int(lengths.sum()) or dy.shape != y.shape or dy.shape != (len(lengths), *x.shape[1:]):
            raise ShapeError(
                f"{self.describe()}: shapes of dOUTPUT {list(dy.shape)}, DATA {list(x.shape)} and "
                f"OUTPUT {list(y.shape)} do not fit LENGTHS"
            )
        d = self.output(0, x.shape, dy.dtype)
        d[...] = np.repeat(dy, lengths, axis=0) * (x == np.repeat(y, lengths, axis=0))


@gradient("LengthsMax")
def _lengths_max_grad(g):
    return [g.op("LengthsMaxWithMainInputAndForwardOutputGradient", [g.GO(0), g.I(1), g.I(0), g.O(0)], [g.GI(0)])]
