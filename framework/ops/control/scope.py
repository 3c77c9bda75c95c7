"""Scopes as child workspaces: the WorkspaceStack, CreateScope, HasScope and Do.

Caffe2 semantics (caffe2/operators/create_scope_op.h, do_op.h): a scope blob
holds a stack of child workspaces. A forward ``Do`` pushes (or reuses) a
child workspace that sees only the outer blobs bound to it (``inner_blobs``
-> outer names by index) and runs its ``net`` there; the child keeps its
local blobs, so the gradient ``Do`` (``is_gradient_op``) pops the same
workspace and finds the forward values it needs (``saved_fwd_blobs``).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.errors import OperatorError, TypeMismatchError
from framework.memory.workspace import Workspace
from framework.ops.gradient import no_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, INTS, NET, STRINGS, UNKNOWN, Arg, TensorSpec
from framework.ops.subnet import build, nesting, net_arg


class WorkspaceStack:
    """Forward workspaces of one scope, reused across runs (Caffe2's detail::WorkspaceStack)."""

    def __init__(self) -> None:
        self.workspaces: list[Workspace] = []
        self.top = -1
        self.rebinds: dict[Workspace, int] = {}  # workspace -> times local copies were dropped (nets rebuilt)

    def push_forward(self, parent: Workspace, bindings: dict[str, str]) -> Workspace:
        if self.top == len(self.workspaces) - 1:
            ws = Workspace(parent.root_folder, name=f"{parent.name or 'ws'}/scope{len(self.workspaces)}")
            ws.add_blob_mapping(parent, bindings)
            self.workspaces.append(ws)
        else:
            ws = self.workspaces[self.top + 1]
            local = set(ws.local_blobs())
            stale = [inner for inner in bindings if inner in local]
            for inner in stale:  # a local copy shadows a binding: drop it, re-bind
                ws.remove_blob(inner)
            if stale:  # nets built there bound the dropped blobs: Do rebuilds them
                self.rebinds[ws] = self.rebinds.get(ws, 0) + 1
            ws.add_blob_mapping(parent, bindings)
        self.top += 1
        return ws

    def pop_gradient(self, parent: Workspace, bindings: dict[str, str]) -> Workspace | None:
        if self.top < 0:
            return None
        ws = self.workspaces[self.top]
        ws.add_blob_mapping(parent, bindings, skip_defined=True)
        self.top -= 1
        return ws

    def reuse_last_forward(self, parent: Workspace, bindings: dict[str, str]) -> Workspace | None:
        if self.top < 0:
            return None
        ws = self.workspaces[self.top]
        ws.add_blob_mapping(parent, bindings)
        return ws

    def clear(self) -> None:
        self.top = -1

    def empty(self) -> bool:
        return self.top < 0

    def __repr__(self) -> str:
        return f"<WorkspaceStack {self.top + 1} active of {len(self.workspaces)}>"


def copy_forwarded(ws: Workspace, bindings: dict[str, str]) -> None:
    """Replace the forwarded bound blobs of ``ws`` by local copies of their tensors (Caffe2's
    Workspace::CopyForwardedTensors); the next push of this workspace re-binds them."""
    from framework.memory.tensor import Tensor

    for inner in bindings:
        fwd = ws._forwarded.get(inner)
        if fwd is None:
            continue
        src = fwd[0].get_blob(fwd[1]).held
        if type(src) is not Tensor:
            continue
        del ws._forwarded[inner]
        t = ws.create_local_blob(inner).get_mutable(Tensor)
        t.copy_from(src)


def scope_stack(op: Operator, blob_index: int, is_output: bool) -> WorkspaceStack:
    """The WorkspaceStack held by a blob of ``op`` (created in an empty output blob)."""
    blob = op.outputs[blob_index] if is_output else op.inputs[blob_index]
    names = op.output_names if is_output else op.input_names
    obj = blob.held
    if obj is None and is_output:
        obj = WorkspaceStack()
        blob.reset(obj)
        return obj
    if type(obj) is not WorkspaceStack:
        found = "an empty blob" if obj is None else type(obj).__qualname__
        raise TypeMismatchError(
            f"{op.describe()}: blob '{names[blob_index]}' must hold a scope (WorkspaceStack made by CreateScope), "
            f"found {found}"
        )
    return obj


@register_op(
    "CreateScope",
    inputs=0,
    outputs=1,
    output_docs=[("scope", "Blob holding a new, empty stack of scope workspaces")],
    infer=lambda args, ins: [UNKNOWN],
    category="control",
)
class CreateScope(Operator):
    """'CreateScope' operator initializes and outputs an empty scope (a stack of child workspaces)
    that is used by Do operator to store local blobs. Running it again clears the stack (the
    workspaces are kept and reused)."""

    def run(self) -> None:
        obj = self.outputs[0].held
        if type(obj) is WorkspaceStack:
            obj.clear()
        else:
            self.outputs[0].reset(WorkspaceStack())


@register_op(
    "HasScope",
    inputs=1,
    outputs=1,
    input_docs=[("scope", "Scope blob (CreateScope)")],
    output_docs=[("has_scope", "bool tensor of shape [1]: true if the scope holds an active workspace")],
    infer=lambda args, ins: [TensorSpec((1,), np.dtype(np.bool_))],
    category="control",
)
class HasScope(Operator):
    """Checks whether the scope blob has any saved (forward, not yet popped) scopes left."""

    def run(self) -> None:
        stack = scope_stack(self, 0, is_output=False)
        self.output(0, (1,), np.bool_)[0] = not stack.empty()


@register_op(
    "Do",
    inputs=(1, float("inf")),
    outputs=(1, float("inf")),
    input_docs=[("inputs", "Outer blobs bound to inner names; the last input is the scope blob")],
    output_docs=[("outputs", "Outer blobs bound to inner names; the last output is the scope blob (same as input)")],
    args=[
        Arg("net", NET, None, "Subnet with blob bindings"),
        Arg("inner_blobs", STRINGS, (), "List of inner net blob names to bind to outer workspace"),
        Arg(
            "outer_blobs_idx",
            INTS,
            (),
            "Indices of corresponding outer workspace blobs, in order: operator inputs, operator outputs "
            "(skipping workspace blobs)",
        ),
        Arg(
            "saved_fwd_blobs",
            STRINGS,
            (),
            "List of blobs from the forward Do operator workspace needed in backward pass, used in gradient Do",
        ),
        Arg("reuse_workspace", BOOL, False, "Whether to reuse workspace or create a new one in a given scope"),
        Arg(
            "copy_external_blobs",
            BOOL,
            False,
            "After a forward run, keep copies of the bound outer tensors in the child workspace (a While body's "
            "gradient then sees each iteration's values)",
        ),
    ],
    allow_inplace=lambda i, o: True,
    infer=lambda args, ins: [UNKNOWN] * args.num_outputs,
    category="control",
)
class Do(Operator):
    """'Do' control operator, executes a subnet in a separate workspace. Last blobs in the input
    and output lists should be the same blob created with CreateScope op. Arguments
    'inner_blobs' and 'outer_blobs_idx' provide a mapping between selected inner blob names and
    corresponding outer blob indices; every outer blob (inputs, then outputs, without the scope
    blob) must be bound exactly once. The child workspace sees only the bound outer blobs. A
    gradient Do (``is_gradient_op``) pops the last forward workspace of the scope, so it sees
    the forward blobs kept there. Departure: a scope blob holding something else (a tensor) is
    an error here; Caffe2 would silently replace it with an empty scope."""

    def setup(self) -> None:
        self.net_def = net_arg(self, "net")
        self.is_gradient = bool(self.op_def.is_gradient_op)
        self.reuse = bool(self.args.reuse_workspace)
        if self.is_gradient and self.reuse:
            raise self.arg_error("Gradient Do op requires use of stacked workspaces (reuse_workspace must be 0)")
        ins, outs = self.input_names, self.output_names
        if ins[-1] != outs[-1]:
            raise self.arg_error(
                f"expected the same input/output workspace blob, got input '{ins[-1]}' and output '{outs[-1]}'"
            )
        for label, names in (("input", ins[:-1]), ("output", outs[:-1])):
            if len(set(names)) != len(names):
                raise self.arg_error(f"duplicate {label} blobs in {names}")
        outer = ins[:-1] + outs[:-1]
        inner_blobs, idx = self.args.inner_blobs, self.args.outer_blobs_idx
        if len(inner_blobs) != len(idx):
            raise self.arg_error(
                f"invalid blob bindings: {len(inner_blobs)} inner_blobs but {len(idx)} outer_blobs_idx"
            )
        self.bindings: dict[str, str] = {}
        used: set[str] = set()
        for inner, k in zip(inner_blobs, idx):
            if inner in self.bindings:
                raise self.arg_error(f"invalid blob bindings: redefinition of inner blob '{inner}'")
            if not 0 <= k < len(outer):
                raise self.arg_error(
                    f"invalid blob bindings: outer blob index {k} (inner name '{inner}') is out of bounds "
                    f"[0, {len(outer) - 1}]"
                )
            if outer[k] in used:
                raise self.arg_error(f"reusage of outer name '{outer[k]}' in blob bindings")
            used.add(outer[k])
            self.bindings[inner] = outer[k]
        missing = sorted(set(outer) - used)
        if missing:
            raise self.arg_error(f"not all outer names are used in blob bindings: {missing} are unbound")
        self._nets: dict[Workspace, tuple[int, Any]] = {}  # the workspaces are the stack's

    def run(self) -> None:
        n = len(self.outputs) - 1
        stack = scope_stack(self, n, is_output=True)
        parent = self.workspace
        if self.is_gradient:
            ws = stack.pop_gradient(parent, self.bindings)
        elif self.reuse and not stack.empty():
            ws = stack.reuse_last_forward(parent, self.bindings)
        else:
            ws = stack.push_forward(parent, self.bindings)
        if ws is None:
            raise OperatorError(
                f"{self.describe()}: the scope '{self.output_names[n]}' holds no forward workspace to pop "
                "(run the forward Do first)"
            )
        gen = stack.rebinds.get(ws, 0)
        entry = self._nets.get(ws)
        if entry is None or entry[0] != gen:
            entry = self._nets[ws] = (gen, build(self, self.net_def, ws, "net"))
        with nesting(self, "net"):
            entry[1].run()
        if self.args.copy_external_blobs and not self.is_gradient:
            copy_forwarded(ws, self.bindings)


no_gradient("CreateScope", "HasScope")
