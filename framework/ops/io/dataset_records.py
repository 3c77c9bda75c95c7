"""Dataset building ops (Caffe2's dataset_ops.cc): PackRecords/UnPackRecords, TrimDataset, Append,
AtomicAppend, and the tensor vectors (CreateTensorVector, TensorVectorSize, ConcatTensorVector,
CollectTensor).

Packed records are a 1-D object tensor whose elements are ``PackedRecord`` tuples of arrays (Caffe2's
``SharedTensorVectorPtr``), so row ops (Gather, reservoir sampling) can move them. Tensor vectors
are ``TensorVector`` objects. Neither has a serializer: saving one is a clear SerializationError.
"""

from __future__ import annotations

import numpy as np

from framework.errors import SerializationError, ShapeError, TypeMismatchError
from framework.memory.blob import Blob
from framework.memory.serialize import register_blob_serializer
from framework.ops.gradient import should_not_do_gradient
from framework.ops.io.dataset_ops import _FIELDS, _dataset, _iterator, _unknown
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import INT, Arg, TensorSpec
from framework.ops.training.counters import Mutex, held

_OBJ, _I32 = np.dtype(object), np.dtype(np.int32)


class PackedRecord(tuple):
    """One record of a packed dataset: one array per field."""


class TensorVector(list):
    """A growable list of tensors (Caffe2's ``unique_ptr<vector<Tensor>>``)."""


def _no_serializer(obj, name):
    raise SerializationError(f"blob '{name}' holds a {type(obj).__name__}, which has no serializer (as in Caffe2)")


def _no_deserializer(proto, blob: Blob) -> None:
    raise SerializationError(f"blob '{proto.name}': {proto.type} cannot be deserialized")


register_blob_serializer(TensorVector, "std::unique_ptr<std::vector<Tensor>>", _no_serializer, _no_deserializer)


@register_op(
    "PackRecords",
    inputs=(1, float("inf")),
    args=[_FIELDS],
    input_docs=[("field_0", "the data of each field")],
    output_docs=[("tensor", "1-D object tensor: one PackedRecord (a tuple of arrays) per record")],
    infer=lambda args, ins: [TensorSpec((None,), _OBJ)],
    category="data",
)
class PackRecords(Operator):
    """Pack a dataset into one tensor with one element per top-level record (the record's slice of
    every field); UnPackRecords reverses it."""

    def setup(self) -> None:
        self._it = _iterator(self)

    def run(self) -> None:
        it = self._it
        data, lengths, limits = _dataset(self, it, 0)
        offsets = [0] * it.num_offset_fields
        records = []
        for _ in range(limits[0]):
            start = list(offsets)
            sizes = it.advance(lengths, offsets, limits, 1)
            records.append(
                PackedRecord(
                    x[start[it.domain(i)] : start[it.domain(i)] + sizes[it.domain(i)]].copy()
                    for i, x in enumerate(data)
                )
            )
        out = self.output(0, (len(records),), _OBJ)
        for k, r in enumerate(records):
            out[k] = r


@register_op(
    "UnPackRecords",
    inputs=(1, float("inf")),
    outputs=(1, float("inf")),
    args=[_FIELDS],
    input_docs=[("packed_tensor", "from PackRecords"), ("prototypes", "optional: one tensor per field giving shapes")],
    output_docs=[("field_0", "each field, concatenated over the records")],
    infer=_unknown,
    category="data",
)
class UnPackRecords(Operator):
    """Concatenate the packed records back into one tensor per field. With no records, the optional
    prototype inputs give each field's inner shape and type."""

    def run(self) -> None:
        packed = self.input(0).reshape(-1)
        n_fields = len(self.args.fields)
        if len(self.outputs) != n_fields:
            raise ShapeError(f"{self.describe()}: {n_fields} fields but {len(self.outputs)} outputs")
        if packed.size == 0 and len(self.inputs) == 1:
            raise ShapeError(f"{self.describe()}: unpacking an empty record without prototypes")
        if len(self.inputs) > 1:
            if len(self.inputs) - 1 != n_fields:
                raise ShapeError(f"{self.describe()}: {len(self.inputs) - 1} prototypes for {n_fields} fields")
            protos = [self.input(1 + j) for j in range(n_fields)]
        else:
            protos = None
        for k, rec in enumerate(packed.tolist()):
            if not isinstance(rec, PackedRecord) or len(rec) != n_fields:
                raise TypeMismatchError(f"{self.describe()}: element {k} is not a packed record of {n_fields} fields")
        for j in range(n_fields):
            ref = protos[j] if protos is not None else packed[0][j]
            parts = [rec[j] for rec in packed.tolist()]
            for p in parts:
                if p.ndim != ref.ndim or p.shape[1:] != ref.shape[1:] or p.dtype != ref.dtype:
                    raise ShapeError(
                        f"{self.describe()}: field {j} rows are {p.dtype} {list(p.shape)}, expected {ref.dtype} "
                        f"[*, {', '.join(map(str, ref.shape[1:]))}]"
                    )
            total = sum(p.shape[0] for p in parts)
            out = self.output(j, (total, *ref.shape[1:]), ref.dtype)
            if parts:
                np.concatenate(parts, out=out)


