"""Image decoding and the per-image transforms of ImageInput, on Pillow and numpy.

Images are handled as Caffe2 does with OpenCV: HWC uint8 in **BGR** channel
order (so ``mean_per_channel``/``std_per_channel`` are BGR, as Caffe2
documents), grayscale as HW1. Decoding uses Pillow (an optional dependency:
``pip install framework[image]``); pixel values of JPEGs can differ from
OpenCV's decoder by rounding. Resizing is Pillow's area filter (BOX) when
shrinking, as OpenCV's INTER_AREA, and bilinear when enlarging (where
INTER_AREA is bilinear too).
"""

from __future__ import annotations

import io
import math
from typing import Any

import numpy as np

from framework.errors import FrameworkError

# Caffe2's hard-coded PCA basis of ImageNet colours (RGB order) for color_lighting.
LIGHTING_EIGVECS = np.array(
    [[-144.7125, 183.396, 102.2295], [-148.104, -1.1475, -207.57], [-148.818, -177.174, 107.1765]], np.float32
)
LIGHTING_EIGVALS = np.array([0.2175, 0.0188, 0.0045], np.float32)


class ImageDecodeError(FrameworkError, ValueError):
    """Bytes that are not an image Pillow can decode."""


def pil() -> Any:
    """The Pillow Image module, or a clear error naming the extra to install."""
    try:
        from PIL import Image
    except ImportError as e:  # pragma: no cover - Pillow is in the test extra
        raise FrameworkError(
            "ImageInput decodes JPEG/PNG with Pillow, which is not installed: pip install 'framework[image]'"
        ) from e
    return Image


def decode(data: bytes, color: bool) -> np.ndarray:
    """Decode JPEG/PNG/... bytes to HWC uint8: BGR (color) or HW1 gray."""
    Image = pil()
    try:
        with Image.open(io.BytesIO(data)) as im:
            im = im.convert("RGB" if color else "L")
            arr = np.asarray(im)
    except Exception as e:  # Pillow raises many types for bad files
        raise ImageDecodeError(f"cannot decode image ({len(data)} bytes): {type(e).__name__}: {e}") from None
    if color:
        return np.ascontiguousarray(arr[:, :, ::-1])
    return arr[:, :, None]


def decode_pil(data: bytes, color: bool) -> Any:
    """Decode to a loaded Pillow image in mode RGB (color) or L; ImageDecodeError if it is not an image."""
    Image = pil()
    mode = "RGB" if color else "L"
    try:
        im = Image.open(io.BytesIO(data))
        im.load()  # decoding errors surface here
        if im.mode != mode:
            im = im.convert(mode)
    except Exception as e:  # Pillow raises many types for bad files
        raise ImageDecodeError(f"cannot decode image ({len(data)} bytes): {type(e).__name__}: {e}") from None
    return im


def size_of(img: Any) -> tuple[int, int]:
    """(height, width) of a Pillow image or an HWC array."""
    if isinstance(img, np.ndarray):
        return img.shape[0], img.shape[1]
    return img.size[1], img.size[0]


def as_bgr(img: Any) -> np.ndarray:
    """HWC uint8 in BGR (or HW1 gray): arrays pass through, Pillow RGB images become a channel-reversed view."""
    if isinstance(img, np.ndarray):
        return img
    arr = np.asarray(img)
    return arr[:, :, None] if arr.ndim == 2 else arr[:, :, ::-1]


def apply_box(img: Any, box: tuple[int, int, int, int]) -> Any:
    """Cut the bounding box (ymin, xmin, height, width) when it lies inside the image (else unchanged)."""
    y, x, bh, bw = box
    h, w = size_of(img)
    if bh <= 0 or bw <= 0 or h < y + bh or w < x + bw:
        return img
    if isinstance(img, np.ndarray):
        return np.ascontiguousarray(img[y : y + bh, x : x + bw])
    return img.crop((x, y, x + bw, y + bh))


def resize_any(img: Any, width: int, height: int) -> Any:
    """``resize`` for arrays, or the same filters on a Pillow image (kept as one)."""
    if isinstance(img, np.ndarray):
        return resize(img, width, height)
    h, w = size_of(img)
    Image = pil()
    shrink = height <= h and width <= w
    return img.resize((width, height), Image.Resampling.BOX if shrink else Image.Resampling.BILINEAR)


