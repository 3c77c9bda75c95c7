"""net/graph.py's hazard edges come from the dataflow view: on random nets (in-place ops, several writers,
external inputs, control inputs) they equal those of a plain scan of the op list written from the ordering
rules in the module doc, edge for edge and in the same order."""

from __future__ import annotations

from collections import defaultdict

from hypothesis import given, settings
from hypothesis import strategies as st

from framework.net.graph import build_graph
from framework.proto.framework_pb2 import NetDef, OperatorDef

BLOBS = "abcde"


def scan_edges(net_def: NetDef) -> list[tuple[int, int, str, str]]:
    """(a, b, kind, blob) in the order a sweep over the ops meets them (the ordering rules, by scanning)."""
    ops = net_def.op
    writers = defaultdict(list)
    for i, op in enumerate(ops):
        for b in dict.fromkeys(op.output):
            writers[b].append(i)
    external = set(net_def.external_input)
    single = {b for b, w in writers.items() if len(w) == 1 and b not in external and b not in ops[w[0]].input}
    edges, last_writer, readers = [], {}, defaultdict(list)
    for i, op in enumerate(ops):
        for b in op.input:
            if b in single:
                edges.append((writers[b][0], i, "RaW", b))
                continue
            if b in last_writer:
                edges.append((last_writer[b], i, "RaW", b))
            readers[b].append(i)
        for b in op.control_input:
            w = writers[b][0] if b in single else last_writer.get(b)
            if w is not None:
                edges.append((w, i, "control", b))
        for b in dict.fromkeys(op.output):
            if b in single:
                continue
            if b in last_writer:
                edges.append((last_writer[b], i, "WaW", b))
            edges.extend((r, i, "WaR", b) for r in readers.pop(b, ()))
            last_writer[b] = i
    return [e for e in edges if e[0] != e[1]]


names = st.lists(st.sampled_from(BLOBS), max_size=3)
op_st = st.builds(lambda i, o, c: OperatorDef(type="X", input=i, output=o, control_input=c), names, names, names)


@settings(max_examples=80, deadline=None)
@given(st.lists(op_st, max_size=9), st.lists(st.sampled_from(BLOBS), max_size=2))
def test_hazard_edges_equal_a_scan(ops, external):
    net = NetDef(name="n", op=ops, external_input=external)
    g, flow, single = build_graph(net)
    want = scan_edges(net)
    kinds = defaultdict(set)
    first_seen = []
    for a, b, kind, blob in want:
        if (a, b) not in kinds:
            first_seen.append((a, b))
        kinds[(a, b)].add((kind, blob))
    assert g.kinds == dict(kinds)
    succ = defaultdict(list)
    for a, b in first_seen:
        succ[a].append(b)
    assert [g._succ[a] for a in range(len(ops))] == [succ[a] for a in range(len(ops))]
    assert flow.produced() == {b for op in ops for b in op.output}
