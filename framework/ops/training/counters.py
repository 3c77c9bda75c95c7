"""Counters, mutexes and atomics (Caffe2's counter_ops, atomic_ops and AtomicIter).

The objects live in blobs and are thread-safe, so ops of concurrent steps or
of a ``dag`` net may share them:

- ``Counter`` (``CreateCounter``): an int64 behind a lock. It serializes as
  Caffe2 does (``BlobProto.type = "std::unique_ptr<Counter<int64_t>>"``,
  an int64 tensor [1] holding the count), so checkpoints keep it;
- ``Mutex`` (``CreateMutex``): a lock; serializes as Caffe2 does (type
  ``"std::unique_ptr<std::mutex>"``, empty content) and loads as a new,
  unlocked mutex;
- ``AtomicBool`` (``CreateAtomicBool``): no serializer, as in Caffe2, so
  saving one is a clear SerializationError.
"""

from __future__ import annotations

import threading

import numpy as np

from framework.errors import SerializationError, ShapeError, TypeMismatchError
from framework.memory.blob import Blob
from framework.memory.serialize import register_blob_serializer
from framework.ops.gradient import no_gradient, should_not_do_gradient
from framework.ops.object_blobs import held, register_create_op, unknown_outputs
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import INT, Arg, TensorSpec
from framework.ops.training.stats import default_registry
from framework.proto.framework_pb2 import BlobProto, TensorProto

_INT64 = np.dtype(np.int64)
_INT32 = np.dtype(np.int32)
_BOOL = np.dtype(np.bool_)
_INT64_MAX = np.iinfo(np.int64).max


class Counter:
    """A thread-safe int64 count."""

    def __init__(self, count: int = 0) -> None:
        self._count = int(count)
        self._lock = threading.Lock()

    def count_down(self) -> bool:
        """Decrement; True (done) if the count was already <= 0 before."""
        with self._lock:
            done = self._count <= 0
            self._count -= 1
            return done

    def count_up(self) -> int:
        with self._lock:
            prev = self._count
            self._count += 1
            return prev

    def retrieve(self) -> int:
        with self._lock:
            return self._count

    def check_done(self) -> bool:
        with self._lock:
            return self._count <= 0

    def reset(self, init_count: int) -> int:
        with self._lock:
            prev, self._count = self._count, int(init_count)
            return prev

    def __repr__(self) -> str:
        return f"Counter({self._count})"


class Mutex:
    """A lock in a blob (Caffe2's ``unique_ptr<std::mutex>``)."""

    def __init__(self) -> None:
        self.lock = threading.Lock()

    def __repr__(self) -> str:
        return "Mutex(locked)" if self.lock.locked() else "Mutex()"


class AtomicBool:
    """A bool set from any thread (Caffe2's ``unique_ptr<std::atomic<bool>>``)."""

    def __init__(self) -> None:
        self.value = False

    def __repr__(self) -> str:
        return f"AtomicBool({self.value})"


COUNTER_TYPE = "std::unique_ptr<Counter<int64_t>>"
MUTEX_TYPE = "std::unique_ptr<std::mutex>"


def _serialize_counter(c: Counter, name: str) -> BlobProto:
    proto = BlobProto(name=name, type=COUNTER_TYPE)
    proto.tensor.name = name
    proto.tensor.data_type = TensorProto.INT64
    proto.tensor.dims.append(1)
    proto.tensor.int64_data.append(c.retrieve())
    return proto


def _deserialize_counter(proto: BlobProto, blob: Blob) -> None:
    t = proto.tensor
    if list(t.dims) != [1] or t.data_type != TensorProto.INT64 or len(t.int64_data) != 1:
        raise SerializationError(
            f"counter blob '{proto.name}': expected an int64 tensor [1] with one value, got data_type "
            f"{t.data_type} dims {list(t.dims)} and {len(t.int64_data)} int64 values"
        )
    blob.reset(Counter(t.int64_data[0]))


def _serialize_mutex(m: Mutex, name: str) -> BlobProto:
    return BlobProto(name=name, type=MUTEX_TYPE, content=b"")


def _deserialize_mutex(proto: BlobProto, blob: Blob) -> None:
    blob.reset(Mutex())


register_blob_serializer(Counter, COUNTER_TYPE, _serialize_counter, _deserialize_counter)
register_blob_serializer(Mutex, MUTEX_TYPE, _serialize_mutex, _deserialize_mutex)


_unknown = unknown_outputs


