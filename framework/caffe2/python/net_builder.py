"""Caffe2's ``net_builder``: NetBuilder contexts and ``ops`` for nets, loops and conditionals.

As ``caffe2.python.net_builder``: inside ``with NetBuilder() as nb:`` calls like ``ops.Add(...)``
go to the builder's current net; ``ops.loop``, ``ops.If``/``Elif``/``Else`` and ``ops.stop_if``
build execution steps with stop blobs; ``ops.IfNet``/``ops.Else`` and ``ops.WhileNet`` with
``ops.Condition`` build single nets with If/While control operators whose branches run in Do
scopes (``NetBuilder(_use_control_ops=True)``; builders in ``framework.caffe2.python.net_builder_control``).
``to_execution_step(nb)`` turns a builder into a step for a plan.

Task hooks (``net_builder_hooks``), for tasks built in ``with task.Task():``
and run by ``framework.caffe2.python.session.LocalSession``: ``with ops.task_init():`` / ``task_exit()`` hold ops
run once before / after the task (all its instances), ``task_instance_init()`` / ``_exit()`` per
instance (in the instance's workspace), ``local_init()`` / ``local_exit()`` once per node around
all tasks of the TaskGroup; ``task_reporter(interval_ms)`` / ``local_reporter(interval_ms)`` hold
ops run periodically while the task / the group runs and once more after it; ``task_group()``
adds a TaskGroup as the next step of the current builder. As in Caffe2, the hooks attach their
builders to the current net (``Net.add_attribute``) and ``Task`` / ``TaskGroup`` collect them when
they build their steps, so a processor that only sees ``ops`` can still add setup. Departure:
one node (this process), so "once per node" is once per TaskGroup run.
"""

from __future__ import annotations

import threading
from typing import Any

from framework import core

__all__ = ["NetBuilder", "Operations", "ops", "to_execution_step"]

_local = threading.local()


def _stack() -> list:
    if not hasattr(_local, "stack"):
        _local.stack = []
    return _local.stack


class NetBuilder:
    """Scope-driven mechanism for building nets, loops and conditional blocks (see module doc)."""

    def __init__(
        self,
        name: str | None = None,
        initial_scope: Any = None,
        _stop_blob_required: bool = False,
        _stop_blob: Any = None,
        _fullname: str | None = None,
        _use_control_ops: bool = False,
    ) -> None:
        parent = NetBuilder.current(required=False)
        if _fullname and name:
            raise ValueError("Cannot set both _fullname and name")
        if _use_control_ops and (_stop_blob_required or _stop_blob):
            raise ValueError("Stop blobs are not used with control operators")
        self.name = _fullname or "/".join(n for n in (parent.name if parent else None, name) if n)
        self._frozen = False
        self._current_net = None
        self._children: list = []
        if parent:
            parent._update_lexical_scope()
        self._init_lexical_scope = set(parent._lexical_scope) if parent else set()
        if initial_scope:
            self._init_lexical_scope |= {str(b) for b in initial_scope}
        self._lexical_scope = set(self._init_lexical_scope)
        self._stop_blob = _stop_blob
        self._stop_blob_required = _stop_blob_required
        self._use_control_ops = _use_control_ops

    @staticmethod
    def current(required: bool = True) -> NetBuilder | None:
        stack = _stack()
        if not stack:
            if required:
                raise RuntimeError("No active NetBuilder: use `with NetBuilder():`")
            return None
        return stack[-1]

    def __enter__(self) -> NetBuilder:
        _stack().append(self)
        return self

    def stop_blob(self) -> Any:
        if self._use_control_ops:
            raise ValueError("Stop blobs are not used with control operators")
        if self._stop_blob is None:
            net = self.current_net()
            self._stop_blob = core.BlobReference(net.NextName("stop_blob"), net)
            net.Const(False, blob_out=self._stop_blob)
            if self._current_net is not self._children[0]:
                init = core.Net("stop_blob_init")
                init.Const(False, blob_out=self._stop_blob)
                self._children.insert(0, init)
        return self._stop_blob

    def stop_if(self, blob: Any) -> None:
        stop = self.stop_blob()
        ops.Or([stop, blob], [stop])
        self._current_net = None

    def _update_lexical_scope(self) -> None:
        self._lexical_scope = set(self._init_lexical_scope)
        for child in self._children:
            if isinstance(child, core.Net):
                self._lexical_scope |= child.UsedBlobNames()
            elif isinstance(child, NetBuilder) and child._use_control_ops:
                self._lexical_scope |= child._lexical_scope

    def _reset_children(self) -> None:
        self._current_net = None
        self._children = []
        self._lexical_scope = set(self._init_lexical_scope)

    def add(self, child: Any) -> Any:
        if self._frozen:
            raise RuntimeError(f"This NetBuilder ({self.name}) has been built already.")
        if self._use_control_ops and not (
            isinstance(child, core.Net) or (isinstance(child, NetBuilder) and child._use_control_ops)
        ):
            raise ValueError("Expected Net or NetBuilder with control ops")
        self._current_net = None
        self._children.append(child)
        if isinstance(child, core.Net):
            self._current_net = child
        self._update_lexical_scope()
        return child

    def current_net(self, name: str | None = None) -> Any:
        if self._current_net is None or name is not None:
            self.add(core.Net(name or "net"))
        return self._current_net

    def freeze(self) -> None:
        for child in self._children:
            if hasattr(child, "freeze"):
                child.freeze()
        self._current_net = None
        self._frozen = True

    def get(self) -> list:
        self.freeze()
        return self._children

    def __exit__(self, etype: Any, *args: Any) -> None:
        _stack().pop()
        if self._use_control_ops and self._children:
            children = self._children
            self._reset_children()
            self._children = [NetBuilder.merge_nets(children, self._lexical_scope)]
        self.freeze()
        if etype is None and self._stop_blob_required and self._stop_blob is None:
            raise RuntimeError(f"This NetBuilder ({self.name}) requires a stop condition (`stop` or `stop_if`)")

    @staticmethod
    def merge_nets(nets_or_builders: list, outer_blob_names: set) -> Any:
        net = None
        for n in nets_or_builders:
            if isinstance(n, NetBuilder):
                nets = n.get()
                if len(nets) != 1 or not isinstance(nets[0], core.Net):
                    raise ValueError("Invalid control op net builder")
                cur = nets[0]
            else:
                cur = n
            if net is None:
                net = cur
            else:
                net.AppendNet(cur)
        if net is not None:
            keep = [o for o in net.Proto().external_output if o in outer_blob_names]
            del net.Proto().external_output[:]
            net.Proto().external_output.extend(keep)
        return net

    def __str__(self) -> str:
        return self.name or "Un-named NetBuilder"


