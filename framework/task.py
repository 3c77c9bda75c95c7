"""Tasks and task groups, the local part of Caffe2's ``caffe2.python.task``.

A ``Task`` is an execution step built in a ``with Task(...)`` block (a NetBuilder: ``ops.net(...)``
and ``ops.X(...)`` inside add to it) or given as ``step``; it can name output blobs or records
(``outputs=`` / ``add_output`` / ``final_output``) that a session fetches into ``TaskOutput``s
after the run. A ``TaskGroup`` collects the tasks created inside its ``with`` block (or given
``group=``); ``get_step()`` runs them all as concurrent substeps, after the init nets of any
``LOCAL_SETUP`` hooks (objects with ``setup(init_net)`` returning extra init nets, as
``pipeline.NetProcessor``) registered with ``add_setup``. Run them with
``framework.session.LocalSession``. Not ported: Cluster/Node placement (all tasks run on this
process), workspace types other than the session's workspace, reporter nets.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any

from framework import core
from framework.net_builder import NetBuilder, to_execution_step

__all__ = ["Task", "TaskGroup", "TaskOutput", "TaskOutputList", "final_output", "WorkspaceType"]

_local = threading.local()
_names = itertools.count()


def _stack(kind: str) -> list:
    if not hasattr(_local, kind):
        setattr(_local, kind, [])
    return getattr(_local, kind)


class WorkspaceType:
    """Caffe2's workspace types: PRIVATE (a task's own) or GLOBAL (the session's). Tasks here run in
    the session's workspace either way."""

    PRIVATE = "private"
    GLOBAL = "global"


class TaskOutput:
    """Blobs (or a record's blobs) a task hands back; ``fetch()`` after the session ran."""

    def __init__(self, names: Any) -> None:
        from framework import schema

        self.names = names
        self._is_record = isinstance(names, schema.Field)
        self._blobs = [str(b) for b in (names.field_blobs() if self._is_record else _as_list(names))]
        self._values: list[Any] | None = None

    def blob_names(self) -> list[str]:
        return list(self._blobs)

    def set(self, values: list[Any]) -> None:
        if len(values) != len(self._blobs):
            raise ValueError(f"{len(values)} values for {len(self._blobs)} output blobs")
        self._values = list(values)

    def get(self) -> Any:
        if self._values is None:
            raise RuntimeError("TaskOutput not yet fetched: run the task in a session first")
        if self._is_record:
            from framework import schema

            return schema.from_blob_list(self.names, self._values)
        return self._values[0] if not isinstance(self.names, (list, tuple)) else self._values

    fetch = get


class TaskOutputList:
    """Several TaskOutputs fetched together (Caffe2's helper)."""

    def __init__(self, outputs: list[TaskOutput] | None = None) -> None:
        self.outputs = list(outputs or [])

    def names(self) -> list[str]:
        return [n for o in self.outputs for n in o.blob_names()]

    def set_values(self, values: list[Any]) -> None:
        offset = 0
        for o in self.outputs:
            n = len(o.blob_names())
            o.set(values[offset : offset + n])
            offset += n


class TaskGroup:
    """A group of Tasks run concurrently (see module doc)."""

    LOCAL_SETUP = "local_setup"

    def __init__(self, workspace_type: str | None = None) -> None:
        self._tasks: list[Task] = []
        self._setups: list[Any] = []
        self._workspace_type = workspace_type
        self._already_used = False

    @staticmethod
    def current(required: bool = True) -> TaskGroup | None:
        stack = _stack("groups")
        if not stack and required:
            raise RuntimeError("No active TaskGroup: use `with TaskGroup():`")
        return stack[-1] if stack else None

    def __enter__(self) -> TaskGroup:
        _stack("groups").append(self)
        return self

    def __exit__(self, *args: Any) -> None:
        _stack("groups").pop()

    def add(self, task: Task) -> None:
        if self._already_used:
            raise RuntimeError("Cannot add Task to an already used TaskGroup.")
        self._tasks.append(task)

    def add_setup(self, hook: Any) -> None:
        """Register an object whose ``setup(init_net)`` returns init nets to run before the tasks."""
        if hook not in self._setups:
            self._setups.append(hook)

    def tasks(self) -> list[Task]:
        return list(self._tasks)

    def num_registered_tasks(self) -> int:
        return len(self._tasks)

    def used_nodes(self) -> list[str]:
        return ["local"] if self._tasks else []

    def workspace_type(self) -> str | None:
        return self._workspace_type

    def get_step(self) -> core.ExecutionStep:
        """Setup init nets, then every task's step as concurrent substeps."""
        self._already_used = True
        steps = []
        init = core.Net("task_group_setup")
        for hook in self._setups:
            nets = hook.setup(init)
            for net in nets if isinstance(nets, list) else []:
                steps.append(core.execution_step(f"setup:{net.Name()}", net))
        if init.Proto().op:
            steps.insert(0, core.execution_step("setup", init))
        body = [t.get_step() for t in self._tasks]
        if body:
            steps.append(core.execution_step("tasks", body, concurrent_substeps=True))
        return core.execution_step("task_group", steps)

    def outputs(self) -> TaskOutputList:
        return TaskOutputList([o for t in self._tasks for o in t.outputs()])


class Task:
    """One execution step with outputs (see module doc)."""

    TASK_SETUP = "task_setup"

    def __init__(
        self, step: Any = None, outputs: Any = None, workspace_type: str | None = None, group: TaskGroup | None = None,
        node: Any = None, name: str | None = None, num_instances: int | None = None,
    ) -> None:  # fmt: skip
        self.name = name or f"task_{next(_names)}"
        self.node = node or "local"
        self._workspace_type = workspace_type
        self._num_instances = num_instances
        self._step: Any = None
        self._outputs: list[TaskOutput] = []
        self._net_builder: NetBuilder | None = None
        if step is not None:
            self.set_step(step)
        if outputs is not None:
            self.add_outputs(outputs)
        self.group = group if group is not None else TaskGroup.current(required=False)
        if self.group is not None:
            self.group.add(self)

    @staticmethod
    def current(required: bool = True) -> Task | None:
        stack = _stack("tasks")
        if not stack and required:
            raise RuntimeError("No active Task: use `with Task():`")
        return stack[-1] if stack else None

    def __enter__(self) -> Task:
        if self._step is not None:
            raise RuntimeError("this Task already has a step")
        _stack("tasks").append(self)
        self._net_builder = NetBuilder(_fullname=self.name)
        self._net_builder.__enter__()
        return self

    def __exit__(self, etype: Any, *args: Any) -> None:
        self._net_builder.__exit__(etype, *args)
        _stack("tasks").pop()
        if etype is None:
            self.set_step(self._net_builder)
        self._net_builder = None

    def set_step(self, step: Any) -> None:
        if self._step is not None:
            raise RuntimeError("this Task already has a step")
        self._step = step

    def get_step(self) -> core.ExecutionStep:
        if self._step is None:
            return core.execution_step(self.name, [])
        step = to_execution_step(self._step, default_name=self.name)
        if self._num_instances and self._num_instances > 1:
            step = core.execution_step(self.name, [step], num_concurrent_instances=self._num_instances)
        return step

    def add_output(self, output: Any) -> TaskOutput:
        out = output if isinstance(output, TaskOutput) else TaskOutput(output)
        self._outputs.append(out)
        return out

    def add_outputs(self, outputs: Any) -> Any:
        if isinstance(outputs, (list, tuple)):
            return [self.add_output(o) for o in outputs]
        return self.add_output(outputs)

    def outputs(self) -> list[TaskOutput]:
        return list(self._outputs)

    def output_names(self) -> list[str]:
        return [n for o in self._outputs for n in o.blob_names()]

    def set_outputs(self, values: list[Any]) -> None:
        TaskOutputList(self._outputs).set_values(values)

    def workspace_type(self) -> str | None:
        return self._workspace_type


def final_output(blob_or_record: Any) -> TaskOutput:
    """Add a blob or record to the outputs of the current Task."""
    return Task.current().add_output(blob_or_record)


def _as_list(x: Any) -> list[Any]:
    return list(x) if isinstance(x, (list, tuple)) else [x]
