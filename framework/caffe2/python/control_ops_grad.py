"""Caffe2's ``control_ops_grad``: gradient generators of the Do, If and While ops.

The makers themselves are registered on the ops' schemas (``framework/ops/control/grad.py``);
these functions give them Caffe2's Python signature ``(op, g_output) -> (grad_ops, g_input)``.
"""

from __future__ import annotations

from typing import Any

from framework.net.accumulation import rename_grad_output
from framework.ops.control.grad import dedupe_g_output
from framework.ops.gradient import get_gradient_for_op

__all__ = [
    "dedupe_g_output",
    "disambiguate_grad_if_op_output",
    "gen_do_gradient",
    "gen_if_gradient",
    "gen_while_gradient",
]


def _gen(op_type: str, op: Any, g_output: Any) -> tuple[list, list]:
    if op.type != op_type:
        raise ValueError(f"Expected {op_type} op, got {op.type}")
    import framework.net  # noqa: F401  (installs the backward pass the makers use)

    return get_gradient_for_op(op, [None if not g else str(g) for g in g_output])


def gen_do_gradient(op: Any, g_output: Any) -> tuple[list, list]:
    return _gen("Do", op, g_output)


def gen_if_gradient(op: Any, g_output: Any) -> tuple[list, list]:
    return _gen("If", op, g_output)


def gen_while_gradient(op: Any, g_output: Any) -> tuple[list, list]:
    return _gen("While", op, g_output)


def disambiguate_grad_if_op_output(grad_op: Any, idx: int, new_grad_output: str) -> None:
    """Rename output ``idx`` of an If gradient op to ``new_grad_output``, and the outputs of its
    then/else nets that wrote the old name (what ``core.IR`` does when it splits a gradient)."""
    rename_grad_output(grad_op, idx, new_grad_output)