class Operations:
    """Operations to be used in the context of a NetBuilder (``ops``)."""

    def net(self, net: Any = None, name: str | None = None) -> Any:
        if name is not None and net is not None:
            raise ValueError("Cannot provide both `net` and `name`.")
        if net is not None:
            NetBuilder.current().add(net)
            return net
        return NetBuilder.current().current_net(name=name)

    def __getattr__(self, op_type: str) -> Any:
        if op_type.startswith("__"):
            raise AttributeError(op_type)
        if NetBuilder.current(required=False) is None:
            raise AttributeError("No active NetBuilder.")
        return getattr(self.net(), op_type)

    def stop(self) -> None:
        return self.stop_if(ops.Const(True))

    def stop_if(self, blob: Any) -> None:
        return NetBuilder.current().stop_if(blob)

    def loop(self, iters: Any = None, name: str | None = None) -> Any:
        return NetBuilder.current().add(_Loop(iters, name=name))

    Loop = loop  # the name some scripts use

    def stop_guard(self, has_stopped_blob: Any = None, name: str | None = None) -> Any:
        return NetBuilder.current().add(_StopGuard(has_stopped_blob=has_stopped_blob, name=name))

    def If(self, cond: Any, name: str | None = None) -> Any:
        return NetBuilder.current().add(_RunIf(cond, name=name))

    def IfNet(self, cond: Any, name: str | None = None) -> Any:
        return NetBuilder.current().add(_control().RunIfNet(cond, name=name))

    def Else(self, name: str | None = None) -> Any:
        return _control().RunElseNet(name=name)

    def WhileNet(self, name: str | None = None) -> Any:
        return NetBuilder.current().add(_control().RunWhileNet(name=name))

    def Condition(self, name: str | None = None) -> Any:
        if not isinstance(NetBuilder.current(), _control().RunWhileNet):
            raise RuntimeError("Use of Condition outside of WhileNet")
        return _control().RunWhileCondition(name=name)

    # -- Task/TaskGroup hooks (net_builder_hooks; collected by task) ------------------------------------------------
    def task_init(self) -> Any:
        """Ops run once at task start-up, before every instance starts (``with ops.task_init():``)."""
        return _hooks().attach_setup("task", "init")

    def task_exit(self) -> Any:
        """Ops run once at task shutdown, after every instance finished."""
        return _hooks().attach_setup("task", "exit")

    def task_instance_init(self) -> Any:
        """Ops run at the start of each instance of the task (in its own workspace when the task
        has several instances), after the task init."""
        return _hooks().attach_setup("instance", "init")

    def task_instance_exit(self) -> Any:
        """Ops run at the end of each instance of the task."""
        return _hooks().attach_setup("instance", "exit")

    def local_init(self) -> Any:
        """Ops run once per node when the TaskGroup starts, before any of its tasks."""
        return _hooks().attach_setup("local", "init")

    def local_exit(self, name: str | None = None) -> Any:
        """Ops run once per node after every task of the TaskGroup finished."""
        return _hooks().attach_setup("local", "exit", name)

    def task_reporter(self, interval_ms: int = 1000, name: str | None = None) -> Any:
        """Ops run every ``interval_ms`` from task start-up to finish, and once more after."""
        return _hooks().reporter(interval_ms, name, task_level=True)

    def local_reporter(self, interval_ms: int = 1000, name: str | None = None) -> Any:
        """Ops run every ``interval_ms`` while any task of the current TaskGroup runs."""
        return _hooks().reporter(interval_ms, name, task_level=False)

    def task_group(self) -> Any:
        """A local TaskGroup run as the next step of the current NetBuilder."""
        return _hooks().task_group()


