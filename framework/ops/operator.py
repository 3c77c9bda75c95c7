"""Operator: the base every op implementation derives from.

An Operator is built once from an OperatorDef and a Workspace. The base class
does the checks (arity, in-place rules, arguments) and binds the input and
output Blobs, so an op author writes only ``run()``:

    @register_op("Relu", infer=same_as_input(0), allow_inplace={(0, 0)})
    class Relu(Operator):
        "Y = max(0, X)."
        def run(self):
            x = self.input(0)
            np.maximum(x, 0, out=self.output(0, x.shape, x.dtype))

``input(i)`` returns a numpy view of input i's tensor; ``output(i, shape,
dtype)`` resizes output i and returns a writable view, reusing the buffer
when shape and dtype are unchanged (so a second run allocates nothing).

A failed op leaves no trace. Every ``run()`` is wrapped (``__init_subclass__``) so that:
the schema's declared input checks (``framework.ops.validation``) run first; each output
that ``output()``/``output_tensor()`` resizes or retypes is journaled (the blob's old object
and the tensor's old shape, type and storage; the new shape gets a fresh buffer, except in the
memory planner's shared blobs, which hold nothing observable), and if ``run()`` raises, the journal
is rolled back. What the journal cannot undo is data written
into a buffer the op reuses (same shape and type, or in-place inputs such as optimizer
state): an op must check everything that can fail before it writes there.
"""

from __future__ import annotations

import functools
import logging
from typing import Any, Sequence

import numpy as np

from framework.errors import ArgumentError, SchemaError, TypeMismatchError, UninitializedError
from framework.memory.allocator import check_elements
from framework.memory.blob import Blob
from framework.memory.int8_tensor import Int8TensorCPU
from framework.memory.tensor import Tensor
from framework.memory.workspace import Workspace
from framework.ops.arguments import Args, parse_args
from framework.ops.registry import schema_of
from framework.ops.schema import OpSchema
from framework.proto.framework_pb2 import DeviceOption, OperatorDef

log = logging.getLogger("framework.ops")


def describe_op(op_def: OperatorDef, index: int | None = None) -> str:
    """'op #3 FC "fc1"' style label for messages."""
    where = f"op #{index} " if index is not None and index >= 0 else "op "
    name = f' "{op_def.name}"' if op_def.name else ""
    return f"{where}{op_def.type}{name}"


def check_schema(schema: OpSchema, op_def: OperatorDef, index: int | None = None) -> None:
    """Arity and in-place rules of ``op_def`` against ``schema``; SchemaError naming the op."""
    where = describe_op(op_def, index)
    n_in, n_out = len(op_def.input), len(op_def.output)
    if not schema.input_count_ok(n_in):
        raise SchemaError(f"{where}: takes {schema.input_count_text()} inputs, got {n_in} ({list(op_def.input)})")
    if not schema.output_count_ok(n_out):
        raise SchemaError(
            f"{where}: produces {schema.output_count_text()} outputs, got {n_out} ({list(op_def.output)})"
        )
    for o, out_name in enumerate(op_def.output):
        for i, in_name in enumerate(op_def.input):
            if in_name == out_name and not schema.inplace_allowed(i, o):
                raise SchemaError(
                    f"{where}: input {i} and output {o} are both '{out_name}', "
                    f"but {op_def.type} does not allow this in-place use"
                )
    for i, o in schema.enforced_pairs(n_in, n_out):
        if op_def.input[i] != op_def.output[o]:
            raise SchemaError(
                f"{where}: output {o} ('{op_def.output[o]}') must be the same blob as input {i} "
                f"('{op_def.input[i]}'): {op_def.type} works in place"
            )


def _transactional(run: Any) -> Any:
    """``run`` preceded by the schema's input checks and rolled back (outputs) if it raises."""

    def run_checked(self: Operator) -> None:
        if self._journal is not None:  # a subclass's run() calling super().run()
            return run(self)
        journal: list[tuple] = []
        self._journal = journal
        try:
            for check in self.schema.checks:
                check(self)
            if self.schema.snapshot_inplace:
                _snapshot_inplace(self, journal)
            run(self)
        except BaseException:
            _rollback(journal)
            raise
        finally:
            self._journal = None

    functools.update_wrapper(run_checked, run)
    run_checked._transactional = True  # type: ignore[attr-defined]
    return run_checked


def _remember(journal: list, blob: Blob) -> None:
    for entry in journal:
        if entry[0] is blob:
            return
    obj = blob.held
    state = obj.snapshot() if type(obj) is Tensor else None
    journal.append((blob, obj, state))


