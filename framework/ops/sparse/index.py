"""A growing id -> index map held in a blob (Caffe2's ``index_ops``): ``{Int,Long,String}IndexCreate``,
``IndexGet``, ``IndexLoad``, ``IndexStore``, ``IndexFreeze``, ``IndexSize``.

Keys get consecutive indices from 1 in order of first sight; 0 is reserved for unknown keys (what a frozen
index returns for them). ``max_elements`` counts the 0 entry too, so at most ``max_elements - 1`` keys fit;
inserting beyond is an error. ``IndexSize`` returns the next index to hand out (keys + 1), as Caffe2's code
does. The blob serializes as Caffe2's (type ``std::unique_ptr<caffe2::IndexBase>``, the keys as a tensor,
``"<max_elements> <frozen>"`` as content), so checkpoints carry indices. No gradients.
"""

from __future__ import annotations

import threading

import numpy as np

from framework.errors import FrameworkError, SerializationError, ShapeError, TypeMismatchError
from framework.memory.blob import Blob
from framework.memory.serialize import register_blob_serializer
from framework.memory.tensor_proto import tensor_from_proto, tensor_to_proto
from framework.ops.gradient import no_gradient, should_not_do_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import INT, UNKNOWN, Arg, TensorSpec
from framework.proto.framework_pb2 import BlobProto

I64 = np.dtype(np.int64)
INDEX_TYPE = "std::unique_ptr<caffe2::IndexBase>"
INT32_MAX = 2**31 - 1
KEY_KINDS = {"int32": np.dtype(np.int32), "int64": I64, "string": np.dtype(object)}


class Index:
    """The map itself: keys of one kind (int32, int64 or string bytes) -> int64 indices from 1."""

    def __init__(self, kind: str, max_elements: int = INT32_MAX) -> None:
        self.kind = kind
        self.max_elements = int(max_elements)
        self.frozen = False
        self.ids: dict = {}
        self.lock = threading.Lock()

    def next_id(self) -> int:
        return len(self.ids) + 1

    def get(self, keys: list) -> np.ndarray:
        out = np.empty(len(keys), I64)
        with self.lock:
            if self.frozen:
                for i, k in enumerate(keys):
                    out[i] = self.ids.get(k, 0)
                return out
            new = [k for k in dict.fromkeys(keys) if k not in self.ids]
            if self.next_id() + len(new) > self.max_elements:
                raise FrameworkError(f"index max size reached ({self.max_elements} entries including 0)")
            for k in new:
                self.ids[k] = self.next_id()
            for i, k in enumerate(keys):
                out[i] = self.ids[k]
        return out

    def load(self, keys: list) -> None:
        if len(keys) > self.max_elements:
            raise FrameworkError(f"cannot load index: {len(keys)} keys exceed max_elements {self.max_elements}")
        ids = {}
        for i, k in enumerate(keys):
            if k in ids:
                raise FrameworkError(f"repeated element {k!r}: cannot load into the index")
            ids[k] = i + 1
        with self.lock:
            self.ids = ids

    def keys(self) -> list:
        with self.lock:
            return list(self.ids)  # insertion order is index order


def as_keys(op: Operator, i: int, kind: str | None = None) -> list:
    x = op.input(i)
    found = "string" if x.dtype == object else str(x.dtype)
    if found not in KEY_KINDS or (kind is not None and found != kind):
        raise TypeMismatchError(
            f"{op.describe()}: keys '{op.input_names[i]}' are {x.dtype}, expected "
            f"{kind or 'int32, int64 or string'} keys"
        )
    flat = x.reshape(-1)
    return [bytes(v) if isinstance(v, (bytes, str)) and not isinstance(v, bytes) else v for v in flat.tolist()]


def held_index(op: Operator, i: int) -> Index:
    obj = op.inputs[i].held
    if not isinstance(obj, Index):
        what = "nothing" if obj is None else type(obj).__qualname__
        raise TypeMismatchError(
            f"{op.describe()}: input {i} ('{op.input_names[i]}') holds {what}, expected an index "
            "(made by IntIndexCreate, LongIndexCreate or StringIndexCreate)"
        )
    return obj


def _key_array(index: Index, keys: list) -> np.ndarray:
    dtype = KEY_KINDS[index.kind]
    if index.kind == "string":
        arr = np.empty(len(keys), object)
        arr[:] = keys
        return arr
    return np.array(keys, dtype)


def _unknown(args, ins):
    return [UNKNOWN]


for _name, _kind in (("IntIndexCreate", "int32"), ("LongIndexCreate", "int64"), ("StringIndexCreate", "string")):

    def _run(self, _kind=_kind):
        if self.args.max_elements < 1:
            raise self.arg_error(f"max_elements must be at least 1, got {self.args.max_elements}")
        self.outputs[0].reset(Index(_kind, self.args.max_elements))

    register_op(
        _name,
        inputs=0,
        args=[Arg("max_elements", INT, INT32_MAX, "entries allowed, including the 0 entry")],
        output_docs=[("handle", f"a new, empty index of {_kind} keys")],
        infer=_unknown,
        category="sparse",
    )(
        type(
            _name,
            (Operator,),
            {
                "run": _run,
                "__doc__": f"Create an index that maps {_kind} keys to consecutive int64 indices from 1 "
                "(0 is reserved for unknown keys).",
            },
        )
    )