def _scalar(dtype):
    def infer(args, ins):
        return [TensorSpec((), np.dtype(dtype))] * args.num_outputs

    return infer


def _init_count_ok(op: Operator) -> None:
    if op.args.init_count < 0:
        raise op.arg_error(f"negative init_count is not permitted, got {op.args.init_count}")


register_create_op(
    "CreateCounter",
    lambda op: Counter(op.args.init_count),
    "Create a count-down counter holding ``init_count``.",
    ("counter", "the new Counter"),
    "training",
    args=[Arg("init_count", INT, 0, "initial count, >= 0")],
    check=_init_count_ok,
    module=__name__,
)


@register_op(
    "ResetCounter",
    inputs=1,
    outputs=(0, 1),
    args=[Arg("init_count", INT, 0, "value to reset to, >= 0")],
    input_docs=[("counter", "a Counter")],
    output_docs=[("previous_value", "(optional) int64 scalar: the count before the reset")],
    infer=_scalar(np.int64),
    category="training",
)
class ResetCounter(Operator):
    """Set the counter to ``init_count``; optionally output the previous count."""

    def setup(self) -> None:
        _init_count_ok(self)

    def run(self) -> None:
        counter = held(self, 0, Counter, "CreateCounter")
        if self.outputs:
            out = self.output(0, (), _INT64)
            out[...] = counter.reset(self.args.init_count)
        else:
            counter.reset(self.args.init_count)


def _counter_op(type_name: str, doc: str, out_doc: str, dtype, method: str):
    @register_op(
        type_name,
        doc=doc,
        inputs=1,
        outputs=1,
        input_docs=[("counter", "a Counter")],
        output_docs=[(out_doc.split(":")[0], out_doc)],
        infer=_scalar(dtype),
        category="training",
    )
    class _CounterOp(Operator):
        def run(self) -> None:
            counter = held(self, 0, Counter, "CreateCounter")
            self.output(0, (), dtype)[...] = getattr(counter, method)()

    _CounterOp.__name__ = _CounterOp.__qualname__ = type_name
    return _CounterOp


_counter_op(
    "CountDown",
    "If the count is > 0, decrease it by one and output false; otherwise output true (the count still "
    "decreases, as Caffe2's ``count_-- > 0``).",
    "done: bool scalar, false unless the count was <= 0",
    _BOOL,
    "count_down",
)
_counter_op(
    "CheckCounterDone",
    "Output true if the count is <= 0.",
    "done: bool scalar",
    _BOOL,
    "check_done",
)
_counter_op(
    "CountUp",
    "Increase the count by one and output the previous value, atomically.",
    "previous_count: int64 scalar, the count before this op",
    _INT64,
    "count_up",
)
_counter_op("RetrieveCount", "Output the current count.", "count: int64 scalar", _INT64, "retrieve")


register_create_op(
    "CreateMutex",
    lambda op: Mutex(),
    "Create an unlocked mutex (for AtomicFetchAdd, AtomicIter).",
    ("mutex_ptr", "the new, unlocked Mutex"),
    "training",
    module=__name__,
)


def _fetch_add_infer(dtype):
    def infer(args, ins):
        return [TensorSpec((), np.dtype(dtype)), TensorSpec((), np.dtype(dtype))]

    return infer


def _fetch_add(type_name: str, dtype) -> None:
    dt = np.dtype(dtype)
    doc = (
        f"Under the mutex, output ``mut_value + increment`` and the prior ``mut_value`` ({dt.name} scalars); "
        "in place on input 1 this is an atomic fetch-add. Integer overflow wraps around, as in C++."
    )

    @register_op(
        type_name,
        doc=doc,
        inputs=3,
        outputs=2,
        allow_inplace={(1, 0)},
        input_docs=[
            ("mutex_ptr", "a Mutex"),
            ("mut_value", f"{dt.name} scalar to add to"),
            ("increment", f"{dt.name} scalar to add"),
        ],
        output_docs=[
            ("mut_value", "the sum (usually the same blob as input 1)"),
            ("fetched_value", "the value before"),
        ],
        infer=_fetch_add_infer(dt),
        category="training",
    )
    class _FetchAdd(Operator):
        def run(self) -> None:
            mutex = held(self, 0, Mutex, "CreateMutex")
            a, b = self.input(1), self.input(2)
            for k, x in ((1, a), (2, b)):
                if x.dtype != dt or x.size != 1:
                    raise TypeMismatchError(
                        f"{self.describe()}: input {k} ('{self.input_names[k]}') must be a one-element {dt.name} "
                        f"tensor, got {x.dtype} {list(x.shape)}"
                    )
            with mutex.lock:
                prev = a.reshape(-1)[:1].copy()
                total = np.add(prev, b.reshape(-1)[:1])  # wraps around on overflow, as C++ integers
                self.output(1, (), dt)[...] = prev[0]
                self.output(0, (), dt)[...] = total[0]

    _FetchAdd.__name__ = _FetchAdd.__qualname__ = type_name


