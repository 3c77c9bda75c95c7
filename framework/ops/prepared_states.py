"""An op's prepared state per input signature, so that returning to an input shape prepares (and allocates) nothing.

Ops whose run depends on the input's shape prepare once per shape (``_prepare``: geometry, a kernel
strategy, padded and scratch buffers, packed filters) and keep one prepared state. A net fed shape A,
then B, then A again would prepare A twice and allocate its buffers again; ``prepare_for`` keeps the
last few states instead: switching to a signature seen before puts its attributes back.

A state is the set of the op's attributes its ``prepare`` sets, saved as they are when the op switches
away from that signature, so what later runs updated in them (a packed filter's stamp, a kernel's
replay) comes back with them. The names are learned from each prepare: those it added or rebound to
another object (one rebound to the same object, ``None`` again, is seen only once a prepare changes it);
a state saved before a name was learned lacks it and is prepared anew instead of restored.
At most ``KEEP`` states other than the current one are kept, the least recently used dropped (their
buffers freed with them).

>>> class Op: pass
>>> op, calls = Op(), []
>>> def prep(n): calls.append(n); op.size = n
>>> for n in (2, 3, 2): prepare_for(op, n, lambda: prep(n))
>>> calls, op.size
([2, 3], 2)
"""

from __future__ import annotations

from typing import Any, Callable, Hashable

__all__ = ["KEEP", "prepare_for"]

KEEP = 2
_STATES, _NAMES, _KEY = "_prepared_states", "_prepared_names", "_prepared_key"
_MISSING = object()


def prepare_for(op: Any, key: Hashable, prepare: Callable[[], None]) -> None:
    """Make ``op``'s prepared attributes those for signature ``key``: restored if kept, else ``prepare()``.

    ``key`` must determine everything ``prepare`` depends on (shapes, dtypes, thread count). A
    ``prepare`` that raises leaves no state under ``key``; the one switched away from stays kept."""
    attrs = op.__dict__
    states: dict = attrs.setdefault(_STATES, {})
    names: frozenset = attrs.get(_NAMES, frozenset())
    current = attrs.get(_KEY, _MISSING)
    if current == key:  # (the op found its state stale itself)
        prepare()
        return
    kept = states.pop(key, None)
    if current is not _MISSING and names:
        states.pop(current, None)
        states[current] = {n: attrs[n] for n in names if n in attrs}  # (most recent last)
        while len(states) > KEEP:
            del states[next(iter(states))]
    attrs[_KEY] = _MISSING
    if kept is not None and names <= kept.keys():
        attrs.update(kept)
    else:
        before = dict(attrs)
        prepare()
        changed = {n for n, v in attrs.items() if before.get(n, _MISSING) is not v}
        attrs[_NAMES] = names | (changed - {_STATES, _NAMES, _KEY})
    attrs[_KEY] = key
