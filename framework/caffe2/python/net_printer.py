"""Print and check jobs, task groups, tasks, steps and nets, Caffe2's ``caffe2.python.net_printer``.

- ``to_string(obj, factor_prefixes=False, c2_syntax=True)``: a Python-like text of what ``obj`` (an
  OperatorDef, NetDef, Net, ExecutionStep, Task, TaskGroup or Job) runs: ``with loop(10):``,
  ``with parallel():``, ``with Task(node=..., name=..., outputs=...):``, one line per op
  (``core.Net('n')`` then ``n.Add(['a', 'b'], ['c'])`` in Caffe2 syntax, ``c = Add(a, b)`` without).
- ``analyze(obj)``: walks a Job (its init then epoch group) as it would run, one simulated workspace per
  node, and raises AssertionError (as Caffe2) for a blob read before any op defined it (``Blob undefined:
  a``; blobs starting with ``distributed_ctx_init`` are exempt) or defined by two concurrent steps.
  PRIVATE tasks and steps with ``create_workspace`` work on a copy, so their blobs do not leak.
- ``debug_net(net)``: a copy of ``net`` with a ``LogInfo`` of each op's text before the op.

Departure: Caffe2 prints and analyzes a TaskGroup through ``tasks_by_node()`` (one merged task per
node); here each Task is printed on its own, in node order, and the tasks of a node are analyzed as the
concurrent substeps that merge would make. ``Visitor`` dispatches on the object's class or its nearest
registered base (2018 matched with isinstance, 2020 on the exact class).
"""

from __future__ import annotations

from collections import defaultdict
from contextlib import contextmanager
from copy import copy
from itertools import chain
from typing import Any, Callable, Iterator

from framework.caffe2.python.checkpoint import Job
from framework.caffe2.python.core import ExecutionStep, Net, Plan
from framework.caffe2.python.task import Task, TaskGroup, TaskOutput, WorkspaceType
from framework.proto.caffe2_pb2 import NetDef, OperatorDef

__all__ = ["Analyzer", "Printer", "Text", "Visitor", "analyze", "call", "debug_net", "factor_prefix", "to_string"]


class Visitor:
    """Calls the function registered (``@Cls.register(Type)``) for the visited object's class."""

    @classmethod
    def register(cls, type_: type) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
        if "visitors" not in cls.__dict__:
            cls.visitors = {}
        if type_ in cls.visitors:
            raise AssertionError(f"{type_} already registered!")

        def _register(func: Callable[..., Any]) -> Callable[..., Any]:
            cls.visitors[type_] = func
            return func

        return _register

    def __call__(self, obj: Any, *args: Any, **kwargs: Any) -> Any:
        if obj is None:
            return None
        for klass in type(obj).__mro__:
            func = self.__class__.visitors.get(klass)
            if func is not None:
                return func(self, obj, *args, **kwargs)
        raise TypeError(f"{self.__class__.__name__}: unsupported object type: {type(obj)}")


def _by_node(tg: TaskGroup) -> list[tuple[str, list[Task]]]:
    """The group's tasks gathered by node, nodes in order of first use."""
    groups: dict[str, list[Task]] = {}
    for task in tg.tasks():
        groups.setdefault(str(task.node), []).append(task)
    return list(groups.items())


