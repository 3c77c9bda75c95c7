"""Caffe2's ``control_ops_util``: add If / While ops whose branches run in Do scopes.

Blobs of a branch whose names are in ``lexical_scope`` (the outer blobs visible there) or that
the branch reads before writing are outer blobs, bound into the branch's child workspace by a
``Do`` op; every other blob stays local to the branch. As ``caffe2.python.control_ops_util``.
"""

from __future__ import annotations

from typing import Any

from framework import core

__all__ = ["add_if_op", "add_while_op", "get_external_blob_names"]


def _undefined(net_proto: Any) -> list[str]:
    written: set[str] = set()
    out: list[str] = []
    for op in net_proto.op:
        for b in op.input:
            if b not in written and b not in out:
                out.append(b)
        written.update(op.output)
    return out


def get_external_blob_names(net: Any, lexical_scope: Any) -> tuple[set, set]:
    """(blobs the net reads from outside, outer blobs it writes); every read must be in scope."""
    proto = net.Proto()
    inputs = set(_undefined(proto))
    for name in inputs:
        if str(name) not in lexical_scope:
            raise ValueError(f"Input blob {name} is undefined")
    outputs = {o for op in proto.op for o in op.output if o in lexical_scope}
    return inputs, outputs


def _do_net(name: str, body: Any, ins: set, outs: set, scope_blob: Any, **kw: Any) -> tuple[Any, list, list]:
    in_blobs = [core.BlobReference(b) for b in sorted(ins)]
    out_blobs = [core.BlobReference(b) for b in sorted(outs)]
    ordered = [str(b) for b in in_blobs + out_blobs]
    outer = sorted(ins | outs)
    idx = [ordered.index(b) for b in outer]
    in_blobs.append(scope_blob)
    out_blobs.append(scope_blob)
    net = core.Net(name)
    net.Do(in_blobs, out_blobs, net=body.Proto(), inner_blobs=outer, outer_blobs_idx=idx, **kw)
    net.AddExternalOutput(*out_blobs)
    return net, in_blobs, out_blobs


def add_if_op(if_net: Any, cond_blob: Any, lexical_scope: Any, then_net: Any, else_net: Any = None) -> None:
    """Add CreateScope + If(cond, outer inputs..., scopes) with then/else branches wrapped in Do."""
    then_in, then_out = get_external_blob_names(then_net, lexical_scope)
    else_in, else_out = get_external_blob_names(else_net, lexical_scope) if else_net else (set(), set())
    if_inputs = [cond_blob] + [core.BlobReference(b) for b in sorted(then_in | else_in)]
    if_outputs = [core.BlobReference(b) for b in sorted(then_out | else_out)]
    then_scope = if_net.NextScopedBlob(if_net.Name() + "/workspace_if_then")
    do_then, _, _ = _do_net("do_then_net", then_net, then_in, then_out, then_scope)
    if_inputs.append(then_scope)
    if_outputs.append(then_scope)
    args = {"then_net": do_then.Proto()}
    else_scope = None
    if else_net:
        else_scope = if_net.NextScopedBlob(if_net.Name() + "/workspace_if_else")
        do_else, _, _ = _do_net("do_else_net", else_net, else_in, else_out, else_scope)
        if_inputs.append(else_scope)
        if_outputs.append(else_scope)
        args["else_net"] = do_else.Proto()
    if_net.CreateScope([], [then_scope])
    if else_scope is not None:
        if_net.CreateScope([], [else_scope])
    if_net.If(if_inputs, if_outputs, **args)
    if_net.AddExternalOutput(*if_outputs)


def add_while_op(
    while_net: Any, cond_blob: Any, lexical_scope: Any, loop_body_net: Any, condition_body_net: Any = None
) -> None:
    """Add CreateScope(s) + While(cond, ...) with the body (and condition net) wrapped in Do."""
    ins, outs = get_external_blob_names(loop_body_net, lexical_scope)
    ins = ins | outs  # the loop may not run at all: its outputs are also inputs
    body_scope = while_net.NextScopedBlob(while_net.Name() + "/workspace_loop_body")
    do_body, loop_in, loop_out = _do_net(
        "do_loop_body_net", loop_body_net, ins, outs, body_scope, copy_external_blobs=True
    )
    while_inputs = [cond_blob] + loop_in
    while_outputs = list(loop_out)
    args = {"loop_net": do_body.Proto()}
    cond_scope = None
    if condition_body_net:
        c_in, c_out = get_external_blob_names(condition_body_net, lexical_scope)
        if not any(str(cond_blob) in op.output for op in condition_body_net.Proto().op):
            raise ValueError("Condition net does not write into condition blob")
        c_out.add(str(cond_blob))
        cond_scope = while_net.NextScopedBlob(while_net.Name() + "/workspace_loop_cond")
        do_cond, cond_in, cond_out = _do_net("do_loop_condition_net", condition_body_net, c_in, c_out, cond_scope)
        args["cond_net"] = do_cond.Proto()
        while_inputs += [b for b in cond_in if str(b) not in ins]
        while_outputs += [b for b in cond_out if str(b) not in outs]
        if str(cond_blob) not in lexical_scope:
            while_net.ConstantFill([], cond_blob, dtype=core.DataType.BOOL, value=False)
    while_net.CreateScope([], [body_scope])
    if cond_scope is not None:
        while_net.CreateScope([], [cond_scope])
    while_net.While(while_inputs, while_outputs, **args)
    while_net.AddExternalOutput(*while_outputs)
