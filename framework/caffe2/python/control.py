"""Caffe2's ``control`` module: Do, DoParallel, For, While, Until, DoWhile, DoUntil, Switch, If,
IfNot over nets and execution steps (plans), as ``caffe2.python.control``.

Each function returns an ExecutionStep; conditions are a bool blob or a net whose last external
output is the bool condition (run before the body). Steps stop through ``should_stop_blob``
(Not of the condition) and ``only_once``, exactly as Caffe2 builds them, so a PlanDef made here
runs with ``workspace.RunPlan`` / ``framework run``.
"""

from __future__ import annotations

from typing import Any

from framework import core

__all__ = [
    "BoolNet",
    "CombineConditions",
    "Do",
    "DoParallel",
    "DoUntil",
    "DoWhile",
    "For",
    "GetConditionBlobFromNet",
    "If",
    "IfNot",
    "MergeConditionNets",
    "NotNet",
    "Switch",
    "SwitchNot",
    "Until",
    "While",
]

_current_idx = 1
_used_step_names: set[str] = set()


def _next_step_name(control_name: str, base_name: str) -> str:
    global _current_idx
    concat = f"{base_name}/{control_name}"
    name = concat
    while name in _used_step_names:
        name = f"{concat}_{_current_idx}"
        _current_idx += 1
    _used_step_names.add(name)
    return name


def _make_list(items: tuple) -> list:
    if len(items) == 0:
        raise ValueError("input cannot be empty.")
    if len(items) == 1:
        return items[0] if isinstance(items[0], list) else [items[0]]
    return list(items)


def _is_nets(x: Any) -> bool:
    if isinstance(x, list):
        return all(isinstance(n, core.Net) for n in x)
    return isinstance(x, core.Net)


def _prepend(nets_or_steps: Any, *nets: Any) -> list:
    body, nets = _make_list((nets_or_steps,)), _make_list(nets)
    return nets + body if _is_nets(body) else [Do("prepend", nets)] + body


def _append(nets_or_steps: Any, *nets: Any) -> list:
    body, nets = _make_list((nets_or_steps,)), _make_list(nets)
    return body + nets if _is_nets(body) else body + [Do("append", nets)]


def _step(name: str, items: Any, **kw: Any) -> Any:
    """core.execution_step; in a list mixing nets and steps every net becomes its own substep (as Caffe2)."""
    if isinstance(items, list) and not _is_nets(items):
        items = [x if isinstance(x, core.ExecutionStep) else core.execution_step(str(x.Name()), x) for x in items]
    return core.execution_step(name, items, **kw)


def GetConditionBlobFromNet(condition_net: Any) -> Any:
    """The condition blob: the last external output of the net (a single bool)."""
    outs = condition_net.Proto().external_output
    if not outs:
        raise ValueError(f"Condition net {condition_net.Proto().name} must have at least one external output")
    return core.BlobReference(outs[-1])


def BoolNet(*blobs_with_bool_value: Any) -> Any:
    """A net assigning constant bool values to blobs: BoolNet((blob, value), ...)."""
    net = core.Net("bool_net")
    for blob, value in _make_list(blobs_with_bool_value):
        out = net.ConstantFill([], [blob], shape=[], value=bool(value), dtype=core.DataType.BOOL)
        net.AddExternalOutput(out)
    return net


def NotNet(condition_blob_or_net: Any) -> tuple[Any, Any]:
    """(net computing Not of the condition, its output blob)."""
    cond = (
        GetConditionBlobFromNet(condition_blob_or_net)
        if isinstance(condition_blob_or_net, core.Net)
        else condition_blob_or_net
    )
    net = core.Net("not_net")
    out = net.Not(cond)
    net.AddExternalOutput(out)
    return net, out


def _copy_condition_net(condition_blob: Any) -> tuple[Any, Any]:
    net = core.Net("copy_condition_blob_net")
    out = net.Copy(condition_blob)
    net.AddExternalOutput(out)
    return net, out


