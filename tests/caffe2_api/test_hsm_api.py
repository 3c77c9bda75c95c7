"""caffe2.proto.hsm_pb2 and caffe2.python.hsm_util: Caffe2's hierarchical-softmax trees."""

import numpy as np

import framework.caffe2 as hook
from framework import core, workspace
from framework.proto import hsm_pb2


def test_hsm_messages_are_caffe2_wire_format():
    node = hsm_pb2.NodeProto(name="n", offset=3)
    node.word_ids.extend([1, 2])
    # proto2, unpacked: word_ids is field 2 (tag 0x10) per element, offset field 3 (0x18),
    # name field 4 (0x22)
    assert node.SerializeToString() == b"\x10\x01\x10\x02\x18\x03\x22\x01n"
    path = hsm_pb2.PathProto(word_id=7)
    path.path_nodes.add(index=0, length=2, target=1)
    assert path.SerializeToString() == b"\x08\x07\x12\x06\x08\x00\x10\x02\x18\x01"
    assert hsm_pb2.TreeProto.DESCRIPTOR.full_name == "caffe2.TreeProto"
    hook.install()
    from caffe2.proto import hsm_pb2 as alias

    assert alias.HierarchyProto is hsm_pb2.HierarchyProto


def test_ops_use_the_same_messages():
    from framework.ops.nn import hsm_proto

    assert hsm_proto.TreeProto is hsm_pb2.TreeProto


def _tree(hsm_util):
    leaf_a = hsm_util.create_node_with_words([0, 1], "a")
    leaf_b = hsm_util.create_node_with_words([2], "b")
    root = hsm_util.create_node_with_nodes([leaf_a, leaf_b], "root")
    root.word_ids.append(3)
    return hsm_pb2.TreeProto(root_node=root)


def test_hierarchy_of_a_small_tree():
    hook.install()
    from caffe2.python import hsm_util

    tree = _tree(hsm_util)
    assert [c.name for c in tree.root_node.children] == ["a", "b"]
    h = hsm_util.create_hierarchy(tree)
    # root: rows 0..2 (children a, b, then word 3); a: rows 3..4; b: row 5
    assert h.size == 6
    assert (tree.root_node.offset, tree.root_node.children[0].offset, tree.root_node.children[1].offset) == (0, 3, 5)
    paths = {p.word_id: [(n.index, n.length, n.target) for n in p.path_nodes] for p in h.paths}
    assert paths == {
        0: [(0, 3, 0), (3, 2, 0)],
        1: [(0, 3, 0), (3, 2, 1)],
        2: [(0, 3, 1), (5, 1, 0)],
        3: [(0, 3, 2)],
    }


def test_hsoftmax_runs_on_the_built_hierarchy():
    hook.install()
    from caffe2.python import hsm_util

    h = hsm_util.create_hierarchy(_tree(hsm_util))
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 4)).astype(np.float32)
    w = rng.standard_normal((h.size, 4)).astype(np.float32)
    b = rng.standard_normal(h.size).astype(np.float32)
    labels = np.array([1, 3], dtype=np.int32)
    for name, value in dict(X=x, W=w, b=b, labels=labels).items():
        workspace.FeedBlob(name, value)
    op = core.CreateOperator(
        "HSoftmax", ["X", "W", "b", "labels"], ["Y", "intermediate"], hierarchy=h.SerializeToString()
    )
    workspace.RunOperatorOnce(op)

    def nll(row, path):
        loss = 0.0
        for index, length, target in path:
            logits = w[index : index + length] @ x[row] + b[index : index + length]
            loss -= logits[target] - np.log(np.exp(logits).sum())
        return loss

    expected = [nll(0, [(0, 3, 0), (3, 2, 1)]), nll(1, [(0, 3, 2)])]
    np.testing.assert_allclose(workspace.FetchBlob("Y"), expected, rtol=1e-5)
