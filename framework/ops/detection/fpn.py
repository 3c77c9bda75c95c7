"""Feature-pyramid RoI routing: CollectRpnProposals (merge the RPN levels' proposals, keep the
best rpn_post_nms_topN), DistributeFpnProposals (send each RoI to the pyramid level its size
calls for, FPN paper eqn. 1) and CollectAndDistributeFpnRpnProposals (both)."""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.errors import ShapeError
from framework.ops.detection import boxes as B
from framework.ops.detection.common import float_input, roi_table
from framework.ops.gradient import should_not_do_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, INT, Arg, TensorSpec

_F32 = np.dtype(np.float32)
_I32 = np.dtype(np.int32)

_COLLECT_ARGS = [
    Arg("rpn_max_level", INT, 6, "highest RPN level (inputs: rois of each level, then their scores)"),
    Arg("rpn_min_level", INT, 2, "lowest RPN level"),
    Arg("rpn_post_nms_topN", INT, 2000, "RoIs kept over all levels, by score; <= 0: all"),
]
_DISTRIBUTE_ARGS = [
    Arg("roi_canonical_scale", INT, 224, "canonical RoI size s0"),
    Arg("roi_canonical_level", INT, 4, "level of a canonical-size RoI"),
    Arg("roi_max_level", INT, 5, "highest RoI level (outputs: one RoI blob per level)"),
    Arg("roi_min_level", INT, 2, "lowest RoI level"),
    Arg("legacy_plus_one", BOOL, True, "box sides are x2 - x1 + 1"),
]


def _levels(op: Operator, kind: str) -> int:
    lo, hi = op.args.get(f"{kind}_min_level"), op.args.get(f"{kind}_max_level")
    if hi < lo:
        raise op.arg_error(f"{kind}_max_level ({hi}) is below {kind}_min_level ({lo})")
    return hi - lo + 1


def collect(op: Operator) -> np.ndarray:
    """The levels' RoIs (R x 5) in descending score order (ties: earlier first), the first
    rpn_post_nms_topN of them."""
    n_lv = _levels(op, "rpn")
    if len(op.inputs) != 2 * n_lv:
        raise ShapeError(
            f"{op.describe()}: needs {2 * n_lv} inputs (rois, then scores, for {n_lv} levels), got {len(op.inputs)}"
        )
    rois, scores = [], []
    for i in range(n_lv):
        r = roi_table(op, i, (5,))
        s = float_input(op, n_lv + i)
        if s.size != r.shape[0]:
            raise ShapeError(
                f"{op.describe()}: scores ('{op.input_names[n_lv + i]}') hold {s.size} values for {r.shape[0]} RoIs"
            )
        rois.append(r.astype(np.float32))
        scores.append(s.reshape(-1).astype(np.float32))
    r, s = np.concatenate(rois), np.concatenate(scores)
    order = B.order_by_score(s)
    top = op.args.rpn_post_nms_topN
    if 0 < top < order.size:
        order = order[:top]
    return r[order]


def fpn_levels(rois: np.ndarray, lo: int, hi: int, s0: int, lvl0: int, legacy_plus_one: bool) -> np.ndarray:
    """floor(lvl0 + log2(sqrt(area) / s0 + 1e-6)) clipped to [lo, hi] (float32 maths, as Caffe2)."""
    area = B.boxes_area(rois[:, 1:5].astype(np.float32), legacy_plus_one)
    s = np.sqrt(area)
    with np.errstate(divide="ignore", invalid="ignore"):
        lv = np.floor(np.float32(lvl0) + np.log(s / np.float32(s0) + np.float32(1e-6)) / np.float32(np.log(2.0)))
    return np.clip(lv, lo, hi)


