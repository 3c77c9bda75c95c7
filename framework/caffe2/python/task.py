"""Tasks and task groups, the local part of Caffe2's ``caffe2.python.task``.

A ``Task`` is an execution step built in a ``with Task(...)`` block (a NetBuilder: ``ops.net(...)``
and ``ops.X(...)`` inside add to it) or given as ``step``; it can name output blobs or records
(``outputs=`` / ``add_output`` / ``final_output``) that a session fetches into ``TaskOutput``s
after the run. A ``TaskGroup`` collects the tasks created inside its ``with`` block (or given
``group=``). Run them with ``framework.caffe2.python.session.LocalSession``.

Setup, as Caffe2: objects attached to the nets of a task's step (``Net.add_attribute``, e.g. by
``net_builder.ops.task_init()`` or a ``SetupNets``) under ``Task.TASK_SETUP`` run once around the
task, under ``Task.TASK_INSTANCE_SETUP`` around each instance (``num_instances`` > 1: concurrent
instances, each in a child workspace), under ``TaskGroup.LOCAL_SETUP`` once around all the
group's tasks; an object's ``setup(init_net)`` / ``exit(exit_net)`` add ops to the shared net or
return nets/steps, and each object runs once (``get_setup_nets``). ``Task.REPORT_STEP`` steps and
``TaskGroup.report_step`` / ``report_net`` run every ``run_every_ms`` while the task / group runs
(on a timer thread of the plan executor) and once more after. ``TaskGroup.add_setup(obj)``
registers a LOCAL_SETUP object directly. ``Node`` / ``Cluster`` record node names as Caffe2's;
``LocalSession`` runs the tasks of every node in this process, so LOCAL_SETUP and reporters run
once per group run. Not ported: workspace types (tasks run in the session's workspace, only
task instances get child workspaces).
"""

from __future__ import annotations

import threading
from typing import Any

from framework import core
from framework.caffe2.python.net_builder import NetBuilder, to_execution_step
from framework.caffe2.python.task_setup import SetupNets, add_setup_steps, get_setup_nets

__all__ = [
    "Cluster",
    "Node",
    "SetupNets",
    "Task",
    "TaskGroup",
    "TaskOutput",
    "TaskOutputList",
    "WorkspaceType",
    "add_setup_steps",
    "final_output",
    "get_setup_nets",
]

_local = threading.local()


def _stack(kind: str) -> list:
    if not hasattr(_local, kind):
        setattr(_local, kind, [])
    return getattr(_local, kind)


class WorkspaceType:
    """Caffe2's workspace types: PRIVATE (a task's own) or GLOBAL (the session's). Tasks here run in
    the session's workspace either way."""

    PRIVATE = "private"
    GLOBAL = "global"


class Cluster:
    """The node names used by tasks (Caffe2's; created on first use of ``Node``): ``nodes()``,
    ``node_kwargs()``. A context: ``with Cluster():`` starts a fresh record."""

    def __init__(self) -> None:
        self._nodes: list[str] = []
        self._node_kwargs: dict[str, dict] = {}

    @staticmethod
    def current() -> Cluster:
        stack = _stack("clusters")
        if not stack:
            stack.append(Cluster())  # the default cluster (Caffe2's allow_default)
        return stack[-1]

    def __enter__(self) -> Cluster:
        _stack("clusters").append(self)
        return self

    def __exit__(self, *args: Any) -> None:
        _stack("clusters").pop()

    def add_node(self, node: Node) -> None:
        name = str(node)
        if name not in self._nodes:
            self._nodes.append(name)
        self._node_kwargs[name] = {**self._node_kwargs.get(name, {}), **node.kwargs()}

    def nodes(self) -> list[str]:
        return list(self._nodes)

    def node_kwargs(self) -> dict[str, dict]:
        return dict(self._node_kwargs)

    def __repr__(self) -> str:
        return f"Cluster(nodes={self._nodes}, node_kwargs={self._node_kwargs})"


