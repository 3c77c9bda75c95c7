"""Shape and type inference for one operator, from its schema."""

from __future__ import annotations

import logging
from typing import Sequence

from framework.ops.arguments import parse_args
from framework.ops.operator import describe_op
from framework.ops.registry import schema_of
from framework.ops.schema import UNKNOWN, TensorSpec
from framework.proto.framework_pb2 import OperatorDef

log = logging.getLogger("framework.ops")


def infer_op(op_def: OperatorDef, in_specs: Sequence[TensorSpec], strict: bool = False) -> list[TensorSpec]:
    """Output TensorSpecs of ``op_def`` given its input specs.

    Unknown inputs are allowed; inference functions return UNKNOWN where they
    cannot tell. With ``strict=False`` an inference error degrades to UNKNOWN
    outputs (logged at debug level) instead of raising.
    """
    schema = schema_of(op_def)
    n_out = len(op_def.output)
    if schema.infer is None:
        return [UNKNOWN] * n_out
    try:
        args = parse_args(schema, op_def.arg, describe_op(op_def), len(op_def.input), n_out)
        outs = list(schema.infer(args, list(in_specs)))
    except Exception as e:
        if strict:
            raise
        log.debug("shape inference of %s failed: %s", describe_op(op_def), e)
        return [UNKNOWN] * n_out
    if len(outs) < n_out:
        outs += [UNKNOWN] * (n_out - len(outs))
    return outs[:n_out]
