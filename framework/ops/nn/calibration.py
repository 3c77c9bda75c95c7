"""Score calibration and histograms: PiecewiseLinearTransform, Percentile, BisectPercentile,
Histogram and SelfBinningHistogram (Caffe2's feature-processing ops; none is differentiable)."""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.ops.gradient import no_gradient
from framework.ops.operator import Operator
from framework.ops.pointwise import float_input
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, FLOAT, FLOATS, INT, INTS, STRING, Arg, TensorSpec, same_as_input

_I64 = np.dtype(np.int64)


# -- PiecewiseLinearTransform ----------------------------------------------------------------------------


@register_op(
    "PiecewiseLinearTransform",
    inputs={1, 4},
    args=[
        Arg("bounds", FLOATS, [], "bounds of the pieces, group by group (pieces + 1 per group, sorted)"),
        Arg("slopes", FLOATS, [], "slope of each piece, group by group"),
        Arg("intercepts", FLOATS, [], "intercept of each piece, group by group"),
        Arg("binary", BOOL, False, "X is N or N x 2 binary predictions: one group, column 0 = 1 - column 1"),
    ],
    input_docs=[
        ("predictions", "N x M (N or N x 2 with binary)"),
        ("bounds", "optional, instead of the argument"),
        ("slopes", "optional"),
        ("intercepts", "optional"),
    ],
    output_docs=[("transforms", "shaped as predictions")],
    infer=same_as_input(0),
    category="math",
)
class PiecewiseLinearTransform(Operator):
    """Column j goes through group j's piecewise linear function: y = slope_k x + intercept_k
    for the piece k with bounds[k] < x <= bounds[k + 1] (the first piece from bounds[0]); x
    outside [bounds[0], bounds[-1]] is clamped to the end value."""

    def setup(self) -> None:
        a = self.args
        given = sum(bool(v) for v in (a.bounds, a.slopes, a.intercepts))
        if given not in (0, 3):
            raise self.arg_error("bounds, slopes and intercepts must be all set or all not set")
        self._from_args = given == 3
        if self._from_args:
            if len(self.inputs) != 1:
                raise self.arg_error("parameters given as arguments: only the predictions input is read")
            self._params = self._check(np.array(a.bounds), np.array(a.slopes), np.array(a.intercepts))

    def _check(self, b: np.ndarray, s: np.ndarray, c: np.ndarray) -> tuple:
        groups = b.size - s.size
        if s.size != c.size or groups <= 0 or s.size % groups or (self.args.binary and groups != 1):
            raise self.arg_error(f"{b.size} bounds, {s.size} slopes, {c.size} intercepts do not form equal groups")
        per = s.size // groups
        b2 = b.reshape(groups, per + 1)
        if np.any(np.diff(b2, axis=1) < 0):
            raise self.arg_error("bounds must be sorted within each group")
        return b2, s.reshape(groups, per), c.reshape(groups, per)

    @staticmethod
    def _apply(x: np.ndarray, b: np.ndarray, s: np.ndarray, c: np.ndarray) -> np.ndarray:
        per = s.size
        k = np.clip(np.searchsorted(b, x, side="left") - 1, 0, per - 1)
        y = s[k] * x + c[k]
        y = np.where(x >= b[per], s[per - 1] * b[per] + c[per - 1], y)
        # the lower clamp wins when both hold (all bounds equal), as Caffe2 tests x <= bounds[0] first
        return np.where(x <= b[0], s[0] * b[0] + c[0], y)

    def run(self) -> None:
        x = float_input(self, 0)
        if self._from_args:
            b, s, c = self._params
        else:
            if len(self.inputs) != 4:
                raise self.arg_error("without bounds/slopes/intercepts arguments, give them as inputs 1-3")
            b, s, c = self._check(*(float_input(self, i).reshape(-1).astype(np.float64) for i in (1, 2, 3)))
        xd = x.astype(np.float64)
        if self.args.binary:
            if x.ndim not in (1, 2) or (x.ndim == 2 and x.shape[1] not in (1, 2)):
                raise ShapeError(
                    f"{self.describe()}: binary predictions must be N or N x 1 / N x 2, got {list(x.shape)}"
                )
            y = xd.copy()
            if x.ndim == 2 and x.shape[1] == 2:
                y[:, 1] = self._apply(xd[:, 1], b[0], s[0], c[0])
                y[:, 0] = 1.0 - y[:, 1]
            else:
                y = self._apply(xd, b[0], s[0], c[0])
        else:
            if x.ndim != 2 or x.shape[1] != b.shape[0]:
                raise ShapeError(
                    f"{self.describe()}: predictions must be N x {b.shape[0]} (one column per group), "
                    f"got {list(x.shape)}"
                )
            y = np.stack([self._apply(xd[:, j], b[j], s[j], c[j]) for j in range(b.shape[0])], axis=1) if x.size else xd
        self.output(0, x.shape, x.dtype)[...] = y


