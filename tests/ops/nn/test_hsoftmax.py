"""HSoftmax (+gradient), HSoftmaxSearch and HuffmanTreeHierarchy against plain-Python
references, with hierarchies given as serialized hsm.proto messages."""

import heapq
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.ops import get_gradient_for_op
from framework.ops.nn.hsm_proto import HierarchyProto, NodeProto, TreeProto
from framework.ops.testing import assert_gradient_checks, assert_reference_checks, run_op_on

# a 2-level hierarchy over 4 words: root (rows 0-1) -> node A (rows 2-3: words 0, 1) and node B (rows 4-5: words 2, 3)
PATHS = {0: [(0, 2, 0), (2, 2, 0)], 1: [(0, 2, 0), (2, 2, 1)], 2: [(0, 2, 1), (4, 2, 0)], 3: [(0, 2, 1), (4, 2, 1)]}


def hierarchy() -> bytes:
    h = HierarchyProto(size=4)
    for wid, nodes in PATHS.items():
        p = h.paths.add(word_id=wid)
        for idx, ln, tgt in nodes:
            p.path_nodes.add(index=idx, length=ln, target=tgt)
    return h.SerializeToString()


def ref_hsm(x, w, b, labels):
    y = []
    for s, lab in enumerate(labels):
        tot = 0.0
        for idx, ln, tgt in PATHS[int(lab)]:
            z = w[idx : idx + ln] @ x[s] + b[idx : idx + ln]
            p = np.exp(z - z.max())
            p /= p.sum()
            tot += -math.log(max(p[tgt], 1e-20))
        y.append(tot)
    return np.array(y, np.float32)


@given(seed=st.integers(0, 2**16), m=st.integers(1, 4))
@settings(max_examples=15, deadline=None)
def test_hsoftmax(seed, m):
    rng = np.random.default_rng(seed)
    x, w, b = rng.standard_normal((m, 3)), rng.standard_normal((6, 3)), rng.standard_normal(6)
    labels = rng.integers(0, 4, m).astype(np.int32)
    op = CreateOperator("HSoftmax", ["X", "W", "b", "L"], ["Y", "I"], hierarchy=hierarchy())
    assert_reference_checks(
        op, [x, w, b, labels], lambda x, w, b, lab: ref_hsm(x, w, b, lab), outputs_to_check=[0], check_inference=False
    )
    for i in range(3):
        assert_gradient_checks(op, [x, w, b, labels], i, check_inference=False)


def test_hsoftmax_wiring_and_errors():
    op = CreateOperator("HSoftmax", ["X", "W", "b", "L"], ["Y", "I"], hierarchy=hierarchy())
    ops, g = get_gradient_for_op(op, ["Y_grad", None])
    assert list(ops[0].input) == ["X", "W", "b", "L", "I", "Y_grad"] and g[:3] == ["X_grad", "W_grad", "b_grad"]
    with pytest.raises(FrameworkError, match="HSoftmax.*hierarchy"):
        run_op_on(
            CreateOperator("HSoftmax", ["X", "W", "b", "L"], ["Y", "I"], hierarchy=b"\xff\xff"),
            [np.ones((1, 3)), np.ones((6, 3)), np.ones(6), np.zeros(1, np.int32)],
        )
    with pytest.raises(FrameworkError, match="HSoftmax.*'W'"):
        run_op_on(op, [np.ones((1, 3)), np.ones((6, 2)), np.ones(6), np.zeros(1, np.int32)])


def named_tree() -> TreeProto:
    t = TreeProto()
    r = t.root_node
    r.offset, r.name = 0, "root"
    for name, off, words in (("A", 2, [0, 1]), ("B", 4, [2, 3])):
        c = r.children.add(offset=off, name=name)
        c.word_ids.extend(words)
    return t


def ref_search(x, w, b, node, parent, beam, out):
    ln = len(node.children) + len(node.word_ids)
    z = w[node.offset : node.offset + ln] @ x + b[node.offset : node.offset + ln]
    p = np.exp(z - z.max())
    p /= p.sum()
    sc = [float(np.float32(-math.log(max(v, 1e-20)) + parent)) for v in p]
    kept = [(c, sc[i]) for i, c in enumerate(node.children) if sc[i] < np.float32(parent + beam)]
    out += [(c.name, s) for c, s in kept]
    out += [
        (str(wd), sc[len(node.children) + j])
        for j, wd in enumerate(node.word_ids)
        if sc[len(node.children) + j] < np.float32(parent + beam)
    ]
    for c, s in kept:
        ref_search(x, w, b, c, s, beam, out)


@given(seed=st.integers(0, 2**16), beam=st.sampled_from([0.5, 2.0, 10.0]), top=st.integers(1, 7))
@settings(max_examples=15, deadline=None)
def test_hsoftmax_search(seed, beam, top):
    rng = np.random.default_rng(seed)
    x, w, b = rng.standard_normal((2, 3)), rng.standard_normal((6, 3)), rng.standard_normal(6)
    t = named_tree()
    op = CreateOperator("HSoftmaxSearch", ["X", "W", "b"], ["N", "S"], tree=t.SerializeToString(), beam=beam, topN=top)

    def ref(x, w, b):
        names = np.empty((2, top), dtype=object)
        names[...] = b""
        scores = np.zeros((2, top), np.float32)
        for s in range(2):
            found = []
            ref_search(x[s], w, b, t.root_node, 0.0, beam, found)
            for j, i in enumerate(sorted(range(len(found)), key=lambda i: (found[i][1], i))[:top]):
                names[s, j], scores[s, j] = found[i][0].encode(), found[i][1]
        return [names, scores]

    (nm, sc) = run_op_on(op, [x, w, b])
    rn, rs = ref(x, w, b)
    assert nm.tolist() == rn.tolist()
    np.testing.assert_allclose(sc, rs, rtol=1e-5)


def depth_sum(node, counts, depth=1):
    total = sum(counts[wd] * depth for wd in node.word_ids)
    return total + sum(depth_sum(c, counts, depth + 1) for c in node.children)


@given(labels=st.lists(st.integers(0, 5), min_size=1, max_size=30))
@settings(max_examples=20, deadline=None)
def test_huffman_tree_hierarchy(labels):
    k = 6
    (out,) = run_op_on(
        CreateOperator("HuffmanTreeHierarchy", ["L"], ["T"], num_classes=k), [np.array(labels, np.int64)]
    )
    t = TreeProto.FromString(bytes(out[0]))
    words = []

    def collect(node):
        words.extend(node.word_ids)
        for c in node.children:
            collect(c)

    collect(t.root_node)
    assert sorted(words) == list(range(k))
    counts = np.bincount(labels, minlength=k)
    # Huffman optimality: the weighted depth equals the optimal merge cost
    h = list(counts)
    heapq.heapify(h)
    cost = 0
    while len(h) > 1:
        a, b2 = heapq.heappop(h), heapq.heappop(h)
        cost += a + b2
        heapq.heappush(h, a + b2)
    assert depth_sum(t.root_node, counts) == cost
    assert isinstance(t.root_node, type(NodeProto()))
