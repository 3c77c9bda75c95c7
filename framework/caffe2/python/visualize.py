"""``caffe2.python.visualize`` (what the MNIST tutorial uses): tile image batches into one image
and show it with matplotlib. ``NCHW.ShowMultiple(batch)`` / ``NHWC.ShowMultiple(batch)``;
``PatchVisualizer`` returns the tiled image (a numpy array) after drawing it.

Tiling is numpy; drawing needs matplotlib (the ``plot`` extra), imported when first drawing,
with a clear error when it is missing.
"""

from __future__ import annotations

from typing import Any, Callable

import numpy as np

from framework.errors import FrameworkError


def _pyplot() -> tuple[Any, Any]:
    try:
        from matplotlib import cm, pyplot
    except ImportError as e:
        raise FrameworkError(
            'visualize draws with matplotlib, which is not installed: pip install "framework[plot]"'
        ) from e
    return cm, pyplot


def ChannelFirst(arr: np.ndarray) -> np.ndarray:
    """HWC -> CHW (over the last three axes)."""
    n = arr.ndim
    return arr.swapaxes(n - 1, n - 2).swapaxes(n - 2, n - 3)


def ChannelLast(arr: np.ndarray) -> np.ndarray:
    """CHW -> HWC (over the last three axes)."""
    n = arr.ndim
    return arr.swapaxes(n - 3, n - 2).swapaxes(n - 2, n - 1)


class PatchVisualizer:
    """Shows patches (images) one by one or tiled, ``gap`` pixels apart."""

    def __init__(self, gap: int = 1) -> None:
        self.gap = gap

    def ShowSingle(self, patch: np.ndarray, cmap: Any = None) -> np.ndarray:
        """One patch: a vector (square, or square x 3), an HxW matrix or an HxWx3 image."""
        patch = np.asarray(patch)
        if patch.ndim == 1:
            patch = patch.reshape(self.get_patch_shape(patch))
        elif patch.ndim > 2 and patch.shape[2] != 3:
            raise ValueError("The input patch shape isn't correct.")
        cm, pyplot = _pyplot()
        if patch.ndim == 2 and cmap is None:
            cmap = cm.gray
        pyplot.imshow(patch, cmap=cmap)
        return patch

    def tile(self, patches: np.ndarray, ncols: int | None = None, bg_func: Callable = np.mean) -> np.ndarray:
        """The tiled image of ``patches`` (one patch per row), without drawing it."""
        patches = np.asarray(patches)
        num = patches.shape[0]
        if ncols is None:
            ncols = int(np.ceil(np.sqrt(num)))
        nrows = int(np.ceil(num / float(ncols)))
        if patches.ndim == 2:
            patches = patches.reshape((num,) + self.get_patch_shape(patches[0]))
        expand = np.array(patches.shape[1:3]) + self.gap
        size = expand * np.array([nrows, ncols]) - self.gap
        if patches.ndim == 4:
            if patches.shape[3] == 1:
                patches = patches.reshape(patches.shape[:-1])
                shape = tuple(size)
            elif patches.shape[3] == 3:
                shape = tuple(size) + (3,)
            else:
                raise ValueError("The input patch shape isn't expected.")
        else:
            shape = tuple(size)
        image = np.ones(shape) * bg_func(patches)
        for pid in range(num):
            row, col = pid // ncols * expand[0], pid % ncols * expand[1]
            image[row : row + patches.shape[1], col : col + patches.shape[2]] = patches[pid]
        return image

    def ShowMultiple(
        self, patches: np.ndarray, ncols: int | None = None, cmap: Any = None, bg_func: Callable = np.mean
    ) -> np.ndarray:
        """Tile the patches (each row one patch: n*n, n*n*1 or n*n*3, flat or not) and show them."""
        image = self.tile(patches, ncols, bg_func)
        cm, pyplot = _pyplot()
        if image.ndim == 2 and cmap is None:
            cmap = cm.gray
        pyplot.imshow(image, cmap=cmap, interpolation="nearest")
        pyplot.axis("off")
        return image

    def ShowImages(self, patches: np.ndarray, *args: Any, **kwargs: Any) -> np.ndarray:
        """ShowMultiple with the values scaled to [0, 1]."""
        patches = np.asarray(patches, dtype=np.float64)
        patches = patches - np.min(patches)
        patches /= np.max(patches) + np.finfo(np.float64).eps
        return self.ShowMultiple(patches, *args, **kwargs)

    def ShowChannels(self, patch: np.ndarray, cmap: Any = None, bg_func: Callable = np.mean) -> np.ndarray:
        """Each channel of an [w, h, channels] patch as a gray patch."""
        patch = np.asarray(patch)
        if patch.ndim != 3:
            raise ValueError("The input patch shape isn't correct.")
        return self.ShowMultiple(np.swapaxes(patch.T, 1, 2), cmap=cmap, bg_func=bg_func)

    def get_patch_shape(self, patch: np.ndarray) -> tuple:
        """A square (n, n), or (n, n, 3) for colour, from the patch's size."""
        edge = np.sqrt(patch.size)
        if edge != np.floor(edge):
            edge = np.sqrt(patch.size / 3.0)
            if edge != np.floor(edge):
                raise ValueError("I can't figure out the patch shape.")
            return (int(edge), int(edge), 3)
        return (int(edge), int(edge))


_default_visualizer = PatchVisualizer()


class NHWC:
    """Show NHWC batches (return nothing, as Caffe2's)."""

    @staticmethod
    def ShowSingle(*args: Any, **kwargs: Any) -> None:
        _default_visualizer.ShowSingle(*args, **kwargs)

    @staticmethod
    def ShowMultiple(*args: Any, **kwargs: Any) -> None:
        _default_visualizer.ShowMultiple(*args, **kwargs)

    @staticmethod
    def ShowImages(*args: Any, **kwargs: Any) -> None:
        _default_visualizer.ShowImages(*args, **kwargs)

    @staticmethod
    def ShowChannels(*args: Any, **kwargs: Any) -> None:
        _default_visualizer.ShowChannels(*args, **kwargs)


class NCHW:
    """Show NCHW batches (channels moved last first; return nothing, as Caffe2's)."""

    @staticmethod
    def ShowSingle(patch: np.ndarray, *args: Any, **kwargs: Any) -> None:
        _default_visualizer.ShowSingle(ChannelLast(np.asarray(patch)), *args, **kwargs)

    @staticmethod
    def ShowMultiple(patch: np.ndarray, *args: Any, **kwargs: Any) -> None:
        _default_visualizer.ShowMultiple(ChannelLast(np.asarray(patch)), *args, **kwargs)

    @staticmethod
    def ShowImages(patch: np.ndarray, *args: Any, **kwargs: Any) -> None:
        _default_visualizer.ShowImages(ChannelLast(np.asarray(patch)), *args, **kwargs)

    @staticmethod
    def ShowChannels(patch: np.ndarray, *args: Any, **kwargs: Any) -> None:
        _default_visualizer.ShowChannels(ChannelLast(np.asarray(patch)), *args, **kwargs)