# -- Percentile / BisectPercentile --------------------------------------------------------------------


@register_op(
    "Percentile",
    inputs=3,
    input_docs=[
        ("original_values", "N x F raw values"),
        ("value_to_pct", "R x 2 [value, percentile], sorted per feature"),
        ("lengths", "(F,) int32: rows of value_to_pct per feature"),
    ],
    output_docs=[("percentile_values", "N x F percentiles")],
    infer=same_as_input(0),
    category="math",
)
class Percentile(Operator):
    """Each value's percentile from its feature's sorted (value, percentile) samples: the
    sample's percentile on an exact match, linear interpolation between neighbours, 0 below
    the first sample and 1 above the last."""

    def run(self) -> None:
        x, vp, lengths = float_input(self, 0), float_input(self, 1), self.input(2)
        if x.ndim != 2 or vp.ndim != 2 or vp.shape[1] != 2:
            raise ShapeError(
                f"{self.describe()}: need N x F values and R x 2 value_to_pct, got {list(x.shape)}, {list(vp.shape)}"
            )
        if (
            lengths.dtype.kind not in "iu"
            or lengths.size != x.shape[1]
            or int(lengths.sum()) != vp.shape[0]
            or np.any(lengths < 0)
        ):
            raise ShapeError(
                f"{self.describe()}: lengths ('{self.input_names[2]}') must be {x.shape[1]} counts "
                f"summing to {vp.shape[0]}"
            )
        out = np.zeros(x.shape, np.float64)
        starts = np.concatenate([[0], np.cumsum(lengths)])
        for j in range(x.shape[1]):
            vals, pcts = vp[starts[j] : starts[j + 1], 0], vp[starts[j] : starts[j + 1], 1]
            for i in range(x.shape[0]):
                v = x[i, j]
                k = int(np.searchsorted(vals, v, side="left"))
                if k == vals.size:
                    out[i, j] = 1.0
                elif v == vals[k]:
                    out[i, j] = pcts[k]
                elif k == 0:
                    out[i, j] = 0.0
                else:
                    t = (np.float32(v) - vals[k - 1]) / (vals[k] - vals[k - 1])
                    out[i, j] = pcts[k - 1] + t * (pcts[k] - pcts[k - 1])
        self.output(0, x.shape, x.dtype)[...] = out


_BISECT = [
    Arg("percentile_raw", FLOATS, [], "sampled raw values, feature by feature, sorted"),
    Arg("percentile_mapping", FLOATS, [], "their percentiles"),
    Arg("percentile_lower", FLOATS, [], "lower percentile bound of each sample"),
    Arg("percentile_upper", FLOATS, [], "upper percentile bound of each sample"),
    Arg("lengths", INTS, [], "samples per feature"),
]