def to_channels(img: np.ndarray, color: bool) -> np.ndarray:
    """Convert an HWC uint8 BGR/gray image to 3 (BGR) or 1 channel(s) with OpenCV's cvtColor arithmetic."""
    c = img.shape[2]
    if color and c == 3 or not color and c == 1:
        return img
    if color:
        return np.repeat(img, 3, axis=2)
    # COLOR_BGR2GRAY in fixed point: (1868 B + 9617 G + 4899 R + 2^13) >> 14
    w = img.astype(np.uint32)
    gray = (w[:, :, 0] * 1868 + w[:, :, 1] * 9617 + w[:, :, 2] * 4899 + 8192) >> 14
    return gray.astype(np.uint8)[:, :, None]


def resize(img: np.ndarray, width: int, height: int) -> np.ndarray:
    """Resize HWC uint8 to ``height`` x ``width`` (area filter to shrink, bilinear to enlarge)."""
    h, w, c = img.shape
    if (h, w) == (height, width):
        return img
    Image = pil()
    shrink = height <= h and width <= w
    resample = Image.Resampling.BOX if shrink else Image.Resampling.BILINEAR
    src = Image.fromarray(img[:, :, 0] if c == 1 else img)
    out = np.asarray(src.resize((width, height), resample))
    return out[:, :, None] if c == 1 else out


def scaled_size(h: int, w: int, scale_to_use: int, warp: bool) -> tuple[int, int]:
    """(height, width) after scaling the shorter side to ``scale_to_use`` (both sides with ``warp``)."""
    if warp:
        return scale_to_use, scale_to_use
    if h > w:
        return int(np.float32(h) * np.float32(scale_to_use) / np.float32(w)), scale_to_use
    return scale_to_use, int(np.float32(w) * np.float32(scale_to_use) / np.float32(h))


def random_sized_crop(img: np.ndarray, crop: int, rng: np.random.Generator) -> np.ndarray | None:
    """Inception-style jitter: a random 8%-100% area, 3/4-4/3 aspect window resized to crop x crop.

    Ten tries as Caffe2; None when none fit (the caller then scales and crops as usual).
    """
    h, w = img.shape[:2]
    area = h * w
    for _ in range(10):
        target = int(math.ceil(rng.uniform(0.08, 1.0) * area))
        aspect = rng.uniform(3.0 / 4.0, 4.0 / 3.0)
        nh = int(math.floor(math.sqrt(target / aspect)))
        nw = int(math.floor(math.sqrt(target * aspect)))
        if 1 <= nh <= h and 1 <= nw <= w:
            y = int(rng.integers(0, h - nh + 1))
            x = int(rng.integers(0, w - nw + 1))
            return resize(np.ascontiguousarray(img[y : y + nh, x : x + nw]), crop, crop)
    return None


def crop_offsets(h: int, w: int, crop: int, is_test: bool, rng: np.random.Generator) -> tuple[int, int]:
    """(y, x) of the crop window: centred when testing, uniform otherwise (Caffe2's rule)."""
    if is_test:
        return (h - crop) // 2, (w - crop) // 2
    x = int(rng.integers(0, w - crop + 1))
    y = int(rng.integers(0, h - crop + 1))
    return y, x


def color_jitter(img: np.ndarray, saturation: float, brightness: float, contrast: float, rng) -> None:
    """Caffe2's ColorJitter on an HWC float BGR crop, in place: the three steps in random order."""
    gray_w = np.array([0.114, 0.587, 0.299], np.float32)  # B, G, R
    for step in rng.permutation(3):
        if step == 0:
            alpha = np.float32(1.0 + rng.uniform(-saturation, saturation))
            gray = img @ gray_w
            img *= alpha
            img += (gray * (1 - alpha))[:, :, None]
        elif step == 1:
            img *= np.float32(1.0 + rng.uniform(-brightness, brightness))
        else:
            gray_mean = np.float32((img @ gray_w).mean())
            alpha = np.float32(1.0 + rng.uniform(-contrast, contrast))
            img *= alpha
            img += gray_mean * (1 - alpha)


def color_lighting(img: np.ndarray, std: float, rng) -> None:
    """Caffe2's ColorLighting (AlexNet PCA noise) on an HWC float BGR crop, in place."""
    alphas = rng.normal(0.0, std, size=3).astype(np.float32)
    delta_rgb = LIGHTING_EIGVECS @ (LIGHTING_EIGVALS * alphas)
    img += delta_rgb[::-1]
