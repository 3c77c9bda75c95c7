"""A tiny two-stage detector (Mask R-CNN shaped, random weights) built with ModelHelper/brew and
written as protobuf text to ``models/tiny_mask_rcnn/``. Run from the repository root:

    python models/detector.py

Inference only: backbone (three stride-2 convs) -> two FPN levels (strides 4 and 8) -> RPN head
(shared weights) -> GenerateProposals per level -> CollectAndDistributeFpnRpnProposals ->
RoIAlign per level, Concat, Gather(rois_idx_restore) -> box head (FC, FC) -> BBoxTransform ->
BoxWithNMSLimit -> mask head (RoIAlign on the detections, conv, ConvTranspose, conv, Sigmoid)
inside an ``If`` that runs only when there are detections (its else branch writes an empty
mask tensor). Every fill op of the init net carries a random seed, so the weights are the same
on every run.
"""

from __future__ import annotations

import os
import sys

import numpy as np
from google.protobuf import text_format

from framework.caffe2.python import brew
from framework.caffe2.python.model_helper import ModelHelper
from framework.core import CreateOperator
from framework.proto.framework_pb2 import NetDef

HERE = os.path.dirname(os.path.abspath(__file__))
NAME = "tiny_mask_rcnn"
IMAGE = 64  # input side (pixels)
CLASSES = 3  # background + 2
CH = 16  # feature channels
LEVELS = (2, 3)  # FPN levels: stride 2 ** level
ANCHOR_SIZES = {2: 16.0, 3: 32.0}
RATIOS = (0.5, 1.0, 2.0)
POOL = 4  # box head RoIAlign size
MASK_POOL = 7  # mask head RoIAlign size; masks are 2 * MASK_POOL square

GP_ARGS = dict(pre_nms_topN=60, post_nms_topN=12, nms_thresh=0.7, min_size=0.0)
FPN_ARGS = dict(
    rpn_min_level=2,
    rpn_max_level=3,
    roi_min_level=2,
    roi_max_level=3,
    roi_canonical_scale=32,
    roi_canonical_level=3,
    rpn_post_nms_topN=16,
)
NMS_ARGS = dict(score_thresh=0.2, nms=0.5, detections_per_im=8)
BBOX_WEIGHTS = [10.0, 10.0, 5.0, 5.0]


def anchors(size: float) -> np.ndarray:
    """Detectron-style cell anchors [x1, y1, x2, y2] centred on the cell's first pixel."""
    out = []
    for r in RATIOS:
        w, h = size / np.sqrt(r), size * np.sqrt(r)
        out.append([-(w - 1) / 2, -(h - 1) / 2, (w - 1) / 2, (h - 1) / 2])
    return np.array(out, np.float32)


def _gauss(std: float) -> tuple:
    return ("GaussianFill", {"std": std})


