"""If and While: branches and loops over nested nets run in the op's own workspace.

Caffe2 semantics (caffe2/operators/if_op.h, while_op.h): the nested nets are
built once, when the op is created, bound to the same workspace as the op;
running the op runs one of them (If) or repeats them (While). The condition
is input 0, a one-element bool tensor, read again before every iteration.
"""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.memory.tensor import Tensor
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import NET, UNKNOWN, Arg
from framework.ops.subnet import build, net_arg
from framework.runtime import cancel


def _unknown_outputs(args, ins):
    return [UNKNOWN] * args.num_outputs


def read_condition(op: Operator, i: int = 0) -> bool:
    """Input ``i`` as a single bool; clear errors for anything else."""
    obj = op.inputs[i].held
    if type(obj) is not Tensor:
        op.input(i)  # raises the standard empty / wrong-type error
    arr = op.input(i)
    if arr.dtype != np.bool_:
        raise TypeMismatchError(
            f"{op.describe()}: condition '{op.input_names[i]}' must be a bool tensor, found {arr.dtype}"
        )
    if arr.size != 1:
        raise ShapeError(
            f"{op.describe()}: condition '{op.input_names[i]}' must hold a single value, found shape {list(arr.shape)}"
        )
    return bool(arr.reshape(-1)[0])


@register_op(
    "If",
    inputs=(1, float("inf")),
    outputs=(0, float("inf")),
    input_docs=[
        ("condition", "Scalar (one-element) bool tensor"),
        ("inputs", "Blobs the nested nets read (ordering, gradients)"),
    ],
    output_docs=[("outputs", "Blobs the nested nets write (ordering, gradients)")],
    args=[
        Arg("then_net", NET, None, "Net run when the condition is true"),
        Arg("else_net", NET, None, "Net run when the condition is false (optional)"),
    ],
    allow_inplace=lambda i, o: True,
    infer=_unknown_outputs,
    category="control",
)
class If(Operator):
    """'If' control operator: input 0 is a one-element bool tensor holding the condition.
    ``then_net`` (required) runs when it is true, ``else_net`` (optional) when it is false. Both
    nets run in the same workspace as the If op and are built once, when the op is created.
    Other inputs and outputs are not read by the op itself: they name the blobs the nested nets
    read and write, so the outer net orders the If op correctly and the gradient can reach them
    (Caffe2's Python builders list them). Net-level shape inference descends into both branches
    and keeps the output shapes they agree on."""

    def setup(self) -> None:
        then_def = net_arg(self, "then_net")
        else_def = net_arg(self, "else_net", required=False)
        self.then_net = build(self, then_def, self.workspace, "then_net")
        self.else_net = build(self, else_def, self.workspace, "else_net") if else_def is not None else None

    def run(self) -> None:
        if read_condition(self):
            self.then_net.run()
        elif self.else_net is not None:
            self.else_net.run()


@register_op(
    "While",
    inputs=(1, float("inf")),
    outputs=(0, float("inf")),
    input_docs=[
        ("condition", "Scalar (one-element) bool tensor, re-read before every iteration"),
        ("inputs", "Blobs the nested nets read"),
    ],
    output_docs=[("outputs", "Blobs the nested nets write")],
    args=[
        Arg("loop_net", NET, None, "Net executed on each iteration"),
        Arg("cond_net", NET, None, "Net run before each check of the condition, to recompute it (optional)"),
    ],
    allow_inplace=lambda i, o: True,
    infer=_unknown_outputs,
    category="control",
)
class While(Operator):
    """'While' control operator: repeatedly runs ``loop_net`` while the condition (input 0, a
    one-element bool tensor) is true. If ``cond_net`` is given it runs before every check of the
    condition (so it typically recomputes input 0). All nets run in the same workspace as the op
    and are built once, when the op is created; as in Caffe2 there is no iteration limit."""

    def setup(self) -> None:
        self.loop_net = build(self, net_arg(self, "loop_net"), self.workspace, "loop_net")
        cond_def = net_arg(self, "cond_net", required=False)
        self.cond_net = build(self, cond_def, self.workspace, "cond_net") if cond_def is not None else None

    def run(self) -> None:
        cond_net, loop_net = self.cond_net, self.loop_net
        if cond_net is None:
            read_condition(self)  # validate before anything runs
        while True:
            cancel.check()  # on a dag worker, Ctrl-C reaches this loop only through the run's token
            if cond_net is not None:
                cond_net.run()
            if not read_condition(self):
                return
            loop_net.run()
