"""Memory planning for inference nets, in the spirit of Caffe2's memonger.

Blobs whose lifetimes do not overlap are renamed to share one blob (and so
one buffer), and an op may write its output over an input that dies there
when its schema allows that in-place pair. External inputs and outputs,
blobs read before any op writes them (parameters), string/object blobs and
the blobs the caller names as static are never touched.

The pass is opt-in: call ``optimize_inference_net`` (or Caffe2's ``optimize_inference_fast``) on a
NetDef and create the net it returns. Caffe2's planning API (``optimize_interference`` returning an
``Optimization``, live ranges, greedy and optimal chain assignments, ``verify_graph_equality``,
``compute_statistics``...) lives in ``framework.caffe2.python.memonger_plan``; ``caffe2.python.memonger``
exports both.

>>> # net_def, report = optimize_inference_net(predict_net, shapes={"data": (64, 3, 32, 32)})
>>> # print(report)   # peak activation bytes before and after
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

import numpy as np

from framework.memory.blob import PLANNED_ARG, SHARED_PREFIX, SHARED_SUFFIX
from framework.net.dataflow import DataFlow
from framework.net.graph import compile_graph, load_net_def
from framework.net.inference import infer_net
from framework.net.nested import named_outer_blobs
from framework.ops.registry import get_schema
from framework.ops.schema import TensorSpec
from framework.proto.framework_pb2 import NetDef


@dataclass
class MemongerReport:
    """What the pass did: activation bytes before/after (None where shapes are unknown)."""

    before_bytes: int | None
    after_bytes: int | None
    renamed: dict[str, str] = field(default_factory=dict)
    blobs_before: int = 0
    buffers_after: int = 0

    @property
    def saving(self) -> float | None:
        if not self.before_bytes or self.after_bytes is None:
            return None
        return 1.0 - self.after_bytes / self.before_bytes

    def __str__(self) -> str:
        def fmt(n: int | None) -> str:
            return "unknown" if n is None else f"{n:,} bytes"

        saving = "" if self.saving is None else f" ({self.saving:.1%} less)"
        return (
            f"activations: {self.blobs_before} blobs, {fmt(self.before_bytes)} -> "
            f"{self.buffers_after} shared buffers, {fmt(self.after_bytes)}{saving}"
        )


def _nbytes(spec: TensorSpec | None) -> int | None:
    if spec is None or not spec.known or spec.shape is None or spec.dtype is None:
        return None
    return int(np.prod(spec.shape, dtype=np.int64)) * np.dtype(spec.dtype).itemsize


def _lifetimes(ops: Sequence[Any]) -> tuple[dict[str, int], dict[str, int], set[str]]:
    """first definition, last use (read, ``control_input`` or write) per blob, and blobs read before they are
    written, from the list's dataflow view; what nested nets (If, While, Do, RecurrentNetwork step nets) read
    and write in the net's workspace counts as their op's, so a buffer lives until the last step net reading it
    has run."""
    flow = DataFlow(ops, nested=True, control=True)
    return flow.first_writers(), flow.last_uses(), set(flow.inputs(ordered=False))


def optimize_inference_net(
    net: Any,
    static_blobs: Iterable[str] = (),
    shapes: dict[str, Sequence[int]] | None = None,
    dtypes: dict[str, Any] | None = None,
    inplace: bool = True,
    init_net: Any = None,
) -> tuple[NetDef, MemongerReport]:
    """A copy of ``net`` whose activation blobs share storage, and a report.

    ``shapes``/``dtypes`` give the input shapes (default float32) and
    ``init_net`` the parameters' shapes (by inference over it), so that
    buffers can be matched by size and the report can count bytes. The
    returned net computes bit-identical outputs.
    """
    src = load_net_def(net)
    graph = compile_graph(src, has_blob=lambda name: True)
    ops = [graph.net_def.op[i] for i in graph.order]
    known = infer_net(load_net_def(init_net), {}) if init_net is not None else {}
    known.update(
        {k: TensorSpec(tuple(v), np.dtype((dtypes or {}).get(k, np.float32))) for k, v in (shapes or {}).items()}
    )
    specs = infer_net(graph.net_def, known)

    first_def, last_use, read_first = _lifetimes(ops)
    protected = set(static_blobs) | set(src.external_input) | set(src.external_output) | read_first
    protected.update(b for op in ops for b in named_outer_blobs(op))  # nested nets name them: never renamed
    candidates = {
        b
        for b in first_def
        if b not in protected and not (specs.get(b) and specs[b].dtype is not None and specs[b].dtype == object)
    }

    free: list[str] = []  # shared names whose current occupant has died
    capacity: dict[str, int | None] = {}  # shared name -> largest occupant (bytes)
    assigned: dict[str, str] = {}
    occupant: dict[str, str] = {}  # shared name -> blob currently in it

    def release_dead(i: int) -> None:
        for name, blob in list(occupant.items()):
            if last_use[blob] < i:
                del occupant[name]
                free.append(name)

    def take(blob: str, name: str) -> None:
        size = _nbytes(specs.get(blob))
        cap = capacity.get(name, 0)
        capacity[name] = None if size is None or cap is None else max(cap, size)
        assigned[blob] = name
        occupant[name] = blob

    def best_free(size: int | None) -> str | None:
        if not free:
            return None
        if size is None:
            pick = free[-1]
        else:
            fits = [n for n in free if (cap := capacity[n]) is not None and cap >= size]
            pick = min(fits, key=lambda n: capacity[n] or 0) if fits else max(free, key=lambda n: capacity[n] or 0)
        free.remove(pick)
        return pick

    for i, op in enumerate(ops):
        release_dead(i)
        schema = get_schema(op.type)
        for j, b in enumerate(op.output):
            if b not in candidates or first_def[b] != i or b in assigned:
                continue
            name = _inplace_slot(op, schema, j, b, i, last_use, assigned, occupant, specs) if inplace else None
            if name is None:
                name = best_free(_nbytes(specs.get(b))) or f"{SHARED_PREFIX}{len(capacity)}{SHARED_SUFFIX}"
            take(b, name)

    out = NetDef()
    out.CopyFrom(graph.net_def)
    del out.op[:]
    for op in ops:
        new = out.op.add()
        new.CopyFrom(op)
        for field_name in ("input", "output", "control_input"):
            values = [assigned.get(b, b) for b in getattr(op, field_name)]
            del getattr(new, field_name)[:]
            getattr(new, field_name).extend(values)

    if capacity:  # the net made from this NetDef flags these blobs as the planner's (Blob.planned)
        owned = [a for a in out.arg if a.name == PLANNED_ARG]
        arg = owned[0] if owned else out.arg.add(name=PLANNED_ARG)
        arg.strings.extend(n.encode() for n in capacity if n.encode() not in arg.strings)
    sizes = [s for s in (_nbytes(specs.get(b)) for b in candidates) if s is not None]
    before = sum(sizes) if len(sizes) == len(candidates) else None
    caps = [c for c in capacity.values() if c is not None]
    after = sum(caps) if before is not None and len(caps) == len(capacity) else None
    report = MemongerReport(before, after, dict(assigned), len(candidates), len(capacity))
    return out, report


def _inplace_slot(op, schema, j, out_blob, i, last_use, assigned, occupant, specs) -> str | None:
    """The shared name of an input that dies at op ``i`` and may be overwritten by output ``j``."""
    for k, b in enumerate(op.input):
        name = assigned.get(b)
        if name is None or last_use[b] != i or list(op.input).count(b) != 1 or b in op.output:
            continue
        if occupant.get(name) != b or not schema.inplace_allowed(k, j):
            continue
        a, o = specs.get(b), specs.get(out_blob)
        if a is None or o is None or not a.known or a != o:
            continue
        del occupant[name]
        return name
    return None


def optimize_inference_fast(net: Any, static_blobs: Iterable[str]) -> NetDef:
    """Caffe2's fast inference pass (a C++ function there): this module's planner, the optimized NetDef."""
    return optimize_inference_net(net, static_blobs)[0]


def estimate_activation_bytes(
    net: Any, shapes: dict[str, Sequence[int]], static_blobs: Iterable[str] = ()
) -> int | None:
    """Bytes of the activation blobs of ``net`` (what the pass may share), from inferred shapes."""
    return optimize_inference_net(net, static_blobs, shapes=shapes)[1].before_bytes