class Node:
    """A node name for the Tasks created inside ``with Node(name):`` (Caffe2's). Only the name
    counts; ``LocalSession`` runs every node's tasks in this process, as Caffe2's does."""

    def __init__(self, node: Any = "local", **kwargs: Any) -> None:
        self._name = str(node)
        self._kwargs = kwargs
        Cluster.current().add_node(self)

    @staticmethod
    def current(node: Any = None) -> Node:
        """``node`` if given, else the innermost active Node, else the default ``Node('local')``."""
        if node is not None:
            return node if isinstance(node, Node) else Node(node)
        stack = _stack("nodes")
        return stack[-1] if stack else Node()

    def __enter__(self) -> Node:
        _stack("nodes").append(self)
        return self

    def __exit__(self, *args: Any) -> None:
        _stack("nodes").pop()

    def __str__(self) -> str:
        return self._name

    def kwargs(self) -> dict:
        return self._kwargs

    def __repr__(self) -> str:
        return f"Node(name={self._name}, kwargs={self._kwargs})"


class TaskOutput:
    """Blobs (or a record's blobs) a task hands back; ``fetch()`` after the session ran."""

    def __init__(self, names: Any) -> None:
        from framework.caffe2.python import schema

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
            from framework.caffe2.python import schema

            return schema.from_blob_list(self.names, self._values)
        return self._values[0] if not isinstance(self.names, (list, tuple)) else self._values

    fetch = get

    def __repr__(self) -> str:
        return f"TaskOutput(names={self.names}, values={self._values})"


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
        self._report_nets: dict[str, tuple[Any, int]] = {}
        self._report_steps: list[tuple[str, Any]] = []
        self._workspace_type = workspace_type
        self._already_used = False
        self._step: core.ExecutionStep | None = None
        self._remote_nets: list[Any] = []

    def add_remote_net(self, net: Any) -> None:
        """Record a net meant for a remote node (Caffe2 2020 keeps the list; a local session runs none)."""
        self._remote_nets.append(net)

    def remote_nets(self) -> list[Any]:
        return self._remote_nets

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
        # as Caffe2: a task without a workspace type takes the group's (PRIVATE by default), a group
        # without one takes its first task's
        if task._workspace_type is None:
            task._workspace_type = self._workspace_type or WorkspaceType.PRIVATE
        if self._workspace_type is None:
            self._workspace_type = task._workspace_type
        self._tasks.append(task)

    def add_setup(self, hook: Any) -> None:
        """Register a LOCAL_SETUP object (``setup(init_net)`` / ``exit(exit_net)``) directly."""
        if self._already_used:
            raise RuntimeError("Cannot add setup to an already used TaskGroup.")
        if hook not in self._setups:
            self._setups.append(hook)

    def report_step(self, step: Any = None, node: Any = None, interval_ms: int = 1000) -> None:
        """Run ``step`` every ``interval_ms`` while the group's tasks run, and once after they all
        finished."""
        if self._already_used:
            raise RuntimeError("Cannot add a report step to an already used TaskGroup.")
        self._add_report_step(step, node, interval_ms)

    def _add_report_step(self, step: Any, node: Any, interval_ms: int) -> None:
        step = to_execution_step(step if step is not None else [])
        step.RunEveryMillis(interval_ms)
        self._report_steps.append((str(Node.current(node)), step))

    def report_net(self, net: Any = None, node: Any = None, report_interval: int = 5) -> Any:
        """The node's report net (created when not given), run every ``report_interval`` seconds
        (Caffe2's deprecated form of ``report_step``)."""
        node = str(Node.current(node))
        if net is not None and node in self._report_nets:
            raise RuntimeError(f"node {node} already has a report net")
        if node not in self._report_nets:
            self._report_nets[node] = (net if net is not None else core.Net(f"{node}/reporter"), report_interval)
        return self._report_nets[node][0]

    def tasks(self) -> list[Task]:
        return list(self._tasks)

    def num_registered_tasks(self) -> int:
        return len(self._tasks)

    def used_nodes(self) -> list[str]:
        """The nodes of the group's tasks, in order (all run here: one process)."""
        return list(dict.fromkeys(t.node for t in self._tasks))

    def workspace_type(self) -> str | None:
        return self._workspace_type

    def get_step(self) -> core.ExecutionStep:
        """Local init, then the report steps and every task's step concurrently, then local exit
        (built once: the setup objects are used up)."""
        if self._step is not None:
            return self._step
        self._already_used = True
        for node, (net, interval) in self._report_nets.items():
            self._add_report_step(net, node, interval * 1000)
        self._report_nets = {}
        report_steps = [s for _, s in self._report_steps]
        task_steps = [t.get_step() for t in self._tasks]
        steps = report_steps + task_steps or [core.execution_step("empty", [])]
        body = steps[0] if len(steps) == 1 else core.execution_step("local:body", steps, concurrent_substeps=True)
        inits, exits = get_setup_nets(self.LOCAL_SETUP, task_steps + report_steps, self, self._setups)
        self._step = add_setup_steps(body, inits, exits, "local")
        return self._step

    def outputs(self) -> TaskOutputList:
        return TaskOutputList([o for t in self._tasks for o in t.outputs()])

    def __repr__(self) -> str:
        return (
            f"TaskGroup(tasks={[t.name for t in self._tasks]}, workspace_type={self._workspace_type}, "
            f"remote_nets={self._remote_nets})"
        )