def MergeConditionNets(name: str, condition_nets: Any, relation: str) -> Any:
    """One net running all condition nets, its last output their And/Or."""
    if not isinstance(condition_nets, list):
        return condition_nets
    if len(condition_nets) <= 1:
        return condition_nets[0] if condition_nets else None
    merged = core.Net(name)
    last = None
    for i, net in enumerate(condition_nets):
        proto = net.Proto()
        merged.Proto().op.extend(proto.op)
        merged.Proto().external_input.extend(proto.external_input)
        cur = GetConditionBlobFromNet(net)
        last = cur if i == 0 else getattr(merged, relation)([last, cur])
    merged.AddExternalOutput(last)
    return merged


def CombineConditions(name: str, condition_nets: Any, relation: str) -> Any:
    """A net combining (And/Or) the condition blobs of nets without running their bodies."""
    if not condition_nets:
        return None
    if not isinstance(condition_nets, list):
        raise ValueError("condition_nets must be a list of nets.")
    if len(condition_nets) == 1:
        return _copy_condition_net(GetConditionBlobFromNet(condition_nets[0]))[0]
    combined = core.Net(name)
    last = None
    for i, net in enumerate(condition_nets):
        cur = GetConditionBlobFromNet(net)
        last = cur if i == 0 else getattr(combined, relation)([last, cur])
    combined.AddExternalOutput(last)
    return combined


def Do(name: str, *nets_or_steps: Any) -> Any:
    """Execute the sequence of nets or steps once."""
    items = _make_list(nets_or_steps)
    if len(items) == 1 and isinstance(items[0], core.ExecutionStep):
        return items[0]
    return _step(_next_step_name("Do", name), items)


def DoParallel(name: str, *nets_or_steps: Any) -> Any:
    """Execute the nets or steps in parallel, waiting for all of them to finish."""
    items = _make_list(nets_or_steps)
    if len(items) == 1 and isinstance(items[0], core.ExecutionStep):
        return items[0]
    return _step(_next_step_name("DoParallel", name), items, concurrent_substeps=True)


def _with_negated_condition(cond: Any, nets_or_steps: Any) -> tuple[Any, Any]:
    """(the condition net if any and a net computing NOT condition, then nets_or_steps; that stop blob)."""
    not_net, stop = NotNet(cond)
    if isinstance(cond, core.Net):
        return _prepend(nets_or_steps, cond, not_net), stop
    return _prepend(nets_or_steps, not_net), stop


def _run_once_if(name: str, cond: Any, nets_or_steps: Any) -> Any:
    nets_or_steps, stop = _with_negated_condition(cond, nets_or_steps)

    def if_step(control_name: str) -> Any:
        return _step(_next_step_name(control_name, name), nets_or_steps, should_stop_blob=stop, only_once=True)

    if _is_nets(nets_or_steps):
        return Do(name + "/_RunOnceIf", BoolNet((stop, False)), if_step("_RunOnceIf-inner"))
    return if_step("_RunOnceIf")


def _run_once_if_not(name: str, cond: Any, nets_or_steps: Any) -> Any:
    if isinstance(cond, core.Net):
        cond_blob = GetConditionBlobFromNet(cond)
        nets_or_steps = _prepend(nets_or_steps, cond)
    else:
        copy_net, cond_blob = _copy_condition_net(cond)
        nets_or_steps = _prepend(nets_or_steps, copy_net)
    return _step(_next_step_name("_RunOnceIfNot", name), nets_or_steps, should_stop_blob=cond_blob, only_once=True)


def For(name: str, nets_or_steps: Any, iter_num: int) -> Any:
    """Execute nets_or_steps iter_num times."""
    init_net = core.Net("init-net")
    counter = init_net.CreateCounter([], init_count=iter_num)
    iter_net = core.Net("For-iter")
    done = iter_net.CountDown([counter])
    body = _step(_next_step_name("For-inner", name), _prepend(nets_or_steps, iter_net), should_stop_blob=done)
    return Do(name + "/For", Do(name + "/For-init-net", init_net), body)


