"""ONNX GridSample and AffineGrid: sampling an N-D image at normalized grid coordinates, and the
affine grids that feed it (PyTorch's ``grid_sample`` / ``affine_grid``).

- ``ONNXGridSample(X, grid)``: X ``[N, C, D1, ..., Dk]``, grid ``[N, O1, ..., Ok, k]`` holding
  normalized coordinates in [-1, 1], last dim in reverse order (x = width first). Output
  ``[N, C, O1, ..., Ok]``. A coordinate ``n`` becomes the pixel position ``(n + 1) (d - 1) / 2``
  (``align_corners=1``: -1 and 1 are the corner pixels' centres) or ``((n + 1) d - 1) / 2``
  (the corners' outer edges), computed in float32 as onnx's reference does. ``mode``:
  ``nearest`` (round half to even), ``linear`` (2 taps per dim), ``cubic`` (4 taps, Keys
  A = -0.75). ``padding_mode``: ``zeros`` (taps outside read 0), ``border`` (positions clamped to
  the edge pixels), ``reflection`` (positions reflected at the borders, -0.5 and d - 0.5, or the
  edge centres with align_corners).
- ``ONNXAffineGrid(theta, size)``: theta ``[N, 2, 3]`` (2-D) or ``[N, 3, 4]`` (3-D), size the
  int64 output image size ``[N, C, H, W]`` / ``[N, C, D, H, W]``; the grid ``[N, H, W, 2]`` /
  ``[N, D, H, W, 3]`` = theta applied to the normalized pixel centres (x, y[, z], 1).

No gradients: these ops serve the ONNX backend (inference).
"""

from __future__ import annotations

import itertools

import numpy as np

from framework.errors import ShapeError
from framework.memory.allocator import check_elements
from framework.ops.gradient import no_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import INT, STRING, Arg, TensorSpec
from framework.ops.validation import expect_shape

MODES = ("nearest", "linear", "cubic")
PADDING = ("zeros", "border", "reflection")


