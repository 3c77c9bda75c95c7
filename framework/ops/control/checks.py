"""Run-time checks and blob lifetime: Assert, EnforceFinite, Free, Crash, and Conditional."""

from __future__ import annotations

import os
import signal

import numpy as np

from framework.errors import OperatorError, ShapeError, TypeMismatchError
from framework.ops.gradient import no_gradient, should_not_do_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import STRING, UNKNOWN, Arg


class AssertionFailedError(OperatorError):
    """An Assert/EnforceFinite op found what it checks for."""


@register_op(
    "Assert",
    inputs=1,
    outputs=0,
    input_docs=[("X", "bool, int32 or int64 tensor: every element must be true (non-zero)")],
    args=[Arg("error_msg", STRING, "", "Message appended to the error when the assertion fails")],
    infer=lambda args, ins: [],
    category="control",
)
class Assert(Operator):
    """Takes in a tensor of type bool, int, long, or long long and checks if all values are True
    when coerced into a boolean. In other words, for non-bool types this asserts that all values
    in the tensor are non-zero. If a value is False after coerced into a boolean, the operator
    throws an error naming the first failing element. Else, if all values are True, nothing is
    returned. An empty tensor passes."""

    def run(self) -> None:
        x = self.input(0)
        if x.dtype not in (np.bool_, np.int32, np.int64):
            raise TypeMismatchError(
                f"{self.describe()}: input 'X' ('{self.input_names[0]}') must be bool, int32 or int64, found {x.dtype}"
            )
        flat = x.reshape(-1)
        bad = np.flatnonzero(flat == 0)
        if bad.size:
            i = int(bad[0])
            msg = (
                f"{self.describe()}: Assert failed for element {i} in tensor '{self.input_names[0]}', value: {flat[i]}"
            )
            if self.args.error_msg:
                msg += f"\nError message: {self.args.error_msg}"
            raise AssertionFailedError(msg)


@register_op(
    "EnforceFinite",
    inputs=1,
    outputs=0,
    input_docs=[("input", "float tensor to check")],
    infer=lambda args, ins: [],
    category="control",
)
class EnforceFinite(Operator):
    """Raise if the input tensor contains a NaN or an infinity (the error names the first
    offending element). Otherwise do nothing."""

    def run(self) -> None:
        x = self.input(0)
        if x.dtype.kind != "f":
            raise TypeMismatchError(
                f"{self.describe()}: input '{self.input_names[0]}' must be a float tensor, found {x.dtype}"
            )
        if x.size and not np.isfinite(x).all():
            flat = x.reshape(-1)
            i = int(np.flatnonzero(~np.isfinite(flat))[0])
            raise AssertionFailedError(
                f"{self.describe()}: Tensor '{self.input_names[0]}' contains NaN or inf: element {i} is {flat[i]}"
            )


@register_op(
    "Free",
    inputs=(1, float("inf")),
    outputs=lambda n: n >= 1,
    input_docs=[("blobs", "Blobs to free")],
    output_docs=[("blobs", "The same blobs, now empty")],
    enforce_inplace="all",
    infer=lambda args, ins: [UNKNOWN] * args.num_outputs,
    category="control",
)
class Free(Operator):
    """Frees the content of the blobs. The input and output blobs should be one-to-one inplace:
    each blob is reset to empty (its memory is released)."""

    def setup(self) -> None:
        if len(self.inputs) != len(self.outputs):
            raise self.arg_error(f"takes as many outputs as inputs, got {len(self.inputs)} and {len(self.outputs)}")

    def run(self) -> None:
        for b in self.outputs:
            b.reset()


@register_op("Crash", inputs=0, outputs=0, infer=lambda args, ins: [], category="control")
class Crash(Operator):
    """Crashes the program (raises SIGABRT in this process, as Caffe2's Crash op). Use for
    testing crash handling only: the process ends with no Python cleanup."""

    def run(self) -> None:  # pragma: no cover (runs in a subprocess in the tests)
        os.kill(os.getpid(), signal.SIGABRT)


def _conditional_infer(args, ins):
    return [ins[1] if len(ins) > 1 else UNKNOWN]


@register_op(
    "Conditional",
    inputs=3,
    outputs=1,
    input_docs=[
        ("Condition", "Boolean 1-D tensor to select DataT or DataF"),
        ("DataT", "Data to use when True"),
        ("DataF", "Data to use when False"),
    ],
    output_docs=[("DataO", "Output data after applying ConditionalOp")],
    infer=_conditional_infer,
    category="control",
)
class Conditional(Operator):
    """Given a 1-D tensor of boolean values, apply conditional operator along the first
    dimension of DataT and DataF and return DataO: row i of DataO is row i of DataT where
    Condition[i] is true, else row i of DataF. DataT and DataF must have the exact same shape
    and type, and their first dimension must equal the length of Condition."""

    def run(self) -> None:
        cond, t, f = self.input(0), self.input(1), self.input(2)
        names = self.input_names
        if cond.dtype != np.bool_:
            raise TypeMismatchError(f"{self.describe()}: Condition '{names[0]}' must be bool, found {cond.dtype}")
        if cond.ndim != 1:
            raise ShapeError(f"{self.describe()}: Condition '{names[0]}' must be 1-D, found shape {list(cond.shape)}")
        if t.ndim < 1 or t.shape[0] != cond.shape[0]:
            raise ShapeError(
                f"{self.describe()}: DataT '{names[1]}' must have first dimension {cond.shape[0]} "
                f"(the length of Condition), found shape {list(t.shape)}"
            )
        if t.shape != f.shape:
            raise ShapeError(
                f"{self.describe()}: DataT '{names[1]}' and DataF '{names[2]}' must have the same shape, "
                f"found {list(t.shape)} and {list(f.shape)}"
            )
        if t.dtype != f.dtype:
            raise TypeMismatchError(
                f"{self.describe()}: DataT '{names[1]}' and DataF '{names[2]}' must have the same type, "
                f"found {t.dtype} and {f.dtype}"
            )
        out = self.output(0, t.shape, t.dtype)
        mask = cond.reshape((-1,) + (1,) * (t.ndim - 1))
        np.copyto(out, np.where(mask, t, f))


no_gradient("Conditional", "Assert", "Crash")
should_not_do_gradient("EnforceFinite", "Free")
