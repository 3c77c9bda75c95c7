"""Ops that manage a tensor's storage rather than its values: ExtendTensor (grow in place, amortized) and
UnsafeCoalesce (copy several tensors into one buffer and make them views of it), as Caffe2's
``extend_tensor_op.cc`` and ``utility_ops.h``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.memory.allocator import check_elements
from framework.ops.gradient import should_not_do_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import INT, UNKNOWN, Arg, TensorSpec

# Caffe2's gCaffe2Alignment: 64 bytes from 2019 on (32 in the 2018 tree); UnsafeCoalesce pads each input to it
COALESCE_ALIGNMENT = 64


# -- ExtendTensor ----------------------------------------------------------------------------------------
@register_op(
    "ExtendTensor",
    inputs=2,
    args=[Arg("growthPct", INT, 40, "when the buffer must grow, grow it by at least this percentage")],
    input_docs=[("tensor", "the tensor to extend (the output, in place)"), ("new_indices", "int32 indices")],
    output_docs=[("extended_tensor", "input 0, grown so that every index of new_indices is inside it")],
    enforce_inplace={(0, 0)},
    input_types={1: "int"},
    infer=lambda args, ins: [UNKNOWN],
    category="shape",
)
class ExtendTensor(Operator):
    """Grow input 0 in place so that ``max(new_indices) + 1`` elements fit: its outer dimension is extended
    by ``max(new_indices) + 1 - size`` (size counts all its elements, as Caffe2 computes it) when that is
    positive, with amortized reallocation (``growthPct``); the new elements are zeros (b"" for strings).
    new_indices must have as many dims as the tensor. Empty new_indices leave it as it is (Caffe2 reads
    past them)."""

    def run(self) -> None:
        t = self.input_tensor(0)
        idx = self.input(1)
        x = self.input(0)
        if idx.ndim < 1 or idx.ndim != x.ndim:
            raise ShapeError(
                f"{self.describe()}: new_indices '{self.input_names[1]}' {list(idx.shape)} must have at least one "
                f"dim and as many as the tensor '{self.input_names[0]}' {list(x.shape)}"
            )
        if not idx.size:
            return
        old = x.size
        grow = int(idx.max()) + 1 - old
        if grow <= 0:
            return
        inner = int(np.prod(x.shape[1:], dtype=np.int64))
        check_elements((x.shape[0] + grow, inner), x.dtype.itemsize, f"the extended '{self.input_names[0]}'")
        t = self.output_tensor(0)
        t.extend(grow, self.args.growthPct)
        flat = t.mutable_data(x.dtype).reshape(-1)
        flat[old:] = b"" if flat.dtype == object else 0


should_not_do_gradient("ExtendTensor")


# -- UnsafeCoalesce --------------------------------------------------------------------------------------
def _padded(nbytes: int) -> int:
    return -(-nbytes // COALESCE_ALIGNMENT) * COALESCE_ALIGNMENT


def _coalesce_infer(args: Any, ins: list[TensorSpec]) -> list[TensorSpec]:
    total = 0
    for spec in ins:
        if not spec.known or spec.dtype is None:
            total = None
            break
        total += _padded(int(np.prod(spec.shape, dtype=np.int64)) * np.dtype(spec.dtype).itemsize)
    return list(ins) + [TensorSpec(None if total is None else (total,), np.dtype(np.uint8))]


@register_op(
    "UnsafeCoalesce",
    inputs=(1, float("inf")),
    outputs=(2, float("inf")),
    input_docs=[("X_i", "tensors of plain element types (numbers, bool)")],
    output_docs=[("Y_i", "X_i's values, now a view into the coalesced buffer"), ("coalesced", "uint8 buffer")],
    allow_inplace=lambda i, o: i == o,
    infer=_coalesce_infer,
    category="shape",
)
class UnsafeCoalesce(Operator):
    """Copy the N inputs into one uint8 buffer (the last output), each at an offset padded to 64 bytes
    (Caffe2's alignment; 32 in the 2018 tree), zeros between them, and make output i a view of input i's
    bytes in it: writing to one writes to the other ("unsafe": the outputs alias the buffer). Strings
    cannot be coalesced."""

    def run(self) -> None:
        n = len(self.inputs)
        if len(self.outputs) != n + 1:
            raise ShapeError(f"{self.describe()}: {n} inputs need {n + 1} outputs (one per input, then the buffer)")
        xs = [self.input(i) for i in range(n)]
        for i, x in enumerate(xs):
            if x.dtype == object:
                raise TypeMismatchError(
                    f"{self.describe()}: input {i} ('{self.input_names[i]}') holds strings; only plain element "
                    "types can be coalesced"
                )
        offsets, total = [], 0
        for x in xs:
            offsets.append(total)
            total += _padded(x.nbytes)
        xs = [np.array(x, order="C", copy=True) for x in xs]  # an input may be the output it is about to become
        buf = self.output(n, (total,), np.uint8)
        buf[...] = 0
        for i, (x, start) in enumerate(zip(xs, offsets)):
            view = buf[start : start + x.nbytes].view(x.dtype).reshape(x.shape)
            view[...] = x
            self.output_tensor(i).share_external(view)


should_not_do_gradient("UnsafeCoalesce")
