"""``caffe2.python.hsm_util``: build the trees and hierarchies that hierarchical softmax takes.

- ``create_node_with_words(words, name)``: a leaf-level ``NodeProto`` holding word ids.
- ``create_node_with_nodes(nodes, name)``: a ``NodeProto`` whose children are copies of ``nodes``.
- ``create_hierarchy(tree)``: the ``HierarchyProto`` of a ``TreeProto``. Nodes are numbered depth
  first, children before words: each node's ``offset`` (set on the tree in place) is the first of its
  ``len(children) + len(word_ids)`` consecutive rows of the softmax weights; a node's child ``i`` is
  target ``i``, its word ``j`` target ``len(children) + j``. Every word gets a path of (index=offset,
  length, target) entries from the root down; ``size`` is the total number of rows.
"""

from __future__ import annotations

from typing import Iterable

from framework.proto.hsm_pb2 import HierarchyProto, NodeProto, PathProto, TreeProto


def create_node_with_words(words: Iterable[int], name: str = "node") -> NodeProto:
    node = NodeProto(name=name)
    node.word_ids.extend(words)
    return node


def create_node_with_nodes(nodes: Iterable[NodeProto], name: str = "node") -> NodeProto:
    node = NodeProto(name=name)
    for child in nodes:
        node.children.add().CopyFrom(child)
    return node


def create_hierarchy(tree_proto: TreeProto) -> HierarchyProto:
    hierarchy = HierarchyProto()
    path: list[tuple[int, int, int]] = []  # (offset, length, target) of each node above

    def visit(node: NodeProto, next_row: int) -> int:
        node.offset = next_row
        width = len(node.children) + len(node.word_ids)
        next_row += width
        hierarchy.size = max(hierarchy.size, next_row)
        for target, child in enumerate(node.children):
            path.append((node.offset, width, target))
            next_row = visit(child, next_row)
            path.pop()
        for j, word in enumerate(node.word_ids):
            entry = PathProto(word_id=word)
            for index, length, target in [*path, (node.offset, width, len(node.children) + j)]:
                entry.path_nodes.add(index=index, length=length, target=target)
            hierarchy.paths.append(entry)
        return next_row

    visit(tree_proto.root_node, 0)
    return hierarchy