def distribute(op: Operator, rois: np.ndarray, first_out: int) -> None:
    """Write each level's RoIs to outputs first_out.. and the restoring permutation last."""
    a = op.args
    n_lv = _levels(op, "roi")
    if len(op.outputs) != first_out + n_lv + 1:
        raise ShapeError(
            f"{op.describe()}: needs {first_out + n_lv + 1} outputs for RoI levels "
            f"{a.roi_min_level}..{a.roi_max_level}, "
            f"got {len(op.outputs)}"
        )
    area = B.boxes_area(rois[:, 1:5], a.legacy_plus_one)
    if np.any(area < 0):
        raise ShapeError(f"{op.describe()}: RoIs with negative area")
    lv = fpn_levels(
        rois, a.roi_min_level, a.roi_max_level, a.roi_canonical_scale, a.roi_canonical_level, a.legacy_plus_one
    )
    order = []
    for k, level in enumerate(range(a.roi_min_level, a.roi_max_level + 1)):
        idx = np.flatnonzero(lv == level)
        op.output(first_out + k, (idx.size, 5), _F32)[...] = rois[idx]
        order.append(idx)
    restore = np.argsort(np.concatenate(order), kind="stable") if order else np.zeros(0, np.int64)
    op.output(len(op.outputs) - 1, (restore.size,), _I32)[...] = restore


def _unknown(args: Any, ins: list) -> list:
    return [TensorSpec(None, _F32)] * (args.num_outputs - 1) + [TensorSpec(None, _I32)]


@register_op(
    "CollectAndDistributeFpnRpnProposals",
    inputs=(2, float("inf")),
    outputs=(3, float("inf")),
    args=_DISTRIBUTE_ARGS + _COLLECT_ARGS,
    input_docs=[
        ("rpn_rois_fpn<l>", "R_l x 5 RPN proposals of each level, then"),
        ("rpn_roi_probs_fpn<l>", "their scores"),
    ],
    output_docs=[
        ("rois", "the kept RoIs, best first"),
        ("rois_fpn<l>", "RoIs of each RoI level (roi_min_level .. roi_max_level)"),
        ("rois_idx_restore", "int32 permutation restoring `rois` order from the concatenated level blobs"),
    ],
    infer=lambda args, ins: [TensorSpec(None, _F32)] * (args.num_outputs - 1) + [TensorSpec(None, _I32)],
    category="detection",
)
class CollectAndDistributeFpnRpnProposals(Operator):
    """Merges the RPN proposals of every level, keeps the rpn_post_nms_topN best by score (ties:
    earlier input first) and distributes them to the RoI levels by size:
    level = clip(floor(roi_canonical_level + log2(sqrt(area) / roi_canonical_scale + 1e-6))).
    Inference only, as Caffe2's."""

    def run(self) -> None:
        rois = collect(self)
        _levels(self, "roi")
        distribute(self, rois, 1)
        self.output(0, rois.shape, _F32)[...] = rois


@register_op(
    "CollectRpnProposals",
    inputs=(2, float("inf")),
    args=_COLLECT_ARGS,
    input_docs=[
        ("rpn_rois_fpn<l>", "R_l x 5 RPN proposals of each level, then"),
        ("rpn_roi_probs_fpn<l>", "their scores"),
    ],
    output_docs=[("rois", "the kept RoIs, best first")],
    infer=lambda args, ins: [TensorSpec(None, _F32)],
    category="detection",
)
class CollectRpnProposals(Operator):
    """Merges the RPN proposals of every level and keeps the rpn_post_nms_topN best by score."""

    def run(self) -> None:
        rois = collect(self)
        self.output(0, rois.shape, _F32)[...] = rois


@register_op(
    "DistributeFpnProposals",
    inputs=1,
    outputs=(2, float("inf")),
    args=_DISTRIBUTE_ARGS,
    input_docs=[("rois", "R x 5 RoIs [batch index, x1, y1, x2, y2]")],
    output_docs=[
        ("rois_fpn<l>", "RoIs of each RoI level (roi_min_level .. roi_max_level)"),
        ("rois_idx_restore", "int32 permutation restoring the input order from the concatenated level blobs"),
    ],
    infer=_unknown,
    category="detection",
)
class DistributeFpnProposals(Operator):
    """Sends each RoI to its FPN level (see CollectAndDistributeFpnRpnProposals)."""

    def run(self) -> None:
        rois = roi_table(self, 0, (5,)).astype(np.float32)
        distribute(self, rois, 0)


should_not_do_gradient("CollectAndDistributeFpnRpnProposals", "CollectRpnProposals", "DistributeFpnProposals")
