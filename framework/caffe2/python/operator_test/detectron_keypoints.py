"""``caffe2.python.operator_test.detectron_keypoints``: Detectron's keypoint decoding, the reference
of Caffe2's HeatmapMaxKeypoint tests.

- ``heatmaps_to_keypoints(maps, rois)``: each ROI's ``(K, H, W)`` heatmaps are resized bicubically
  (OpenCV's INTER_CUBIC: a = -0.75, pixel centres aligned, edges replicated) to the ROI's size rounded
  up (at least 1), and each keypoint is the argmax, at ``(x + 0.5, y + 0.5)`` scaled back to the ROI,
  with its score and its spatial-softmax probability. Returns ``(R, 4, K)``: x, y, logit, prob.
- ``approx_heatmap_keypoint(heatmaps, boxes)``: the argmax on the heatmap itself, refined by one
  Newton step on the quadratic fit of its 3x3 neighbourhood (mirrored at the border; the step is
  clipped to 1.5 cells and dropped when the Hessian is near singular). Returns ``(N, 4, K)``.
- ``scores_to_probs(scores)``: spatial softmax of each channel of ``(C, H, W)``, in place.
"""

from __future__ import annotations

import numpy as np

_NUM_KEYPOINTS = -1  # Detectron's cfg.KRCNN.NUM_KEYPOINTS: the heatmaps' channel count decides
_INFERENCE_MIN_SIZE = 0  # cfg.KRCNN.INFERENCE_MIN_SIZE: no minimum resize


def scores_to_probs(scores: np.ndarray) -> np.ndarray:
    """Softmax over each channel's H x W plane of ``scores`` (C, H, W), written into ``scores``."""
    for c in range(scores.shape[0]):
        e = np.exp(scores[c] - scores[c].max())
        scores[c] = e / e.sum()
    return scores


def _cubic_weights(t: np.ndarray, a: float = -0.75) -> np.ndarray:
    """The 4 cubic-convolution weights for taps at -1, 0, 1, 2 around a fractional offset ``t``."""
    d = np.stack([1 + t, t, 1 - t, 2 - t], axis=-1)
    near = ((a + 2) * d - (a + 3)) * d * d + 1
    far = ((a * d - 5 * a) * d + 8 * a) * d - 4 * a
    return np.where(d <= 1, near, far).astype(np.float32)


def _resize_axis(x: np.ndarray, size: int, axis: int) -> np.ndarray:
    n = x.shape[axis]
    pos = (np.arange(size, dtype=np.float64) + 0.5) * (n / size) - 0.5
    base = np.floor(pos).astype(np.int64)
    w = _cubic_weights((pos - base).astype(np.float32))
    out = 0
    for k in range(4):
        idx = np.clip(base - 1 + k, 0, n - 1)
        shape = [1] * x.ndim
        shape[axis] = size
        out = out + np.take(x, idx, axis=axis) * w[:, k].reshape(shape)
    return np.asarray(out, dtype=np.float32)


def _resize_bicubic(chw: np.ndarray, width: int, height: int) -> np.ndarray:
    return _resize_axis(_resize_axis(chw.astype(np.float32), height, 1), width, 2)


def heatmaps_to_keypoints(maps: np.ndarray, rois: np.ndarray) -> np.ndarray:
    """Keypoints of ``maps`` (R, K, H, W) in the boxes ``rois`` (R, 4: x0, y0, x1, y1); (R, 4, K)."""
    widths = np.maximum(rois[:, 2] - rois[:, 0], 1)
    heights = np.maximum(rois[:, 3] - rois[:, 1], 1)
    num_keypoints = max(maps.shape[1], _NUM_KEYPOINTS)
    out = np.zeros((len(rois), 4, num_keypoints), dtype=np.float32)
    for i in range(len(rois)):
        map_w = int(max(np.ceil(widths[i]), _INFERENCE_MIN_SIZE))
        map_h = int(max(np.ceil(heights[i]), _INFERENCE_MIN_SIZE))
        roi_map = _resize_bicubic(maps[i], map_w, map_h)
        probs = scores_to_probs(roi_map.copy())
        for k in range(num_keypoints):
            y, x = np.unravel_index(np.argmax(roi_map[k]), roi_map[k].shape)
            out[i, 0, k] = (x + 0.5) * widths[i] / map_w + rois[i, 0]
            out[i, 1, k] = (y + 0.5) * heights[i] / map_h + rois[i, 1]
            out[i, 2, k] = roi_map[k, y, x]
            out[i, 3, k] = probs[k, y, x]
    return out


def _refine(f: np.ndarray, mx: int, my: int) -> tuple[float, float, float]:
    """Newton step from the argmax (mx, my) of the heatmap ``f``: (dx, dy, interpolated score)."""
    size = f.shape[0]

    def at(y: int, x: int) -> np.float32:
        # out of range by one: mirror around the centre cell
        x = x - 2 if x >= size else x + 2 if x < 0 else x
        y = y - 2 if y >= size else y + 2 if y < 0 else y
        return f[y, x]

    g = [[at(my + r - 1, mx + c - 1) for c in range(3)] for r in range(3)]
    # in the heatmap's float32, as the kernel computes
    b = np.array([-(g[1][2] - g[1][0]) / 2, -(g[2][1] - g[0][1]) / 2], dtype=f.dtype)
    cross = (g[2][2] - g[2][0] - g[0][2] + g[0][0]) / 4
    hess = np.array([[g[1][0] - 2 * g[1][1] + g[1][2], cross], [cross, g[0][1] - 2 * g[1][1] + g[2][1]]], f.dtype)
    det = hess[0, 0] * hess[1, 1] - hess[0, 1] * hess[1, 0]
    if abs(det) < 1e-4:
        return 0.0, 0.0, float(f[my, mx])
    dx = (b[0] * hess[1, 1] - b[1] * hess[0, 1]) / det
    dy = (b[1] * hess[0, 0] - b[0] * hess[1, 0]) / det
    largest = max(abs(dx), abs(dy))
    if largest > 1.5:
        dx, dy = dx * 1.5 / largest, dy * 1.5 / largest
    step = np.array([dx, dy], dtype=f.dtype)
    score = g[1][1] - b @ step + 0.5 * step @ hess @ step
    return float(dx), float(dy), float(score)


def approx_heatmap_keypoint(heatmaps_in: np.ndarray, bboxes_in: np.ndarray) -> np.ndarray:
    """Keypoints of square heatmaps (N, K, S, S), S >= 2, in boxes (N, 4); (N, 4, K) float64."""
    n, num_keypoints, size = heatmaps_in.shape[0], heatmaps_in.shape[1], heatmaps_in.shape[2]
    if bboxes_in.shape != (n, 4) or heatmaps_in.shape[3] != size or size < 2:
        raise ValueError(f"heatmaps {heatmaps_in.shape} and boxes {bboxes_in.shape} do not fit")
    out = np.zeros((n, num_keypoints, 4))
    for i in range(n):
        x0, y0, x1, y1 = bboxes_in[i]
        x_len, y_len = max(x1 - x0, 1), max(y1 - y0, 1)
        probs = scores_to_probs(heatmaps_in[i].copy())
        for k in range(num_keypoints):
            f = heatmaps_in[i, k]
            # first maximum in row-major order
            my, mx = np.unravel_index(np.argmax(f), f.shape)
            dx, dy, score = _refine(f, int(mx), int(my))
            out[i, k] = (
                x0 + (mx + dx + 0.5) * x_len / size,
                y0 + (my + dy + 0.5) * y_len / size,
                score,
                probs[k, my, mx],
            )
    return np.transpose(out, [0, 2, 1])