@register_op(
    "TrimDataset",
    inputs=(1, float("inf")),
    outputs=(1, float("inf")),
    args=[_FIELDS, Arg("multiple_of", INT, 1, "keep the largest number of records divisible by this")],
    enforce_inplace=lambda i, o: i == o,
    input_docs=[("field_0", "the data of each field")],
    output_docs=[("field_0", "the same blobs, trimmed")],
    infer=_unknown,
    category="data",
)
class TrimDataset(Operator):
    """Trim the dataset in place to the largest number of records that is a multiple of ``multiple_of``."""

    def setup(self) -> None:
        self._it = _iterator(self)
        if self.args.multiple_of < 1:
            raise self.arg_error(f"multiple_of must be >= 1, got {self.args.multiple_of}")

    def run(self) -> None:
        it = self._it
        data, lengths, limits = _dataset(self, it, 0)
        n = limits[0]
        keep = (n // self.args.multiple_of) * self.args.multiple_of
        if keep == n:
            return
        offsets = [0] * it.num_offset_fields
        it.advance(lengths, offsets, limits, keep)
        for i in range(len(data)):
            self.output_tensor(i).shrink_to(offsets[it.domain(i)])


def _append(op: Operator, a_idx: int, b_idx: int, out_idx: int) -> None:
    t = op.input_tensor(a_idx)
    b = op.input(b_idx)
    if not t.is_allocated or (t.numel == 0 and t.ndim and t.dims[0] == 0):
        np.copyto(op.output(out_idx, b.shape, b.dtype), b)
        return
    t.extend(b.shape[0])
    arr = t.mutable_data()
    arr[arr.shape[0] - b.shape[0] :] = b


def _append_check(op: Operator, a_idx: int, b_idx: int) -> None:
    t, b = op.input_tensor(a_idx), op.input(b_idx)
    if b.ndim < 1:
        raise ShapeError(f"{op.describe()}: '{op.input_names[b_idx]}' must have at least one dimension")
    if not t.is_allocated or t.numel == 0:
        return
    a = op.input(a_idx)
    if a.ndim != b.ndim or a.dtype != b.dtype or a.shape[1:] != b.shape[1:]:
        raise ShapeError(
            f"{op.describe()}: cannot append '{op.input_names[b_idx]}' {b.dtype} {list(b.shape)} to "
            f"'{op.input_names[a_idx]}' {a.dtype} {list(a.shape)}: inner dimensions and types must match"
        )


@register_op(
    "Append",
    inputs=2,
    enforce_inplace={(0, 0)},
    input_docs=[("A", "[N, ...] (in place)"), ("B", "[M, ...]")],
    output_docs=[("A", "[N + M, ...]")],
    infer=_unknown,
    category="data",
)
class Append(Operator):
    """Append B's rows to A in place, growing A's storage geometrically (amortized O(1))."""

    def run(self) -> None:
        _append_check(self, 0, 1)
        _append(self, 0, 1, 0)


@register_op(
    "AtomicAppend",
    inputs=(3, float("inf")),
    outputs=(1, float("inf")),
    allow_inplace=lambda i, o: i == o + 1,
    input_docs=[("mutex", "a Mutex"), ("fields", "the tensors appended to, then the tensors to append")],
    output_docs=[("fields", "the tensors appended to (in place)")],
    infer=_unknown,
    category="data",
)
class AtomicAppend(Operator):
    """Append each field's new rows under the mutex; all fields are checked before any is changed."""

    def setup(self) -> None:
        n = len(self.outputs)
        if len(self.inputs) != 1 + 2 * n:
            raise self.arg_error(f"needs a mutex plus 2 x {n} inputs for {n} outputs, got {len(self.inputs)}")
        for i in range(n):
            if self.input_names[1 + i] != self.output_names[i]:
                raise self.arg_error(f"appended-to arguments must be in place: input {1 + i} vs output {i}")

    def run(self) -> None:
        mutex = held(self, 0, Mutex, "CreateMutex")
        n = len(self.outputs)
        with mutex.lock:
            for i in range(n):
                _append_check(self, 1 + i, 1 + n + i)
            for i in range(n):
                _append(self, 1 + i, 1 + n + i, i)


@register_op(
    "CreateTensorVector",
    inputs=0,
    output_docs=[("tensor_vector", "an empty TensorVector")],
    infer=_unknown,
    category="data",
)
class CreateTensorVector(Operator):
    """Create an empty vector of tensors."""

    def run(self) -> None:
        self.outputs[0].reset(TensorVector())


def _vector(op: Operator, i: int) -> TensorVector:
    return held(op, i, TensorVector, "CreateTensorVector")


@register_op(
    "TensorVectorSize",
    input_docs=[("tensor_vector", "a TensorVector")],
    output_docs=[("size", "int32 scalar")],
    infer=lambda args, ins: [TensorSpec((), _I32)],
    category="data",
)
class TensorVectorSize(Operator):
    """The number of tensors in the vector."""

    def run(self) -> None:
        self.output(0, (), _I32)[...] = len(_vector(self, 0))


@register_op(
    "ConcatTensorVector",
    input_docs=[("vector of Tensor", "a non-empty TensorVector")],
    output_docs=[("tensor", "its tensors concatenated along the first dimension")],
    infer=_unknown,
    category="data",
)
class ConcatTensorVector(Operator):
    """Concatenate the vector's tensors along their first dimension (equal inner shapes and types)."""

    def run(self) -> None:
        v = _vector(self, 0)
        if not v or v[0].ndim == 0:
            raise ShapeError(f"{self.describe()}: the vector is empty or holds scalars")
        for t in v[1:]:
            if t.shape[1:] != v[0].shape[1:] or t.dtype != v[0].dtype or t.ndim != v[0].ndim:
                raise ShapeError(f"{self.describe()}: tensors differ in inner shape or type: {t.shape} vs {v[0].shape}")
        total = sum(t.shape[0] for t in v)
        np.concatenate(v, out=self.output(0, (total, *v[0].shape[1:]), v[0].dtype))


@register_op(
    "CollectTensor",
    inputs=lambda n: n > 0 and n % 2 == 0,
    outputs=(1, float("inf")),
    args=[Arg("num_to_collect", INT, -1, "how many tensors to keep (> 0)")],
    enforce_inplace=lambda i, o: i == o,
    input_docs=[("vectors", "TensorVectors (in place), then one tensor per vector")],
    output_docs=[("vectors", "the same vectors")],
    infer=_unknown,
    category="data",
)
class CollectTensor(Operator):
    """Reservoir-sample tensors into the vectors: the first ``num_to_collect`` visits append, later
    visit k replaces a uniform position in [0, k] if it is < num_to_collect (all vectors alike)."""

    def setup(self) -> None:
        if self.args.num_to_collect <= 0:
            raise self.arg_error(f"num_to_collect must be > 0, got {self.args.num_to_collect}")
        if len(self.inputs) != 2 * len(self.outputs):
            raise self.arg_error("needs one tensor input per vector")
        self._visited = 0

    def run(self) -> None:
        n, k = len(self.outputs), self.args.num_to_collect
        vectors = [_vector(self, i) for i in range(n)]
        tensors = [self.input(n + i) for i in range(n)]
        if self._visited >= k and any(len(v) != k for v in vectors):
            raise ShapeError(f"{self.describe()}: a vector's size differs from num_to_collect {k}")
        pos = self._visited if self._visited < k else int(self.rng.integers(0, self._visited + 1))
        for v, t in zip(vectors, tensors):
            if pos >= k:
                continue
            if pos >= len(v):
                v.append(t.copy())
            else:
                v[pos] = t.copy()
        self._visited += 1


should_not_do_gradient(
    "PackRecords", "UnPackRecords", "TrimDataset", "Append", "AtomicAppend",
    "CreateTensorVector", "TensorVectorSize", "ConcatTensorVector", "CollectTensor",
)  # fmt: skip
