"""Sampling ops: UniqueUniformFill, WeightedMultiSampling, ReservoirSampling and
NGramFromCategorical (Caffe2's filler_op, weighted_multi_sampling_op, reservoir_sampling,
ngram_ops). Random draws use the op's generator (``random_seed``)."""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.memory.allocator import check_elements
from framework.ops.gradient import should_not_do_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import INT, INTS, UNKNOWN, Arg, TensorSpec
from framework.ops.sparse.maps import TypedMap
from framework.ops.tensor.fills import _SHAPE_ARGS, FillerOp, filler_infer
from framework.ops.training.counters import Mutex, held
from framework.proto.framework_pb2 import TensorProto

_I32 = np.dtype(np.int32)
_INT_TYPES = {TensorProto.INT32: np.dtype(np.int32), TensorProto.INT64: np.dtype(np.int64)}


@register_op(
    "UniqueUniformFill",
    inputs=(0, 2),
    args=[
        *_SHAPE_ARGS,
        Arg("dtype", INT, TensorProto.INT32, "INT32 (2) or INT64 (10)", dtype_name=True),
        Arg("min", INT, None, "lower bound, inclusive (required)"),
        Arg("max", INT, None, "upper bound, inclusive (required, > min)"),
    ],
    input_docs=[("input", "optional: shape source (see ConstantFill)"), ("avoid", "optional: values not to draw")],
    output_docs=[("output", "distinct integers uniform on [min, max], none of them in avoid")],
    allow_inplace={(0, 0)},
    infer=filler_infer(),
    category="fill",
)
class UniqueUniformFill(FillerOp):
    """Fill with distinct integers drawn uniformly from [min, max] minus the ``avoid`` input's values."""

    def prepare(self) -> None:
        a = self.args
        if a.dtype not in _INT_TYPES:
            raise self.arg_error(f"dtype must be INT32 or INT64, got {a.dtype}")
        if a.min is None or a.max is None:
            raise self.arg_error("min and max are required")
        if not a.min < a.max:
            raise self.arg_error("max value should be bigger than min value")
        self.out_dtype = _INT_TYPES[a.dtype]

    def fill(self, out: np.ndarray) -> None:
        a = self.args
        avoid = np.unique(self.input(1)) if len(self.inputs) > 1 else np.zeros(0, np.int64)
        avoid = avoid[(avoid >= a.min) & (avoid <= a.max)]
        span = a.max - a.min + 1
        if out.size + avoid.size > span:
            raise ShapeError(
                f"{self.describe()}: cannot draw {out.size} distinct values from [{a.min}, {a.max}] avoiding "
                f"{avoid.size} of them"
            )
        # draw ranks among the allowed values, then map each rank past the avoided values below it
        ranks = np.sort(self.rng.choice(span - avoid.size, size=out.size, replace=False))
        vals = ranks + a.min
        for v in np.sort(avoid):
            vals = np.where(vals >= v, vals + 1, vals)
        out.reshape(-1)[...] = self.rng.permutation(vals)


@register_op(
    "WeightedMultiSampling",
    inputs=(1, 2),
    args=[Arg("num_samples", INT, 0, "samples to draw (or give input 1 for the output shape)")],
    input_docs=[("sampling_cdf", "1-D non-decreasing float CDF (last value: the total)"), ("shape_tensor", "optional")],
    output_docs=[("sampled_indexes", "int32: lower_bound(cdf, U(0, cdf[-1])) per sample")],
    infer=lambda args, ins: [
        TensorSpec((args.num_samples,) if args.num_inputs == 1 else (ins[1].shape if len(ins) > 1 else None), _I32)
    ],
    category="fill",
)
class WeightedMultiSampling(Operator):
    """Draw indices from a cumulative distribution: each sample is the first index whose CDF value
    is >= r, r uniform on [0, cdf[-1]); an empty CDF gives an empty output."""

    def setup(self) -> None:
        if len(self.inputs) == 2 and "num_samples" in self.args.given:
            raise self.arg_error("the shape is given by input 1: do not pass num_samples")
        if self.args.num_samples < 0:
            raise self.arg_error(f"num_samples must be >= 0, got {self.args.num_samples}")

    def run(self) -> None:
        cdf = self.input(0)
        if cdf.ndim != 1 or cdf.dtype.kind != "f":
            raise ShapeError(
                f"{self.describe()}: the CDF must be a 1-D float tensor, got {cdf.dtype} {list(cdf.shape)}"
            )
        shape = self.input(1).shape if len(self.inputs) == 2 else (self.args.num_samples,)
        if cdf.size == 0:
            self.output(0, (0,), _I32)
            return
        n = check_elements(shape, 8, f"{self.describe()}: the samples")  # the int64 positions searchsorted returns
        r = self.rng.random(n, dtype=np.float32) * np.float32(cdf[-1])
        idx = np.searchsorted(cdf.astype(np.float32), r, side="left")
        if n and idx.max() >= cdf.size:
            raise ShapeError(f"{self.describe()}: cannot find a sample in the input CDF (is it non-decreasing?)")
        self.output(0, tuple(shape), _I32)[...] = idx.reshape(shape)


