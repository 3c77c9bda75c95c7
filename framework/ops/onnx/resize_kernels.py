"""The 1-D interpolation step of ONNXResize: source coordinates, kernel taps and weights for one
axis (see ``framework/ops/onnx/resize.py`` for the semantics)."""

from __future__ import annotations

from typing import Any

import numpy as np

COORDINATE_MODES = (
    "half_pixel",
    "half_pixel_symmetric",
    "pytorch_half_pixel",
    "align_corners",
    "asymmetric",
    "tf_crop_and_resize",
)
NEAREST_MODES = ("round_prefer_floor", "round_prefer_ceil", "floor", "ceil")


def source_coords(mode: str, y: np.ndarray, scale: float, w_in: int, w_out: int, roi: Any) -> np.ndarray:
    """The input coordinate of each output index ``y`` (float64)."""
    width = scale * w_in  # the output width before flooring
    if mode == "align_corners":
        return np.zeros(w_out) if width == 1 else y * (w_in - 1) / (width - 1)
    if mode == "asymmetric":
        return y / scale
    if mode == "tf_crop_and_resize":
        start, end = roi
        x = (
            np.full(w_out, (end - start) * (w_in - 1) / 2)
            if width == 1
            else y * (end - start) * (w_in - 1) / (width - 1)
        )
        return x + start * (w_in - 1)
    if mode == "pytorch_half_pixel":
        return np.full(w_out, -0.5) if width == 1 else (y + 0.5) / scale - 0.5
    if mode == "half_pixel_symmetric":
        offset = w_in / 2 * (1 - w_out / width)
        return offset + (y + 0.5) / scale - 0.5
    return (y + 0.5) / scale - 0.5  # half_pixel


def _cubic(t: np.ndarray, a: float) -> np.ndarray:
    """Keys' cubic convolution kernel at distances ``t``."""
    t = np.abs(t)
    near = ((a + 2) * t - (a + 3)) * t * t + 1
    far = ((a * t - 5 * a) * t + 8 * a) * t - 4 * a
    return np.where(t <= 1, near, np.where(t < 2, far, 0.0))


def weights(ratio: np.ndarray, scale: float, args: Any) -> np.ndarray:
    """[len(ratio), taps] weights; ``ratio`` in (0, 1] is the distance past the left neighbour."""
    mode = args.mode
    if mode == "nearest":
        whole = ratio == 1
        nm = args.nearest_mode
        if nm == "round_prefer_floor":
            right = ratio > 0.5
        elif nm == "round_prefer_ceil":
            right = ratio >= 0.5
        else:
            right = np.full(ratio.shape, nm == "ceil")
        right = right | whole
        return np.stack([~right, right], axis=1).astype(np.float64)
    if not args.antialias:
        if mode == "linear":
            return np.stack([1 - ratio, ratio], axis=1)
        offsets = np.array([-1.0, 0.0, 1.0, 2.0])  # taps left-1, left, right, right+1
        return _cubic(ratio[:, None] - offsets[None, :], args.cubic_coeff_a)
    s = min(scale, 1.0)
    if mode == "linear":
        start = int(np.floor(-1 / s) + 1)
        taps = np.arange(start, start + 2 - 2 * start)
        w = np.clip(1 - np.abs((taps[None, :] - ratio[:, None]) * s), 0, 1)
    else:
        start = int(np.floor(-2 / s) + 1)
        taps = np.arange(start, 2 - start)
        w = _cubic(s * (taps[None, :] - ratio[:, None]), args.cubic_coeff_a)
    return w / w.sum(axis=1, keepdims=True)


def interpolate_axis(data: np.ndarray, axis: int, scale: float, w_out: int, roi: Any, args: Any) -> np.ndarray:
    """``data`` (float64) resized along ``axis`` to ``w_out``."""
    shape = list(data.shape)
    shape[axis] = w_out
    if w_out == 0:
        return np.zeros(shape)
    w_in = data.shape[axis]
    mode = args.coordinate_transformation_mode
    x = source_coords(mode, np.arange(w_out, dtype=np.float64), scale, w_in, w_out, roi)
    left = np.floor(x)
    ratio = np.where(x == left, 1.0, x - left)
    coeffs = weights(ratio, scale, args)
    n = coeffs.shape[1]
    # the n taps nearest x (ties to the smaller index): for even n the window around the gap
    # x falls in (the left one at whole x), for odd n centred on the nearest index
    pad = -(-n // 2)
    xp = x + pad
    p = np.floor(xp)
    frac = xp - p
    if n % 2 == 0:
        offset = np.where(frac == 0, -(n // 2), -(n // 2) + 1)
    else:
        base = -((n - 1) // 2)
        offset = np.where(frac <= 0.5, base, base + 1)
    idx = (p + offset).astype(np.int64)[:, None] + np.arange(n)[None, :] - pad
    if args.exclude_outside:
        coeffs = np.where((idx < 0) | (idx >= w_in), 0.0, coeffs)
        total = coeffs.sum(axis=1, keepdims=True)
        coeffs = coeffs / np.where(total == 0, 1.0, total)
    taken = np.take(data, np.clip(idx, 0, w_in - 1), axis=axis)  # edge taps repeat the edge
    cshape = (1,) * axis + coeffs.shape + (1,) * (data.ndim - axis - 1)
    out = (taken * coeffs.reshape(cshape)).sum(axis=axis + 1)
    if mode == "tf_crop_and_resize":
        outside = (x < 0) | (x > w_in - 1)
        mshape = (1,) * axis + (w_out,) + (1,) * (data.ndim - axis - 1)
        out = np.where(outside.reshape(mshape), args.extrapolation_value, out)
    return out