class Analyzer(Visitor):
    """Simulated workspaces (blob -> times defined), one per node, and a stack of the active ones."""

    PREFIXES_TO_IGNORE = {"distributed_ctx_init"}

    def __init__(self) -> None:
        self.workspaces: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
        self.workspace_ctx: list[dict[str, int]] = []

    @property
    def workspace(self) -> dict[str, int]:
        return self.workspace_ctx[-1]

    @contextmanager
    def set_workspace(self, node: Any = None, ws: Any = None, do_copy: bool = False) -> Iterator[dict[str, int]]:
        if ws is None:
            ws = self.workspaces[str(node)] if node is not None else self.workspace
        if do_copy:
            ws = copy(ws)
        self.workspace_ctx.append(ws)
        try:
            yield ws
        finally:
            self.workspace_ctx.pop()

    def define_blob(self, blob: str) -> None:
        self.workspace[blob] += 1

    def need_blob(self, blob: str) -> None:
        if any(blob.startswith(p) for p in self.PREFIXES_TO_IGNORE):
            return
        assert blob in self.workspace, f"Blob undefined: {blob}"

    def concurrently(self, items: list[Any]) -> None:
        """Visit ``items`` as concurrent substeps: each on a copy of the workspace; a blob created by
        two of them is an error; the blobs they create are defined afterwards."""
        all_new: set[str] = set()
        for item in items:
            with self.set_workspace(do_copy=True) as ws_in:
                self(item)
            new = set(ws_in) - set(self.workspace)
            both = all_new & new
            assert not both, f"Error: Blobs created by multiple parallel steps: {', '.join(sorted(both))}"
            all_new |= new
        for blob in all_new:
            self.define_blob(blob)


@Analyzer.register(OperatorDef)
def analyze_op(analyzer: Analyzer, op: OperatorDef) -> None:
    for x in op.input:
        analyzer.need_blob(x)
    for x in op.output:
        analyzer.define_blob(x)


@Analyzer.register(Net)
def analyze_net(analyzer: Analyzer, net: Net) -> None:
    for op in net.Proto().op:
        analyzer(op)


@Analyzer.register(ExecutionStep)
def analyze_step(analyzer: Analyzer, step: ExecutionStep) -> None:
    proto = step.Proto()
    with analyzer.set_workspace(do_copy=proto.create_workspace):
        if proto.report_net:
            with analyzer.set_workspace(do_copy=True):
                analyzer(step.get_net(proto.report_net))
        substeps = step.Substeps() + [step.get_net(n) for n in proto.network]
        if proto.concurrent_substeps and len(substeps) > 1:
            analyzer.concurrently(substeps)
            if proto.should_stop_blob:
                analyzer.need_blob(proto.should_stop_blob)
        else:
            for sub in substeps:
                analyzer(sub)
                if proto.should_stop_blob:
                    analyzer.need_blob(proto.should_stop_blob)


@Analyzer.register(Task)
def analyze_task(analyzer: Analyzer, task: Task) -> None:
    step = task.get_step()
    plan = Plan(task.node)
    plan.AddStep(step)
    size = len(plan.Proto().SerializeToString())
    # a serialized plan is sent as one protobuf message (64 MiB limit)
    assert size < 2**26, (
        f"Due to a protobuf limitation, serialized tasks must be smaller than 64Mb, but this task has {size} bytes."
    )
    with analyzer.set_workspace(do_copy=task.workspace_type() != WorkspaceType.GLOBAL):
        analyzer(step)


@Analyzer.register(TaskGroup)
def analyze_task_group(analyzer: Analyzer, tg: TaskGroup) -> None:
    for node, tasks in _by_node(tg):
        with analyzer.set_workspace(node=node):
            if len(tasks) == 1:
                analyzer(tasks[0])
            else:
                analyzer.concurrently(tasks)


@Analyzer.register(Job)
def analyze_job(analyzer: Analyzer, job: Job) -> None:
    analyzer(job.init_group)
    analyzer(job.epoch_group)


def analyze(obj: Any) -> None:
    """Check ``obj`` (usually a Job): no blob is read before it is defined, no blob is defined by two
    concurrent steps (AssertionError naming the blob otherwise)."""
    Analyzer()(obj)


class Text:
    """Lines of text with ``with ...:`` indentation (an empty block gets ``pass``)."""

    def __init__(self) -> None:
        self._indent = 0
        self._lines_in_context = [0]
        self.lines: list[str] = []

    @contextmanager
    def context(self, text: str | None) -> Iterator[None]:
        if text is not None:
            self.add(f"with {text}:")
            self._indent += 4
            self._lines_in_context.append(0)
        try:
            yield
        finally:
            if text is not None:
                if self._lines_in_context[-1] == 0:
                    self.add("pass")
                self._indent -= 4
                self._lines_in_context.pop()

    def add(self, text: str) -> None:
        self._lines_in_context[-1] += 1
        self.lines.append(" " * self._indent + text)

    def __str__(self) -> str:
        return "\n".join(self.lines)


