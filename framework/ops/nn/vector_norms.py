"""Row similarities and norms: CosineSimilarity, DotProductWithPadding, Normalize (L2),
NormalizeL1, LpNorm, SquareRootDivide, NormalizePlanarYUV, with Caffe2's gradient ops
(CosineSimilarityGradient, DotProductWithPaddingGradient, NormalizeGradient, LpNormGradient;
SquareRootDivide's gradient is SquareRootDivide of dY)."""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.ops.gradient import gradient, should_not_do_gradient
from framework.ops.operator import Operator
from framework.ops.pointwise import float_input
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, FLOAT, INT, Arg, TensorSpec, same_as_input
from framework.ops.validation import expect_axis, expect_rank, expect_same_shape

_EPS = 1e-12  # Caffe2's kEps in these ops


def _rows(op: Operator, x: np.ndarray) -> tuple[int, int]:
    n = x.shape[0] if x.ndim > 0 else 1
    return n, (x.size // n if n else int(np.prod(x.shape[1:], dtype=np.int64)))


def _pair(op: Operator, same: bool = True) -> tuple[np.ndarray, np.ndarray, int]:
    x, y = float_input(op, 0), float_input(op, 1)
    if same and x.shape != y.shape:
        raise ShapeError(
            f"{op.describe()}: X ('{op.input_names[0]}') {list(x.shape)} and Y ('{op.input_names[1]}') "
            f"{list(y.shape)} must have the same shape"
        )
    n = x.shape[0] if x.ndim > 0 else 1
    if not same and (y.shape[0] if y.ndim > 0 else 1) != n:
        raise ShapeError(
            f"{op.describe()}: X and Y must have the same number of rows, got {list(x.shape)} and {list(y.shape)}"
        )
    return x.reshape(n, -1) if n else x.reshape(0, 0), y.reshape(n, -1) if n else y.reshape(0, 0), n


def _rows_infer(args: Any, ins: list) -> list:
    x = ins[0]
    if x.shape is None:
        return [TensorSpec(None, x.dtype)]
    return [TensorSpec((x.shape[0] if len(x.shape) else 1,), x.dtype)]


# -- CosineSimilarity --------------------------------------------------------------------------------


@register_op(
    "CosineSimilarity",
    inputs=2,
    input_docs=[("X", "N x D (or N) float rows"), ("Y", "shaped as X")],
    output_docs=[("Z", "(N,) cosine similarity of each row pair")],
    infer=_rows_infer,
    category="math",
)
class CosineSimilarity(Operator):
    """Z[i] = <X_i, Y_i> / (sqrt(max(|X_i|^2, 1e-12)) sqrt(max(|Y_i|^2, 1e-12)))."""

    def run(self) -> None:
        x, y, n = _pair(self)
        xx = np.maximum((x * x).sum(axis=1), _EPS)
        yy = np.maximum((y * y).sum(axis=1), _EPS)
        self.output(0, (n,), x.dtype)[...] = (x * y).sum(axis=1) / np.sqrt(xx * yy)


@register_op(
    "CosineSimilarityGradient",
    inputs=3,
    outputs=2,
    input_docs=[("X", "forward X"), ("Y", "forward Y"), ("dZ", "gradient of Z")],
    output_docs=[("dX", "gradient of X"), ("dY", "gradient of Y")],
    infer=lambda args, ins: [ins[0], ins[1]],
    category="math",
    private=True,
)
class CosineSimilarityGradient(Operator):
    """dX = dZ (Y / (|X||Y|) - X cos / |X|^2), and symmetrically dY."""

    def run(self) -> None:
        x, y, n = _pair(self)
        dz = float_input(self, 2).reshape(-1)
        if dz.size != n:
            raise ShapeError(f"{self.describe()}: dZ ('{self.input_names[2]}') must have {n} values, got {dz.size}")
        xx = np.maximum((x * x).sum(axis=1), _EPS)[:, None]
        yy = np.maximum((y * y).sum(axis=1), _EPS)[:, None]
        xy = (x * y).sum(axis=1)[:, None]
        xyn = np.sqrt(xx * yy)
        d = dz[:, None]
        self.output(0, self.input(0).shape, x.dtype)[...] = (d * (y / xyn - x * xy / (xyn * xx))).reshape(
            self.input(0).shape
        )
        self.output(1, self.input(1).shape, y.dtype)[...] = (d * (x / xyn - y * xy / (xyn * yy))).reshape(
            self.input(1).shape
        )


@gradient("CosineSimilarity")
def _cosine_similarity_grad(g):
    return [g.op("CosineSimilarityGradient", [g.I(0), g.I(1), g.GO(0)], [g.GI(0), g.GI(1)])]


# -- DotProductWithPadding ----------------------------------------------------------------------------

_PAD_ARGS = [
    Arg("pad_value", FLOAT, 0.0, "value the shorter row is padded with"),
    Arg("replicate", BOOL, False, "tile the shorter row instead of padding (lengths must divide)"),
]


class _PadBase(Operator):
    def _expand(self, x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """Both rows at the longer length, the shorter padded or tiled."""
        dx, dy = x.shape[1], y.shape[1]
        if self.args.replicate:
            lo, hi = min(dx, dy), max(dx, dy)
            if lo == 0 or hi % lo:
                raise ShapeError(
                    f"{self.describe()}: with replicate, row lengths {dx} and {dy} must divide one another"
                )
            return (np.tile(x, (1, hi // dx)), y) if dx < dy else (x, np.tile(y, (1, hi // dy)))
        d = max(dx, dy)
        pad = x.dtype.type(self.args.pad_value)
        xp = np.concatenate([x, np.full((x.shape[0], d - dx), pad, x.dtype)], axis=1)
        yp = np.concatenate([y, np.full((y.shape[0], d - dy), pad, y.dtype)], axis=1)
        return xp, yp


@register_op(
    "DotProductWithPadding",
    inputs=2,
    args=_PAD_ARGS,
    input_docs=[("X", "N x DX float rows"), ("Y", "N x DY float rows")],
    output_docs=[("Z", "(N,) dot products")],
    infer=_rows_infer,
    category="math",
)
class DotProductWithPadding(_PadBase):
    """Row dot products of rows of different lengths: the shorter row is padded with
    pad_value (or, with replicate, tiled) to the longer one's length."""

    def run(self) -> None:
        x, y, n = _pair(self, same=False)
        xp, yp = self._expand(x, y)
        self.output(0, (n,), x.dtype)[...] = (xp * yp).sum(axis=1)


@register_op(
    "DotProductWithPaddingGradient",
    inputs=3,
    outputs=2,
    args=_PAD_ARGS,
    input_docs=[("X", "forward X"), ("Y", "forward Y"), ("dZ", "gradient of Z")],
    output_docs=[("dX", "gradient of X"), ("dY", "gradient of Y")],
    infer=lambda args, ins: [ins[0], ins[1]],
    category="math",
    private=True,
)
class DotProductWithPaddingGradient(_PadBase):
    """dX = dZ * (padded or tiled Y), folded back onto X's length (tiles summed); same for dY."""

    def run(self) -> None:
        x, y, n = _pair(self, same=False)
        dz = float_input(self, 2).reshape(-1)
        if dz.size != n:
            raise ShapeError(f"{self.describe()}: dZ ('{self.input_names[2]}') must have {n} values, got {dz.size}")
        xp, yp = self._expand(x, y)
        gx, gy = dz[:, None] * yp, dz[:, None] * xp

        def fold(g: np.ndarray, d: int) -> np.ndarray:
            if self.args.replicate and g.shape[1] != d:
                return g.reshape(g.shape[0], -1, d).sum(axis=1)
            return g[:, :d]

        self.output(0, self.input(0).shape, x.dtype)[...] = fold(gx, x.shape[1]).reshape(self.input(0).shape)
        self.output(1, self.input(1).shape, y.dtype)[...] = fold(gy, y.shape[1]).reshape(self.input(1).shape)


@gradient("DotProductWithPadding")
def _dot_product_with_padding_grad(g):
    return [g.op("DotProductWithPaddingGradient", [g.I(0), g.I(1), g.GO(0)], [g.GI(0), g.GI(1)])]


# -- Normalize / NormalizeL1 ------------------------------------------------------------------------

_AXIS = [Arg("axis", INT, -1, "the axis normalized along")]


def _axis(op: Operator, x: np.ndarray) -> int:
    return expect_axis(op.describe(), op.args.axis, x.ndim, of=f"X ('{op.input_names[0]}') of shape {list(x.shape)}")


@register_op(
    "Normalize",
    args=_AXIS,
    input_docs=[("X", "float tensor")],
    output_docs=[("Y", "X divided by its L2 norm along `axis`")],
    infer=same_as_input(0),
    category="normalization",
)
class Normalize(Operator):
    """Y = X / max(||X||_2, 1e-12) along `axis`."""

    def run(self) -> None:
        x = float_input(self, 0)
        a = _axis(self, x)
        norm = np.maximum(np.sqrt((x.astype(np.float64) ** 2).sum(axis=a, keepdims=True)), _EPS)
        self.output(0, x.shape, x.dtype)[...] = x / norm


@register_op(
    "NormalizeGradient",
    inputs=2,
    args=_AXIS,
    input_docs=[("X", "forward input"), ("dY", "gradient of Y")],
    output_docs=[("dX", "gradient of X")],
    infer=same_as_input(0),
    category="normalization",
    private=True,
)
class NormalizeGradient(Operator):
    """dX = dY / n - <X, dY> X / n^3, n = max(||X||, 1e-12) along `axis`."""

    def run(self) -> None:
        x, dy = float_input(self, 0), float_input(self, 1)
        expect_same_shape(self, 0, x, 1, dy)
        a = _axis(self, x)
        norm = np.maximum(np.sqrt((x.astype(np.float64) ** 2).sum(axis=a, keepdims=True)), _EPS)
        dot = (x * dy).sum(axis=a, keepdims=True)
        self.output(0, x.shape, x.dtype)[...] = dy / norm - dot / norm**3 * x


@gradient("Normalize")
def _normalize_grad(g):
    return [g.op("NormalizeGradient", [g.I(0), g.GO(0)], [g.GI(0)])]


@register_op(
    "NormalizeL1",
    args=_AXIS,
    input_docs=[("X", "float tensor")],
    output_docs=[("Y", "X divided by its L1 norm along `axis` (unchanged where the norm is 0)")],
    infer=same_as_input(0),
    category="normalization",
)
class NormalizeL1(Operator):
    """Y = X / sum|X| along `axis`; slices whose norm is 0 are copied. No gradient (Caffe2)."""

    def run(self) -> None:
        x = float_input(self, 0)
        a = _axis(self, x)
        norm = np.abs(x).sum(axis=a, keepdims=True)
        self.output(0, x.shape, x.dtype)[...] = x / np.where(norm == 0, 1, norm)


# -- LpNorm ------------------------------------------------------------------------------------------

_LP_ARGS = [
    Arg("p", INT, 2, "1: sum |X|; 2: sum X^2 (no square root, as Caffe2)"),
    Arg("average", BOOL, False, "divide by the number of elements"),
]


class _LpBase(Operator):
    def setup(self) -> None:
        if self.args.p not in (1, 2):
            raise self.arg_error(f"'p' must be 1 or 2, got {self.args.p}")


@register_op(
    "LpNorm",
    args=_LP_ARGS,
    input_docs=[("X", "float tensor")],
    output_docs=[("Z", "shape [1]: sum |X|^p (averaged with average=1)")],
    infer=lambda args, ins: [TensorSpec((1,), ins[0].dtype)],
    category="math",
)
class LpNorm(_LpBase):
    """Z = sum |X| (p = 1) or sum X^2 (p = 2), divided by the size with average=1."""

    def run(self) -> None:
        x = float_input(self, 0)
        v = np.abs(x).sum() if self.args.p == 1 else (x.astype(np.float64) ** 2).sum()
        if self.args.average and x.size:
            v = v / x.size
        self.output(0, (1,), x.dtype)[...] = v


@register_op(
    "LpNormGradient",
    inputs=2,
    args=_LP_ARGS,
    input_docs=[("X", "forward input"), ("dZ", "gradient of Z (one value)")],
    output_docs=[("dX", "gradient of X")],
    infer=same_as_input(0),
    category="math",
    private=True,
)
class LpNormGradient(_LpBase):
    """p = 1: dX = sign(X) dZ (0 where |X| <= 1e-12); p = 2: dX = 2 X dZ; / size with average."""

    def run(self) -> None:
        x, dz = float_input(self, 0), float_input(self, 1)
        if dz.size != 1:
            raise ShapeError(
                f"{self.describe()}: dZ ('{self.input_names[1]}') must hold one value, got {list(dz.shape)}"
            )
        d = float(dz.reshape(-1)[0]) / (x.size if self.args.average and x.size else 1)
        if self.args.p == 1:
            g = ((x > _EPS).astype(np.float64) - (x < -_EPS)) * d
        else:
            g = 2.0 * x * d
        self.output(0, x.shape, x.dtype)[...] = g


@gradient("LpNorm")
def _lp_norm_grad(g):
    return [g.op("LpNormGradient", [g.I(0), g.GO(0)], [g.GI(0)])]


# -- SquareRootDivide / NormalizePlanarYUV ------------------------------------------------------------


@register_op(
    "SquareRootDivide",
    inputs=2,
    input_docs=[("data", "N x ... float tensor"), ("scale", "(N,) non-negative scales (ints or floats)")],
    output_docs=[("Y", "data[i] / sqrt(scale[i]) (scale 0: unchanged)")],
    infer=same_as_input(0),
    category="math",
)
class SquareRootDivide(Operator):
    """Y[i] = data[i] / sqrt(scale[i]) for each row i; a zero scale leaves the row as is."""

    def run(self) -> None:
        x, s = float_input(self, 0), self.input(1)
        if s.dtype.kind not in "iuf":
            raise TypeMismatchError(
                f"{self.describe()}: scale ('{self.input_names[1]}') must hold numbers, got {s.dtype}"
            )
        n = x.shape[0] if x.ndim else 1
        if s.size != n or (s.size and s.min() < 0):
            raise ShapeError(f"{self.describe()}: scale ('{self.input_names[1]}') must hold {n} non-negative values")
        root = np.sqrt(np.where(s == 0, 1, s).astype(np.float64)).reshape((n,) + (1,) * max(x.ndim - 1, 0))
        self.output(0, x.shape, x.dtype)[...] = x / root.reshape(root.shape if x.ndim else ())


@gradient("SquareRootDivide")
def _square_root_divide_grad(g):
    return [g.op("SquareRootDivide", [g.GO(0), g.I(1)], [g.GI(0)])]


@register_op(
    "NormalizePlanarYUV",
    inputs=3,
    input_docs=[("X", "N x C x H x W"), ("mean", "(1, C) or (C,)"), ("std", "(1, C) or (C,)")],
    output_docs=[("Y", "(X - mean) / std per channel")],
    infer=same_as_input(0),
    category="normalization",
)
class NormalizePlanarYUV(Operator):
    """Y = (X - mean[c]) / std[c] over planar (NCHW) images. No gradient (Caffe2 has none)."""

    def run(self) -> None:
        x = float_input(
            self,
            0,
        )
        expect_rank(self, 0, x, 4, "N x C x H x W")
        c = x.shape[1]
        m, s = float_input(self, 1), float_input(self, 2)
        for i, v in ((1, m), (2, s)):
            if v.size != c:
                raise ShapeError(
                    f"{self.describe()}: input {i} ('{self.input_names[i]}') must hold {c} values, got {list(v.shape)}"
                )
        self.output(0, x.shape, x.dtype)[...] = (x - m.reshape(1, c, 1, 1)) / s.reshape(1, c, 1, 1)


should_not_do_gradient("NormalizeL1", "NormalizePlanarYUV")
