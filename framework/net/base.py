"""NetBase: a compiled net bound to a workspace, and the net-type registry.

A net is built once (``NetBase(graph, ws)``): its operators are constructed in
execution order and bind their blobs; ``run()`` then calls a flat list of
callables (see ``framework.net.program``). Executors are subclasses that
override ``_run`` (how the callables are scheduled) and the small hooks
``_run_chain`` / ``_on_run_end``; profiling is such a subclass, not a flag.

Concurrency: a net is not reentrant. ``run()`` holds the net's lock, so two
threads running the same net at once are serialized (the second waits).
Separate nets, even on separate workspaces, run concurrently.
"""

from __future__ import annotations

import threading
from typing import Any, Callable

from framework.errors import FrameworkError, NetError, OperatorError
from framework.memory.blob import PLANNED_ARG
from framework.memory.workspace import Workspace
from framework.net.graph import NetGraph, compile_graph, creation_site, format_ops
from framework.net.program import OpProgram
from framework.ops import create_operator
from framework.ops.arg_reader import ArgReader
from framework.ops.operator import Operator, describe_op
from framework.ops.schema import BOOL, INT, STRINGS
from framework.runtime.state import RUNTIME

NET_TYPES: dict[str, type[NetBase]] = {}


def register_net_type(*names: str) -> Callable[[type], type]:
    def deco(cls: type) -> type:
        for n in names:
            NET_TYPES[n] = cls
        return cls

    return deco


def net_class(type_name: str, label: str = "net") -> type[NetBase]:
    from framework.memory.workspace import suggest
    from framework.net import executors  # noqa: F401  (fills NET_TYPES)

    cls = NET_TYPES.get(type_name or "simple")
    if cls is None:
        raise NetError(
            f"{label}: unknown net type '{type_name}'.{suggest(type_name, NET_TYPES)} Known: {sorted(NET_TYPES)}"
        )
    return cls


class NetBase:
    """A validated, instantiated net; see module doc."""

    def __init__(self, graph: NetGraph, ws: Workspace, compile_when_stable: bool = False) -> None:
        self.graph = graph
        self.net_def = graph.net_def
        self.name = graph.net_def.name
        self.workspace = ws
        for name in ArgReader(self.net_def).repeated(PLANNED_ARG, kind=STRINGS):  # the memory planner's buffers
            ws.create_blob(name).planned = True
        self.ops: list[Operator] = [self._create_op(i) for i in graph.order]
        self.program = OpProgram(self.ops, enable_compile=self._compile_enabled(), when_stable=compile_when_stable)
        self._lock = threading.Lock()
        self.observers: list[Any] = []  # framework.net.observers: told when each run starts and stops
        self.setup()

    def _create_op(self, i: int) -> Operator:
        """Build op ``i``; errors name the net, the op and, for nets built in Python, its creation site."""
        op_def = self.net_def.op[i]
        try:
            return create_operator(op_def, self.workspace, i)
        except Exception as e:
            where = describe_op(op_def, i)
            text = str(e)
            if where not in text:
                text = f"{where}: {text}"
            text = f'net "{self.name}": {text}{creation_site(op_def)}'
            if isinstance(e, FrameworkError):
                try:
                    err = type(e)(text)
                except Exception:  # an error type with another signature
                    err = NetError(text)
            else:
                err = NetError(f"{text} ({type(e).__name__} while creating the op)")
            raise err from e

    def _compile_enabled(self) -> bool:
        args = ArgReader(self.net_def)
        return args.single("compile_ops", kind=BOOL) if args.has_single("compile_ops", INT) else True

    def setup(self) -> None:
        """Executor-specific preparation (chains, workers...)."""

    # -- running ---------------------------------------------------------------
    run_count = 0  # completed runs (progress reports of long plans)
    _cancelled = False  # set by cancel() during a run

    def run(self) -> None:
        """Run every op once; raise OperatorError naming the failing op.

        Holds the net's lock: concurrent callers of one net are serialized. BLAS runs on the runtime's
        thread count for the run and is put back after (framework.runtime.state)."""
        with self._lock:
            self._cancelled = False
            RUNTIME.enter_net()  # BLAS threads for the run (framework.runtime.state), restored after
            try:
                if not self.observers:
                    self._checked_run()
                else:
                    for ob in self.observers:
                        ob.start(self)
                    try:
                        self._checked_run()
                    finally:
                        for ob in self.observers:
                            ob.stop(self)
            finally:
                RUNTIME.exit_net()
            if self._cancelled:
                raise NetError(f"net '{self.name}' was cancelled while it ran (Net.cancel)")
            self.run_count += 1

    def _run(self) -> None:
        raise NotImplementedError

    def _checked_run(self) -> None:
        if RUNTIME.fp_exceptions:
            with fp_checks():
                self._run()
        else:
            self._run()

    def cancel(self) -> None:
        """Caffe2's ``Net.cancel()`` (callable from another thread while the net runs): every op that can be
        waiting on something outside the net (a queue read or write) is told to stop waiting (``Operator.cancel``:
        queue ops close their queue), and the run in progress raises NetError once its ops return."""
        self._cancelled = True
        for op in self.ops:
            op.cancel()

    def _fail(self, k: int, e: BaseException) -> OperatorError:
        """The error to raise for the op at execution position ``k``."""
        from framework.net.api import wrap_op_error

        op = self.ops[k]
        self.workspace.last_failed_op_net_position = op.index
        self.program.invalidate()
        if isinstance(e, OperatorError) and getattr(e, "op_index", None) == op.index:
            return e
        return wrap_op_error(op, e, net_name=self.name)

    # -- introspection -----------------------------------------------------------
    @property
    def type(self) -> str:
        return self.net_def.type or "simple"

    def ops_in_order(self) -> list[Any]:
        return self.graph.ops_in_order()

    def __str__(self) -> str:
        return format_ops(self.ops_in_order())

    def __repr__(self) -> str:
        return f"<{type(self).__name__} '{self.name}': {len(self.ops)} ops>"

    def Proto(self) -> Any:  # noqa: N802  (Caffe2 name)
        return self.net_def


def fp_checks() -> Any:
    """The floating-point checks of Caffe2's ``--caffe2_operator_throw_if_fp_exceptions`` for the current
    thread: numpy raises FloatingPointError on division by zero, overflow and invalid operations, so the op
    doing one fails (and is reported as any failing op). As in Caffe2, which tests the FP flags after the op
    ran, the op's outputs may already hold what it computed. Executors that run ops on worker threads enter
    it there too."""
    import numpy as np

    return np.errstate(divide="raise", over="raise", invalid="raise")


def instantiate(net: Any, ws: Workspace, owned: bool = False) -> NetBase:
    """Validate ``net`` against ``ws`` and build its executor; on failure ``ws`` is unchanged.
    ``owned=True``: a NetDef ``net`` is handed over, not copied (see ``compile_graph``)."""
    graph = compile_graph(net, ws.has_blob, owned=owned)
    cls = net_class(graph.net_def.type, f'net "{graph.net_def.name}"')
    before = set(ws._blobs)
    try:
        return cls(graph, ws)
    except BaseException:
        with ws._lock:
            for name in [n for n in ws._blobs if n not in before]:
                del ws._blobs[name]
        raise
