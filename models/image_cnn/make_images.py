"""Generate a small image-classification set as an ImageFolder: FOLDER/<class>/<n>.jpg.

Four classes of 32x32 colour images, each drawn with random colours, position,
size and noise: ``hstripes`` (horizontal bands), ``vstripes`` (vertical bands),
``disk`` (a filled circle) and ``cross`` (a plus sign). Saved as JPEG (quality
90), so ImageInput really decodes.

Run: ``python models/image_cnn/make_images.py data/shapes [--per-class N] [--seed S]``
"""

from __future__ import annotations

import argparse
import os

import numpy as np

CLASSES = ("cross", "disk", "hstripes", "vstripes")
SIZE = 32


def draw(kind: str, rng: np.random.Generator) -> np.ndarray:
    """One HWC uint8 RGB image of class ``kind``."""
    bg = rng.integers(0, 256, 3)
    fg = (bg + rng.integers(80, 176, 3)) % 256
    img = np.empty((SIZE, SIZE, 3), np.float32)
    img[:] = bg
    yy, xx = np.mgrid[:SIZE, :SIZE]
    if kind in ("hstripes", "vstripes"):
        period = int(rng.integers(4, 9))
        phase = int(rng.integers(0, period))
        coord = yy if kind == "hstripes" else xx
        mask = ((coord + phase) % period) < period // 2
    elif kind == "disk":
        cy, cx = rng.integers(10, 22, 2)
        r = rng.integers(5, 10)
        mask = (yy - cy) ** 2 + (xx - cx) ** 2 <= r * r
    else:
        cy, cx = rng.integers(9, 23, 2)
        arm, half = int(rng.integers(6, 11)), int(rng.integers(1, 3))
        mask = ((abs(yy - cy) <= half) & (abs(xx - cx) <= arm)) | ((abs(xx - cx) <= half) & (abs(yy - cy) <= arm))
    img[mask] = fg
    img += rng.normal(0, 12, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def make_images(folder: str, per_class: int = 150, seed: int = 0) -> int:
    """Write ``per_class`` JPEGs per class under ``folder``; returns the number written."""
    from PIL import Image

    rng = np.random.default_rng(seed)
    n = 0
    for kind in CLASSES:
        os.makedirs(os.path.join(folder, kind), exist_ok=True)
        for i in range(per_class):
            Image.fromarray(draw(kind, rng)).save(os.path.join(folder, kind, f"{i:05d}.jpg"), quality=90)
            n += 1
    return n


if __name__ == "__main__":
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("folder")
    p.add_argument("--per-class", type=int, default=150)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args()
    print(f"wrote {make_images(a.folder, a.per_class, a.seed)} images under {a.folder}")