def build() -> dict[str, NetDef]:
    m = ModelHelper(name=NAME)
    a = len(RATIOS)
    # backbone
    h = brew.relu(m, brew.conv(m, "data", "c1", 3, 8, 3, stride=2, pad=1, bias_init=_gauss(0.1)), "c1")
    h = brew.relu(m, brew.conv(m, h, "c2", 8, CH, 3, stride=2, pad=1, bias_init=_gauss(0.1)), "c2")
    feats = {2: h, 3: brew.relu(m, brew.conv(m, h, "c3", CH, CH, 3, stride=2, pad=1, bias_init=_gauss(0.1)), "c3")}
    # RPN head, shared over levels (parameters of the first level reused by name)
    rois, probs = [], []
    for lv in LEVELS:
        hid = m.net.Conv([feats[lv], "rpn_conv_w", "rpn_conv_b"], f"rpn_hid_fpn{lv}", kernel=3, pad=1)
        hid = m.net.Relu(hid, hid)
        logits = m.net.Conv([hid, "rpn_cls_w", "rpn_cls_b"], f"rpn_cls_logits_fpn{lv}", kernel=1)
        prob = m.net.Sigmoid(logits, f"rpn_cls_probs_fpn{lv}")
        deltas = m.net.Conv([hid, "rpn_bbox_w", "rpn_bbox_b"], f"rpn_bbox_pred_fpn{lv}", kernel=1)
        r, p = m.net.GenerateProposals(
            [prob, deltas, "im_info", f"anchors_fpn{lv}"],
            [f"rpn_rois_fpn{lv}", f"rpn_roi_probs_fpn{lv}"],
            spatial_scale=1.0 / 2**lv,
            **GP_ARGS,
        )
        rois.append(r)
        probs.append(p)
    for name, shape, std in (
        ("rpn_conv", [CH, CH, 3, 3], 0.1),
        ("rpn_cls", [a, CH, 1, 1], 0.3),
        ("rpn_bbox", [4 * a, CH, 1, 1], 0.05),
    ):
        m.create_param(f"{name}_w", shape, _gauss(std))
        m.create_param(f"{name}_b", [shape[0]], _gauss(0.1))
    outs = ["rois"] + [f"rois_fpn{lv}" for lv in LEVELS] + ["rois_idx_restore"]
    m.net.CollectAndDistributeFpnRpnProposals(rois + probs, outs, **FPN_ARGS)
    # box head
    pooled = [
        m.net.RoIAlign(
            [feats[lv], f"rois_fpn{lv}"],
            f"roi_feat_fpn{lv}",
            pooled_h=POOL,
            pooled_w=POOL,
            spatial_scale=1.0 / 2**lv,
            sampling_ratio=2,
        )
        for lv in LEVELS
    ]
    shuffled, _ = m.net.Concat(pooled, ["roi_feat_shuffled", "roi_feat_split"], axis=0)
    feat = m.net.Gather([shuffled, "rois_idx_restore"], "roi_feat")
    h = brew.relu(m, brew.fc(m, feat, "fc6", CH * POOL * POOL, 32, bias_init=_gauss(0.1)), "fc6")
    cls = brew.softmax(m, brew.fc(m, h, "cls_score", 32, CLASSES, weight_init=_gauss(0.5)), "cls_prob")
    bbox = brew.fc(m, h, "bbox_pred", 32, 4 * CLASSES, weight_init=_gauss(0.2))
    m.net.BBoxTransform(
        ["rois", bbox, "im_info"], ["pred_boxes", "roi_batch_splits"], weights=BBOX_WEIGHTS, apply_scale=0
    )
    m.net.BoxWithNMSLimit(
        [cls, "pred_boxes", "roi_batch_splits"], ["score_nms", "bbox_nms", "class_nms", "batch_splits_nms"], **NMS_ARGS
    )
    # mask head, run only when there are detections
    m.net.Size("score_nms", "num_dets")
    m.net.GT(["num_dets", "zero"], "has_dets")
    mask_w = {
        "mask_conv_w": ([CH, CH, 3, 3], 0.1),
        "mask_conv_b": ([CH], 0.1),
        "mask_up_w": ([CH, CH, 2, 2], 0.2),
        "mask_up_b": ([CH], 0.1),
        "mask_logits_w": ([CLASSES, CH, 1, 1], 0.3),
        "mask_logits_b": ([CLASSES], 0.1),
    }
    for name, (shape, std) in mask_w.items():
        m.create_param(name, shape, _gauss(std))
    then = NetDef(
        name="mask_head",
        op=[
            CreateOperator(
                "RoIAlign",
                [feats[2], "bbox_nms"],
                ["mask_roi_feat"],
                pooled_h=MASK_POOL,
                pooled_w=MASK_POOL,
                spatial_scale=0.25,
                sampling_ratio=2,
            ),
            CreateOperator("Conv", ["mask_roi_feat", "mask_conv_w", "mask_conv_b"], ["mask_hid"], kernel=3, pad=1),
            CreateOperator("Relu", ["mask_hid"], ["mask_hid"]),
            CreateOperator("ConvTranspose", ["mask_hid", "mask_up_w", "mask_up_b"], ["mask_up"], kernel=2, stride=2),
            CreateOperator("Relu", ["mask_up"], ["mask_up"]),
            CreateOperator("Conv", ["mask_up", "mask_logits_w", "mask_logits_b"], ["mask_logits"], kernel=1),
            CreateOperator("Sigmoid", ["mask_logits"], ["mask_probs"]),
        ],
    )
    side = 2 * MASK_POOL
    empty = NetDef(
        name="no_detections",
        op=[
            CreateOperator("ConstantFill", [], ["mask_probs"], shape=[0, CLASSES, side, side], value=0.0),
        ],
    )
    m.net.If(["has_dets", feats[2], "bbox_nms", *mask_w], ["mask_probs"], then_net=then, else_net=empty)

    init = m.param_init_net.Proto()
    for lv in LEVELS:
        anc = anchors(ANCHOR_SIZES[lv])
        init.op.append(
            CreateOperator(
                "GivenTensorFill",
                [],
                [f"anchors_fpn{lv}"],
                shape=list(anc.shape),
                values=[float(v) for v in anc.reshape(-1)],
            )
        )
    init.op.append(CreateOperator("GivenTensorFill", [], ["im_info"], shape=[1, 3], values=[IMAGE, IMAGE, 1.0]))
    init.op.append(CreateOperator("GivenTensorInt64Fill", [], ["zero"], shape=[], values=[0]))
    for seed, op in enumerate(init.op):
        op.device_option.random_seed = 1000 + seed
    predict = m.net.Proto()
    predict.name = NAME
    del predict.external_input[:]
    predict.external_input.extend(["data", "im_info"])
    del predict.external_output[:]
    predict.external_output.extend(["bbox_nms", "score_nms", "class_nms", "mask_probs"])
    for net in (init, predict):
        net.name = net.name or f"{NAME}_init"
        for op in net.op:
            op.ClearField("debug_info")
    return {"init_net.pbtxt": init, "predict_net.pbtxt": predict}


def sample_image() -> np.ndarray:
    """A deterministic 1 x 3 x 64 x 64 test image: two bright rectangles on a gradient."""
    y, x = np.mgrid[0:IMAGE, 0:IMAGE].astype(np.float32) / IMAGE
    img = np.stack([x, y, 0.5 * (x + y)])
    img[:, 10:30, 8:40] += 1.0
    img[0, 38:58, 30:54] -= 1.0
    return img[None].astype(np.float32)


def render() -> dict[str, str]:
    header = "# Generated by models/detector.py; edit the generator, not this file.\n"
    return {f: header + text_format.MessageToString(net) for f, net in build().items()}


def main() -> int:
    folder = os.path.join(HERE, NAME)
    os.makedirs(folder, exist_ok=True)
    for fname, text in render().items():
        with open(os.path.join(folder, fname), "w") as f:
            f.write(text)
    np.save(os.path.join(folder, "sample_image.npy"), sample_image())
    print(f"wrote {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