class Printer(Visitor, Text):
    """Text of what an object runs (see module doc)."""

    def __init__(self, factor_prefixes: bool = False, c2_syntax: bool = True) -> None:
        Text.__init__(self)
        self.factor_prefixes = factor_prefixes
        self.c2_syntax = c2_syntax
        self.c2_net_name: str | None = None


def _sanitize_str(s: Any) -> str:
    text = s.decode("ascii", errors="ignore") if isinstance(s, bytes) else str(s)
    return f"'{text}'" if len(text) < 64 else f"'{text[:64]}'...<+len={len(text) - 64}>"


def _arg_val(arg: Any) -> str:
    if arg.HasField("f"):
        return str(arg.f)
    if arg.HasField("i"):
        return str(arg.i)
    if arg.HasField("s"):
        return _sanitize_str(arg.s)
    if arg.floats:
        return str(list(arg.floats))
    if arg.ints:
        return str(list(arg.ints))
    if arg.strings:
        return str([_sanitize_str(s) for s in arg.strings])
    return "[]"


def commonprefix(m: list[str]) -> str:
    """The longest common prefix of the strings ``m`` ('' for none)."""
    if not m:
        return ""
    lo, hi = min(m), max(m)
    for i, c in enumerate(lo):
        if c != hi[i]:
            return lo[:i]
    return lo


def format_value(val: Any) -> str:
    if isinstance(val, list):
        return "[" + ", ".join(f"'{v}'" for v in val) + "]"
    return str(val)


def factor_prefix(vals: list[Any], do_it: bool) -> str:
    """``vals`` joined by ', '; with ``do_it`` and several values, their common prefix is written once:
    ``pre/[a, b]``."""
    texts = [format_value(v) for v in vals]
    prefix = commonprefix(texts) if len(texts) > 1 and do_it else ""
    joined = ", ".join(v[len(prefix) :] for v in texts)
    return f"{prefix}[{joined}]" if prefix else joined


def call(
    op: str, inputs: list[Any] | None = None, outputs: list[Any] | None = None, factor_prefixes: bool = False
) -> str:
    """``outputs = op(inputs)``: positional inputs, then ``(key, value)`` tuples as ``key=value``."""
    args = ""
    if inputs:
        positional = [a for a in inputs if not isinstance(a, tuple)]
        keywords = [a for a in inputs if isinstance(a, tuple)]
        args = ", ".join(
            x for x in chain([factor_prefix(positional, factor_prefixes)], (f"{k}={v}" for k, v in keywords)) if x
        )
    text = f"{op}({args})"
    return f"{factor_prefix(outputs, factor_prefixes)} = {text}" if outputs else text


def format_device_option(dev_opt: Any) -> str | None:
    """``DeviceOption(type, id, 'node')``, or None for the default device."""
    if not dev_opt or not (dev_opt.device_type or dev_opt.device_id or dev_opt.node_name):
        return None
    return call("DeviceOption", [dev_opt.device_type, dev_opt.device_id, f"'{dev_opt.node_name}'"])


@Printer.register(OperatorDef)
def print_op(text: Printer, op: OperatorDef) -> None:
    args = [(a.name, _arg_val(a)) for a in op.arg]
    device = format_device_option(op.device_option)
    if device:
        args.append(("device_option", device))
    if getattr(text, "c2_net_name", None):
        text.add(call(f"{text.c2_net_name}.{op.type}", [list(op.input), list(op.output), *args]))
    else:
        text.add(
            call(op.type, [*op.input, *args], list(op.output), factor_prefixes=getattr(text, "factor_prefixes", False))
        )
    for arg in op.arg:
        if arg.HasField("n"):
            with text.context(f"arg: {arg.name}"):
                text(arg.n)


