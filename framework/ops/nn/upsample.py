"""UpsampleBilinear and UpsampleBilinearGradient (Caffe2's upsample_op), NCHW.

Output size per spatial dim is ``int(in * scale)`` (the product taken in float32, as Caffe2's
``int * float``). Output cell ``o`` of a dim reads the input at ``r * o`` with
``r = (in - 1) / (out - 1)`` (0 when out <= 1), i.e. corners aligned: the two neighbours
``floor(r*o)`` and ``min(floor(r*o) + 1, in - 1)`` weighted by the fraction, all in float32.

The interpolation is separable, so it runs as two matmuls against small dense weight
matrices built once per shape: ``Y = A_h @ X @ A_w^T``; the gradient is the adjoint,
``dX = A_h^T @ dY @ A_w``.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.ops.gradient import gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import FLOAT, UNKNOWN, Arg, TensorSpec

_F32 = np.float32

_ARGS = [
    Arg("width_scale", FLOAT, 1.0, "output width = int(W * width_scale); > 0"),
    Arg("height_scale", FLOAT, 1.0, "output height = int(H * height_scale); > 0"),
]


def upsampled_size(size: int, scale: float) -> int:
    """Caffe2's ``int output = input * scale`` with a float ``scale``."""
    return int(_F32(size) * _F32(scale))


def interp_matrix(out: int, size: int) -> np.ndarray:
    """(out, size) float32 weights of corner-aligned linear interpolation from ``size`` to ``out``."""
    r = _F32(size - 1) / _F32(out - 1) if out > 1 else _F32(0)
    pos = r * np.arange(out, dtype=_F32)
    lo = pos.astype(np.int64)
    hi = np.where(lo < size - 1, lo + 1, lo)
    frac = pos - lo.astype(_F32)
    a = np.zeros((out, size), _F32)
    rows = np.arange(out)
    np.add.at(a, (rows, lo), _F32(1) - frac)
    np.add.at(a, (rows, hi), frac)
    return a


def _infer(args: Any, ins: list) -> list:
    x = ins[0]
    if x.shape is None or len(x.shape) != 4:
        return [TensorSpec(None, x.dtype)]
    if len(ins) > 1 or x.shape[2] is None or x.shape[3] is None:  # the scales input decides at run time
        return [TensorSpec((x.shape[0], x.shape[1], None, None), x.dtype)]
    n, c, h, w = x.shape
    return [TensorSpec((n, c, upsampled_size(h, args.height_scale), upsampled_size(w, args.width_scale)), x.dtype)]


class _UpsampleBase(Operator):
    scales_input = 1  # index of the optional scales input

    def setup(self) -> None:
        self._scale = (float(_F32(self.args.height_scale)), float(_F32(self.args.width_scale)))
        if not (self._scale[0] > 0 and self._scale[1] > 0):
            raise self.arg_error(
                f"height_scale and width_scale must be > 0, got {self.args.height_scale}, {self.args.width_scale}"
            )
        self._key = None

    def _scales(self) -> tuple[float, float]:
        if len(self.inputs) <= self.scales_input:
            return self._scale
        s = self.input(self.scales_input)
        name = self.input_names[self.scales_input]
        if s.shape != (2,):
            raise ShapeError(
                f"{self.describe()}: scales '{name}' must be 1-D with 2 values (height, width), got {s.shape}"
            )
        hs, ws = float(_F32(s[0])), float(_F32(s[1]))
        if not (hs > 0 and ws > 0):
            raise ShapeError(f"{self.describe()}: scales '{name}' must be > 0, got [{hs}, {ws}]")
        return hs, ws

    def _check(self, i: int, a: np.ndarray) -> None:
        name = self.input_names[i]
        if a.ndim != 4:
            raise ShapeError(f"{self.describe()}: input '{name}' must be 4-D NCHW, got shape {a.shape}")
        if a.dtype.kind != "f":
            raise TypeMismatchError(f"{self.describe()}: input '{name}' must hold floats, got {a.dtype}")