def _row(x: np.ndarray, i: int):
    """Row ``i`` of ``x`` as its own copy; an element of an object tensor (a packed record) is kept as the
    object itself, which is never modified in place (Caffe2 shares the record's pointer)."""
    return x[i] if x.dtype == object else x[i].copy()


@register_op(
    "ReservoirSampling",
    inputs={4, 7},
    outputs={2, 4},
    enforce_inplace={(0, 0), (1, 1), (5, 2), (6, 3)},
    args=[Arg("num_to_collect", INT, -1, "reservoir size (> 0)")],
    input_docs=[
        ("RESERVOIR", "the reservoir (start empty)"),
        ("NUM_VISITED", "int64 [1]: rows seen (start 0)"),
        ("DATA", "rows to sample from"),
        ("MUTEX", "a Mutex"),
        ("OBJECT_ID", "(optional) int64 [N]: the object of each row, for deduplication"),
        ("OBJECT_TO_POS_MAP_IN", "(optional) a CreateMap map int64 -> int32: reservoir position of each object"),
        ("POS_TO_OBJECT_IN", "(optional) int64: the object at each reservoir position"),
    ],
    output_docs=[
        ("RESERVOIR", "a uniform sample of num_to_collect rows seen"),
        ("NUM_VISITED", "updated count"),
        ("OBJECT_TO_POS_MAP", "(optional) the map, in place"),
        ("POS_TO_OBJECT", "(optional) the position -> object tensor, in place"),
    ],
    infer=lambda args, ins: [UNKNOWN] * args.num_outputs,
    category="shape",
)
class ReservoirSampling(Operator):
    """Reservoir sampling of the rows seen across runs: the first ``num_to_collect`` are kept; row
    number k (0-based) then replaces a uniform position in [0, k] when it is < num_to_collect.
    An empty reservoir restarts the count (NUM_VISITED, and the map and POS_TO_OBJECT are
    cleared). Thread-safe (the mutex).

    Deduplicating form (7 inputs, 4 outputs): only the first row of each OBJECT_ID not already in
    the map is considered (later rows of the same object in the batch, and objects in the
    reservoir, are skipped and not counted); a kept row records its object in the map and in
    POS_TO_OBJECT, and the object it replaced leaves the map. Departure: Caffe2 also erases the
    map entry of object id 0 whenever a row fills a fresh position (its zero-filled
    POS_TO_OBJECT slot); here only a replaced object leaves the map."""

    def setup(self) -> None:
        if self.args.num_to_collect <= 0:
            raise self.arg_error(f"num_to_collect must be > 0, got {self.args.num_to_collect}")
        if (len(self.inputs) == 7) != (len(self.outputs) == 4):
            raise self.arg_error(
                f"4 inputs go with 2 outputs and 7 with 4 (deduplicating form), got {len(self.inputs)} and "
                f"{len(self.outputs)}"
            )

    def run(self) -> None:
        with held(self, 3, Mutex, "CreateMutex").lock:
            self._collect()

    def _dedup_inputs(self, n: int) -> tuple:
        if len(self.inputs) < 7:
            return None, None, np.zeros(0, np.int64)
        oid = self.input(4)
        if oid.dtype != np.int64 or oid.ndim != 1 or oid.shape[0] != n:
            raise ShapeError(f"{self.describe()}: OBJECT_ID must be int64 [{n}], got {oid.dtype} {list(oid.shape)}")
        omap = held(self, 5, TypedMap, "CreateMap")
        if omap.key_dtype != np.int64 or omap.value_dtype != np.int32:
            raise TypeMismatchError(f"{self.describe()}: OBJECT_TO_POS_MAP must map int64 -> int32")
        obj = self.inputs[6].held
        pos_to_obj = self.input(6) if obj is not None and obj.is_allocated else np.zeros(0, np.int64)
        if pos_to_obj.dtype != np.int64 or pos_to_obj.ndim != 1:
            raise TypeMismatchError(f"{self.describe()}: POS_TO_OBJECT must be a 1-D int64 tensor")
        return oid, omap, pos_to_obj

    def _collect(self) -> None:
        k = self.args.num_to_collect
        x = self.input(2)
        if x.ndim < 1:
            raise ShapeError(f"{self.describe()}: DATA needs at least one dimension")
        obj = self.inputs[0].held
        initialized = obj is not None and obj.is_allocated and obj.numel > 0
        res = self.input(0) if initialized else None
        if initialized and (res.ndim != x.ndim or res.shape[1:] != x.shape[1:] or res.dtype != x.dtype):
            raise ShapeError(f"{self.describe()}: reservoir {list(res.shape)} does not fit DATA {list(x.shape)}")
        nv = self.input(1)
        if nv.size != 1 or nv.dtype != np.int64:
            raise TypeMismatchError(f"{self.describe()}: NUM_VISITED must be an int64 tensor of one element")
        visited = int(nv.reshape(-1)[0]) if initialized else 0
        if visited < 0:
            raise ShapeError(f"{self.describe()}: NUM_VISITED is negative")
        if visited > np.iinfo(np.int64).max - x.shape[0]:
            raise ShapeError(f"{self.describe()}: NUM_VISITED {visited} plus {x.shape[0]} new rows overflows int64")
        oid, omap, pos_to_obj = self._dedup_inputs(x.shape[0])
        if omap is not None and not initialized:
            omap.items.clear()
            pos_to_obj = np.zeros(0, np.int64)
        if x.shape[0] == 0:
            if not initialized:
                np.copyto(self.output(0, x.shape, x.dtype), x)
            nv.reshape(-1)[0] = visited
            self._write_pos_to_obj(pos_to_obj)
            return
        rows = list(res) if initialized else []
        owners = list(pos_to_obj[: len(rows)]) + [0] * max(0, len(rows) - pos_to_obj.size)
        pending = None if oid is None else {int(o) for o in oid if int(o) not in omap.items}
        for i in range(x.shape[0]):
            if pending is not None:
                o = int(oid[i])
                if o not in pending:
                    continue  # in the reservoir already, or seen earlier in this batch
                pending.discard(o)
            pos = visited if visited < k else int(self.rng.integers(0, visited + 1))
            if pos < k:
                if pos >= len(rows):
                    rows.append(_row(x, i))
                    owners.append(0)
                else:
                    rows[pos] = _row(x, i)
                    if omap is not None:
                        omap.items.pop(int(owners[pos]), None)
                if omap is not None:
                    owners[pos] = o
                    omap.items[o] = pos
            visited += 1
        new = np.empty((len(rows), *x.shape[1:]), x.dtype)
        for j, row in enumerate(rows):  # not np.stack: it would unpack a packed record's arrays
            new[j] = row
        np.copyto(self.output(0, new.shape, x.dtype), new)
        nv.reshape(-1)[0] = visited
        self._write_pos_to_obj(np.array(owners, np.int64))

    def _write_pos_to_obj(self, owners: np.ndarray) -> None:
        if len(self.outputs) == 4:
            np.copyto(self.output(3, owners.shape, np.int64), owners)


