"""Inference rewrite: an Add of two tensors of one shape becomes a Sum, so a residual Add fuses into its conv.

The pass fuses a residual ``Sum`` into the Conv producing one operand (``optimize.fuse_sum``). Caffe2 nets
and ONNX graphs whose shapes the importer could not prove equal write the same residual as ``Add``; an Add
whose operands have one shape (and, with ``broadcast=1``, writes no result over B) computes exactly what
``Sum`` of the same two inputs computes: the same elementwise sum in the same dtype, the same errors on mixed
dtypes. Where the shapes differ or are not known (numpy broadcasting, Caffe2's ``broadcast=1`` over a
sub-shape) the Add is left alone: Sum takes only equal shapes.

Shapes come from inference along the op list, from the workspace's tensors and the ``shapes`` the pass is
given for the inputs (the first feeds of an ONNX rep). Without them, as a ``Predictor`` optimizing before any
input is fed, an Add whose operands depend on the input's shape stays an Add.

Sum computes in place only over its first input, so an Add writing over B becomes ``Sum(B, A)``
(floating-point addition commutes exactly).
"""

from __future__ import annotations

from typing import Any

from framework.errors import UnknownOperatorError
from framework.net.inference import specs_from_workspace
from framework.net.optimize import _arg, _Net
from framework.ops.inference import infer_op
from framework.ops.schema import UNKNOWN, TensorSpec
from framework.proto.framework_pb2 import OperatorDef

__all__ = ["adds_as_sums"]


def _input_specs(net: _Net, shapes: dict[str, Any] | None) -> dict[str, TensorSpec]:
    """What is known of the blobs the op list reads before writing: the workspace's tensors, then ``shapes``."""
    specs = specs_from_workspace(net.ws, net.flow.inputs(ordered=False))
    for name, shape in (shapes or {}).items():
        dtype = specs[name].dtype if name in specs else None
        specs[name] = TensorSpec(tuple(int(d) for d in shape), dtype)
    return specs


def _as_sum(op: OperatorDef, a: TensorSpec, b: TensorSpec) -> OperatorDef | None:
    """The Sum computing ``op`` (an Add reading specs ``a`` and ``b``), or None where it would differ."""
    if len(op.input) != 2 or len(op.output) != 1 or not (a.known and b.known) or a.shape != b.shape:
        return None
    inputs = list(op.input)
    if op.output[0] == inputs[1] != inputs[0]:
        if _arg(op, "broadcast", 0):
            return None  # the Add itself refuses to write over B with broadcast=1
        inputs.reverse()
    new = OperatorDef()
    new.CopyFrom(op)
    new.type = "Sum"
    del new.arg[:]  # (Add's arguments are its broadcast rule; Sum takes none)
    del new.input[:]
    new.input.extend(inputs)
    return new


def adds_as_sums(net: _Net, shapes: dict[str, Any] | None = None) -> int:
    """Replace each Add of two same-shape tensors by the equal Sum (see module doc); the number replaced."""
    specs = _input_specs(net, shapes)
    n = 0
    for i, op in enumerate(net.ops):
        ins = [specs.get(b, UNKNOWN) for b in op.input]
        if op.type == "Add":
            new = _as_sum(op, *ins) if len(ins) == 2 else None
            if new is not None:
                net.flow.replace(i, new)
                n += 1
        try:
            outs = infer_op(op, ins)
        except UnknownOperatorError:
            outs = [UNKNOWN] * len(op.output)
        for b, spec in zip(op.output, outs):
            specs[b] = spec if spec is not None else UNKNOWN
    return n