@register_op(
    "UpsampleBilinear",
    inputs=(1, 2),
    args=_ARGS,
    input_docs=[("X", "4-D NCHW input"), ("scales", "optional 1-D [height_scale, width_scale]; overrides the args")],
    output_docs=[("Y", "(N, C, int(H * height_scale), int(W * width_scale))")],
    infer=_infer,
    category="image",
)
class UpsampleBilinear(_UpsampleBase):
    """Bilinear resize of an NCHW image with corners aligned (Caffe2's UpsampleBilinear):
    output (N, C, int(H * height_scale), int(W * width_scale)); output row o reads input
    row (H - 1) / (OH - 1) * o, interpolating its two neighbours (likewise for columns)."""

    def _prepare(self, x: np.ndarray, scale: tuple[float, float]) -> None:
        n, c, h, w = x.shape
        oh, ow = upsampled_size(h, scale[0]), upsampled_size(w, scale[1])
        dt = x.dtype
        self._ah = interp_matrix(oh, h).astype(dt)
        self._awt = np.ascontiguousarray(interp_matrix(ow, w).T.astype(dt))
        self._tmp = np.empty((n, c, oh, w), dt)
        self._yshape = (n, c, oh, ow)
        self._key = (x.shape, dt, scale)

    def run(self) -> None:
        x = self.input(0)
        scale = self._scales()
        if self._key != (x.shape, x.dtype, scale):
            self._check(0, x)
            self._prepare(x, scale)
        y = self.output(0, self._yshape, x.dtype)
        np.matmul(self._ah, x, out=self._tmp)
        np.matmul(self._tmp, self._awt, out=y)


@register_op(
    "UpsampleBilinearGradient",
    inputs=(2, 3),
    args=_ARGS,
    input_docs=[("dY", "gradient of Y"), ("X", "the forward input (gives dX's shape)"), ("scales", "optional")],
    output_docs=[("dX", "gradient of X")],
    infer=lambda args, ins: [TensorSpec(ins[1].shape, ins[0].dtype) if ins[1].shape is not None else UNKNOWN],
    category="image",
    private=True,
)
class UpsampleBilinearGradient(_UpsampleBase):
    """dX = A_h^T dY A_w: each dY cell adds its four interpolation weights back to the input
    cells it read (Caffe2's UpsampleBilinearGradient; sizes come from dY and X)."""

    scales_input = 2

    def _prepare(self, dy: np.ndarray, x: np.ndarray) -> None:
        n, c, oh, ow = dy.shape
        if (n, c) != x.shape[:2]:
            raise ShapeError(
                f"{self.describe()}: gradient '{self.input_names[0]}' {dy.shape} and input "
                f"'{self.input_names[1]}' {x.shape} differ in N or C"
            )
        h, w = x.shape[2:]
        dt = dy.dtype
        self._aht = np.ascontiguousarray(interp_matrix(oh, h).T.astype(dt))
        self._aw = interp_matrix(ow, w).astype(dt)
        self._tmp = np.empty((n, c, oh, w), dt)
        self._key = (dy.shape, x.shape, dt)

    def run(self) -> None:
        dy, x = self.input(0), self.input(1)
        self._scales()  # validated as Caffe2 does; the sizes come from the shapes
        if self._key != (dy.shape, x.shape, dy.dtype):
            self._check(0, dy)
            self._check(1, x)
            self._prepare(dy, x)
        dx = self.output(0, x.shape, dy.dtype)
        np.matmul(dy, self._aw, out=self._tmp)
        np.matmul(self._aht, self._tmp, out=dx)


@gradient("UpsampleBilinear")
def _upsample_bilinear_grad(g):
    ins = [g.GO(0), g.I(0)] + ([g.I(1)] if len(g.def_.input) == 2 else [])
    return [g.op("UpsampleBilinearGradient", ins, [g.GI(0)])]
