"""ONNXTreeEnsemble: ai.onnx.ml TreeEnsemble (opset 5), a forest of decision trees.

Each interior node compares feature ``nodes_featureids[i]`` of a row with its split by
``nodes_modes[i]`` (0 <=, 1 <, 2 >=, 3 >, 4 ==, 5 !=, 6 membership in a set) and goes to its true
or false child; a child is a leaf when ``nodes_trueleafs``/``nodes_falseleafs`` says so (the id
then indexes ``leaf_targetids``/``leaf_weights``). A NaN feature goes true where
``nodes_missing_value_tracks_true``. Leaf weights are aggregated per target over the trees
(``aggregate_function`` 0 average, 1 sum, 2 min, 3 max). Membership sets come from
``membership_values``, NaN-delimited, in the order the membership nodes appear in
``nodes_modes`` (ONNX's spec). Splits, weights and sets are input tensors (X's float type:
comparisons keep their precision). Only ``post_transform`` NONE. Not differentiable.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.errors import ArgumentError, ShapeError
from framework.ops.gradient import no_gradient
from framework.ops.onnx.reduce import _check_kind
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import INT, INTS, REQUIRED, Arg, TensorSpec
from framework.ops.validation import expect_in_range

_COMPARE = {
    0: np.less_equal,
    1: np.less,
    2: np.greater_equal,
    3: np.greater,
    4: np.equal,
    5: np.not_equal,
}


def _infer(args: Any, ins: list) -> list:
    s = ins[0].shape
    return [TensorSpec(None if s is None else (s[0], int(args.n_targets)), ins[0].dtype)]


@register_op(
    "ONNXTreeEnsemble",
    inputs=(3, 4),
    args=[
        Arg("nodes_featureids", INTS, REQUIRED, "feature index compared at each node"),
        Arg("nodes_modes", INTS, REQUIRED, "comparison of each node: 0 <=, 1 <, 2 >=, 3 >, 4 ==, 5 !=, 6 member"),
        Arg("nodes_truenodeids", INTS, REQUIRED, "true child: a node id, or a leaf id if nodes_trueleafs"),
        Arg("nodes_falsenodeids", INTS, REQUIRED, "false child: a node id, or a leaf id if nodes_falseleafs"),
        Arg("nodes_trueleafs", INTS, REQUIRED, "1: the true child is a leaf"),
        Arg("nodes_falseleafs", INTS, REQUIRED, "1: the false child is a leaf"),
        Arg("nodes_missing_value_tracks_true", INTS, [], "1: a NaN feature takes the true branch"),
        Arg("leaf_targetids", INTS, REQUIRED, "target of each leaf"),
        Arg("tree_roots", INTS, REQUIRED, "root node id of each tree"),
        Arg("n_targets", INT, 1, "number of targets (output columns)", low=1),
        Arg("aggregate_function", INT, 1, "0 average, 1 sum, 2 min, 3 max", choices=(0, 1, 2, 3)),
    ],
    input_docs=[
        ("X", "float features [N, F]"),
        ("splits", "split value of each node (X's type)"),
        ("leaf_weights", "weight of each leaf (X's type)"),
        ("membership_values", "optional: NaN-delimited sets of the membership nodes (X's type)"),
    ],
    output_docs=[("Y", "[N, n_targets] aggregated leaf weights")],
    infer=_infer,
    category="onnx",
    input_types="any",
    ranks={0: 2, 1: 1, 2: 1},
)
class ONNXTreeEnsemble(Operator):
    """ai.onnx.ml TreeEnsemble (see the module docs): Y[n, t] aggregates, over the trees, the
    weight of the leaf row n reaches when that leaf's target is t."""

    def setup(self) -> None:
        a = self.args
        n = len(a.nodes_modes)
        lists = (a.nodes_featureids, a.nodes_truenodeids, a.nodes_falsenodeids, a.nodes_trueleafs, a.nodes_falseleafs)
        if any(len(v) != n for v in lists) or any(m not in (0, 1, 2, 3, 4, 5, 6) for m in a.nodes_modes):
            raise self.arg_error("the nodes_* lists must have one entry per node and modes in 0..6")

    def _sets(self, members: np.ndarray) -> dict[int, set]:
        sets: dict[int, set] = {}
        groups, cur = [], set()
        for v in members.tolist():
            if np.isnan(v):
                groups.append(cur)
                cur = set()
            else:
                cur.add(v)
        member_nodes = [i for i, m in enumerate(self.args.nodes_modes) if m == 6]
        if len(groups) < len(member_nodes):
            raise ArgumentError(
                f"{self.describe()}: membership_values has {len(groups)} sets for {len(member_nodes)} membership nodes"
            )
        for i, g in zip(member_nodes, groups):
            sets[i] = g
        return sets

    def run(self) -> None:
        a = self.args
        x = self.input(0)
        _check_kind(self, x, ("float",))
        splits, weights = self.input(1), self.input(2)
        n_nodes, n_leaves = len(a.nodes_modes), len(a.leaf_targetids)
        if splits.size != n_nodes or weights.size != n_leaves:
            raise ShapeError(
                f"{self.describe()}: '{self.input_names[1]}' has {splits.size} splits for {n_nodes} nodes, "
                f"'{self.input_names[2]}' {weights.size} weights for {n_leaves} leaves"
            )
        sets = self._sets(self.input(3) if len(self.input_names) > 3 else np.zeros(0))
        where, n_features = self.describe(), x.shape[1]
        for v in a.nodes_featureids:
            expect_in_range(where, "feature id", v, 0, n_features, of=f"{n_features} features", error=ArgumentError)
        for t in a.leaf_targetids:
            expect_in_range(where, "target id", t, 0, a.n_targets, of="n_targets", error=ArgumentError)
        for r in a.tree_roots:
            expect_in_range(where, "tree root", r, 0, n_nodes, of=f"{n_nodes} nodes", error=ArgumentError)
        for v in (*a.nodes_truenodeids, *a.nodes_falsenodeids):  # their upper bounds depend on the branch taken
            if v < 0:
                raise ArgumentError(f"{where}: node or leaf id {v} is negative")
        tracks = list(a.nodes_missing_value_tracks_true) + [0] * n_nodes
        leaf_hits = [self._walk(row, r, splits, sets, tracks, where) for row in x for r in a.tree_roots]
        fn = a.aggregate_function
        info = np.finfo(x.dtype)
        init = {0: 0.0, 1: 0.0, 2: float(info.max), 3: float(info.min)}[fn]  # min/max start at the extremes
        y = np.full((x.shape[0], a.n_targets), init, np.float64)
        k = 0
        for r in range(x.shape[0]):
            for _ in a.tree_roots:
                leaf = leaf_hits[k]
                k += 1
                t, w = a.leaf_targetids[leaf], float(weights[leaf])
                if fn in (0, 1):
                    y[r, t] += w / len(a.tree_roots) if fn == 0 else w
                else:
                    y[r, t] = min(y[r, t], w) if fn == 2 else max(y[r, t], w)
        out = self.output(0, (x.shape[0], a.n_targets), x.dtype)
        out[...] = y

    def _walk(self, row: np.ndarray, node: int, splits: np.ndarray, sets: dict, tracks: list, where: str) -> int:
        a = self.args
        n_leaves, n_nodes = len(a.leaf_targetids), len(a.nodes_modes)
        of_leaves, of_nodes = f"{n_leaves} leaves", f"{n_nodes} nodes"
        if (
            a.nodes_trueleafs[node]
            and a.nodes_falseleafs[node]
            and a.nodes_truenodeids[node] == a.nodes_falsenodeids[node]
        ):
            return a.nodes_truenodeids[node]  # a tree that is one leaf
        for _ in range(n_nodes + 1):
            v = row[a.nodes_featureids[node]]
            mode = a.nodes_modes[node]
            if np.isnan(v) and tracks[node]:
                go = True
            elif mode == 6:
                go = float(v) in sets.get(node, set())
            else:
                go = bool(_COMPARE[mode](v, splits[node]))
            nxt, leaf = (
                (a.nodes_truenodeids[node], a.nodes_trueleafs[node])
                if go
                else (a.nodes_falsenodeids[node], a.nodes_falseleafs[node])
            )
            if leaf:
                return expect_in_range(where, "leaf id", nxt, 0, n_leaves, of=of_leaves, error=ArgumentError)
            node = expect_in_range(where, "node id", nxt, 0, n_nodes, of=of_nodes, error=ArgumentError)
        raise ArgumentError(f"{where}: the trees have a cycle")


no_gradient("ONNXTreeEnsemble")