def _task_name(node: str, group: TaskGroup | None, name: str) -> str:
    """Caffe2's task names: ``<node>/<name>``, made unique within the group with ``:1``, ``:2``..."""
    base = f"{node}/{name}"
    used = {t.name for t in group._tasks} if group is not None else set()
    out, i = base, 0
    while out in used:
        i += 1
        out = f"{base}:{i}"
    return out


class Task:
    """One execution step with outputs (see module doc)."""

    # Run once per task, before / after all its concurrent instances.
    TASK_SETUP = "task_setup"
    # Run once for each instance of the task.
    TASK_INSTANCE_SETUP = "task_instance_setup"
    REPORT_STEP = "report_step"

    def __init__(
        self, step: Any = None, outputs: Any = None, workspace_type: str | None = None, group: TaskGroup | None = None,
        node: Any = None, name: str | None = None, num_instances: int | None = None,
    ) -> None:  # fmt: skip
        if not name and isinstance(step, core.ExecutionStep):
            name = step.Proto().name
        self.node = str(Node.current(node))
        owner = group if group is not None else TaskGroup.current(required=False)
        self.name = _task_name(self.node, owner, name or "task")
        self._workspace_type = workspace_type
        self._num_instances = num_instances
        self._step: Any = None
        self._step_with_setup: Any = None
        self._outputs: list[TaskOutput] = []
        self._net_builder: NetBuilder | None = None
        self._nested_groups: list[TaskGroup] = []
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
        self._step = to_execution_step(step, default_name=self.name)

    def get_step(self) -> core.ExecutionStep:
        """The task's step wrapped as Caffe2 does: task init, then the instance(s) (each: instance
        init, the report steps on their timers beside the step, instance exit), then task exit.
        Built once: the setup objects are used up."""
        if self._step_with_setup is not None:
            return self._step_with_setup
        if self._step is None:
            self._step_with_setup = core.execution_step(self.name, [])
            return self._step_with_setup
        report_steps = [s for s in self._step.get_all_attributes(self.REPORT_STEP) if not hasattr(s, "_report_used")]
        for s in report_steps:
            s._report_used = True
            if not s.Proto().run_every_ms:
                s.RunEveryMillis(1000)
        both = [self._step, *report_steps]
        task_inits, task_exits = get_setup_nets(self.TASK_SETUP, both, self)
        inst_inits, inst_exits = get_setup_nets(self.TASK_INSTANCE_SETUP, both, self)
        body = self._step if not report_steps else core.execution_step(f"{self.name}:body", [*report_steps, self._step])
        step = add_setup_steps(body, inst_inits, inst_exits, f"{self.name}:instance")
        if self._num_instances and self._num_instances > 1:
            step.SetCreateWorkspace(True)
            step = core.execution_step(f"{self.name}:parallel", [step], num_concurrent_instances=self._num_instances)
        self._step_with_setup = add_setup_steps(step, task_inits, task_exits, self.name)
        return self._step_with_setup

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

    def __repr__(self) -> str:
        return f"Task(name={self.name}, node={self.node}, outputs={self.output_names()})"


def final_output(blob_or_record: Any) -> TaskOutput:
    """Add a blob or record to the outputs of the current Task (a new Task, in the current
    TaskGroup if any, when none is active: as Caffe2)."""
    return (Task.current(required=False) or Task()).add_output(blob_or_record)


def _as_list(x: Any) -> list[Any]:
    return list(x) if isinstance(x, (list, tuple)) else [x]
