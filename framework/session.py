"""Sessions that run tasks, the local part of Caffe2's ``caffe2.python.session``.

``LocalSession(ws=None).run(runnable)`` runs a ``TaskGroup``, ``Task``, ``Net``, ``ExecutionStep``
or ``Plan`` in a workspace (the current one by default) through the plan executor, then fetches
every task's outputs into its ``TaskOutput``s. ``Session`` is the base (``run``, ``close``,
context manager).
"""

from __future__ import annotations

from typing import Any

from framework import core
from framework.task import Task, TaskGroup

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
        tasks: list[Task] = []
        if isinstance(runnable, TaskGroup):
            tasks = runnable.tasks()
            step = runnable.get_step()
        elif isinstance(runnable, Task):
            tasks = [runnable]
            step = runnable.get_step()
        elif isinstance(runnable, core.Net):
            step = core.execution_step(runnable.Name(), runnable)
        elif isinstance(runnable, (core.ExecutionStep, core.Plan)):
            step = runnable
        else:
            raise TypeError(f"cannot run a {type(runnable).__name__} in a session")
        plan = step if isinstance(step, core.Plan) else core.Plan(step)
        self._run_plan(plan)
        for task in tasks:
            names = task.output_names()
            if names:
                task.set_outputs(self._fetch(names))

    def close(self) -> None:
        self._open = False

    def __enter__(self) -> Session:
        return self

    def __exit__(self, *args: Any) -> None:
        self.close()

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

    def _run_plan(self, plan: Any) -> None:
        self._workspace().run_plan(plan.Proto())

    def _fetch(self, names: list[str]) -> list[Any]:
        ws = self._workspace()
        return [ws.fetch_blob(n) for n in names]