@register_op(
    "BisectPercentile",
    args=_BISECT,
    input_docs=[("raw", "N x F float values")],
    output_docs=[("percentile", "N x F percentiles")],
    infer=same_as_input(0),
    category="math",
)
class BisectPercentile(Operator):
    """Percentile by bisection over each feature's samples (Caffe2's search, kept exactly):
    0 below the first sample, 1 above the last, the mapping on an exact hit, else
    (1 - w) upper[k] + w lower[k + 1] with w the position between samples k and k + 1."""

    def setup(self) -> None:
        a = self.args
        n = len(a.percentile_raw)
        if not (len(a.percentile_mapping) == len(a.percentile_lower) == len(a.percentile_upper) == n):
            raise self.arg_error("percentile_raw, _mapping, _lower and _upper must have the same length")
        if sum(a.lengths) != n or any(v < 1 for v in a.lengths):
            raise self.arg_error(f"lengths {a.lengths} must be positive and sum to {n}")
        f32 = lambda v: np.array(v, np.float32)  # noqa: E731  (Caffe2 keeps them as float)
        self._raw, self._map = f32(a.percentile_raw), f32(a.percentile_mapping)
        self._lo, self._hi = f32(a.percentile_lower), f32(a.percentile_upper)
        self._starts = np.concatenate([[0], np.cumsum(a.lengths)]).astype(np.int64)

    def _search(self, data: np.ndarray, lo: int, hi: int, val: np.float32) -> int:
        while lo < hi:
            mid = lo + (hi - lo) // 2
            low_ok, high_ok = data[mid] <= val, val < data[mid + 1]
            if low_ok and high_ok:
                return mid
            if not low_ok:
                hi = mid - 1
            else:
                lo = mid + 1
        return lo

    def _one(self, j: int, val: np.float32) -> float:
        s, e = self._starts[j], self._starts[j + 1]
        raw = self._raw[s:e]
        if val < raw[0]:
            return 0.0
        if val > raw[-1]:
            return 1.0
        k = self._search(raw, 0, e - s - 1, val)
        if raw[k] == val:
            return float(self._map[s + k])
        w = np.float32((val - raw[k]) / (raw[k + 1] - raw[k] + np.float32(1e-10)))
        return float((1 - w) * self._hi[s + k] + w * self._lo[s + k + 1])

    def run(self) -> None:
        x = float_input(self, 0)
        if x.ndim != 2 or x.shape[1] != len(self.args.lengths):
            raise ShapeError(
                f"{self.describe()}: raw ('{self.input_names[0]}') must be N x {len(self.args.lengths)}, "
                f"got {list(x.shape)}"
            )
        out = np.zeros(x.shape, np.float64)
        for j in range(x.shape[1]):
            for i in range(x.shape[0]):
                out[i, j] = self._one(j, np.float32(x[i, j]))
        self.output(0, x.shape, np.dtype(np.float32))[...] = out


# -- Histogram / SelfBinningHistogram ------------------------------------------------------------------


def _same_float_inputs(op: Operator) -> list:
    xs = [float_input(op, i) for i in range(len(op.inputs))]
    for i, x in enumerate(xs[1:], 1):
        if x.dtype != xs[0].dtype:
            raise TypeMismatchError(
                f"{op.describe()}: input {i} ('{op.input_names[i]}') has dtype {x.dtype}, "
                f"expected {xs[0].dtype} as input 0"
            )
    return xs


