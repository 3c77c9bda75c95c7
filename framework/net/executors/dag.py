"""DAGNet: chains of ops on worker threads, by dependency counting and a ready queue.

As PyTorch's autograd engine (seeds/004) and Caffe2's DAGNet: each chain (a
maximal linear run of ops, one scheduling task) has a count of unfinished
parent chains. Chains with no parents go to the ready queue; a worker that
finishes a chain decrements its children's counts and queues those that reach
zero, running one of them itself to save a hand-off. The caller waits until
every chain has run or one failed.

numpy releases the GIL inside BLAS and large ufuncs, so independent branches
run in parallel. While a run is in progress the BLAS thread count is capped at
``cores // workers`` (threadpoolctl) so Python and BLAS threads do not fight.

Errors: the first exception stops scheduling (chains already running finish,
nothing new starts); ``run()`` raises it in the caller as an OperatorError
naming the op, with later errors listed as notes (``secondary_errors``).
Workers persist across runs (daemon threads) and stop when the net is freed.
"""

from __future__ import annotations

import logging
import os
import queue
import threading
import weakref
from contextlib import nullcontext
from typing import Any, Callable

from framework.errors import add_note
from framework.net.base import NetBase, fp_checks, register_net_type
from framework.net.graph import compute_chains
from framework.ops.arg_reader import ArgReader
from framework.ops.schema import INT
from framework.runtime import cancel
from framework.runtime.state import RUNTIME

log = logging.getLogger("framework.net")


class _ChainFailure(Exception):
    def __init__(self, k: int, exc: BaseException) -> None:
        super().__init__(k, exc)
        self.k = k
        self.exc = exc


class _RunState:
    __slots__ = ("fns", "counts", "outstanding", "lock", "done", "errors", "failed", "stop", "parent")

    def __init__(self, fns: list, counts: list[int], outstanding: int, parent: Any = None) -> None:
        self.fns = fns
        self.counts = counts
        self.outstanding = outstanding
        self.lock = threading.Lock()
        self.done = threading.Event()
        self.errors: list[tuple[int, BaseException]] = []
        self.failed = False
        self.stop = False  # interrupted: chains in flight stop before their next op
        self.parent = parent  # the run this one is nested in (a worker's token), for cancel.check


def _worker_loop(q: queue.SimpleQueue) -> None:
    while True:
        item = q.get()
        if item is None:
            return
        net, state, c = item
        del item
        with cancel.running(state):
            net._execute(state, c)
        del net, state


def _drain(state: _RunState) -> None:
    """Wait until the run's chains in flight have stopped (further Ctrl-C are absorbed meanwhile)."""
    while True:
        try:
            if state.done.wait(0.05):
                return
        except KeyboardInterrupt:
            continue


class _Workers:
    """A fixed set of daemon threads reading (net, state, chain) tasks from one queue."""

    def __init__(self, n: int, name: str) -> None:
        self.queue: queue.SimpleQueue = queue.SimpleQueue()
        self.threads = [
            threading.Thread(target=_worker_loop, args=(self.queue,), daemon=True, name=f"dag:{name}:{i}")
            for i in range(n)
        ]
        for t in self.threads:
            t.start()

    def close(self) -> None:
        for _ in self.threads:
            self.queue.put(None)


def blas_limit(n: int) -> Any:
    """Context capping BLAS threads at ``n`` (no-op without threadpoolctl or BLAS); restores them after."""
    libs = RUNTIME.blas_libs()
    if all(lib.get_num_threads() <= n for lib in libs):
        return nullcontext()
    return _Limit(libs, n)


class _Limit:
    __slots__ = ("libs", "n", "before")

    def __init__(self, libs: Any, n: int) -> None:
        self.libs, self.n = libs, n
        self.before: list[Any] = []

    def __enter__(self) -> None:
        self.before = [lib.get_num_threads() for lib in self.libs]
        for lib, k in zip(self.libs, self.before):
            if k > self.n:
                lib.set_num_threads(self.n)

    def __exit__(self, *exc: Any) -> None:
        for lib, k in zip(self.libs, self.before):
            lib.set_num_threads(k)


# A net file cannot ask for unbounded threads: num_workers is capped at this many per core.
MAX_WORKERS_PER_CORE = 4


