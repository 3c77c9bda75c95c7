"""Workspace-level entry points for running ops, nets and plans."""

from __future__ import annotations

from typing import Any

from framework.errors import BlobNotFoundError, FrameworkError, OperatorError
from framework.memory.workspace import Workspace, suggest
from framework.ops import create_operator
from framework.ops.operator import Operator, describe_op


def _as_op_def(op: Any) -> Any:
    if hasattr(op, "Proto") and callable(op.Proto):
        return op.Proto()
    return op


def run_operator_once(ws: Workspace, op_def: Any) -> None:
    """Build ``op_def`` against ``ws``, run it once, and discard it.

    Inputs must exist in the workspace; errors name the op and the blob.
    """
    op_def = _as_op_def(op_def)
    for name in op_def.input:
        if not ws.has_blob(name):
            raise BlobNotFoundError(
                f"{describe_op(op_def)}: input blob '{name}' does not exist in the workspace."
                f"{suggest(name, ws.blobs())}"
            )
    op = create_operator(op_def, ws)
    run_op(op)


def run_op(op: Operator) -> None:
    """Run one operator, wrapping any error with the op's context."""
    try:
        op.run()
    except Exception as e:
        raise wrap_op_error(op, e) from e


def wrap_op_error(op: Operator, e: BaseException) -> OperatorError:
    """An OperatorError naming the op, its blobs and shapes, and where it was created."""
    msg = f"error running {op.context()}\n{type(e).__name__}: {e}"
    if op.debug_info:
        msg += f"\nthe op was created at:\n{op.debug_info}"
    err = OperatorError(msg)
    err.op_index = op.index
    err.op_type = op.type
    err.cause_is_user_error = isinstance(e, FrameworkError)
    return err
