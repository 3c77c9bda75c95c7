"""Hierarchical softmax: HSoftmax (+HSoftmaxGradient), HSoftmaxSearch (beam search over a named
tree) and HuffmanTreeHierarchy (a Huffman tree of the label counts), with the hierarchy and tree
given as serialized hsm.proto messages (``framework.ops.nn.hsm_proto``)."""

from __future__ import annotations

from typing import Any

import numpy as np
from google.protobuf import message as pb_message

from framework.errors import ShapeError, TypeMismatchError
from framework.ops.gradient import gradient, should_not_do_gradient
from framework.ops.nn.hsm_proto import HierarchyProto, NodeProto, TreeProto
from framework.ops.operator import Operator
from framework.ops.pointwise import float_input
from framework.ops.registry import register_op
from framework.ops.schema import FLOAT, INT, STRING, Arg, TensorSpec

_LOG_T = 1e-20


class _RawProtoArg(Operator):
    """Takes the serialized-proto argument ``proto_arg`` as raw bytes (before argument parsing
    would decode it as text) and parses it into ``proto_cls``."""

    proto_arg = "hierarchy"
    proto_cls: Any = HierarchyProto

    def __init__(self, op_def: Any, ws: Any, index: int | None = None) -> None:
        raw = [bytes(a.s) for a in op_def.arg if a.name == self.proto_arg]
        stripped = type(op_def)()
        stripped.CopyFrom(op_def)
        del stripped.arg[:]
        stripped.arg.extend(a for a in op_def.arg if a.name != self.proto_arg)
        self._raw = raw[0] if raw else b""
        super().__init__(stripped, ws, index)
        self.op_def = op_def

    def setup(self) -> None:
        try:
            self.proto = self.proto_cls.FromString(self._raw)
        except pb_message.DecodeError as e:
            raise self.arg_error(
                f"argument '{self.proto_arg}' is not a serialized {self.proto_cls.__name__}: {e}"
            ) from None