def _num_workers(net_def: Any) -> int:
    asked = 0
    if net_def.HasField("num_workers") and net_def.num_workers > 0:
        asked = net_def.num_workers
    args = ArgReader(net_def)
    if not asked and args.has_single("num_workers", INT) and args.single("num_workers", kind=INT) > 0:
        asked = args.single("num_workers", kind=INT)
    cores = os.cpu_count() or 1
    if not asked:
        return cores
    cap = MAX_WORKERS_PER_CORE * cores
    if asked > cap:
        log.warning(
            "net '%s': num_workers %d capped at %d (%d per core on %d cores)",
            net_def.name,
            asked,
            cap,
            MAX_WORKERS_PER_CORE,
            cores,
        )
        return cap
    return asked


@register_net_type("dag", "async_dag", "async_scheduling", "async_polling")
class DAGNet(NetBase):
    """Worker threads over chains of ops; see module doc."""

    def setup(self) -> None:
        pos = {op_index: k for k, op_index in enumerate(self.graph.order)}
        chains = compute_chains(self.graph.graph, self.graph.order)
        chain_of = {n: c for c, chain in enumerate(chains) for n in chain}
        # Chains hold execution positions (indices into the callables list).
        self.chains: list[list[int]] = [[pos[n] for n in chain] for chain in chains]
        children: list[set[int]] = [set() for _ in chains]
        counts = [0] * len(chains)
        for a, b in self.graph.graph.edges:
            ca, cb = chain_of[a], chain_of[b]
            if ca != cb and cb not in children[ca]:
                children[ca].add(cb)
                counts[cb] += 1
        self.children = [sorted(c) for c in children]
        self.initial_counts = counts
        self.roots = [c for c, n in enumerate(counts) if n == 0]
        self.num_workers = max(1, min(_num_workers(self.net_def), len(self.chains)))
        self.blas_threads = max(1, (os.cpu_count() or 1) // self.num_workers)
        self._workers: _Workers | None = None
        self._state: _RunState | None = None

    def _pool(self) -> _Workers:
        if self._workers is None:
            self._workers = _Workers(self.num_workers, self.name)
            weakref.finalize(self, self._workers.close)
        return self._workers

    def _run(self) -> None:
        if not self.chains:
            return
        program = self.program
        fns = program.callables()
        parent = cancel.current()  # set when this net runs inside another dag net's worker
        state = self._state = _RunState(fns, list(self.initial_counts), len(self.roots), parent)
        q = self._pool().queue
        with blas_limit(self.blas_threads):
            for c in self.roots:
                q.put((self, state, c))
            try:
                if parent is None:
                    state.done.wait()
                else:  # a worker thread gets no signal: watch the outer run's stop flag instead
                    while not state.done.wait(0.05):
                        if cancel.stopped(parent):
                            raise cancel.RunInterrupted("the run was interrupted")
            except BaseException:
                # Ctrl-C (or another signal) in the caller: start nothing new, and return only after
                # every chain in flight has stopped, so the next run never overlaps this one.
                with state.lock:
                    state.failed = state.stop = True
                _drain(state)
                raise
        if state.errors:
            secondary = [self._fail(k2, e2) for k2, e2 in state.errors[1:]]
            k, e = state.errors[0]
            err = self._fail(k, e)
            err.secondary_errors = secondary
            for k2, e2 in state.errors[1:]:
                add_note(err, f"secondary error from {self.ops[k2].describe()}: {type(e2).__name__}: {e2}")
            raise err from e
        self._on_run_end()
        if fns is program.slow:
            program.compile()

    def _on_run_end(self) -> None:
        """Hook called after each successful run."""

    def _run_chain(self, chain: list[int], fns: list[Callable[[], Any]]) -> None:
        """Run one chain's callables in order (hook: ProfDAGNet times them)."""
        k = -1
        state = self._state
        assert state is not None, "chains run inside run()"
        checks = fp_checks() if RUNTIME.fp_exceptions else nullcontext()
        try:
            with checks:
                for k in chain:
                    if state.stop:
                        return
                    fns[k]()
        except Exception as e:
            raise _ChainFailure(k, e) from e

    def _execute(self, state: _RunState, c: int | None) -> None:
        children = self.children
        while c is not None:
            if not state.failed:
                try:
                    self._run_chain(self.chains[c], state.fns)
                except _ChainFailure as f:
                    with state.lock:
                        state.errors.append((f.k, f.exc))
                        state.failed = True
            ready = []
            with state.lock:
                if not state.failed:
                    counts = state.counts
                    for child in children[c]:
                        counts[child] -= 1
                        if counts[child] == 0:
                            ready.append(child)
                state.outstanding += len(ready) - 1
                finished = state.outstanding == 0
            if finished:
                state.done.set()
                return
            c = ready.pop() if ready else None
            if ready:
                workers = self._workers
                assert workers is not None, "chains run inside run(), which starts the workers"
                for r in ready:
                    workers.queue.put((self, state, r))