@register_op(
    "IndexGet",
    inputs=2,
    input_docs=[("handle", "an index"), ("keys", "keys to look up (any shape)")],
    output_docs=[("indices", "int64, keys' shape: new keys are added unless the index is frozen (then 0)")],
    infer=lambda args, ins: [TensorSpec(ins[1].shape, I64)],
    category="sparse",
)
class IndexGet(Operator):
    """Indices of keys, adding unseen keys (error past max_elements); a frozen index gives 0 for them."""

    def run(self) -> None:
        index = held_index(self, 0)
        keys = as_keys(self, 1, index.kind)
        out = index.get(keys)
        self.output(0, self.input(1).shape, I64)[...] = out.reshape(self.input(1).shape)


@register_op(
    "IndexLoad",
    inputs=2,
    args=[Arg("skip_first_entry", INT, 0, "1: skip the first key (aligned with an embedding's 0 row)")],
    input_docs=[("handle", "an index"), ("items", "1-D keys; key k gets index k + 1")],
    output_docs=[("handle", "the same index")],
    enforce_inplace={(0, 0)},
    infer=_unknown,
    category="sparse",
)
class IndexLoad(Operator):
    """Replace the index's contents by ``items`` (repeated keys are an error)."""

    def run(self) -> None:
        index = held_index(self, 0)
        keys = as_keys(self, 1, index.kind)
        if self.args.skip_first_entry:
            if not keys:
                raise ShapeError(f"{self.describe()}: skip_first_entry needs at least one item")
            keys = keys[1:]
        try:
            index.load(keys)
        except FrameworkError as e:
            raise ShapeError(f"{self.describe()}: {e}") from None


@register_op(
    "IndexStore",
    input_docs=[("handle", "an index")],
    output_docs=[("items", "1-D keys in index order (index 1 first)")],
    infer=lambda args, ins: [TensorSpec((None,), None)],
    category="sparse",
)
class IndexStore(Operator):
    """The index's keys as a tensor, in index order."""

    def run(self) -> None:
        index = held_index(self, 0)
        arr = _key_array(index, index.keys())
        self.output(0, arr.shape, arr.dtype)[...] = arr


@register_op(
    "IndexFreeze",
    input_docs=[("handle", "an index")],
    output_docs=[("handle", "the same index, frozen")],
    enforce_inplace={(0, 0)},
    infer=_unknown,
    category="sparse",
)
class IndexFreeze(Operator):
    """Stop adding keys: IndexGet then maps unknown keys to 0."""

    def run(self) -> None:
        held_index(self, 0).frozen = True


@register_op(
    "IndexSize",
    input_docs=[("handle", "an index")],
    output_docs=[("size", "int64 scalar: the next index to hand out (keys + 1, Caffe2's count)")],
    infer=lambda args, ins: [TensorSpec((), I64)],
    category="sparse",
)
class IndexSize(Operator):
    """The index's size as Caffe2 reports it: keys + 1 (the 0 entry counts)."""

    def run(self) -> None:
        self.output(0, (), I64)[...] = held_index(self, 0).next_id()


no_gradient("IntIndexCreate", "LongIndexCreate", "StringIndexCreate", "IndexGet")
should_not_do_gradient("IndexFreeze", "IndexLoad", "IndexStore", "IndexSize")


def _serialize(index: Index, name: str) -> BlobProto:
    proto = BlobProto(name=name, type=INDEX_TYPE)
    proto.tensor.CopyFrom(tensor_to_proto(_key_array(index, index.keys()), name, typed=index.kind == "string"))
    proto.content = f"{index.max_elements} {int(index.frozen)}".encode()
    return proto


def _deserialize(proto: BlobProto, blob: Blob) -> None:
    keys = tensor_from_proto(proto.tensor).data()
    kind = "string" if keys.dtype == object else str(keys.dtype)
    if kind not in KEY_KINDS:
        raise SerializationError(f"index blob '{proto.name}': keys of type {keys.dtype} cannot form an index")
    try:
        max_elements, frozen = (int(v) for v in proto.content.decode().split())
    except (UnicodeDecodeError, ValueError) as e:
        raise SerializationError(
            f"index blob '{proto.name}': content {proto.content[:40]!r} is not '<max> <frozen>'"
        ) from e
    index = Index(kind, max_elements)
    try:
        index.load(keys.reshape(-1).tolist())
    except FrameworkError as e:
        raise SerializationError(f"index blob '{proto.name}': {e}") from None
    index.frozen = bool(frozen)
    blob.reset(index)


register_blob_serializer(Index, INDEX_TYPE, _serialize, _deserialize)