@register_op(
    "NGramFromCategorical",
    args=[
        Arg("col_ids", INTS, [], "columns of the input used"),
        Arg("categorical_limits", INTS, [], "number of categories of each column"),
        Arg("vals", INTS, [], "the category values of each column, concatenated"),
    ],
    input_docs=[("floats", "float [N, D]")],
    output_docs=[("output", "int32 [N]: the mixed-radix code of each row's categories")],
    infer=lambda args, ins: [TensorSpec((ins[0].shape[0],) if ins and ins[0].shape else None, _I32)],
    category="shape",
)
class NGramFromCategorical(Operator):
    """Encode the categorical columns of each row as one id: column k's value (rounded) maps to its
    position m among its ``vals`` and adds ``m * prod(limits[:k])``; unknown values count as 0."""

    def setup(self) -> None:
        a = self.args
        if not a.col_ids or len(a.col_ids) != len(a.categorical_limits):
            raise self.arg_error("col_ids and categorical_limits must be non-empty and of equal length")
        if any(limit <= 0 for limit in a.categorical_limits) or any(c < 0 for c in a.col_ids):
            raise self.arg_error("categorical_limits must be > 0 and col_ids >= 0")
        if sum(a.categorical_limits) != len(a.vals):
            raise self.arg_error(f"vals must hold sum(categorical_limits) = {sum(a.categorical_limits)} values")
        self._maps, base, idx = [], 1, 0
        for limit in a.categorical_limits:
            m = {}
            for pos in range(limit):
                m[a.vals[idx]] = pos * base
                idx += 1
            self._maps.append(m)
            base *= limit

    def run(self) -> None:
        x = self.input(0)
        if x.ndim < 1 or x.dtype != np.float32:
            raise TypeMismatchError(f"{self.describe()}: input must be a float tensor [N, ...], got {x.dtype}")
        flat = x.reshape(x.shape[0], -1)
        if flat.shape[1] <= max(self.args.col_ids):
            raise ShapeError(
                f"{self.describe()}: input has {flat.shape[1]} columns, col_ids need {max(self.args.col_ids) + 1}"
            )
        out = self.output(0, (x.shape[0],), _I32)
        out[...] = 0
        for k, j in enumerate(self.args.col_ids):
            col = flat[:, j].astype(np.float64)
            rounded = (np.sign(col) * np.floor(np.abs(col) + 0.5)).astype(np.int64)  # C's round
            out += np.array([self._maps[k].get(int(v), 0) for v in rounded], np.int32)


should_not_do_gradient("UniqueUniformFill", "WeightedMultiSampling", "ReservoirSampling", "NGramFromCategorical")