def _snapshot_inplace(op: Operator, journal: list) -> None:
    """Journal the outputs that are also inputs with a copy of their values: an op that fails after
    writing into them in place (same shape, so no new buffer) gets them back by the rollback."""
    inputs = {id(b) for b in op.inputs}  # op.inputs holds these blobs for the whole call
    for blob in op.outputs:
        obj = blob.held
        if id(blob) in inputs and type(obj) is Tensor and obj.array is not None:
            if not any(entry[0] is blob for entry in journal):
                journal.append((blob, obj, obj.snapshot(), (obj.array, obj.array.copy())))


def _rollback(journal: list) -> None:
    for blob, obj, state, *saved in reversed(journal):
        blob.reset(obj)
        if state is not None:
            obj.restore(state)
        if saved:
            array, values = saved[0]
            np.copyto(array, values)


class Operator:
    """Base of all operators; see module doc."""

    schema: OpSchema = None  # type: ignore[assignment]  # set by register_op on each operator class
    _journal: list | None = None  # the outputs changed by the current run (see module doc)
    # (output index, shape, dtype) -> (TypeMeta, elements, bytes) of the shapes this op has written into
    # the memory planner's shared blobs: a shared blob changes shape at every op that writes it, and
    # output() re-views its buffer (Tensor.view_within) instead of paying a resize, a type lookup and a
    # journal entry per call, which weigh on small nets. Nothing a caller observes lives in those blobs,
    # so they are not journaled for a rollback.
    _planned: dict | None = None

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        run = cls.__dict__.get("run")
        if run is not None and not getattr(run, "_transactional", False):
            cls.run = _transactional(run)  # type: ignore[method-assign]

    def __init__(self, op_def: OperatorDef, ws: Workspace, index: int | None = None) -> None:
        schema = schema_of(op_def)
        self.schema = schema
        self.op_def = op_def
        self.type = op_def.type
        self.name = op_def.name
        self.index = -1 if index is None else index
        self.workspace = ws
        where = describe_op(op_def, index)
        check_schema(schema, op_def, index)
        self.args: Args = parse_args(schema, op_def.arg, where, len(op_def.input), len(op_def.output))
        self.device_option: DeviceOption = op_def.device_option
        if op_def.HasField("device_option") and op_def.device_option.device_type != 0:
            log.debug("%s: device_type %d runs on the CPU implementation", where, op_def.device_option.device_type)
        if op_def.engine:
            log.debug("%s: engine %s runs on the default CPU implementation", where, op_def.engine)
        self.input_names: list[str] = list(op_def.input)
        self.output_names: list[str] = list(op_def.output)
        self.inputs: list[Blob] = [ws.create_blob(n) for n in self.input_names]
        self.outputs: list[Blob] = [ws.create_blob(n) for n in self.output_names]
        self._rng: np.random.Generator | None = None
        self.debug_info = op_def.debug_info
        self.setup()

    def setup(self) -> None:
        """Hook for per-op preparation after arguments are parsed (checks, caches)."""

    def run(self) -> None:
        raise NotImplementedError(f"{self.type} has no run()")

    def cancel(self) -> None:
        """Stop waiting on anything outside the net (Caffe2's ``OperatorBase::Cancel``; its net's ``cancel()``
        calls it, possibly from another thread, while ``run`` may be blocked). Nothing to do for most ops."""

    # -- helpers for op authors -------------------------------------------------
    def input(self, i: int) -> np.ndarray:
        """Numpy view of input ``i``'s tensor (no copy)."""
        blob = self.inputs[i]
        arr = blob.array
        if arr is not None:
            return arr
        obj = blob.held
        if type(obj) is Tensor:
            return self._input_data(i, obj)
        raise self._input_type_error(i, obj)

    def input_tensor(self, i: int) -> Tensor:
        obj = self.inputs[i].held
        if type(obj) is Tensor:
            return obj
        raise self._input_type_error(i, obj)

    def _input_data(self, i: int, t: Tensor) -> np.ndarray:
        try:
            return t.data()
        except UninitializedError as e:
            raise UninitializedError(
                f"input {i} ('{self.input_names[i]}') of {self.describe()} has no data: {e}. "
                "Feed it or run the net that produces it first"
            ) from None

    def _input_type_error(self, i: int, obj: Any) -> Exception:
        if obj is None:
            return UninitializedError(
                f"input {i} ('{self.input_names[i]}') of {self.describe()} is empty: "
                "feed it or run the net that produces it (e.g. the init net) first"
            )
        return TypeMismatchError(
            f"input {i} ('{self.input_names[i]}') of {self.describe()} holds "
            f"{type(obj).__qualname__}, expected a Tensor"
        )

    def output(self, i: int, shape: Sequence[int], dtype: Any) -> np.ndarray:
        """Writable view of output ``i`` resized to ``shape`` with ``dtype``; reuses the buffer.

        A new shape or type is checked against the allocation limit and, inside ``run()``,
        gets a fresh buffer (the old one is kept for the rollback if the op fails).
        """
        blob = self.outputs[i]
        arr = blob.reuse_view(shape, dtype)
        if arr is not None:
            return arr
        t = blob.held
        if type(t) is Tensor:
            known = self._planned
            if known is not None and type(shape) is tuple:
                view = known.get((i, shape, dtype))
                if view is not None:
                    arr = t.view_within(shape, *view)
                    if arr is not None:
                        return arr
        shape = tuple(shape)
        check_elements(shape, np.dtype(dtype).itemsize, f"output {i} ('{self.output_names[i]}') of {self.describe()}")
        journal = self._journal
        if journal is not None:
            _remember(journal, blob)
        if type(t) is not Tensor:
            t = blob.get_mutable(Tensor)
        elif journal is not None and t.storage is not None and not t.shares_data and not blob.planned:
            arr = t.array
            if arr is not None and arr.dtype == dtype and arr.size == int(np.prod(shape, dtype=np.int64)):
                # the same elements in another shape (a later op reshaped the blob in place): reshape back and
                # write in place, as for an unchanged shape; the journal restores the dims on a failure
                t.reshape(shape)
                t.version += 1
                return t.data()
            # the journal keeps the old storage for the rollback; the new data goes to the spare buffer
            # (not for the memory planner's shared blobs: nothing observable lives there)
            return t.resize_aside(shape, dtype)
        t.resize(shape)
        arr = t.mutable_data(dtype)
        if blob.planned:  # the next run's call with this shape re-views the buffer directly
            if self._planned is None:
                self._planned = {}
            self._planned[(i, shape, dtype)] = (t.meta, t.numel, arr.nbytes)
        return arr

    def output_tensor(self, i: int) -> Tensor:
        """Output ``i``'s Tensor (made one if the blob holds something else); journaled inside ``run()``."""
        blob = self.outputs[i]
        journal = self._journal
        if journal is not None:
            _remember(journal, blob)
        t = blob.held
        if type(t) is not Tensor:
            t = blob.get_mutable(Tensor)
        return t

    @property
    def rng(self) -> np.random.Generator:
        """This op's random generator: MT19937 seeded from DeviceOption.random_seed, else fresh entropy."""
        if self._rng is None:
            if self.device_option.HasField("random_seed"):
                bitgen = np.random.MT19937(self.device_option.random_seed)
            else:
                bitgen = np.random.MT19937()
            self._rng = np.random.Generator(bitgen)
        return self._rng

    def arg_error(self, message: str) -> ArgumentError:
        return ArgumentError(f"{self.describe()}: {message}")

    def describe(self) -> str:
        return describe_op(self.op_def, self.index)

    def context(self) -> str:
        """Multi-line description of the op with its blobs and their shapes, for errors."""
        lines = [self.describe()]
        for label, names, blobs in (
            ("input", self.input_names, self.inputs),
            ("output", self.output_names, self.outputs),
        ):
            for k, (n, b) in enumerate(zip(names, blobs)):
                lines.append(f"  {label} {k} '{n}': {_blob_summary(b)}")
        return "\n".join(lines)

    def __repr__(self) -> str:
        return f"<{self.describe()}: {self.input_names} -> {self.output_names}>"


def _blob_summary(blob: Blob) -> str:
    obj = blob.held
    if obj is None:
        return "empty"
    if isinstance(obj, Tensor):
        if obj.is_allocated and obj.meta is not None:
            return f"{obj.meta.name} {list(obj.dims)}"
        return f"unallocated tensor {list(obj.dims) if obj.is_initialized else ''}"
    if isinstance(obj, Int8TensorCPU) and obj.t.array is not None:
        arr = obj.t.array
        return f"Int8TensorCPU {arr.dtype} {list(arr.shape)} (scale {obj.scale}, zero_point {obj.zero_point})"
    return type(obj).__qualname__
