"""framework/net/graph.py's HazardGraph: its order is networkx's lexicographical topological sort of the
same edges, a cycle gives None, and ``to_networkx`` carries every edge's labels; compiling a net
imports no networkx."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import networkx as nx
from hypothesis import given
from hypothesis import strategies as st

import framework
from framework.net.graph import HazardGraph

ROOT = Path(framework.__file__).resolve().parents[1]


@given(st.integers(1, 9).flatmap(lambda n: st.tuples(st.just(n), st.lists(st.tuples(st.integers(0, n - 1),
       st.integers(0, n - 1)), max_size=20))))  # fmt: skip
def test_order_is_the_lexicographic_topological_sort(case):
    n, edges = case
    g = HazardGraph(n)
    ref = nx.DiGraph()
    ref.add_nodes_from(range(n))
    for a, b in edges:
        g.add_edge(a, b, "RaW", f"b{a}")
        if a != b:
            ref.add_edge(a, b)
    want = (
        list(nx.lexicographical_topological_sort(ref, key=lambda i: i)) if nx.is_directed_acyclic_graph(ref) else None
    )
    assert g.order() == want
    mine = g.to_networkx()
    assert sorted(mine.edges) == sorted(ref.edges) and list(mine.nodes) == list(range(n))
    for a, b in mine.edges:
        assert mine.edges[a, b]["kinds"] == {("RaW", f"b{a}")}


def test_compiling_and_running_a_net_imports_no_networkx():
    code = """
import json, sys
import numpy as np
from framework.core import CreateOperator
from framework.memory.workspace import Workspace
from framework.proto.framework_pb2 import NetDef
net = NetDef(name="n", external_input=["X"], external_output=["Y"])
net.op.extend([CreateOperator("Relu", "H", "Y"), CreateOperator("Relu", "X", "H")])
ws = Workspace()
ws.feed_blob("X", np.array([-1.0, 2.0], np.float32))
ws.run_net_once(net)
print(json.dumps([ws.fetch_blob("Y").tolist(), "networkx" in sys.modules]))
"""
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=ROOT, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert json.loads(out.stdout.strip().splitlines()[-1]) == [[0.0, 2.0], False]