@Printer.register(NetDef)
def print_net_def(text: Printer, net_def: NetDef) -> None:
    if text.c2_syntax:
        text.add(call("core.Net", [f"'{net_def.name}'"], [net_def.name]))
        text.c2_net_name = net_def.name
    else:
        text.add(f"# net: {net_def.name}")
    for op in net_def.op:
        text(op)
    if text.c2_syntax:
        text.c2_net_name = None


@Printer.register(Net)
def print_net(text: Printer, net: Net) -> None:
    text(net.Proto())


def _get_step_context(step: ExecutionStep) -> tuple[str | None, bool]:
    """(the ``with`` header of the step or None, whether each substep gets its own header)."""
    proto = step.Proto()
    if proto.should_stop_blob:
        return call("loop"), False
    if proto.num_iter and proto.num_iter != 1:
        return call("loop", [proto.num_iter]), False
    if proto.num_concurrent_instances > 1:
        return call("parallel", [("num_instances", proto.num_concurrent_instances)]), len(step.Substeps()) > 1
    if proto.concurrent_substeps and len(step.Substeps()) > 1:
        return call("parallel"), True
    if proto.report_net:
        return call("run_once"), False
    return None, False


@Printer.register(ExecutionStep)
def print_step(text: Printer, step: ExecutionStep) -> None:
    proto = step.Proto()
    step_ctx, do_substep = _get_step_context(step)
    with text.context(step_ctx):
        if proto.report_net:
            with text.context(call("report_net", [proto.report_interval])):
                text(step.get_net(proto.report_net))
        for sub in step.Substeps() + [step.get_net(n) for n in proto.network]:
            sub_proto = sub.Proto() if isinstance(sub, ExecutionStep) else None
            if sub_proto is not None and sub_proto.run_every_ms:
                sub_ctx = call("reporter", [str(sub), ("interval_ms", sub_proto.run_every_ms)])
            elif do_substep:
                title = "workspace" if sub_proto is not None and sub_proto.create_workspace else "step"
                sub_ctx = call(title, [str(sub)])
            else:
                sub_ctx = None
            with text.context(sub_ctx):
                text(sub)
                if proto.should_stop_blob:
                    text.add(call("yield stop_if", [proto.should_stop_blob]))


def _print_task_output(x: TaskOutput) -> str:
    if not isinstance(x, TaskOutput):
        raise TypeError(f"a TaskOutput was expected, got {type(x).__name__}")
    return "Output[" + ", ".join(x.blob_names()) + "]"


@Printer.register(Task)
def print_task(text: Printer, task: Task) -> None:
    outs = ", ".join(_print_task_output(o) for o in task.outputs())
    with text.context(call("Task", [("node", task.node), ("name", task.name), ("outputs", outs)])):
        text(task.get_step())


@Printer.register(TaskGroup)
def print_task_group(text: Printer, tg: TaskGroup, header: str | None = None) -> None:
    with text.context(header or call("TaskGroup")):
        for _, tasks in _by_node(tg):
            for task in tasks:
                text(task)


@Printer.register(Job)
def print_job(text: Printer, job: Job) -> None:
    text(job.init_group, "Job.current().init_group")
    text(job.epoch_group, "Job.current().epoch_group")
    with text.context("Job.current().stop_conditions"):
        for out in job.stop_conditions:
            text.add(_print_task_output(out))
    text(job.download_group, "Job.current().download_group")
    text(job.exit_group, "Job.current().exit_group")


def to_string(obj: Any, **kwargs: Any) -> str:
    """The text of ``obj`` (see module doc); ``kwargs`` go to ``Printer``."""
    printer = Printer(**kwargs)
    printer(obj)
    return str(printer)


def debug_net(net: Net) -> Net:
    """A copy of ``net`` that logs each op's text (``LogInfo``) before running it."""
    if not isinstance(net, Net):
        raise TypeError(f"debug_net takes a Net, got {type(net).__name__}")
    out = Net(str(net))
    for op in net.Proto().op:
        text = Printer(c2_syntax=False)
        print_op(text, op)
        out.LogInfo(str(text))
        out.Proto().op.extend([op])
    return out