_fetch_add("AtomicFetchAdd", np.int32)
_fetch_add("AtomicFetchAdd64", np.int64)


@register_op(
    "AtomicIter",
    inputs=2,
    outputs=1,
    enforce_inplace={(1, 0)},
    input_docs=[("mutex", "a Mutex"), ("iter", "int64 counter holding one element")],
    output_docs=[("iter", "the same blob, incremented by one")],
    infer=lambda args, ins: [TensorSpec(ins[1].shape if len(ins) > 1 else None, _INT64)],
    category="training",
)
class AtomicIter(Operator):
    """Iter under a mutex: add one to the int64 counter, atomically (e.g. Hogwild SGD). Each step also adds
    one to the stat ``atomic_iter/stats/<counter blob>/num_iter`` of the workspace's StatRegistry, as
    Caffe2's op reports it (``StatRegistryExport`` lists it)."""

    def setup(self) -> None:
        self._stat_key = f"atomic_iter/stats/{self.input_names[1]}/num_iter"

    def run(self) -> None:
        mutex = held(self, 0, Mutex, "CreateMutex")
        t = self.input_tensor(1)
        arr = self.input(1)
        if arr.dtype != _INT64 or arr.size != 1:
            raise TypeMismatchError(
                f"{self.describe()}: input 1 ('{self.input_names[1]}') must be a one-element int64 tensor, "
                f"got {arr.dtype} {list(arr.shape)}"
            )
        with mutex.lock:
            flat = arr.reshape(-1)
            value = int(flat[0])
            if value < 0:
                raise ShapeError(f"{self.describe()}: previous iteration number {value} is negative")
            if value == _INT64_MAX:
                raise ShapeError(f"{self.describe()}: the iteration counter would overflow")
            flat[0] = value + 1
            t.version += 1
        default_registry(self.workspace).update(self._stat_key, 1)


register_create_op(
    "CreateAtomicBool",
    lambda op: AtomicBool(),
    "Create an atomic bool holding false.",
    ("atomic_bool", "the new AtomicBool (false)"),
    "training",
    module=__name__,
)


def _condition(op: Operator, i: int) -> bool:
    c = op.input(i)
    if c.dtype != _BOOL or c.size < 1:
        raise TypeMismatchError(
            f"{op.describe()}: input {i} ('{op.input_names[i]}') must be a non-empty bool tensor, "
            f"got {c.dtype} {list(c.shape)}"
        )
    return bool(c.reshape(-1)[0])


@register_op(
    "ConditionalSetAtomicBool",
    inputs=2,
    outputs=0,
    input_docs=[("atomic_bool", "an AtomicBool"), ("condition", "bool tensor; its first element is read")],
    infer=_unknown,
    category="training",
)
class ConditionalSetAtomicBool(Operator):
    """Set the atomic bool to true if the condition's first element is true (never resets it)."""

    def run(self) -> None:
        ab = held(self, 0, AtomicBool, "CreateAtomicBool")
        if _condition(self, 1):
            ab.value = True


@register_op(
    "CheckAtomicBool",
    inputs=1,
    outputs=1,
    input_docs=[("atomic_bool", "an AtomicBool")],
    output_docs=[("value", "bool [1]: the atomic bool's value")],
    infer=lambda args, ins: [TensorSpec((1,), _BOOL)],
    category="training",
)
class CheckAtomicBool(Operator):
    """Copy the atomic bool's value into a bool tensor of shape [1]."""

    def run(self) -> None:
        ab = held(self, 0, AtomicBool, "CreateAtomicBool")
        self.output(0, (1,), _BOOL)[0] = ab.value


should_not_do_gradient(
    "CreateCounter",
    "ResetCounter",
    "CountDown",
    "CheckCounterDone",
    "CountUp",
    "RetrieveCount",
    "CreateMutex",
    "AtomicFetchAdd",
    "AtomicFetchAdd64",
    "CreateAtomicBool",
    "ConditionalSetAtomicBool",
    "CheckAtomicBool",
)
no_gradient("AtomicIter")