def _hooks() -> Any:
    from framework.caffe2.python import net_builder_hooks

    return net_builder_hooks


def _control() -> Any:
    from framework.caffe2.python import net_builder_control

    return net_builder_control


ops = Operations()


class _RunOnce(NetBuilder):
    def __exit__(self, etype: Any, *args: Any) -> None:
        if etype is None and self._stop_blob is not None:
            ops.stop()
        NetBuilder.__exit__(self, etype, *args)


class _StopGuard(_RunOnce):
    def __init__(self, has_stopped_blob: Any = None, name: str | None = None) -> None:
        _RunOnce.__init__(self, name)
        self._stopped = has_stopped_blob
        self._ran = False

    def __enter__(self) -> Any:
        r = _RunOnce.__enter__(self)
        self._stopped = ops.Const(True, blob_out=self._stopped)
        return r

    def __exit__(self, etype: Any, *args: Any) -> None:
        if etype is None:
            self._ran = True
            ops.Const(False, blob_out=self._stopped)
        _RunOnce.__exit__(self, etype, *args)

    def has_stopped(self) -> Any:
        if not self._ran:
            raise RuntimeError("Context not used yet.")
        return self._stopped


class _Loop(NetBuilder):
    def __init__(self, iters: Any = None, name: str | None = None) -> None:
        NetBuilder.__init__(self, name, _stop_blob_required=True)
        self._iter = None
        if iters is not None:
            self._inc = ops.Const(1)
            self._iter = ops.Const(0)
            self._num_iters = iters if isinstance(iters, core.BlobReference) else ops.Const(iters)
        else:
            self._num_iters = None

    def iter(self) -> Any:
        if self._num_iters is None or self._iter is None:
            raise RuntimeError("This loop does not have a number of iterations.")
        return self._iter

    def __enter__(self) -> Any:
        builder = NetBuilder.__enter__(self)
        if self._num_iters is not None:
            ops.stop_if(ops.GE([self._iter, self._num_iters]))
        return builder

    def __exit__(self, etype: Any, *args: Any) -> None:
        if etype is None and self._num_iters is not None:
            self.current_net().Add([self._iter, self._inc], [self._iter])
        NetBuilder.__exit__(self, etype, *args)


class _RunIf(_RunOnce):
    def __init__(self, cond_blob: Any = None, name: str | None = None, _already_ran: Any = None) -> None:
        _RunOnce.__init__(self, name)
        if not (cond_blob or _already_ran):
            raise ValueError("If needs a condition")
        self._is_else = cond_blob is None
        if _already_ran is None:
            self._else_blob = ops.Not(cond_blob)
            self._already_ran = ops.Const(False)
        else:
            self._already_ran = _already_ran
            self._else_blob = _already_ran if cond_blob is None else ops.Or([_already_ran, ops.Not(cond_blob)])

    def __enter__(self) -> Any:
        r = _RunOnce.__enter__(self)
        ops.stop_if(self._else_blob)
        ops.Const(True, blob_out=self._already_ran)
        return r

    def Elif(self, cond: Any, name: str | None = None) -> Any:
        if self._is_else:
            raise RuntimeError("Elif not allowed for an Else.")
        return NetBuilder.current().add(_RunIf(cond, name=name or self.name, _already_ran=self._already_ran))

    def Else(self, name: str | None = None) -> Any:
        if self._is_else:
            raise RuntimeError("Else not allowed for an Else.")
        return NetBuilder.current().add(_RunIf(name=name or self.name, _already_ran=self._already_ran))


def to_execution_step(step_or_nets: Any, default_name: str | None = None) -> Any:
    """An ExecutionStep from a NetBuilder (children become nets or substeps), a net, or a step."""
    if isinstance(step_or_nets, core.ExecutionStep):
        return step_or_nets
    if callable(getattr(type(step_or_nets), "get_step", None)):  # a TaskGroup (ops.task_group) or Task
        return step_or_nets.get_step()
    stop = None
    name = default_name or getattr(step_or_nets, "name", None) or "step"
    if isinstance(step_or_nets, NetBuilder):
        stop = step_or_nets._stop_blob
        step_or_nets = step_or_nets.get()
    items = step_or_nets if isinstance(step_or_nets, list) else [step_or_nets]
    if items and all(isinstance(x, core.Net) for x in items):
        return core.execution_step(name, items, should_stop_blob=stop)
    subs = [to_execution_step(x) if not isinstance(x, core.Net) else core.execution_step(x.Name(), x) for x in items]
    return core.execution_step(name, subs, should_stop_blob=stop)
