"""``memonger.optimize_inference_fast``: Caffe2's greedy blob recycling for inference nets (a C++ function
there, ``memonger::optimize_inference_net``), with its naming, so programs that count or read the shared
blobs see what Caffe2 gives.

The ops are walked once in order. A blob's live range runs from the op that first writes it to the last op
that reads it; blobs in ``static_blobs`` (and blobs only read, never written) are never shared. At each op,
an input whose range ends there is freed, but only after the op's outputs are placed: an output written
there for the first time takes the most recently freed blob, if any (so an op never writes into a blob it
reads; several blobs freed by one op join the pool in input order, where Caffe2 takes the hash order of a
set). Every freed blob that was not itself placed in a recycled one becomes a shared root, named
``__m<k>_shared`` in the order the roots are freed; each blob is renamed to its root.

Nets that cannot be handled are returned unchanged, as in Caffe2: a net of a type other than ``""`` or
``"simple"``, a net with a RecurrentNetwork op, and a net already optimized (a ``__m<k>_shared`` name that
the pass would give is in use). The framework's own size-aware planner is ``optimize_inference_net``.
"""

from __future__ import annotations

from typing import Any, Iterable

from framework.proto.framework_pb2 import NetDef

__all__ = ["optimize_inference_fast"]


def _shared_name(k: int) -> str:
    return f"__m{k}_shared"


def optimize_inference_fast(net: Any, static_blobs: Iterable[Any]) -> NetDef:
    """The recycled NetDef (a new message; ``net`` is not modified). ``net`` is a NetDef (or has ``Proto()``)."""
    net_def = net.Proto() if hasattr(net, "Proto") else net
    static = {str(b) for b in static_blobs}
    if net_def.type not in ("", "simple") or any(op.type == "RecurrentNetwork" for op in net_def.op):
        return _copy(net_def)
    ops = list(net_def.op)
    all_blobs: set[str] = set()
    first: dict[str, int] = {}
    last: dict[str, int] = {}
    for i, op in enumerate(ops):
        for b in op.input:
            if b in first:
                last[b] = i
            all_blobs.add(b)
        for b in op.output:
            all_blobs.add(b)
            if b not in static and b not in first:
                first[b], last[b] = i, i

    free: list[str] = []
    renaming: dict[str, str] = {}  # root -> shared name
    mapping: dict[str, str] = {}  # blob -> its root
    for i, op in enumerate(ops):
        released: list[str] = []
        for b in op.input:
            if b not in first or last[b] != i:
                continue
            if b not in mapping:
                mapping[b] = b
                shared = _shared_name(len(renaming))
                if shared in all_blobs:
                    return _copy(net_def)  # already optimized
                renaming[b] = shared
            root = mapping[b]
            if root not in released:
                released.append(root)
        for b in op.output:
            if free and first.get(b) == i:
                mapping[b] = free.pop()
        free.extend(released)

    out = _copy(net_def)
    for op in out.op:
        for field in (op.input, op.output):
            for j, b in enumerate(field):
                if b in mapping:
                    field[j] = renaming[mapping[b]]
    return out


def _copy(net_def: Any) -> NetDef:
    out = NetDef()
    out.CopyFrom(net_def)
    return out
