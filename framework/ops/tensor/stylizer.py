"""The style-transfer pre/post-processing ops of Caffe2's stylizer_ops.cc (CPU, non-NEON path).

``PackedInt8BGRANHWCToNCHWCStylizerPreprocess``: uint8 BGRA images [N, H, W, 4] -> float BGR
planes [N, 3, H, W], ``x - mean[c] + noise``; the noise is a cycle of ``noise_size`` gaussian
values (std ``noise_std``) drawn once and kept in the workspace blob
``__CAFFE2_STYLIZER_NOISE__`` (so successive frames get the same noise), consumed in pixel-major,
channel-minor order from its start for every image.
``BRGNCHWCToPackedInt8BGRAStylizerDeprocess``: float [N, 3, H, W] -> uint8 BGRA [N, H, W, 4],
``x + mean[c]`` clamped to [0, 255] and truncated toward zero, alpha 255.
"""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.memory.allocator import check_elements
from framework.ops.gradient import no_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import FLOAT, INT, Arg, TensorSpec

NOISE_BLOB = "__CAFFE2_STYLIZER_NOISE__"
_F = np.dtype(np.float32)
_U8 = np.dtype(np.uint8)


def _check_mean(op: Operator) -> np.ndarray:
    mean = op.input(1)
    if mean.dtype != _F or mean.size != 3:
        raise ShapeError(f"{op.describe()}: mean must be 3 floats, got {mean.dtype} {list(mean.shape)}")
    return mean.reshape(3)


def _shape_or_none(ins, i):
    return ins[i].shape if ins and ins[i] is not None and ins[i].shape is not None else None


def _pre_infer(args, ins):
    s = _shape_or_none(ins, 0)
    return [TensorSpec((s[0], 3, s[1], s[2]) if s is not None and len(s) == 4 else None, _F)]


def _de_infer(args, ins):
    s = _shape_or_none(ins, 0)
    return [TensorSpec((s[0], s[2], s[3], 4) if s is not None and len(s) == 4 else None, _U8)]


@register_op(
    "PackedInt8BGRANHWCToNCHWCStylizerPreprocess",
    inputs=2,
    args=[
        Arg("noise_size", INT, 491, "length of the noise cycle (a prime avoids artifacts)"),
        Arg("noise_std", FLOAT, 10.0, "standard deviation of the gaussian noise"),
    ],
    input_docs=[("X", "uint8 [N, H, W, 4] BGRA images"), ("mean", "float [3]: per-channel mean")],
    output_docs=[("Y", "float [N, 3, H, W]: x - mean + noise")],
    infer=_pre_infer,
    category="image",
)
class PackedInt8BGRANHWCToNCHWCStylizerPreprocess(Operator):
    """Y[n, c, p] = X[n, p, c] - mean[c] + noise[(3 p + c) % noise_size] for c in B, G, R (alpha
    dropped); see the module doc for the noise."""

    def setup(self) -> None:
        if self.args.noise_size < 1:
            raise self.arg_error(f"noise_size must be >= 1, got {self.args.noise_size}")
        check_elements((self.args.noise_size,), 4, f"{self.describe()}: noise_size")

    def run(self) -> None:
        x = self.input(0)
        if x.dtype != _U8 or x.ndim != 4 or x.shape[3] != 4:
            raise ShapeError(f"{self.describe()}: X must be uint8 [N, H, W, 4], got {x.dtype} {list(x.shape)}")
        mean = _check_mean(self)
        size = self.args.noise_size
        noise = self._noise(size)
        n, h, w, _ = x.shape
        plane = h * w
        cycle = np.resize(noise[:size], plane * 3).reshape(plane, 3) if plane else np.zeros((0, 3), _F)
        y = self.output(0, (n, 3, h, w), _F)
        vals = x[..., :3].reshape(n, plane, 3).astype(_F) - mean + cycle
        y[...] = vals.transpose(0, 2, 1).reshape(n, 3, h, w)

    def _noise(self, size: int) -> np.ndarray:
        ws = self.workspace
        if ws.has_blob(NOISE_BLOB):
            obj = ws.get_blob(NOISE_BLOB).held
            if obj is not None and getattr(obj, "is_allocated", False):
                noise = ws.fetch_blob(NOISE_BLOB)
                if noise.dtype != _F or noise.size < size:
                    raise TypeMismatchError(
                        f"{self.describe()}: workspace blob {NOISE_BLOB} holds {noise.dtype} x {noise.size}, "
                        f"expected at least {size} floats"
                    )
                return noise.reshape(-1)
        noise = self.rng.normal(0.0, self.args.noise_std, size).astype(_F)
        ws.feed_blob(NOISE_BLOB, noise)
        return noise


@register_op(
    "BRGNCHWCToPackedInt8BGRAStylizerDeprocess",
    inputs=2,
    input_docs=[("X", "float [N, 3, H, W]"), ("mean", "float [3]: per-channel mean")],
    output_docs=[("Y", "uint8 [N, H, W, 4] BGRA, alpha 255")],
    infer=_de_infer,
    category="image",
)
class BRGNCHWCToPackedInt8BGRAStylizerDeprocess(Operator):
    """Y[n, p, c] = clamp(X[n, c, p] + mean[c], 0, 255) truncated toward zero; Y[..., 3] = 255.
    NaN becomes 0 (Caffe2's cast of NaN is undefined)."""

    def run(self) -> None:
        x = self.input(0)
        if x.dtype != _F or x.ndim != 4 or x.shape[1] != 3:
            raise ShapeError(f"{self.describe()}: X must be float [N, 3, H, W], got {x.dtype} {list(x.shape)}")
        mean = _check_mean(self)
        n, _, h, w = x.shape
        v = np.nan_to_num(x + mean.reshape(1, 3, 1, 1), nan=0.0)
        y = self.output(0, (n, h, w, 4), _U8)
        y[..., :3] = np.trunc(np.clip(v, 0.0, 255.0)).transpose(0, 2, 3, 1)
        y[..., 3] = 255


no_gradient("PackedInt8BGRANHWCToNCHWCStylizerPreprocess", "BRGNCHWCToPackedInt8BGRAStylizerDeprocess")
