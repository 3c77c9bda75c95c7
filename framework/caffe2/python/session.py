"""Sessions that run tasks, the local part of Caffe2's ``caffe2.python.session``.

``LocalSession(ws=None).run(runnable)`` runs a ``TaskGroup``, ``Task``, ``Net``, ``ExecutionStep``
or ``Plan`` in a workspace (the current one by default) through the plan executor, then fetches
every task's outputs (with those of task groups nested by ``ops.task_group()``) into its
``TaskOutput``s. As Caffe2's ``Session.compile``, anything but a TaskGroup is first wrapped in a
Task of a new TaskGroup, so setup attached to its nets (``ops.task_init()``, ``local_init()``...)
runs; the wrapped step is built once per runnable (setup objects run on every ``run``). A Plan
holding steps given as protos runs as it is. ``Session`` is the base (``run``, ``close``, context
manager).
"""

from __future__ import annotations

from typing import Any

from framework import core
from framework.caffe2.python.task import Task, TaskGroup, WorkspaceType

__all__ = ["LocalSession", "Session"]


class Session:
    """Runs runnables; subclasses implement ``_run_plan(plan)`` and ``_fetch(names)``."""

    def __init__(self) -> None:
        self._open = True

    def is_open(self) -> bool:
        return self._open

    def run(self, runnable: Any, workspace_type: str | None = None) -> None:
        if not self._open:
            raise RuntimeError("Session is closed.")
        step, tasks = self.compile(runnable, workspace_type)
        tasks = _with_nested(tasks)
        self._create_outputs([n for t in tasks for n in t.output_names()])
        self._run_plan(step if isinstance(step, core.Plan) else core.Plan(step))
        for task in tasks:
            names = task.output_names()
            if names:
                task.set_outputs(self._fetch(names))

    @staticmethod
    def compile(runnable: Any, workspace_type: str | None = None) -> tuple[Any, list[Task]]:
        """(the step or plan to run, the tasks whose outputs it fills) for ``runnable``."""
        if isinstance(runnable, TaskGroup):
            return runnable.get_step(), runnable.tasks()
        cached = getattr(runnable, "__dict__", {}).get("_session_compiled")
        if cached is not None:
            return cached
        tg = TaskGroup(workspace_type=workspace_type or WorkspaceType.GLOBAL)
        if isinstance(runnable, Task):
            tg.add(runnable)
        elif isinstance(runnable, core.ExecutionStep):
            Task(step=runnable, group=tg)
        elif isinstance(runnable, core.Net):
            Task(step=core.execution_step("runnable", runnable), group=tg, name=runnable.Name())
        elif isinstance(runnable, core.Plan):
            steps = runnable.Steps()
            if not steps or len(steps) != len(runnable.Proto().execution_step):
                return runnable, []
            Task(step=steps[0] if len(steps) == 1 else steps, group=tg, name=runnable.Name())
        else:
            raise TypeError(f"cannot run a {type(runnable).__name__} in a session")
        compiled = (tg.get_step(), tg.tasks())
        runnable.__dict__["_session_compiled"] = compiled
        return compiled

    def close(self) -> None:
        self._open = False

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *args: Any) -> None:
        self.close()

    def _create_outputs(self, names: list[str]) -> None:
        """Make the output blobs exist before the run (no-op by default)."""

    def _run_plan(self, plan: Any) -> None:
        raise NotImplementedError

    def _fetch(self, names: list[str]) -> list[Any]:
        raise NotImplementedError


class LocalSession(Session):
    """Runs everything in one workspace of this process (``ws``, else the current workspace)."""

    def __init__(self, ws: Any = None) -> None:
        super().__init__()
        self._ws = ws

    def _workspace(self) -> Any:
        if self._ws is not None:
            return self._ws
        from framework import workspace

        return workspace.C()

    def _create_outputs(self, names: list[str]) -> None:
        """As Caffe2's: output blobs are created in the session's workspace first, so a task
        instance running in a child workspace writes them there (not into its own)."""
        ws = self._workspace()
        for name in names:
            ws.create_blob(name)

    def _run_plan(self, plan: Any) -> None:
        self._workspace().run_plan(plan.Proto())

    def _fetch(self, names: list[str]) -> list[Any]:
        ws = self._workspace()
        return [ws.fetch_blob(n) for n in names]


def _with_nested(tasks: list[Task]) -> list[Task]:
    """``tasks`` and the tasks of the groups nested in them (``ops.task_group()``), recursively."""
    out: list[Task] = []
    for task in tasks:
        out.append(task)
        for group in task._nested_groups:
            out += _with_nested(group.tasks())
    return out
