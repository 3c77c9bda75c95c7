"""Plans: PlanDef / ExecutionStep execution, as Caffe2's plan executor.

A plan's NetDefs are created once in the workspace (replacing nets of the
same name); its execution steps then run in order. A step holds either
``network`` names or ``substep``s:

- ``num_iter`` iterations (default 1); with ``should_stop_blob`` the step
  repeats until that scalar blob is true, checked after every net or substep
  (``num_iter`` and ``should_stop_blob`` are exclusive); ``only_once`` makes
  such a step run a single iteration;
- ``concurrent_substeps`` runs the substeps on their own threads; the first
  failure stops the others at their next unit of work and is re-raised;
- ``num_concurrent_instances`` N runs N copies of each substep concurrently;
- substeps with ``run_every_ms`` run on a timer while their siblings run, and
  once more after they finish; ``report_net`` runs every ``report_interval``
  seconds the same way;
- a failing concurrent substep closes the workspace's queues (objects marked
  ``abort_on_plan_failure``: BlobsQueue, RebatchingQueue), so siblings blocked
  on a queue wake up and the plan ends with the first error instead of hanging;
- ``create_workspace`` gives every run of the step a child workspace (parent
  = the current one) in which the plan's nets are created anew.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

import numpy as np

from framework.errors import NetError, add_note
from framework.memory.tensor import Tensor
from framework.memory.workspace import Workspace
from framework.proto.framework_pb2 import ExecutionStep, NetDef, PlanDef

__all__ = ["run_plan", "run_step", "load_plan"]


def load_plan(plan: Any) -> PlanDef:
    """A PlanDef from a PlanDef, core.Plan, ExecutionStep, core.ExecutionStep, path or text."""
    if isinstance(plan, PlanDef):
        return plan
    if isinstance(plan, ExecutionStep):
        return PlanDef(name=plan.name, execution_step=[plan])
    if hasattr(plan, "Proto") and callable(plan.Proto):
        proto = plan.Proto()
        if isinstance(proto, ExecutionStep):
            if hasattr(plan, "as_plan_def"):  # a step builder (core.ExecutionStep) that knows the nets it runs
                return plan.as_plan_def()
            return PlanDef(name=str(plan))
        return proto
    if isinstance(plan, (str, bytes)):
        import os

        from framework.proto.io import parse_bytes, parse_text, read_plan

        if isinstance(plan, bytes):
            return parse_bytes(plan, PlanDef)
        return read_plan(plan) if os.path.isfile(plan) else parse_text(plan, PlanDef)
    raise NetError(f"expected a PlanDef, core.Plan or ExecutionStep, got {type(plan).__name__}")


class _Plan:
    """Run state shared by the steps of one plan run."""

    def __init__(self, plan: PlanDef) -> None:
        self.net_defs: dict[str, NetDef] = {n.name: n for n in plan.network}
        # workspace -> names of the nets this plan made in it. Weak keys, not id(workspace): a child
        # workspace of a finished step instance may be freed and a new one get its id.
        self.created: weakref.WeakKeyDictionary[Workspace, set[str]] = weakref.WeakKeyDictionary()
        self.lock = threading.Lock()
        self.failed = threading.Event()


def run_plan(ws: Workspace, plan: Any) -> None:
    """Run the plan's execution steps in order on ``ws``.

    Each of the plan's nets is created (replacing a net of the same name) the
    first time a step runs it in a workspace, then shared by later steps.
    """
    plan = load_plan(plan)
    state = _Plan(plan)
    for step in plan.execution_step:
        run_step(ws, step, state)


def _get_net(ws: Workspace, name: str, state: _Plan, step: ExecutionStep) -> Any:
    net_def = state.net_defs.get(name)
    if net_def is None:
        if not ws.has_net(name):
            raise NetError(f"step '{step.name}': no net called '{name}' in the plan or the workspace")
        return ws.get_net(name)
    made = state.created.get(ws)
    if made is None or name not in made:  # first use in this workspace (later iterations skip the lock)
        with state.lock:
            made = state.created.setdefault(ws, set())
            if name not in made:
                ws.create_net(net_def, overwrite=True)
                made.add(name)
    return ws.get_net(name)


def _should_stop(ws: Workspace, blob_name: str) -> bool:
    if not blob_name or not ws.has_blob(blob_name):
        return False
    obj = ws.get_blob(blob_name).held
    if isinstance(obj, Tensor):
        if not obj.is_allocated:
            return False
        arr = obj.data()
        if arr.size != 1:
            raise NetError(f"should_stop_blob '{blob_name}' must be a scalar, it has shape {arr.shape}")
        return bool(arr.reshape(-1)[0])
    return bool(obj) if isinstance(obj, (bool, int, float, np.generic)) else False


def _iterations(step: ExecutionStep) -> Any:
    if step.should_stop_blob:
        if step.HasField("num_iter"):
            raise NetError(f"step '{step.name}': num_iter and should_stop_blob cannot be combined")
        return range(1) if step.only_once else _forever()
    return range(step.num_iter if step.HasField("num_iter") else 1)


def _forever() -> Any:
    i = 0
    while True:
        yield i
        i += 1


class _Periodic:
    """Runs ``fn`` every ``interval`` seconds on a thread until stopped, then once more."""

    def __init__(self, interval: float, fn: Any) -> None:
        self.fn = fn
        self.interval = interval
        self.stop = threading.Event()
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._loop, daemon=True)
        self.thread.start()

    def _loop(self) -> None:
        try:
            while not self.stop.wait(self.interval):
                self.fn()
            self.fn()
        except BaseException as e:  # re-raised by finish()
            self.error = e

    def finish(self) -> None:
        self.stop.set()
        self.thread.join()
        if self.error is not None:
            raise self.error


# A plan file cannot ask for unbounded threads: one step runs at most this many substeps at once.
MAX_STEP_THREADS = 1024


def run_step(ws: Workspace, step: ExecutionStep, state: _Plan | None = None) -> None:
    """Run one ExecutionStep (and its substeps) on ``ws``; see module doc."""
    state = state or _Plan(PlanDef())
    if step.substep and step.network:
        raise NetError(f"step '{step.name}' has both networks and substeps; a step holds one kind")
    threads = max(step.num_concurrent_instances, 1) * len(step.substep)
    if threads > MAX_STEP_THREADS:
        raise NetError(
            f"step '{step.name}': num_concurrent_instances {step.num_concurrent_instances} x {len(step.substep)} "
            f"substeps asks for {threads} threads, more than {MAX_STEP_THREADS} (refused: copies are not "
            "interchangeable, so the count is not capped silently)"
        )
    if step.create_workspace:
        ws = Workspace(root_folder=ws.root_folder, parent=ws, name=f"{ws.name}/{step.name}")
    recurring = [s for s in step.substep if not s.run_every_ms]
    periodic = [s for s in step.substep if s.run_every_ms]
    timers = [_Periodic(s.run_every_ms / 1e3, lambda s=s: run_step(ws, s, state)) for s in periodic]
    if step.report_net:
        report = _get_net(ws, step.report_net, state, step)
        timers.append(_Periodic(max(step.report_interval, 0), report.run))
    try:
        _run_body(ws, step, state, recurring)
    finally:
        errors = []
        for t in timers:
            try:
                t.finish()
            except BaseException as e:
                errors.append(e)
    if errors:
        raise errors[0]


def _run_body(ws: Workspace, step: ExecutionStep, state: _Plan, substeps: list[ExecutionStep]) -> None:
    stop_blob = step.should_stop_blob
    instances = max(step.num_concurrent_instances, 1)
    concurrent = step.concurrent_substeps or instances > 1
    nets = [_get_net(ws, name, state, step) for name in step.network]
    for _ in _iterations(step):
        if state.failed.is_set():
            return
        if nets:
            for net in nets:
                if state.failed.is_set():
                    return
                net.run()
                if _should_stop(ws, stop_blob):
                    return
        elif concurrent and substeps:
            _run_concurrent(ws, [s for s in substeps for _ in range(instances)], state)
            if _should_stop(ws, stop_blob):
                return
        else:
            for sub in substeps:
                run_step(ws, sub, state)
                if _should_stop(ws, stop_blob):
                    return
        if not nets and not substeps and _should_stop(ws, stop_blob):
            return


def _close_queues(ws: Workspace) -> None:
    """Close every queue of ``ws`` so siblings blocked on one wake up when a substep failed."""
    for name in ws.blobs():
        obj = ws.get_blob(name).held
        if getattr(obj, "abort_on_plan_failure", False):
            obj.close()


def _run_concurrent(ws: Workspace, substeps: list[ExecutionStep], state: _Plan) -> None:
    errors: list[BaseException] = []
    lock = threading.Lock()

    def work(sub: ExecutionStep) -> None:
        try:
            run_step(ws, sub, state)
        except BaseException as e:
            with lock:
                errors.append(e)
            state.failed.set()
            _close_queues(ws)

    threads = [threading.Thread(target=work, args=(s,), daemon=True) for s in substeps]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    if errors:
        err = errors[0]
        for e in errors[1:]:
            add_note(err, f"secondary error in a concurrent substep: {type(e).__name__}: {e}")
        raise err
