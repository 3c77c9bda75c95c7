"""The op callables a net runs, with an optional compiled fast path.

Every op contributes ``op.run``. An op may also offer ``compile()``: called
after a successful ``run()``, it returns a zero-argument callable doing the
same work on the arrays bound *now* (or None). The contract:

- the callable reads and writes only the numpy arrays of the op's own input
  and output tensors, as they are when ``compile()`` is called;
- it stays valid while the bindings to its blobs hold (framework.memory.binding: the same Tensor,
  Storage and view; for a planner-owned blob the same Tensor and Storage).

Ops need not change: an op without ``compile()`` always runs ``run()``.

Uncompiled ops run between compiled ones. One that writes a blob a compiled
callable uses is wrapped with a check of that blob's array identity after it
runs: if it replaced the array (a new shape mid-run), the rest of this run
switches to ``run()`` (the executors read the callables list as they go) and
the op is remembered as unstable, so later compilations leave the ops sharing
its outputs uncompiled. A slow run whose compilation yields nothing is not
recompiled until some blob's array changes.

Slow runs record, right after each op runs, the array identities of its
blobs; ``compile()`` skips any op whose blobs were replaced later in the same
run, because its callable would be bound to another op's array (while that
happens, in a net's first runs, compilation waits up to _SETTLE_RUNS slow
runs). The memory planner's shared blobs (framework.net.memory_planner) are the
exception (``Blob.planned``): ops of different shapes take views of one buffer in
turn, so for them the buffer (the Tensor's Storage) is what is recorded and guarded, each
op compiles against the views it saw (put back in place while its
``compile()`` runs), and a compiled op writing one re-points the tensor at
its view afterwards, so an uncompiled reader sees what it wrote.

The program keeps the identities of every blob a compiled callable touches
and checks them once at the start of each run (a few tens of ns per blob);
any change (a feed with a new shape, a blob reset, another intra-op thread
count) drops back to ``run()`` for that run and recompiles after it. An
uncompiled op writing a blob a compiled callable uses is checked after it
runs (see above). Both checks are ``framework.memory.binding.all_hold``, the one rule every cache
on the run path uses.

Version counters: a compiled callable does not bump ``Tensor.version``;
instead the program bumps the version of every tensor written by compiled
ops once at the start of each fast run, so caches keyed on versions (packed
weights) see a new version for every run that may change the data.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Sequence

from framework.memory.binding import all_hold, bind, held, same_held
from framework.memory.tensor import Tensor
from framework.ops.operator import Operator
from framework.runtime.parallel import get_num_threads

log = logging.getLogger("framework.net")

# Slow runs a compilation waits for while an op's blobs are replaced later within the run (the first runs of
# a planned net, whose shared buffers grow to their largest occupant): then every op can be compiled.
_SETTLE_RUNS = 2


class OpProgram:
    """Callables of ``ops`` (in execution order): ``run()`` methods or compiled closures."""

    __slots__ = (
        "ops",
        "slow",
        "fast",
        "_guard",
        "_written",
        "compiled_count",
        "_snaps",
        "_views",
        "_settling",
        "_threads",
        "_unstable",
        "_all_blobs",
        "_idle_sig",
        "when_stable",
        "_stable_sig",
    )

    def __init__(self, ops: Sequence[Operator], enable_compile: bool = True, when_stable: bool = False) -> None:
        self.ops = list(ops)
        self._snaps: dict[int, tuple] = {}
        self._views: dict[int, tuple] = {}  # op position -> (tensor, view) of each shared blob it touches
        self._settling = 0  # compilations put off because a buffer was replaced within the run
        self._threads = 0  # the intra-op thread count the fast list was compiled under
        if enable_compile and any(getattr(op, "compile", None) is not None for op in self.ops):
            self.slow: list[Callable[[], Any]] = [self._recorder(k, op) for k, op in enumerate(self.ops)]
        else:
            self.slow = [op.run for op in self.ops]
        self.fast: list[Callable[[], Any]] | None = None
        self._guard: tuple = ()
        self._written: tuple = ()
        self.compiled_count = 0 if enable_compile else -1
        self._unstable: set[int] = set()  # positions of uncompiled ops seen replacing a guarded array
        self._all_blobs = tuple({id(b): b for op in self.ops for b in (*op.inputs, *op.outputs)}.values())
        self._idle_sig: tuple | None = None  # arrays when a compilation last yielded nothing
        # when_stable: compile only after two slow runs in a row that left every blob holding the same
        # arrays; for nets run few times per binding (a RecurrentNetwork's step nets, one per time step, rebound
        # whenever the sequence length changes), where compiling after every first run costs more than it saves
        self.when_stable = when_stable
        self._stable_sig: tuple | None = None

    def callables(self) -> list[Callable[[], Any]]:
        """The callables for this run: the fast list if its guard holds, else ``run()``s."""
        fast = self.fast
        if fast is None:
            return self.slow
        if get_num_threads() != self._threads:  # ops prepare per thread count: compile them again
            self.fast = None
            return self.slow
        if not all_hold(self._guard):
            self.fast = None
            return self.slow
        for t in self._written:
            t.version += 1
        return fast

    def invalidate(self) -> None:
        self.fast = None

    def _recorder(self, k: int, op: Operator) -> Callable[[], Any]:
        """``op.run`` followed by a snapshot of what its blobs hold (see ``_held``) and of the views of
        the shared buffers among them."""
        run, snaps, views, blobs = op.run, self._snaps, self._views, (*op.inputs, *op.outputs)
        shared = tuple({id(b): b for b in blobs if b.planned}.values())

        def recorded() -> None:
            run()
            snaps[k] = _held(blobs)
            if shared:
                views[k] = tuple((t, _view(t)) for t in _tensors(shared))

        return recorded

    def _checked(self, k: int, run: Callable[[], Any], outs: tuple) -> Callable[[], Any]:
        """``run`` of uncompiled op ``k``, then a check that the bindings ``outs`` to its outputs hold."""

        def checked() -> None:
            run()
            if not all_hold(outs):
                self._fall_back(k)

        return checked

    @staticmethod
    def _restoring(fn: Callable[[], Any], views: tuple) -> Callable[[], Any]:
        """Compiled ``fn`` of an op writing shared buffers, then their tensors re-pointed at the views it
        wrote (its closure writes them without output(); an uncompiled reader reads the tensor)."""

        def restoring() -> None:
            fn()
            _set_views(views)

        return restoring

    def _fall_back(self, k: int) -> None:
        """Op ``k`` replaced a guarded array: finish this run with ``run()`` and recompile after the next."""
        self._unstable.add(k)
        fast = self.fast
        self.fast = None
        if fast is not None:
            fast[:] = self.slow  # same length: a running loop picks up the slow callables from here on

    def compile(self) -> None:
        """Build the fast list from the current arrays (call after a successful slow run)."""
        if self.compiled_count < 0:
            return
        if self._idle_sig is not None and same_held(self._idle_sig, _held(self._all_blobs)):
            return  # nothing compiled last time and nothing changed since
        if self.when_stable:
            sig = _held(self._all_blobs)
            last, self._stable_sig = self._stable_sig, sig
            if last is None or not same_held(last, sig):
                return  # the first slow run over these arrays: compile if the next one sees them too
        self._idle_sig = None
        compiled: dict[int, Callable[[], Any]] = {}
        candidates = []
        for k, op in enumerate(self.ops):
            comp = getattr(op, "compile", None)
            if comp is None or not _blobs_hold_arrays(op):
                continue
            snap = self._snaps.get(k)
            now = _held((*op.inputs, *op.outputs))
            if snap is None or len(snap) != len(now) or any(a is not b for a, b in zip(snap, now)):
                if self._settling < _SETTLE_RUNS:  # buffers still growing: compile after another slow run
                    self._settling += 1
                    return
                continue  # a later op replaced one of its arrays during the run
            candidates.append((k, op, comp))
        for k, op, comp in candidates:
            views = self._views.get(k, ())
            ends = [(t, _view(t)) for t, _ in views]
            _set_views(views)  # the shared blobs as op k saw them, not as the run's last op left them
            try:
                fn = comp()
            except Exception as e:  # a compile failure only costs speed
                log.debug("compile() of %s failed: %s", op.describe(), e)
                continue
            finally:
                _set_views(ends)
            if fn is not None:
                outs = {id(b.held) for b in op.outputs}
                written = tuple((t, v) for t, v in views if id(t) in outs)
                compiled[k] = self._restoring(fn, written) if written else fn
        # Drop compiled ops touching outputs of unstable uncompiled ops, to a fixpoint.
        changed = True
        while changed and compiled and self._unstable:
            changed = False
            unsafe = {id(b) for k in self._unstable if k not in compiled for b in self.ops[k].outputs}
            for k in list(compiled):
                op = self.ops[k]
                if any(id(b) in unsafe for b in op.inputs) or any(id(b) in unsafe for b in op.outputs):
                    del compiled[k]
                    changed = True
        self.compiled_count = len(compiled)
        if not compiled:
            self.fast = None
            self._idle_sig = _held(self._all_blobs)
            return
        guard: dict[int, tuple] = {}
        written_by_compiled: dict[int, Tensor] = {}
        for k in compiled:
            op = self.ops[k]
            for b in (*op.inputs, *op.outputs):
                guard[id(b)] = bind(b)
            for b in op.outputs:
                written_by_compiled[id(b.held)] = b.held
        self._guard = tuple(guard.values())
        self._written = tuple(written_by_compiled.values())
        fast = []
        for k, op in enumerate(self.ops):
            run = op.run  # not the recording wrapper: fast runs take no snapshots
            if k in compiled:
                fast.append(compiled[k])
                continue
            bound = tuple(guard[id(b)] for b in self.ops[k].outputs if id(b) in guard)
            fast.append(self._checked(k, run, bound) if bound else run)
        self.fast = fast
        self._threads = get_num_threads()


def _held(blobs: Sequence[Any]) -> tuple:
    """What a compiled callable relies on per blob (framework.memory.binding.held)."""
    return tuple(held(b) for b in blobs)


def _tensors(blobs: Sequence[Any]) -> list:
    return [t for t in (b.held_tensor for b in blobs) if t is not None]


def _view(t: Tensor) -> tuple:
    """The fields that make a tensor's current view of its buffer (Tensor.view_within sets them)."""
    return t.view_state()


def _set_views(views: Sequence[tuple]) -> None:
    for t, state in views:
        t.set_view_state(state)


def _blobs_hold_arrays(op: Operator) -> bool:
    for b in (*op.inputs, *op.outputs):
        t = b.held_tensor
        if t is None or t.array is None:
            return False
    return True
