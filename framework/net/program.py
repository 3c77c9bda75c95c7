"""The op callables a net runs, with an optional compiled fast path.

Every op contributes ``op.run``. An op may also offer ``compile()``: called
after a successful ``run()``, it returns a zero-argument callable doing the
same work on the arrays bound *now* (or None). The contract:

- the callable reads and writes only the numpy arrays of the op's own input
  and output tensors, as they are when ``compile()`` is called;
- it stays valid while those tensors keep the same array objects
  (``Blob._obj`` and ``Tensor._array`` identities).

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
run (a blob shared by ops of different shapes, as memonger makes), because
its callable would be bound to another op's array.

The program keeps the identities of every blob a compiled callable touches
and checks them once at the start of each run (a few tens of ns per blob);
any change (a feed with a new shape, a blob reset) drops back to ``run()``
for that run and recompiles after it. A compiled op is used only if none of
its blobs is written by an op that is *not* compiled (such an op might
replace the array mid-run, when the guard cannot see it).

Version counters: a compiled callable does not bump ``Tensor.version``;
instead the program bumps the version of every tensor written by compiled
ops once at the start of each fast run, so caches keyed on versions (packed
weights) see a new version for every run that may change the data.
"""

from __future__ import annotations

import logging
from typing import Any, Callable, Sequence

from framework.memory.tensor import Tensor
from framework.ops.operator import Operator

log = logging.getLogger("framework.net")


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
        "_unstable",
        "_all_blobs",
        "_idle_sig",
    )

    def __init__(self, ops: Sequence[Operator], enable_compile: bool = True) -> None:
        self.ops = list(ops)
        self._snaps: dict[int, tuple] = {}
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

    def callables(self) -> list[Callable[[], Any]]:
        """The callables for this run: the fast list if its guard holds, else ``run()``s."""
        fast = self.fast
        if fast is None:
            return self.slow
        for blob, obj, arr in self._guard:
            if blob._obj is not obj or obj._array is not arr:
                self.fast = None
                return self.slow
        for t in self._written:
            t.version += 1
        return fast

    def invalidate(self) -> None:
        self.fast = None

    def _recorder(self, k: int, op: Operator) -> Callable[[], Any]:
        """``op.run`` followed by a snapshot of its blobs' array identities."""
        run, snaps, blobs = op.run, self._snaps, (*op.inputs, *op.outputs)

        def recorded() -> None:
            run()
            snaps[k] = _arrays(blobs)

        return recorded

    def _checked(self, k: int, run: Callable[[], Any], outs: tuple) -> Callable[[], Any]:
        """``run`` of uncompiled op ``k``, then a check that it kept the guarded arrays ``outs``."""

        def checked() -> None:
            run()
            for blob, obj, arr in outs:
                if blob._obj is not obj or obj._array is not arr:
                    self._fall_back(k)
                    return

        return checked

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
        if self._idle_sig is not None and _same(self._idle_sig, _arrays(self._all_blobs)):
            return  # nothing compiled last time and nothing changed since
        self._idle_sig = None
        compiled: dict[int, Callable[[], Any]] = {}
        for k, op in enumerate(self.ops):
            comp = getattr(op, "compile", None)
            if comp is None or not _blobs_hold_arrays(op):
                continue
            snap = self._snaps.get(k)
            now = _arrays((*op.inputs, *op.outputs))
            if snap is None or len(snap) != len(now) or any(a is not b for a, b in zip(snap, now)):
                continue  # a later op replaced one of its arrays during the run
            try:
                fn = comp()
            except Exception as e:  # a compile failure only costs speed
                log.debug("compile() of %s failed: %s", op.describe(), e)
                continue
            if fn is not None:
                compiled[k] = fn
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
            self._idle_sig = _arrays(self._all_blobs)
            return
        guard: dict[int, tuple] = {}
        written: dict[int, Tensor] = {}
        for k in compiled:
            op = self.ops[k]
            for b in (*op.inputs, *op.outputs):
                guard[id(b)] = (b, b._obj, b._obj._array)
            for b in op.outputs:
                written[id(b._obj)] = b._obj
        self._guard = tuple(guard.values())
        self._written = tuple(written.values())
        fast = []
        for k, op in enumerate(self.ops):
            run = op.run  # not the recording wrapper: fast runs take no snapshots
            if k in compiled:
                fast.append(compiled[k])
                continue
            outs = tuple(guard[id(b)] for b in self.ops[k].outputs if id(b) in guard)
            fast.append(self._checked(k, run, outs) if outs else run)
        self.fast = fast


def _arrays(blobs: Sequence[Any]) -> tuple:
    out = []
    for b in blobs:
        obj = b._obj
        out.append(obj._array if type(obj) is Tensor else obj)
    return tuple(out)


def _same(a: tuple, b: tuple) -> bool:
    return len(a) == len(b) and all(x is y for x, y in zip(a, b))


def _blobs_hold_arrays(op: Operator) -> bool:
    for b in (*op.inputs, *op.outputs):
        obj = b._obj
        if type(obj) is not Tensor or obj._array is None:
            return False
    return True
