"""ONNXNonMaxSuppression against a scalar numpy reference written from the ONNX spec."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import ShapeError
from framework.ops.testing import assert_reference_checks, run_op_on


def iou(a, b, center):
    if center:
        a = [a[1] - a[3] / 2, a[0] - a[2] / 2, a[1] + a[3] / 2, a[0] + a[2] / 2]
        b = [b[1] - b[3] / 2, b[0] - b[2] / 2, b[1] + b[3] / 2, b[0] + b[2] / 2]
    ay0, ay1 = sorted([a[0], a[2]])
    ax0, ax1 = sorted([a[1], a[3]])
    by0, by1 = sorted([b[0], b[2]])
    bx0, bx1 = sorted([b[1], b[3]])
    ih, iw = min(ay1, by1) - max(ay0, by0), min(ax1, bx1) - max(ax0, bx0)
    if ih <= 0 or iw <= 0:
        return 0.0
    inter = ih * iw
    a1, a2 = (ay1 - ay0) * (ax1 - ax0), (by1 - by0) * (bx1 - bx0)
    return inter / (a1 + a2 - inter) if a1 > 0 and a2 > 0 else 0.0


def reference(boxes, scores, max_out, iou_t, score_t, center):
    rows = []
    for b in range(boxes.shape[0]):
        for c in range(scores.shape[1]):
            cand = [i for i in range(boxes.shape[1]) if score_t is None or scores[b, c, i] > score_t]
            cand.sort(key=lambda i: (-scores[b, c, i], i))
            kept = []
            for i in cand:
                if len(kept) == max_out:
                    break
                if all(iou(boxes[b, i].tolist(), boxes[b, j].tolist(), center) <= iou_t for j in kept):
                    kept.append(i)
            rows += [[b, c, i] for i in kept]
    return np.array(rows, np.int64).reshape(-1, 3)


@given(data=st.data())
@settings(max_examples=30, deadline=None)
def test_matches_reference(data):
    nb, nc, n = data.draw(st.integers(1, 2)), data.draw(st.integers(1, 3)), data.draw(st.integers(0, 8))
    center = data.draw(st.integers(0, 1))
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31 - 1)))
    boxes = rng.integers(0, 6, (nb, n, 4)).astype(np.float32)
    scores = rng.integers(0, 5, (nb, nc, n)).astype(np.float32) / 4  # ties on purpose
    max_out = np.array([data.draw(st.integers(0, 5))], np.int64)
    iou_t = np.array([data.draw(st.sampled_from([0.0, 0.3, 0.5]))], np.float32)
    use_score = data.draw(st.booleans())
    score_t = np.array([0.4], np.float32) if use_score else np.zeros(0, np.float32)
    op = CreateOperator("ONNXNonMaxSuppression", ["B", "S", "M", "I", "T"], ["Y"], center_point_box=center)

    def ref(*_):
        return reference(boxes, scores, int(max_out[0]), float(iou_t[0]), 0.4 if use_score else None, center)

    assert_reference_checks(op, [boxes, scores, max_out, iou_t, score_t], ref, check_inference=False)


def test_defaults_select_nothing_and_bad_shapes_raise():
    boxes, scores = np.zeros((1, 2, 4), np.float32), np.ones((1, 1, 2), np.float32)
    (y,) = run_op_on(CreateOperator("ONNXNonMaxSuppression", ["B", "S"], ["Y"]), [boxes, scores])
    assert y.shape == (0, 3) and y.dtype == np.int64
    with pytest.raises(ShapeError, match="ONNXNonMaxSuppression.*'S'"):
        run_op_on(CreateOperator("ONNXNonMaxSuppression", ["B", "S"], ["Y"]), [boxes, np.ones((1, 1, 3), np.float32)])
    with pytest.raises(ShapeError, match="'M'"):
        run_op_on(CreateOperator("ONNXNonMaxSuppression", ["B", "S", "M"], ["Y"]),
                  [boxes, scores, np.array([1, 2], np.int64)])  # fmt: skip
