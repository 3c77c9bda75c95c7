"""net_builder's Task/TaskGroup hooks: the builders behind ``ops.task_init()`` and its family.

As Caffe2's ``_SetupBuilder`` / ``_ReporterBuilder``: ``ops.task_init()`` (``task_exit``,
``task_instance_init``/``_exit``, ``local_init``/``_exit``) returns a ``SetupBuilder`` (a
NetBuilder: ops inside its ``with`` block go to its own nets) and attaches it to the current net
of the active builder as a net attribute (``Net.add_attribute``) under ``Task.TASK_SETUP``,
``Task.TASK_INSTANCE_SETUP`` or ``TaskGroup.LOCAL_SETUP``. ``framework.caffe2.python.task`` collects those
attributes from the nets of a task's step when it builds the step (``get_setup_nets``) and wraps
the step with them: init before, exit after. ``ops.task_reporter()`` attaches a periodic
(``run_every_ms``) step under ``Task.REPORT_STEP``; ``ops.local_reporter()`` gives it to the
current TaskGroup's ``report_step``. ``ops.task_group()`` adds a TaskGroup as the next step of the
current builder. ``framework.caffe2.python.net_builder.Operations`` calls the functions here.
"""

from __future__ import annotations

from typing import Any

from framework.caffe2.python.net_builder import NetBuilder, to_execution_step

__all__ = ["ReporterBuilder", "SetupBuilder", "attach_setup", "reporter", "task_group"]


class SetupBuilder(NetBuilder):
    """Ops to run at init (``setup``) or exit (``exit``) of a Task, its instances or a node."""

    INIT = "init"
    EXIT = "exit"

    def __init__(self, type: str, name: str | None = None) -> None:
        if type not in (self.INIT, self.EXIT):
            raise ValueError(f"SetupBuilder type must be 'init' or 'exit', got {type!r}")
        NetBuilder.__init__(self, name)
        self.type = type

    def setup(self, net: Any) -> Any:
        return to_execution_step(self) if self.type == self.INIT else None

    def exit(self, net: Any) -> Any:
        return to_execution_step(self) if self.type == self.EXIT else None


class ReporterBuilder(NetBuilder):
    """Ops run every ``interval_ms`` while a task (``net`` given: attached to it) or the current
    TaskGroup runs, and once more after it finished."""

    def __init__(self, interval_ms: int, net: Any = None, name: str | None = None) -> None:
        NetBuilder.__init__(self, name)
        self._net = net
        self.interval_ms = interval_ms

    def __exit__(self, etype: Any, *args: Any) -> None:
        try:
            if etype is None:
                from framework.caffe2.python.task import Task, TaskGroup

                step = to_execution_step(self)
                step.RunEveryMillis(self.interval_ms)
                if self._net is not None:
                    self._net.add_attribute(Task.REPORT_STEP, step)
                else:
                    TaskGroup.current().report_step(step, interval_ms=self.interval_ms)
        finally:
            NetBuilder.__exit__(self, etype, *args)


def attach_setup(level: str, kind: str, name: str | None = None) -> SetupBuilder:
    """A SetupBuilder of ``kind`` attached to the current net of the active builder under the key
    framework.caffe2.python.task collects for ``level`` ("task", "instance" or "local")."""
    from framework.caffe2.python.task import Task, TaskGroup

    key = {"task": Task.TASK_SETUP, "instance": Task.TASK_INSTANCE_SETUP, "local": TaskGroup.LOCAL_SETUP}[level]
    setup = SetupBuilder(kind, name)
    NetBuilder.current().current_net().add_attribute(key, setup)
    return setup


def reporter(interval_ms: int, name: str | None, task_level: bool) -> ReporterBuilder:
    net = NetBuilder.current().current_net() if task_level else None
    return ReporterBuilder(interval_ms, net=net, name=name)


def task_group() -> Any:
    """A new TaskGroup run as the next step of the current builder (its tasks' outputs are fetched
    with the enclosing task's)."""
    from framework.caffe2.python.task import Task, TaskGroup

    builder = NetBuilder.current()
    tg = TaskGroup()
    builder.add(tg)
    task = Task.current(required=False)
    if task is not None:
        task._nested_groups.append(tg)
    return tg
