"""Small utilities of Caffe2's sparse family (``utility_ops``, ``find_op``, ``find_duplicate_elements_op``,
``dense_vector_to_id_list_op``, ``accumulate_histogram``):

``Range`` (1-3 scalar inputs: stop / start, stop / start, stop, step), ``SumInt`` (int32 total),
``HasElements`` (any input non-empty), ``IsNaN``, ``NanCheck`` (copy, error on NaN/inf; its gradient is
NanCheck of the gradient), ``WallClockTime`` (int64 ns), ``Find`` (position of each query in an index
vector, the last occurrence, else ``missing_value``), ``FindDuplicateElements`` (positions repeating an
earlier element), ``DenseVectorToIdList`` (columns of the non-zero entries per row), ``AccumulateHistogram``
(``num_buckets`` bins over [lower_bound, upper_bound) plus under/overflow bins; the second output keeps
adding up across runs), and the failing ops ``Fail``, ``LogFatal``, ``ThrowException``,
``ThrowChildThreadException`` (all raise a FrameworkError; Caffe2's LogFatal aborts the process).
"""

from __future__ import annotations

import math
import threading
import time

import numpy as np

from framework.errors import FrameworkError, ShapeError, TypeMismatchError
from framework.memory.allocator import check_elements
from framework.ops.gradient import gradient, no_gradient, should_not_do_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import FLOAT, INT, STRING, UNKNOWN, Arg, TensorSpec, same_as_input

I32, I64, BOOL = np.dtype(np.int32), np.dtype(np.int64), np.dtype(np.bool_)


@register_op(
    "Range",
    inputs=(1, 3),
    input_docs=[("start", "scalar (or stop alone)"), ("stop", "scalar"), ("step", "scalar, not 0")],
    output_docs=[("output", "1-D values start, start + step, ... below stop")],
    infer=lambda args, ins: [TensorSpec((None,), ins[0].dtype)],
    category="sparse",
    input_types="numeric",
)
class Range(Operator):
    """``arange(start, stop, step)`` from scalar inputs (one input: stop)."""

    def run(self) -> None:
        vals = [self.input(i) for i in range(len(self.inputs))]
        if any(v.size != 1 for v in vals) or len({v.dtype for v in vals}) != 1:
            raise ShapeError(f"{self.describe()}: inputs must be scalars of one type")
        nums = [v.reshape(()).item() for v in vals]
        start, stop, step = (0, nums[0], 1) if len(nums) == 1 else (nums[0], nums[1], nums[2] if len(nums) == 3 else 1)
        if step == 0:
            raise ShapeError(f"{self.describe()}: Step size cannot be 0.")
        if not all(np.isfinite(v) for v in (start, stop, step)):
            raise ShapeError(f"{self.describe()}: start, stop and step must be finite, got {start}, {stop}, {step}")
        n = max(math.ceil((stop - start) / step), 0)
        check_elements((n,), vals[0].dtype.itemsize, f"{self.describe()}: the range")
        out = np.arange(start, stop, step, dtype=vals[0].dtype)
        self.output(0, out.shape, out.dtype)[...] = out


@register_op(
    "SumInt",
    input_docs=[("X", "int32 tensor")],
    output_docs=[("Y", "int32 scalar: the sum")],
    infer=lambda args, ins: [TensorSpec((), I32)],
    category="sparse",
)
class SumInt(Operator):
    """The sum of an int32 tensor (wrapping as int32)."""

    def run(self) -> None:
        x = self.input(0)
        if x.dtype != I32:
            raise TypeMismatchError(f"{self.describe()}: X must be int32, got {x.dtype}")
        self.output(0, (), I32)[...] = np.sum(x, dtype=np.int64).astype(np.int32)


@register_op(
    "HasElements",
    inputs=(1, float("inf")),
    input_docs=[("X", "tensors")],
    output_docs=[("has_elements", "bool scalar: some input has elements")],
    infer=lambda args, ins: [TensorSpec((), BOOL)],
    category="sparse",
)
class HasElements(Operator):
    """True when at least one input is non-empty."""

    def run(self) -> None:
        self.output(0, (), BOOL)[...] = any(self.input(i).size > 0 for i in range(len(self.inputs)))