def _xwbl(op: Operator) -> tuple:
    x, w, b = float_input(op, 0), float_input(op, 1), float_input(op, 2)
    m = x.shape[0] if x.ndim > 1 else 1
    k = x.size // m if m else 0
    if w.ndim < 2 or b.ndim != 1 or w.shape[0] != b.shape[0] or (w.shape[0] and w.size // w.shape[0] != k):
        raise ShapeError(
            f"{op.describe()}: W ('{op.input_names[1]}') must be N x {k} and b ('{op.input_names[2]}') (N,), "
            f"got {list(w.shape)} and {list(b.shape)}"
        )
    return x.reshape(m, k).astype(np.float64), w.reshape(w.shape[0], -1).astype(np.float64), b.astype(np.float64), m


def _paths(op: Operator, labels: np.ndarray, n_rows: int) -> list:
    """The path (list of (index, length, target)) of each label; unknown labels have none (as Caffe2)."""
    table = {p.word_id: [(nd.index, nd.length, nd.target) for nd in p.path_nodes] for p in op.proto.paths}
    out = []
    for lab in labels:
        path = table.get(int(lab), [])
        for idx, ln, tgt in path:
            if idx < 0 or ln < 1 or idx + ln > n_rows or not 0 <= tgt < ln:
                raise ShapeError(
                    f"{op.describe()}: hierarchy node (index {idx}, length {ln}, target {tgt}) does not fit "
                    f"W's {n_rows} rows"
                )
        out.append(path)
    return out


def _labels(op: Operator, m: int) -> np.ndarray:
    lab = op.input(3)
    if lab.dtype.kind not in "iu" or lab.size != m:
        raise TypeMismatchError(
            f"{op.describe()}: labels ('{op.input_names[3]}') must hold {m} integers, got {lab.dtype} {list(lab.shape)}"
        )
    return lab.reshape(-1)


def _softmax(v: np.ndarray) -> np.ndarray:
    e = np.exp(v - v.max())
    return e / e.sum()


_H_ARG = [Arg("hierarchy", STRING, "", "serialized HierarchyProto: each word's path of (index, length, target) nodes")]


@register_op(
    "HSoftmax",
    inputs=4,
    outputs=2,
    args=_H_ARG,
    input_docs=[
        ("X", "M x K inputs"),
        ("W", "N x K stacked node weights"),
        ("b", "(N,) node biases"),
        ("labels", "(M,) int word ids"),
    ],
    output_docs=[
        ("Y", "(M,) negative log probability of each label along its path"),
        ("intermediate_output", "each path node's FC output then softmax, sample by sample"),
    ],
    infer=lambda args, ins: [TensorSpec(None, np.dtype(np.float32)), TensorSpec(None, np.dtype(np.float32))],
    category="loss",
)
class HSoftmax(_RawProtoArg):
    """For each sample, along its word's path: softmax(W[index:index+length] x + b[...]) and
    -log(max(p[target], 1e-20)), summed over the path's nodes."""

    def run(self) -> None:
        x, w, b, m = _xwbl(self)
        paths = _paths(self, _labels(self, m), w.shape[0])
        y, inter = np.zeros(m), []
        for s, path in enumerate(paths):
            for idx, ln, tgt in path:
                fc = w[idx : idx + ln] @ x[s] + b[idx : idx + ln]
                p = _softmax(fc)
                inter += [fc, p]
                y[s] += -np.log(max(p[tgt], _LOG_T))
        iv = np.concatenate(inter) if inter else np.zeros(0)
        dt = self.input(0).dtype
        self.output(0, (m,), dt)[...] = y
        self.output(1, iv.shape, dt)[...] = iv


@register_op(
    "HSoftmaxGradient",
    inputs=6,
    outputs=4,
    args=_H_ARG,
    input_docs=[
        ("X", "forward X"),
        ("W", "forward W"),
        ("b", "forward b"),
        ("labels", "forward labels"),
        ("intermediate_output", "forward intermediate_output"),
        ("dY", "gradient of Y"),
    ],
    output_docs=[
        ("dX", "gradient of X"),
        ("dW", "gradient of W"),
        ("db", "gradient of b"),
        ("dintermediate_output", "per node: the softmax and cross-entropy input gradients"),
    ],
    infer=lambda args, ins: [ins[0], ins[1], ins[2], ins[4]],
    category="loss",
    private=True,
)
class HSoftmaxGradient(_RawProtoArg):
    """Backpropagates each path node's cross entropy through its softmax and FC."""

    def run(self) -> None:
        x, w, b, m = _xwbl(self)
        paths = _paths(self, _labels(self, m), w.shape[0])
        inter, dy = float_input(self, 4).reshape(-1).astype(np.float64), float_input(self, 5).reshape(-1)
        need = sum(2 * ln for path in paths for _, ln, _ in path)
        if inter.size != need or dy.size != m:
            raise ShapeError(f"{self.describe()}: intermediate_output must hold {need} values and dY {m}")
        dx, dw, db, dint = np.zeros(x.shape), np.zeros(w.shape), np.zeros(b.shape), np.zeros(inter.shape)
        off = 0
        for s, path in enumerate(paths):
            for idx, ln, tgt in path:
                p = inter[off + ln : off + 2 * ln]
                d_ent = np.zeros(ln)
                d_ent[tgt] = -dy[s] / max(p[tgt], _LOG_T)
                d_soft = (d_ent - p @ d_ent) * p
                dint[off + ln : off + 2 * ln], dint[off : off + ln] = d_ent, d_soft
                dw[idx : idx + ln] += np.outer(d_soft, x[s])
                db[idx : idx + ln] += d_soft
                dx[s] += w[idx : idx + ln].T @ d_soft
                off += 2 * ln
        self.output(0, self.input(0).shape, self.input(0).dtype)[...] = dx.reshape(self.input(0).shape)
        self.output(1, self.input(1).shape, self.input(1).dtype)[...] = dw.reshape(self.input(1).shape)
        self.output(2, self.input(2).shape, self.input(2).dtype)[...] = db
        self.output(3, inter.shape, self.input(4).dtype)[...] = dint


@gradient("HSoftmax")
def _hsoftmax_grad(g):
    return [
        g.op(
            "HSoftmaxGradient",
            [g.I(0), g.I(1), g.I(2), g.I(3), g.O(1), g.GO(0)],
            [g.GI(0), g.GI(1), g.GI(2), g.O(1) + "_grad"],
        )
    ]


# -- HSoftmaxSearch -----------------------------------------------------------------------------------


@register_op(
    "HSoftmaxSearch",
    inputs=3,
    outputs=2,
    args=[
        Arg("tree", STRING, "", "serialized TreeProto; every node needs offset and name"),
        Arg("beam", FLOAT, 0.01, "a child is explored when its score < parent score + beam"),
        Arg("topN", INT, 5, "results per sample"),
    ],
    input_docs=[("X", "M x K inputs"), ("W", "N x K node weights"), ("b", "(N,) node biases")],
    output_docs=[
        ("Y_names", "M x topN names of the best nodes and words (word ids as text)"),
        ("Y_scores", "M x topN scores (-log probability along the path), 0 past the results"),
    ],
    infer=lambda args, ins: [TensorSpec(None, np.dtype(object)), TensorSpec(None, np.dtype(np.float32))],
    category="loss",
)
class HSoftmaxSearch(_RawProtoArg):
    """Beam search down the tree: each node's softmax over its children then words gives scores
    -log(p) + parent score; entries under parent score + beam are kept (children explored);
    the topN smallest scores over all kept entries are returned (ties keep tree order)."""

    proto_arg = "tree"
    proto_cls = TreeProto

    def setup(self) -> None:
        super().setup()
        if self.args.topN < 1:
            raise self.arg_error(f"'topN' must be >= 1, got {self.args.topN}")

    def _prune(self, x: np.ndarray, w: np.ndarray, b: np.ndarray, node: Any, parent: float, out: list) -> None:
        if not node.HasField("offset") or not node.HasField("name"):
            raise self.arg_error("HSoftmaxSearch needs an offset and a name on every tree node")
        ln = len(node.children) + len(node.word_ids)
        off = node.offset
        if off < 0 or off + ln > w.shape[0]:
            raise ShapeError(f"{self.describe()}: tree node '{node.name}' rows [{off}, {off + ln}) are outside W")
        p = _softmax(w[off : off + ln] @ x + b[off : off + ln]) if ln else np.zeros(0)
        scores = (-np.log(np.maximum(p, _LOG_T)) + parent).astype(np.float32)
        kept = []
        for i, child in enumerate(node.children):
            if scores[i] < np.float32(parent + self.args.beam):
                if not child.HasField("offset") or not child.HasField("name"):
                    raise self.arg_error("HSoftmaxSearch needs an offset and a name on every tree node")
                kept.append((child.name, float(scores[i]), child))
        words = [
            (str(wid), float(scores[len(node.children) + j]))
            for j, wid in enumerate(node.word_ids)
            if scores[len(node.children) + j] < np.float32(parent + self.args.beam)
        ]
        out.extend((name, sc) for name, sc, _ in kept)
        out.extend(words)
        for _, sc, child in kept:
            self._prune(x, w, b, child, sc, out)

    def run(self) -> None:
        x, w, b, m = _xwbl(self)
        if not self.proto.HasField("root_node"):
            raise self.arg_error("argument 'tree' has no root node")
        n = self.args.topN
        names = np.empty((m, n), dtype=object)
        names[...] = b""
        scores = np.zeros((m, n), np.float32)
        for s in range(m):
            found: list = []
            self._prune(x[s], w, b, self.proto.root_node, 0.0, found)
            best = sorted(range(len(found)), key=lambda i: (found[i][1], i))[:n]
            for j, i in enumerate(best):
                names[s, j] = found[i][0].encode("utf-8")
                scores[s, j] = found[i][1]
        self.output(0, (m, n), np.dtype(object))[...] = names
        self.output(1, (m, n), np.dtype(np.float32))[...] = scores


# -- HuffmanTreeHierarchy -----------------------------------------------------------------------------


class _Heap:
    """std::priority_queue over libstdc++'s push_heap / pop_heap, so ties pop as in Caffe2."""

    def __init__(self, before: Any) -> None:
        self.a: list = []
        self.before = before  # before(x, y): x sits below y (the comparator)

    def _up(self, hole: int, top: int, value: Any) -> None:
        a = self.a
        parent = (hole - 1) // 2
        while hole > top and self.before(a[parent], value):
            a[hole] = a[parent]
            hole = parent
            parent = (hole - 1) // 2
        a[hole] = value

    def push(self, v: Any) -> None:
        self.a.append(v)
        self._up(len(self.a) - 1, 0, v)

    def pop(self) -> Any:
        a = self.a
        top = a[0]
        value = a[-1]
        a[-1] = a[0]
        n = len(a) - 1
        hole, child = 0, 0
        while child < (n - 1) // 2:
            child = 2 * (child + 1)
            if self.before(a[child], a[child - 1]):
                child -= 1
            a[hole] = a[child]
            hole = child
        if n % 2 == 0 and child == (n - 2) // 2 and n >= 2:
            child = 2 * (child + 1)
            a[hole] = a[child - 1]
            hole = child - 1
        if n:
            self._up(hole, 0, value)
        a.pop()
        return top


@register_op(
    "HuffmanTreeHierarchy",
    args=[Arg("num_classes", INT, 0, "labels lie in [0, num_classes)")],
    input_docs=[("Labels", "int64 label vector")],
    output_docs=[("Hierarch", "(1,) string: the serialized TreeProto of the Huffman tree")],
    infer=lambda args, ins: [TensorSpec((1,), np.dtype(object))],
    category="loss",
)
class HuffmanTreeHierarchy(Operator):
    """Huffman tree over the label counts (std::priority_queue order, so ties resolve as in
    Caffe2), serialized as a TreeProto whose node offsets index HSoftmax's W rows."""

    def setup(self) -> None:
        if self.args.num_classes < 1:
            raise self.arg_error(f"'num_classes' must be >= 1, got {self.args.num_classes}")

    def run(self) -> None:
        y = self.input(0)
        k = self.args.num_classes
        if y.dtype.kind not in "iu" or y.ndim != 1:
            raise TypeMismatchError(f"{self.describe()}: Labels ('{self.input_names[0]}') must be an int vector")
        if y.size and (y.min() < 0 or y.max() >= k):
            raise ShapeError(f"{self.describe()}: labels must lie in [0, {k})")
        counts = np.bincount(y.astype(np.int64), minlength=k)
        heap = _Heap(lambda a, b: a[1] > b[1])  # node = [label, count, left, right]
        for i in range(k):
            heap.push([i, int(counts[i]), -1, -1])
        tree: list = []

        def take() -> tuple:
            node = heap.pop()
            tree.append(node)
            return len(tree) - 1, node

        while heap.a:
            left = take()
            if heap.a:
                right = take()
                heap.push([-1, left[1][1] + right[1][1], left[0], right[0]])
        offset = [0]

        def leaf(i: int) -> bool:
            return tree[i][2] == -1 and tree[i][3] == -1

        def build(i: int, node: Any) -> None:
            if i == -1 or leaf(i):
                return
            for side, ch in ((0, tree[i][2]), (1, tree[i][3])):
                if ch == -1:
                    continue
                if leaf(ch):
                    node.word_ids.append(tree[ch][0])
                    if side == 1:
                        offset[0] += 1
                else:
                    sub = node.children.add()
                    sub.offset = offset[0]
                    offset[0] += 2
                    build(ch, sub)

        root = NodeProto()
        root.offset = offset[0]
        offset[0] += 2
        build(len(tree) - 1, root)
        t = TreeProto()
        t.root_node.CopyFrom(root)
        out = self.output(0, (1,), np.dtype(object))
        out[0] = t.SerializeToString()


should_not_do_gradient("HSoftmaxSearch", "HuffmanTreeHierarchy")