@register_op(
    "Histogram",
    inputs=(1, float("inf")),
    args=[Arg("bin_edges", FLOATS, [], "strictly increasing edges (at least 2)")],
    input_docs=[("X", "float tensors (any number, same dtype)")],
    output_docs=[("histogram", "int64 counts per bin [edge_i, edge_i+1); values outside are dropped")],
    infer=lambda args, ins: [TensorSpec((max(len(args.bin_edges) - 1, 0),), _I64)],
    category="math",
)
class Histogram(Operator):
    """Counts of all inputs' values per bin [e_i, e_{i+1}) (the last edge excluded, as Caffe2's
    upper_bound)."""

    def setup(self) -> None:
        e = np.array(self.args.bin_edges, np.float32)
        # Caffe2's enforce messages
        if e.size < 2:
            raise self.arg_error(f"Number of bin edges must be greater than or equal to 2, got {e.size}")
        if np.any(np.diff(e) <= 0):
            raise self.arg_error(f"bin_edges must be a strictly increasing sequence of values, got {e.tolist()}")
        self._edges = e

    def run(self) -> None:
        xs = _same_float_inputs(self)
        counts = np.zeros(self._edges.size - 1, np.int64)
        edges = self._edges.astype(xs[0].dtype)
        for x in xs:
            k = np.searchsorted(edges, x.reshape(-1), side="right")
            ok = (k > 0) & (k < edges.size)
            counts += np.bincount(k[ok] - 1, minlength=counts.size)[: counts.size]
        self.output(0, counts.shape, _I64)[...] = counts


@register_op(
    "SelfBinningHistogram",
    inputs=(1, float("inf")),
    outputs=2,
    args=[
        Arg("num_bins", INT, 0, "number of bins (>= 1)"),
        Arg("bin_spacing", STRING, "linear", "linear or logarithmic"),
        Arg("logspace_start", FLOAT, 1e-24, "smallest edge of logarithmic bins (> 0)"),
    ],
    input_docs=[("X", "float tensors (any number, same dtype)")],
    output_docs=[
        ("histogram_values", "num_bins + 1 edges, spanning the data's range * 1.0001"),
        ("histogram_counts", "int64 counts per edge (the last is always 0)"),
    ],
    infer=lambda args, ins: [TensorSpec((args.num_bins + 1,), ins[0].dtype), TensorSpec((args.num_bins + 1,), _I64)],
    category="math",
)
class SelfBinningHistogram(Operator):
    """A histogram whose num_bins + 1 edges span [min, min + 1.0001 (max - min)] of the data,
    linearly or geometrically (from max(min, logspace_start)); values below the first edge
    count in the first bin. No data: all zeros."""

    def setup(self) -> None:
        a = self.args
        # Caffe2's enforce messages, one per argument.
        if a.num_bins < 1:
            raise self.arg_error(f"Number of bins must be greater than or equal to 1. (num_bins {a.num_bins})")
        if a.bin_spacing not in ("linear", "logarithmic"):
            raise self.arg_error(f"bin_spacing must be linear or logarithmic, got {a.bin_spacing!r}")
        if a.logspace_start <= 0:
            raise self.arg_error(f"logspace_start must be > 0, got {a.logspace_start}")

    def run(self) -> None:
        xs = _same_float_inputs(self)
        dt = xs[0].dtype
        t = dt.type
        ne = self.args.num_bins + 1
        vals = self.output(0, (ne,), dt)
        counts = self.output(1, (ne,), _I64)
        flat = np.concatenate([x.reshape(-1) for x in xs])
        vals[...] = 0
        counts[...] = 0
        if flat.size == 0:
            return
        lo, hi = t(flat.min()), t(flat.max())
        ratio = np.arange(ne, dtype=dt) / t(self.args.num_bins)
        if self.args.bin_spacing == "linear":
            smax = t(lo + (hi - lo) * t(1.0001))
            vals[...] = lo + ratio * (smax - lo)
        else:
            start = t(self.args.logspace_start)
            lo, hi = max(lo, start), max(hi, start)
            smax = t(lo + (hi - lo) * t(1.0001))
            vals[...] = lo * np.exp((np.log(smax) - np.log(lo)) * ratio)
        if vals[-1] <= hi:
            vals[-1] = smax
            counts[0] = flat.size
            return
        k = np.searchsorted(vals, flat, side="right")
        inside = (k > 0) & (k < ne)
        counts += np.bincount(k[inside] - 1, minlength=ne)[:ne]
        counts[0] += int((k == 0).sum())


no_gradient("PiecewiseLinearTransform", "Percentile", "BisectPercentile", "Histogram", "SelfBinningHistogram")
