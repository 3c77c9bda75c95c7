"""Caffe2's segment reductions (``segment_reduction_op.h``): one table, one forward class, one gradient class.

An op is ``[Sparse]<Layout><Reducer>``:

- layouts say which segment each row of DATA belongs to: ``Lengths`` (LENGTHS: consecutive runs),
  ``SortedSegment`` (SEGMENT_IDS, non-decreasing; K = last id + 1), ``UnsortedSegment`` (SEGMENT_IDS in
  any order; K = ``num_segments`` if given, else max id + 1);
- ``Sparse`` gathers the rows ``DATA[INDICES]`` first (Gather fused in; the gradient into DATA is then
  sparse: a GradientSlice over INDICES, so an optimizer updates only the rows looked up);
- reducers: ``Sum``, ``Mean`` (an empty segment gives 0) and ``WeightedSum`` (each row scaled by its
  SCALARS entry first; ``grad_on_weights`` also differentiates SCALARS).

Inputs, in Caffe2's order: DATA, [SCALARS], [INDICES], LENGTHS or SEGMENT_IDS. Output: K x DATA's
trailing dims, of DATA's type, except that ``SparseLengths{Sum,WeightedSum,Mean}`` of float16 DATA give
float32, summed in float32 (Caffe2's ``lengths_reducer_ops``: float or half in, float out). Gradient ops
keep Caffe2's names and inputs (``SparseLengthsIndicesInGradientSumGradient``
(dY, LENGTHS, INDICES), ``SparseLengthsIndicesInGradientWeightedSumWithMainInputGradient`` (SCALARS, dY,
LENGTHS, DATA, INDICES) -> (values, dSCALARS), ``SortedSegmentSumGradient`` (dY, SEGMENT_IDS)...).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.memory.allocator import check_elements
from framework.ops.gradient import gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import INT, UNKNOWN, Arg, TensorSpec
from framework.ops.validation import check_indices, check_lengths, expect_kind

LAYOUTS = ("Lengths", "SortedSegment", "UnsortedSegment")
REDUCERS = ("Sum", "Mean", "WeightedSum")
INT_KINDS = "iu"
F16 = np.dtype(np.float16)


# -- segment ids of the rows, by layout ----------------------------------------------------------------
def segment_ids(op: Operator, layout: str, i: int, rows: int, num_segments: int) -> tuple[np.ndarray, int]:
    """(segment id per row, number of segments K) from input ``i`` (LENGTHS or SEGMENT_IDS), checked
    against ``rows``."""
    seg, name = op.input(i), op.input_names[i]
    if seg.ndim != 1 or seg.dtype.kind not in INT_KINDS:
        raise TypeMismatchError(
            f"{op.describe()}: '{name}' must be a 1-D integer tensor, got {seg.dtype} {list(seg.shape)}"
        )
    if layout == "Lengths":
        if (seg < 0).any():
            raise ShapeError(f"{op.describe()}: LENGTHS '{name}' has negative entries")
        if int(seg.sum()) != rows:
            raise ShapeError(f"{op.describe()}: LENGTHS '{name}' sum to {int(seg.sum())}, but there are {rows} rows")
        return np.repeat(np.arange(len(seg)), seg), len(seg)
    if len(seg) != rows:
        raise ShapeError(f"{op.describe()}: SEGMENT_IDS '{name}' has {len(seg)} entries for {rows} rows")
    if rows and seg.min() < 0:
        raise ShapeError(f"{op.describe()}: SEGMENT_IDS '{name}' has negative ids")
    if layout == "SortedSegment":
        if rows and (np.diff(seg) < 0).any():
            raise ShapeError(f"{op.describe()}: SEGMENT_IDS '{name}' must be sorted (non-decreasing)")
        return seg, int(seg[-1]) + 1 if rows else 0
    k = int(seg.max()) + 1 if rows else 0
    if num_segments >= 0:
        if k > num_segments:
            raise ShapeError(f"{op.describe()}: segment id {k - 1} >= num_segments {num_segments}")
        k = num_segments
    return seg, k


def segment_sums(rows: np.ndarray, seg: np.ndarray, k: int, out: np.ndarray) -> np.ndarray:
    """out[s] = sum of rows whose segment is s (0 for empty ones); returns the count per segment."""
    counts = np.bincount(seg, minlength=k) if len(seg) else np.zeros(k, np.int64)
    out.fill(0)
    if len(seg):
        order = None if (len(seg) < 2 or (np.diff(seg) >= 0).all()) else np.argsort(seg, kind="stable")
        s = seg if order is None else seg[order]
        r = rows if order is None else rows[order]
        starts = np.flatnonzero(np.r_[True, s[1:] != s[:-1]])
        out[s[starts]] = np.add.reduceat(r, starts, axis=0)
    return counts


class _Parts:
    """Where each input of a forward op is: DATA 0, then SCALARS, INDICES, the segment input."""

    def __init__(self, reducer: str, sparse: bool) -> None:
        self.weighted = reducer == "WeightedSum"
        self.scalars = 1 if self.weighted else None
        self.indices = (2 if self.weighted else 1) if sparse else None
        self.segment = 1 + self.weighted + sparse
        self.count = self.segment + 1


class SegmentReduction(Operator):
    """Forward of every ``[Sparse]<Layout><Reducer>`` op (see module doc); the class attributes say which."""

    layout = reducer = ""
    sparse = False

    def run(self) -> None:
        parts = _Parts(self.reducer, self.sparse)
        data = self.input(0)
        if data.ndim < 1:
            raise ShapeError(f"{self.describe()}: DATA '{self.input_names[0]}' must have at least one dimension")
        rows_data = data
        if self.sparse:
            idx = checked_indices(self, parts.indices, data.shape[0])
            rows_data = self.scratch_rows((idx.size, *data.shape[1:]), data.dtype)
            gather_rows(data, idx, rows_data)  # into a reused buffer: the gather, no allocation
            if data.dtype == F16 and self.layout == "Lengths":  # half in, float out and float sums
                rows_data = rows_data.astype(np.float32)
        n = rows_data.shape[0]
        if self.layout == "Lengths" and self.equal_lengths(parts, n, data, rows_data):
            return
        seg, k = segment_ids(self, self.layout, parts.segment, n, getattr(self.args, "num_segments", -1))
        if parts.weighted:
            w = checked_scalars(self, parts.scalars, n)
            rows_data = rows_data * w.reshape((n,) + (1,) * (data.ndim - 1)).astype(rows_data.dtype, copy=False)
        out = self.output(0, (k, *data.shape[1:]), rows_data.dtype)
        counts = segment_sums(rows_data, seg, k, out)
        if self.reducer == "Mean":
            scale = np.where(counts > 0, 1.0 / np.maximum(counts, 1), 0.0).astype(rows_data.dtype)
            out *= scale.reshape((k,) + (1,) * (data.ndim - 1))

    def scratch_rows(self, shape: tuple, dtype: np.dtype) -> np.ndarray:
        buf = self.__dict__.get("_rows")
        if buf is None or buf.shape != shape or buf.dtype != dtype:
            buf = self._rows = np.empty(shape, dtype)
        return buf

    def equal_lengths(self, parts: _Parts, n: int, data: np.ndarray, rows: np.ndarray) -> bool:
        """The common case of recommendation batches, every segment of one length L: a reshape and one
        sum over L (numpy's reduceat over rows is several times slower). False: take the general path."""
        lengths = self.input(parts.segment)
        if lengths.ndim != 1 or lengths.dtype.kind not in INT_KINDS or not lengths.size:
            return False
        first = int(lengths[0])
        if first <= 0 or (lengths != first).any() or first * len(lengths) != n:
            return False
        k, trail = len(lengths), data.shape[1:]
        if parts.weighted:
            w = checked_scalars(self, parts.scalars, n).reshape((n,) + (1,) * len(trail))
            if rows is data:
                rows = self.scratch_rows(data.shape, data.dtype)
                np.multiply(data, w, out=rows, casting="unsafe")
            else:
                np.multiply(rows, w, out=rows, casting="unsafe")
        out = self.output(0, (k, *trail), rows.dtype)
        np.sum(rows.reshape((k, first, *trail)), axis=1, out=out)
        if self.reducer == "Mean":
            out *= np.asarray(1.0 / first, rows.dtype)
        return True


def gather_rows(data: np.ndarray, idx: np.ndarray, out: np.ndarray) -> None:
    """``out[:] = data[idx]`` for checked indices, as fast as numpy goes: whole rows as single opaque items
    and ``mode="clip"`` (``mode="raise"`` buffers the output, a second copy)."""
    row_bytes = data.dtype.itemsize * int(np.prod(data.shape[1:], dtype=np.int64))
    if not idx.size:
        return
    if data.ndim >= 2 and row_bytes and data.flags.c_contiguous and out.flags.c_contiguous and data.shape[0]:
        item = np.dtype((np.void, row_bytes))
        src = data.reshape(data.shape[0], -1).view(item).reshape(-1)
        np.take(src, idx, out=out.reshape(len(idx), -1).view(item).reshape(-1), mode="clip")
    elif data.shape[0]:
        np.take(data, idx, axis=0, out=out, mode="clip")


def checked_indices(op: Operator, i: int, rows: int) -> np.ndarray:
    idx = op.input(i)
    if idx.ndim != 1 or idx.dtype.kind not in INT_KINDS:
        raise TypeMismatchError(f"{op.describe()}: INDICES '{op.input_names[i]}' must be a 1-D integer tensor")
    check_indices(op, i, idx, rows, what=f"{rows} rows of DATA")
    return idx


def checked_scalars(op: Operator, i: int, n: int) -> np.ndarray:
    w = op.input(i)
    if w.shape != (n,):
        raise ShapeError(f"{op.describe()}: SCALARS '{op.input_names[i]}' must have shape [{n}], got {list(w.shape)}")
    return w


def _infer(layout: str, reducer: str, sparse: bool):
    parts = _Parts(reducer, sparse)

    def infer(args: Any, ins: list[TensorSpec]) -> list[TensorSpec]:
        data, seg = ins[0], ins[parts.segment] if len(ins) > parts.segment else UNKNOWN
        if data.shape is None:
            return [UNKNOWN]
        k = None
        if layout == "Lengths" and seg.shape is not None:
            k = seg.shape[0]
        elif layout == "UnsortedSegment" and getattr(args, "num_segments", -1) >= 0:
            k = args.num_segments
        dtype = data.dtype
        if sparse and layout == "Lengths" and dtype == F16:
            dtype = np.dtype(np.float32)
        if k is None:  # the ids decide K: only the dtype is known
            return [TensorSpec(None, dtype)]
        return [TensorSpec((k, *data.shape[1:]), dtype)]

    return infer


def _docs(layout: str, reducer: str, sparse: bool) -> list[tuple[str, str]]:
    docs = [("DATA", "tensor whose rows (first dimension) are reduced")]
    if reducer == "WeightedSum":
        docs.append(("SCALARS", "one weight per reduced row (per index with Sparse)"))
    if sparse:
        docs.append(("INDICES", "rows of DATA to gather, then reduce"))
    docs.append(
        ("LENGTHS", "rows per segment, summing to the rows")
        if layout == "Lengths"
        else ("SEGMENT_IDS", "the segment of each row" + (", sorted" if layout == "SortedSegment" else ""))
    )
    return docs


def _doc(layout: str, reducer: str, sparse: bool) -> str:
    what = {"Sum": "Sum", "Mean": "Average (0 for an empty segment)", "WeightedSum": "Weighted sum"}[reducer]
    how = {
        "Lengths": "segments given by LENGTHS (consecutive runs of rows)",
        "SortedSegment": "segments given by sorted SEGMENT_IDS (K = last id + 1)",
        "UnsortedSegment": "segments given by SEGMENT_IDS in any order (K = num_segments or max id + 1)",
    }[layout]
    gather = " of the rows DATA[INDICES]" if sparse else " of the rows of DATA"
    grad = " The gradient into DATA is sparse (rows INDICES)." if sparse else ""
    return f"{what}{gather} over {how}: OUTPUT is K x DATA's trailing dims.{grad}"


def _register(layout: str, reducer: str, sparse: bool) -> None:
    name = f"{'Sparse' if sparse else ''}{layout}{reducer}"
    args = []
    if reducer == "WeightedSum":
        args.append(Arg("grad_on_weights", INT, 0, "1: also produce the gradient of SCALARS"))
    if layout == "UnsortedSegment":
        args.append(Arg("num_segments", INT, -1, "number of segments K; -1: max id + 1"))
    cls = type(
        name,
        (SegmentReduction,),
        {"layout": layout, "reducer": reducer, "sparse": sparse, "__doc__": _doc(layout, reducer, sparse)},
    )
    register_op(
        name,
        inputs=_Parts(reducer, sparse).count,
        outputs=1,
        args=args,
        input_docs=_docs(layout, reducer, sparse),
        output_docs=[("OUTPUT", "K x DATA.shape[1:]")],
        infer=_infer(layout, reducer, sparse),
        category="sparse",
        input_types=_kinds(layout, reducer, sparse),
    )(cls)


def _kinds(layout: str, reducer: str, sparse: bool) -> dict:
    """DATA numeric, SCALARS float, INDICES and the segment input integers."""
    parts = _Parts(reducer, sparse)
    kinds = {0: "numeric", parts.segment: "int"}
    if parts.weighted:
        kinds[parts.scalars] = "float"
    if sparse:
        kinds[parts.indices] = "int"
    return kinds


for _sparse in (False, True):
    for _layout in LAYOUTS:
        for _reducer in REDUCERS:
            _register(_layout, _reducer, _sparse)


# -- gradients ------------------------------------------------------------------------------------------
def gradient_name(layout: str, reducer: str, sparse: bool, main_input: bool) -> str:
    """Caffe2's gradient op type (``LengthsOpGetGradient``/``SegmentOpGetGradient``)."""
    indices_in = layout == "Lengths" and (sparse or reducer != "WeightedSum")
    return (
        f"{'Sparse' if sparse else ''}{layout}{'IndicesInGradient' if indices_in else ''}{reducer}"
        f"{'WithMainInput' if main_input else ''}Gradient"
    )


def gradient_roles(layout: str, reducer: str, sparse: bool, main_input: bool) -> list[str]:
    """The gradient op's inputs by role, in Caffe2's order."""
    roles = ["SCALARS"] if reducer == "WeightedSum" else []
    roles += ["dY", "SEGMENT"]
    if main_input:
        roles += ["DATA"] + (["INDICES"] if sparse else [])
    elif layout == "Lengths" and (sparse or reducer != "WeightedSum"):
        roles += ["INDICES" if sparse else "DATA"]  # Caffe2's "IndicesInGradient" input (unused on CPU)
    return roles


class SegmentReductionGradient(Operator):
    """dDATA (rows, or sparse values per index) and, with main input, dSCALARS of a segment reduction."""

    layout = reducer = ""
    sparse = main_input = False
    roles: list[str] = []

    def run(self) -> None:
        at = {r: i for i, r in enumerate(self.roles)}
        dy = self.input(at["dY"])
        seg_in = self.input(at["SEGMENT"])
        if seg_in.ndim != 1:
            raise ShapeError(f"{self.describe()}: {self.layout.lower()} input must be 1-D, got {list(seg_in.shape)}")
        if self.layout == "Lengths":
            check_lengths(self, at["SEGMENT"], seg_in)
        else:
            expect_kind(self, at["SEGMENT"], seg_in, "int")
        n = int(seg_in.sum(dtype=np.int64)) if self.layout == "Lengths" else len(seg_in)
        check_elements((n, *dy.shape[1:]), dy.dtype.itemsize, f"the gradient of {self.describe()}")
        seg, k = segment_ids(self, self.layout, at["SEGMENT"], n, dy.shape[0] if dy.ndim else 0)
        if dy.ndim < 1 or dy.shape[0] != k:
            raise ShapeError(f"{self.describe()}: dY has shape {list(dy.shape)}, expected {k} segments first")
        block = (1,) * (dy.ndim - 1)
        w = rows = None
        if self.reducer == "WeightedSum":  # every input checked before an output is written
            w = checked_scalars(self, at["SCALARS"], n)
            if self.main_input:
                data = self.input(at["DATA"])
                if data.ndim < 1 or data.shape[1:] != dy.shape[1:]:
                    raise ShapeError(
                        f"{self.describe()}: DATA '{self.input_names[at['DATA']]}' has shape {list(data.shape)}, "
                        f"expected rows of dY's trailing shape {list(dy.shape[1:])}"
                    )
                rows = data[checked_indices(self, at["INDICES"], data.shape[0])] if self.sparse else data
                if rows.shape[0] != n:
                    raise ShapeError(f"{self.describe()}: {rows.shape[0]} rows of DATA for {n} rows of the gradient")
        d = self.output(0, (n, *dy.shape[1:]), dy.dtype)
        first = int(seg_in[0]) if self.layout == "Lengths" and k and n else 0
        if first and first * k == n and (seg_in == first).all():  # equal lengths: a broadcast copy
            np.copyto(d.reshape((k, first, *dy.shape[1:])), dy[:, None])
            if self.reducer == "Mean":
                d *= np.asarray(1.0 / first, dy.dtype)
        else:
            np.take(dy, seg, axis=0, out=d)
            if self.reducer == "Mean":
                counts = np.bincount(seg, minlength=k)[seg] if n else np.zeros(0)
                d /= np.maximum(counts, 1).reshape((n,) + block).astype(dy.dtype)
        if w is not None:
            if rows is not None:
                dw = self.output(1, (n,), w.dtype)
                np.sum((d * rows).reshape(n, -1), axis=1, out=dw) if n else dw.fill(0)
            d *= w.reshape((n,) + block).astype(dy.dtype)


ROLE_DOCS = {
    "SCALARS": "the forward op's weights",
    "dY": "gradient of OUTPUT",
    "SEGMENT": "the forward op's LENGTHS or SEGMENT_IDS",
    "DATA": "the forward op's DATA",
    "INDICES": "the forward op's INDICES",
}
ROLE_KINDS = {"SCALARS": "float", "dY": "float", "SEGMENT": "int", "DATA": "numeric", "INDICES": "int"}
GRAD_ARGS = [
    Arg("num_segments", INT, -1, "as the forward op"),
    Arg("grad_on_weights", INT, 0, "as the forward op"),
]


def _register_gradient(layout: str, reducer: str, sparse: bool, main_input: bool) -> None:
    name = gradient_name(layout, reducer, sparse, main_input)
    roles = gradient_roles(layout, reducer, sparse, main_input)
    cls = type(
        name,
        (SegmentReductionGradient,),
        {
            "layout": layout,
            "reducer": reducer,
            "sparse": sparse,
            "main_input": main_input,
            "roles": roles,
            "__doc__": f"Gradient of {'Sparse' if sparse else ''}{layout}{reducer}.",
        },
    )
    register_op(
        name,
        inputs=len(roles),
        outputs=2 if main_input else 1,
        args=GRAD_ARGS,
        input_docs=[(r, ROLE_DOCS[r]) for r in roles],
        output_docs=[("dDATA", "rows of DATA's gradient (values over INDICES with Sparse)")]
        + ([("dSCALARS", "gradient of SCALARS")] if main_input else []),
        infer=_grad_infer(layout, roles),
        category="sparse",
        private=True,
        input_types=[ROLE_KINDS[r] for r in roles],
        ranks={roles.index("dY"): (1, None), roles.index("SEGMENT"): 1},
    )(cls)


def _grad_infer(layout: str, roles: list[str]):
    """Rows of dDATA: len(SEGMENT_IDS), or for Lengths the rows SCALARS / INDICES / DATA count."""

    def infer(args: Any, ins: list[TensorSpec]) -> list[TensorSpec]:
        spec = dict(zip(roles, ins))
        dy = spec["dY"]
        if layout != "Lengths":
            source = spec["SEGMENT"]
        else:
            source = next((spec[r] for r in ("SCALARS", "INDICES", "DATA") if r in spec), UNKNOWN)
        if dy.shape is None or source.shape is None:
            return [UNKNOWN] * args.num_outputs
        out = [TensorSpec((source.shape[0], *dy.shape[1:]), dy.dtype)]
        if args.num_outputs > 1:
            out.append(spec["SCALARS"])
        return out

    return infer


def _maker(layout: str, reducer: str, sparse: bool):
    parts = _Parts(reducer, sparse)

    def make(g):
        main_input = reducer == "WeightedSum" and bool(g.arg("grad_on_weights", 0))
        by_role = {
            "SCALARS": g.I(parts.scalars) if parts.weighted else None,
            "dY": g.GO(0),
            "SEGMENT": g.I(parts.segment),
            "DATA": g.I(0),
            "INDICES": g.I(parts.indices) if sparse else None,
        }
        ins = [by_role[r] for r in gradient_roles(layout, reducer, sparse, main_input)]
        outs = [g.GI_V(0) if sparse else g.GI(0)] + ([g.GI(parts.scalars)] if main_input else [])
        op = g.op(gradient_name(layout, reducer, sparse, main_input), ins, outs)
        if sparse:
            g.set_sparse(0, g.I(parts.indices), g.GI_V(0))
        return [op]

    return make


# Caffe2's legacy names of the Sum gradient, (dY, LENGTHS) -> each row of dY repeated LENGTHS times; no
# maker emits them (SparseLengthsSum's gradient is SparseLengthsIndicesInGradientSumGradient)
for _legacy in ("LengthsSumGradient", "SparseLengthsSumGradient"):
    register_op(
        _legacy,
        inputs=2,
        args=GRAD_ARGS,
        input_docs=[("dY", ROLE_DOCS["dY"]), ("LENGTHS", "the forward op's LENGTHS")],
        output_docs=[("dDATA", "row i of dY repeated LENGTHS[i] times")],
        infer=lambda args, ins: [UNKNOWN],
        category="sparse",
        private=True,
        input_types=["float", "int"],
        ranks={0: (1, None), 1: 1},
    )(
        type(
            _legacy,
            (SegmentReductionGradient,),
            {
                "layout": "Lengths",
                "reducer": "Sum",
                "roles": ["dY", "SEGMENT"],
                "__doc__": "Gradient of LengthsSum / SparseLengthsSum under Caffe2's legacy name: each row of dY "
                "repeated LENGTHS times (the dense rows of the looked-up indices).",
            },
        )
    )

for _sparse in (False, True):
    for _layout in LAYOUTS:
        for _reducer in REDUCERS:
            for _main in (False, True) if _reducer == "WeightedSum" else (False,):
                _register_gradient(_layout, _reducer, _sparse, _main)
            gradient(f"{'Sparse' if _sparse else ''}{_layout}{_reducer}")(_maker(_layout, _reducer, _sparse))
