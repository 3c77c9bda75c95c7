"""Viterbi decoding with a trained CRF, Caffe2's ``caffe2.python.crf_predict``.

``apply_crf(init_net, net, transitions, predictions, num_classes)`` adds the ops that replace each
word's class scores [T, C] by scores whose arg-max is the best path under ``transitions``
([C + 2, C + 2], begin and end of sequence included): the predictions are framed as for the CRF loss,
``ViterbiPath`` finds the best path, ``SwapBestPath`` moves each word's best-path score to the
path's class, and the framing is removed again. ``crf_update_predictions(model, crf_with_loss,
classes)`` does it with a model's nets and a ``crf.CRFWithLoss``'s transitions.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.caffe2.python.crf import CRFWithLoss

__all__ = ["apply_crf", "crf_update_predictions"]


def crf_update_predictions(model: Any, crf_with_loss: CRFWithLoss, classes: Any) -> Any:
    return apply_crf(model.param_init_net, model.net, crf_with_loss.transitions, classes, crf_with_loss.num_classes)


def apply_crf(init_net: Any, net: Any, transitions: Any, predictions: Any, num_classes: int) -> Any:
    """The blob of the decoded scores [T, C] (see module doc)."""
    padded = CRFWithLoss.pad_predictions(predictions, init_net, net, num_classes)
    best_path = net.ViterbiPath([padded, transitions])
    swapped = net.SwapBestPath([padded, best_path])
    # drop the begin / end rows, then the two extra columns
    unframed = net.RemovePadding([swapped], padding_width=1, end_padding_width=1)
    starts = net.GivenTensorIntFill([], shape=[2], values=np.array([0, 0], np.int32))
    ends = net.GivenTensorIntFill([], shape=[2], values=np.array([-1, -3], np.int32))
    return net.Slice([unframed, starts, ends])