def _reflect(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    """Reflect positions at the borders until inside [lo, hi] (onnx's reference)."""
    rng = hi - lo
    if rng <= 0:
        return np.full_like(x, lo)
    below, above = x < lo, x > hi
    d = np.where(below, lo - x, np.where(above, x - hi, 0.0))
    n = np.floor(d / rng)
    r = d - n * rng
    even = n % 2 == 0
    from_lo, from_hi = lo + r, hi - r
    out = np.where(below, np.where(even, from_lo, from_hi), x)
    return np.where(above, np.where(even, from_hi, from_lo), out)


def _keys(t: np.ndarray) -> np.ndarray:
    a = -0.75
    t = np.abs(t)
    return np.where(
        t <= 1, ((a + 2) * t - (a + 3)) * t * t + 1, np.where(t < 2, ((a * t - 5 * a) * t + 8 * a) * t - 4 * a, 0.0)
    )


def _taps(x: np.ndarray, d: int, mode: str, padding: str, lo: float, hi: float) -> tuple:
    """(indices [M, T], weights [M, T], valid [M, T]) of one dim's taps."""
    if mode == "nearest":
        idx = x.astype(np.int64)[:, None]
        w = np.ones_like(idx, dtype=np.float64)
    else:
        x0 = np.floor(x)
        t = (x - x0).astype(np.float64)[:, None]
        offs = np.array([0, 1]) if mode == "linear" else np.array([-1, 0, 1, 2])
        idx = x0.astype(np.int64)[:, None] + offs[None, :]
        w = np.concatenate([1 - t, t], axis=1) if mode == "linear" else _keys(t - offs[None, :])
    if padding == "zeros":
        valid = (idx >= 0) & (idx < d)
    else:
        valid = np.ones(idx.shape, bool)
        idx = (
            np.clip(idx, 0, d - 1) if padding == "border" else _reflect(idx.astype(np.float64), lo, hi).astype(np.int64)
        )
    return np.clip(idx, 0, d - 1), w, valid


def _grid_sample(x: np.ndarray, grid: np.ndarray, mode: str, padding: str, align: bool) -> np.ndarray:
    n, c = x.shape[:2]
    dims = x.shape[2:]
    k = len(dims)
    out_sp = grid.shape[1:-1]
    g = grid.reshape(n, -1, k)[..., ::-1].astype(np.float32)  # dims order
    m = g.shape[1]
    taps = []
    for i, d in enumerate(dims):
        v = g[:, :, i].reshape(-1)
        pos = ((v + 1) / 2.0 * (d - 1)) if align else (((v + 1) * d - 1) / 2.0)
        pos = pos.astype(np.float32)
        lo, hi = (0.0, d - 1.0) if align else (-0.5, d - 0.5)
        if mode == "nearest":
            pos = np.rint(pos)
        out = (pos < lo) | (pos > hi)
        if padding == "border":
            pos = np.where(out, np.clip(pos, 0, d - 1), pos)
        elif padding == "reflection":
            pos = np.where(out, _reflect(pos.astype(np.float64), lo, hi), pos).astype(np.float32)
        taps.append(_taps(pos, d, mode, padding, lo, hi))
    batch = np.repeat(np.arange(n), m)
    y = np.zeros((n * m, c), np.float64)
    xt = np.moveaxis(x, 1, -1)  # [N, D1.., Dk, C]
    for combo in itertools.product(*[range(t[0].shape[1]) for t in taps]):
        w = np.ones(n * m)
        where = [batch]
        for (idx, wt, valid), j in zip(taps, combo):
            w = w * wt[:, j] * valid[:, j]
            where.append(idx[:, j])
        y += xt[tuple(where)] * w[:, None]
    return np.moveaxis(y.reshape((n,) + tuple(out_sp) + (c,)), -1, 1)


def _gs_infer(args, ins):
    x, g = ins[0], ins[1]
    if x.shape is None or g.shape is None or len(x.shape) < 3:
        return [TensorSpec(None, x.dtype)]
    return [TensorSpec((x.shape[0], x.shape[1]) + tuple(g.shape[1:-1]), x.dtype)]


@register_op(
    "ONNXGridSample",
    inputs=2,
    args=[
        Arg("mode", STRING, "linear", "nearest | linear | cubic", choices=MODES),
        Arg("padding_mode", STRING, "zeros", "zeros | border | reflection", choices=PADDING),
        Arg("align_corners", INT, 0, "1: -1 and 1 are the corner pixels' centres", choices=(0, 1)),
    ],
    input_docs=[("X", "float [N, C, D1, ..., Dk]"), ("grid", "[N, O1, ..., Ok, k] normalized coordinates")],
    output_docs=[("Y", "[N, C, O1, ..., Ok]")],
    input_types="float",
    same_type=[(0, 1)],
    ranks={0: (3, None), 1: (3, None)},
    infer=_gs_infer,
    category="onnx",
)
class ONNXGridSample(Operator):
    """ONNX GridSample (opsets 16, 20, 22): X sampled at the grid's normalized positions."""

    def run(self) -> None:
        x, grid = self.input(0), self.input(1)
        k = x.ndim - 2
        if grid.ndim != k + 2 or grid.shape[0] != x.shape[0] or grid.shape[-1] != k:
            raise ShapeError(
                f"{self.describe()}: grid '{self.input_names[1]}' {list(grid.shape)} must be "
                f"[{x.shape[0]}, O1..O{k}, {k}] for X '{self.input_names[0]}' {list(x.shape)}"
            )
        shape = (x.shape[0], x.shape[1]) + tuple(grid.shape[1:-1])
        check_elements(shape, 8 * 4**k, f"{self.describe()} output")
        y = self.output(0, shape, x.dtype)
        if y.size == 0:
            return
        if 0 in x.shape[2:]:
            raise ShapeError(f"{self.describe()}: X '{self.input_names[0]}' {list(x.shape)} has an empty image")
        a = self.args
        with np.errstate(all="ignore"):
            y[...] = _grid_sample(x, grid, a.mode, a.padding_mode, bool(a.align_corners))


def _base_grid(sizes: list[int], align: bool) -> np.ndarray:
    """[*sizes, k + 1]: normalized pixel centres (x, y[, z]) and 1."""
    axes = []
    for d in sizes:
        if align:
            axes.append(np.linspace(-1.0, 1.0, d) if d > 1 else np.array([-1.0]))
        else:
            axes.append((2 * np.arange(d) + 1) / d - 1)
    mesh = np.meshgrid(*axes, indexing="ij")  # dims order (z,) y, x
    return np.stack(list(mesh[::-1]) + [np.ones(sizes)], axis=-1)


@register_op(
    "ONNXAffineGrid",
    inputs=2,
    args=[Arg("align_corners", INT, 0, "1: -1 and 1 are the corner pixels' centres", choices=(0, 1))],
    input_docs=[("theta", "float [N, 2, 3] or [N, 3, 4]"), ("size", "int64 [N, C, H, W] or [N, C, D, H, W]")],
    output_docs=[("grid", "[N, H, W, 2] or [N, D, H, W, 3]")],
    input_types={0: "float", 1: "int"},
    ranks={0: 3, 1: 1},
    infer=lambda args, ins: [TensorSpec(None, ins[0].dtype)],
    category="onnx",
)
class ONNXAffineGrid(Operator):
    """ONNX AffineGrid (opset 20): theta applied to the normalized pixel centres of the given size."""

    def run(self) -> None:
        theta, size = self.input(0), self.input(1)
        k = size.size - 2
        if k not in (2, 3):
            raise ShapeError(f"{self.describe()}: size '{self.input_names[1]}' must hold 4 or 5 values")
        sizes = [int(s) for s in size]
        expect_shape(self, 0, theta, (sizes[0], k, k + 1), "theta for this size")
        if any(s < 0 for s in sizes):
            raise ShapeError(f"{self.describe()}: size '{self.input_names[1]}' holds a negative dim {sizes}")
        shape = (sizes[0], *sizes[2:], k)
        check_elements(shape, 8, f"{self.describe()} output")
        base = _base_grid(sizes[2:], bool(self.args.align_corners)).reshape(-1, k + 1)
        grid = np.einsum("npq,mq->nmp", theta.astype(np.float64), base)
        self.output(0, shape, theta.dtype)[...] = grid.reshape(shape)


no_gradient("ONNXGridSample", "ONNXAffineGrid")