@register_op(
    "IsNaN",
    input_docs=[("X", "float tensor")],
    output_docs=[("Y", "bool, X's shape")],
    infer=lambda args, ins: [TensorSpec(ins[0].shape, BOOL)],
    category="sparse",
)
class IsNaN(Operator):
    """Which elements are NaN."""

    def run(self) -> None:
        x = self.input(0)
        if x.dtype.kind != "f":
            raise TypeMismatchError(f"{self.describe()}: X must be float, got {x.dtype}")
        np.isnan(x, out=self.output(0, x.shape, BOOL))


@register_op(
    "NanCheck",
    inputs=(1, float("inf")),
    input_docs=[("X", "float tensor to check"), ("others", "optional tensors printed on failure")],
    output_docs=[("Y", "X, unchanged")],
    allow_inplace={(0, 0)},
    infer=same_as_input(0),
    category="sparse",
)
class NanCheck(Operator):
    """Pass X through; an error if it holds NaN or infinity."""

    def run(self) -> None:
        x = self.input(0)
        if x.dtype.kind == "f" and not np.isfinite(x).all():
            bad = int(np.flatnonzero(~np.isfinite(x.reshape(-1)))[0])
            raise FrameworkError(
                f"{self.describe()}: '{self.input_names[0]}' holds {x.reshape(-1)[bad]} at flat position {bad}"
            )
        y = self.output(0, x.shape, x.dtype)
        if y is not x:
            np.copyto(y, x)


@gradient("NanCheck")
def _nan_check_grad(g):
    return [g.op("NanCheck", [g.GO(0)], [g.GI(0)])]


@register_op(
    "WallClockTime",
    inputs=0,
    output_docs=[("time", "int64 scalar: nanoseconds since the epoch")],
    infer=lambda args, ins: [TensorSpec((), I64)],
    category="sparse",
)
class WallClockTime(Operator):
    """The wall-clock time in nanoseconds."""

    def run(self) -> None:
        self.output(0, (), I64)[...] = time.time_ns()


@register_op(
    "Find",
    inputs=2,
    args=[Arg("missing_value", INT, -1, "result for queries not in the index")],
    input_docs=[("index", "1-D int values"), ("query", "int values to find")],
    output_docs=[("query_indices", "position of each query in index (its last occurrence), query's shape")],
    infer=lambda args, ins: [TensorSpec(ins[1].shape, ins[1].dtype)],
    category="sparse",
)
class Find(Operator):
    """Positions of query values in an index vector; ``missing_value`` where absent."""

    def run(self) -> None:
        index, query = self.input(0), self.input(1)
        if index.dtype.kind not in "iu" or query.dtype != index.dtype:
            raise TypeMismatchError(f"{self.describe()}: index and query must be integers of one type")
        pos = {v: i for i, v in enumerate(index.reshape(-1).tolist())}
        out = [pos.get(v, self.args.missing_value) for v in query.reshape(-1).tolist()]
        self.output(0, query.shape, query.dtype)[...] = np.array(out, query.dtype).reshape(query.shape)


@register_op(
    "FindDuplicateElements",
    input_docs=[("data", "1-D tensor")],
    output_docs=[("indices", "int64 positions of elements equal to an earlier one")],
    infer=lambda args, ins: [TensorSpec((None,), I64)],
    category="sparse",
)
class FindDuplicateElements(Operator):
    """Positions of the repeats: ``[a, b, a, a] -> [2, 3]``."""

    def run(self) -> None:
        x = self.input(0)
        if x.ndim != 1:
            raise ShapeError(f"{self.describe()}: data must be 1-D, got {list(x.shape)}")
        _, first = np.unique(x, return_index=True) if x.size else (None, np.zeros(0, np.int64))
        mask = np.ones(x.size, bool)
        mask[first] = False
        out = np.flatnonzero(mask)
        self.output(0, out.shape, I64)[...] = out


