"""Detection ops (Faster/Mask/keypoint R-CNN): RoI pooling (RoIAlign, RoIAlignRotated, RoIPool),
box regression and proposals (BBoxTransform, GenerateProposals), NMS (BoxWithNMSLimit),
feature-pyramid routing (CollectAndDistributeFpnRpnProposals, CollectRpnProposals,
DistributeFpnProposals), HeatmapMaxKeypoint and BatchBoxCox.

Each import below registers its module's ops; boxes.py and common.py (shared box maths and
input checks) register none.
"""

from framework.ops.detection import (  # noqa: F401
    box_nms,
    fpn,
    keypoints,
    proposals,
    roi_align,
    roi_pool,
)