def While(name: str, condition_blob_or_net: Any, nets_or_steps: Any) -> Any:
    """Execute nets_or_steps while the condition is true (checked before each pass)."""
    nets_or_steps, stop = _with_negated_condition(condition_blob_or_net, nets_or_steps)

    def while_step(control_name: str) -> Any:
        return _step(_next_step_name(control_name, name), nets_or_steps, should_stop_blob=stop)

    if _is_nets(nets_or_steps):
        return Do(name + "/While", BoolNet((stop, False)), while_step("While-inner"))
    return while_step("While")


def Until(name: str, condition_blob_or_net: Any, nets_or_steps: Any) -> Any:
    """Execute nets_or_steps until the condition is true."""
    if isinstance(condition_blob_or_net, core.Net):
        stop = GetConditionBlobFromNet(condition_blob_or_net)
        nets_or_steps = _prepend(nets_or_steps, condition_blob_or_net)
    else:
        stop = core.BlobReference(str(condition_blob_or_net))
    return _step(_next_step_name("Until", name), nets_or_steps, should_stop_blob=stop)


def DoWhile(name: str, condition_blob_or_net: Any, nets_or_steps: Any) -> Any:
    """Execute nets_or_steps, then repeat while the condition is true."""
    not_net, stop = NotNet(condition_blob_or_net)
    if isinstance(condition_blob_or_net, core.Net):
        nets_or_steps = _append(nets_or_steps, condition_blob_or_net, not_net)
    else:
        nets_or_steps = _append(nets_or_steps, not_net)
    inner = _step(_next_step_name("DoWhile-inner", name), nets_or_steps, should_stop_blob=stop)
    return Do(name + "/DoWhile", BoolNet((stop, False)), inner)


def DoUntil(name: str, condition_blob_or_net: Any, nets_or_steps: Any) -> Any:
    """Execute nets_or_steps, then repeat until the condition is true."""
    if not isinstance(condition_blob_or_net, core.Net):
        stop = core.BlobReference(str(condition_blob_or_net))
        return _step(_next_step_name("DoUntil", name), nets_or_steps, should_stop_blob=stop)
    nets_or_steps = _append(nets_or_steps, condition_blob_or_net)
    stop = GetConditionBlobFromNet(condition_blob_or_net)
    inner = _step(_next_step_name("DoUntil-inner", name), nets_or_steps, should_stop_blob=stop)
    return Do(name + "/DoUntil", BoolNet((stop, False)), inner)


def Switch(name: str, *conditions: Any) -> Any:
    """Execute every (condition, nets_or_steps) pair whose condition is true."""
    conds = _make_list(conditions)
    return _step(_next_step_name("Switch", name), [_run_once_if(name + "/Switch", c, s) for c, s in conds])


def SwitchNot(name: str, *conditions: Any) -> Any:
    """Execute every pair whose condition is false."""
    conds = _make_list(conditions)
    return _step(_next_step_name("SwitchNot", name), [_run_once_if_not(name + "/SwitchNot", c, s) for c, s in conds])


def _if_else(kind: str, name: str, cond: Any, true_steps: Any, false_steps: Any, when: Any, unless: Any) -> Any:
    """If/IfNot: ``when`` runs the true branch on the condition (net or blob), ``unless`` the false one."""
    if not false_steps:
        return when(f"{name}/{kind}", cond, true_steps)
    cond_blob = GetConditionBlobFromNet(cond) if isinstance(cond, core.Net) else cond
    return Do(
        f"{name}/{kind}",
        when(f"{name}/{kind}-true", cond, true_steps),
        unless(f"{name}/{kind}-false", cond_blob, false_steps),
    )


def If(name: str, condition_blob_or_net: Any, true_nets_or_steps: Any, false_nets_or_steps: Any = None) -> Any:
    """Run true_nets_or_steps if the condition holds, else false_nets_or_steps."""
    return _if_else(
        "If", name, condition_blob_or_net, true_nets_or_steps, false_nets_or_steps, _run_once_if, _run_once_if_not
    )


def IfNot(name: str, condition_blob_or_net: Any, true_nets_or_steps: Any, false_nets_or_steps: Any = None) -> Any:
    """Run true_nets_or_steps if the condition is false, else false_nets_or_steps."""
    return _if_else(
        "IfNot", name, condition_blob_or_net, true_nets_or_steps, false_nets_or_steps, _run_once_if_not, _run_once_if
    )