@register_op(
    "DenseVectorToIdList",
    outputs=2,
    input_docs=[("values", "dense [N, D]")],
    output_docs=[("out_lengths", "int32 non-zeros per row"), ("out_values", "int64 their column ids")],
    infer=lambda args, ins: [TensorSpec((ins[0].shape[0] if ins[0].shape else None,), I32), TensorSpec((None,), I64)],
    category="sparse",
)
class DenseVectorToIdList(Operator):
    """Id lists from dense rows: the columns of the non-zero entries."""

    def run(self) -> None:
        x = self.input(0)
        if x.ndim != 2:
            raise ShapeError(f"{self.describe()}: values must be 2-D, got {list(x.shape)}")
        rows, cols = np.nonzero(x)
        self.output(0, (x.shape[0],), I32)[...] = np.bincount(rows, minlength=x.shape[0])
        self.output(1, cols.shape, I64)[...] = cols


@register_op(
    "AccumulateHistogram",
    outputs=2,
    args=[
        Arg("lower_bound", FLOAT, 0.0, "start of the first bucket"),
        Arg("upper_bound", FLOAT, 1.0, "end of the last bucket"),
        Arg("num_buckets", INT, 1, "buckets between the bounds"),
    ],
    input_docs=[("X", "values")],
    output_docs=[
        ("CurHist", "int64 [num_buckets + 2]: this run's counts (underflow first, overflow last)"),
        ("AccHist", "int64: the counts of every run so far"),
    ],
    infer=lambda args, ins: [TensorSpec((args.num_buckets + 2,), I64)] * 2,
    category="sparse",
    input_types="numeric",
)
class AccumulateHistogram(Operator):
    """Histogram of X over equal buckets plus under/overflow, and its running total."""

    def setup(self) -> None:
        if self.args.num_buckets < 1 or not -np.inf < self.args.lower_bound < self.args.upper_bound < np.inf:
            raise self.arg_error("num_buckets must be >= 1 and lower_bound < upper_bound (finite)")
        check_elements((self.args.num_buckets + 2,), 8, f"the histogram of {self.describe()}")
        self.acc = np.zeros(self.args.num_buckets + 2, I64)

    def run(self) -> None:
        x = self.input(0).reshape(-1).astype(np.float64)
        lo, hi, n = self.args.lower_bound, self.args.upper_bound, self.args.num_buckets
        with np.errstate(invalid="ignore"):  # NaN counts as underflow below
            b = np.floor((x - lo) / ((hi - lo) / n)).astype(np.int64) + 1
        b = np.where(x < lo, 0, np.where(x >= hi, n + 1, np.clip(b, 1, n)))
        cur = np.bincount(b, minlength=n + 2).astype(I64)
        self.acc += cur
        self.output(0, cur.shape, I64)[...] = cur
        self.output(1, cur.shape, I64)[...] = self.acc


def _failing(name: str, doc: str, message_arg: bool, in_thread: bool = False):
    def run(self) -> None:
        msg = self.args.message if message_arg else f"{name} was run"
        if in_thread:  # raised in a child thread, re-raised here, as Caffe2's test op
            err: list[str] = []
            t = threading.Thread(target=lambda: err.append(msg))
            t.start()
            t.join()
            msg = err[0]
        raise FrameworkError(f"{self.describe()}: {msg}")

    register_op(
        name,
        inputs=(0, float("inf")),
        outputs=(0, float("inf")),
        args=[Arg("message", STRING, "", "the error message")] if message_arg else [],
        input_docs=[("inputs", "ignored")],
        output_docs=[("outputs", "never written")],
        infer=lambda args, ins: [UNKNOWN] * args.num_outputs,
        category="sparse",
    )(type(name, (Operator,), {"run": run, "__doc__": doc}))


_failing("Fail", "Always fails (a FrameworkError naming the op).", False)
_failing("LogFatal", "Always fails; Caffe2 aborts the process, here it is a FrameworkError.", False)
_failing("ThrowException", "Raises a FrameworkError with ``message``.", True)
_failing("ThrowChildThreadException", "Raises ``message`` from a child thread, re-raised as a FrameworkError.", True)

no_gradient(
    "Range",
    "SumInt",
    "HasElements",
    "IsNaN",
    "WallClockTime",
    "Find",
    "FindDuplicateElements",
    "DenseVectorToIdList",
    "AccumulateHistogram",
)
should_not_do_gradient("Fail", "LogFatal", "ThrowException", "ThrowChildThreadException")
