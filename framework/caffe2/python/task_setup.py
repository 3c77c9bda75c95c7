"""Setup collection for Tasks and TaskGroups (Caffe2's ``get_setup_nets``, ``add_setup_steps``,
``SetupNets`` of ``caffe2.python.task``; ``framework.caffe2.python.task`` re-exports them).

Setup objects are attached to nets as attributes (``Net.add_attribute(key, obj)``); an object's
``setup(init_net)`` / ``exit(exit_net)`` either add ops to the shared init/exit net or return a
net, a step or a list of them; each object runs once (marked ``_setup_used``).
"""

from __future__ import annotations

from typing import Any

from framework import core

__all__ = ["SetupNets", "add_setup_steps", "get_setup_nets"]


def get_setup_nets(key: str, steps_or_nets: list[Any], target: Any, extra: list[Any] = ()) -> tuple[list, list]:
    """(init nets/steps, exit nets/steps) of the setup objects attached under ``key`` to the nets of
    ``steps_or_nets`` (plus ``extra`` objects), each object once: its ``setup(init_net)`` and
    ``exit(exit_net)`` add ops to the shared ``<key>/init`` / ``<key>/exit`` nets (run first) or
    return a net, a step or a list of them. Objects already used, or whose ``_setup_target`` is
    another target, are skipped (Caffe2's)."""
    init_net, exit_net = core.Net(key + "/init"), core.Net(key + "/exit")
    init_nets: list[Any] = []
    exit_nets: list[Any] = []
    objs: list[Any] = []
    for x in steps_or_nets:
        if isinstance(x, core.ExecutionStep):
            objs += x.get_all_attributes(key)
        elif isinstance(x, core.Net):
            objs += x.get_attributes(key)
    for obj in [*objs, *extra]:
        if getattr(obj, "_setup_used", False) or getattr(obj, "_setup_target", target) is not target:
            continue
        for method, net, out in (("setup", init_net, init_nets), ("exit", exit_net, exit_nets)):
            if callable(getattr(obj, method, None)):
                out += _as_setup_list(getattr(obj, method)(net))
                obj._setup_used = True
    if init_net.Proto().op:
        init_nets.insert(0, init_net)
    if exit_net.Proto().op:
        exit_nets.insert(0, exit_net)
    return init_nets, exit_nets


def _as_setup_list(nets: Any) -> list[Any]:
    if nets is None:
        return []
    if isinstance(nets, (list, tuple)):
        return list(nets)
    if isinstance(nets, (core.Net, core.ExecutionStep)):
        return [nets]
    raise TypeError(f"Unsupported type for setup: {type(nets).__name__}")


def add_setup_steps(step: Any, init_nets: list[Any], exit_nets: list[Any], name: str) -> Any:
    """``step`` between a ``<name>:init`` step of ``init_nets`` and a ``<name>:exit`` step of
    ``exit_nets`` (``step`` itself when there are none)."""
    if not init_nets and not exit_nets:
        return step
    steps = []
    if init_nets:
        steps.append(core.execution_step(f"{name}:init", init_nets))
    steps.append(step)
    if exit_nets:
        steps.append(core.execution_step(f"{name}:exit", exit_nets))
    return core.execution_step(name, steps)


class SetupNets:
    """Nets to run at init / exit of a Task or TaskGroup: attach with
    ``net.add_attribute(Task.TASK_SETUP, SetupNets([init_net]))`` (or ``TaskGroup.LOCAL_SETUP``);
    the same object runs once even when attached to several nets."""

    def __init__(self, init_nets: Any = None, exit_nets: Any = None) -> None:
        self.init_nets = init_nets
        self.exit_nets = exit_nets

    def setup(self, init_net: Any) -> Any:
        return self.init_nets

    def exit(self, exit_net: Any) -> Any:
        return self.exit_nets

    def __repr__(self) -> str:
        return f"SetupNets(init_nets={self.init_nets}, exit_nets={self.exit_nets})"
