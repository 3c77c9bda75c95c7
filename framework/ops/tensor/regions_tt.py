"""RMACRegions (Caffe2's rmac_regions_op) and TT, the tensor-train linear layer (tt_linear_op)."""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.ops.gradient import should_not_do_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import FLOAT, INT, INTS, Arg, TensorSpec

_F = np.dtype(np.float32)


@register_op(
    "RMACRegions",
    args=[Arg("scales", INT, 3, "number of scales"), Arg("overlap", FLOAT, 0.4, "overlap of consecutive regions")],
    input_docs=[("X", "NCHW feature map")],
    output_docs=[("RMAC_REGIONS", "float [R * N, 5]: (batch index, x1, y1, x2, y2) per region, per image")],
    infer=lambda args, ins: [TensorSpec((None, 5), _F)],
    category="detection",
)
class RMACRegions(Operator):
    """The fixed grid of R-MAC regions (https://arxiv.org/abs/1511.05879) at ``scales`` scales: at
    scale l, squares of side ``2 min(H, W) / (l + 1)`` on an (l + Wd) x (l + Hd) grid, where the
    extra steps along the longer side make consecutive regions overlap by about ``overlap``;
    repeated for every image of the batch."""

    def run(self) -> None:
        x = self.input(0)
        if x.size == 0:
            self.output(0, (0, 5), _F)
            return
        if x.ndim != 4:
            raise ShapeError(f"{self.describe()}: X must be NCHW, got {list(x.shape)}")
        n, h, w = x.shape[0], x.shape[2], x.shape[3]
        min_w = min(h, w)
        step = 0
        if w != h:
            best = np.float32(np.finfo(np.float32).max)
            for idx in range(1, 7):
                b = (max(h, w) - min_w) / (1.0 * idx)
                val = np.float32(abs((min_w * min_w - min_w * b) / (min_w * min_w) - np.float32(self.args.overlap)))
                if val < best:
                    step, best = idx, val
        wd, hd = (step if w > h else 0), (step if h > w else 0)
        rois = []
        for lvl in range(1, self.args.scales + 1):
            size = 2 * min_w // (lvl + 1)
            if size == 0:
                break
            bw = np.float32((w - size) / (1.0 * (lvl + wd - 1))) if lvl + wd - 1 > 0 else np.float32(0)
            bh = np.float32((h - size) / (1.0 * (lvl + hd - 1))) if lvl + hd - 1 > 0 else np.float32(0)
            for i in range(lvl + wd):
                for j in range(lvl + hd):
                    x1, y1 = int(bw * i), int(bh * j)
                    x1 -= max(x1 + size - w, 0)
                    y1 -= max(y1 + size - h, 0)
                    rois.append((x1, y1, x1 + size - 1, y1 + size - 1))
        r = len(rois)
        out = self.output(0, (r * n, 5), _F)
        if r:
            base = np.asarray(rois, np.float32)
            for b in range(n):
                out[b * r : (b + 1) * r, 0] = b
                out[b * r : (b + 1) * r, 1:] = base


@register_op(
    "TT",
    inputs=3,
    args=[
        Arg("inp_sizes", INTS, [], "factorization of the input size"),
        Arg("out_sizes", INTS, [], "factorization of the output size"),
        Arg("tt_ranks", INTS, [], "d + 1 ranks"),
    ],
    input_docs=[
        ("X", "float [batch, prod(inp_sizes)]"),
        ("b", "float [prod(out_sizes)] bias"),
        ("cores", "float 1-D: the cores"),
    ],
    output_docs=[("Y", "float [batch, prod(out_sizes)]")],
    infer=lambda args, ins: [
        TensorSpec((ins[0].shape[0] if ins and ins[0].shape else None, int(np.prod(args.out_sizes or [0]))), _F)
    ],
    category="nn",
)
class TT(Operator):
    """Tensor-train linear layer: X times a TT-format weight (the cores, d of them, core i of
    size ``inp_sizes[i] * tt_ranks[i + 1] * tt_ranks[i] * out_sizes[i]``, consumed from the last
    core to the first as Caffe2 multiplies them), plus ``b``. The last step reorders the result
    exactly as Caffe2's final Eigen transposition does: for a batch of one this is the TT-matrix
    product; for larger batches Caffe2's layout permutes the rows' entries, and this op reproduces
    it. Caffe2 registers no working gradient (its TTLinearGradient is a stub): asking is an error."""

    def setup(self) -> None:
        a = self.args
        d = len(a.inp_sizes)
        if d == 0 or len(a.out_sizes) != d or len(a.tt_ranks) != d + 1:
            raise self.arg_error(
                f"inp_sizes and out_sizes need the same non-zero length d and tt_ranks d + 1, got "
                f"{len(a.inp_sizes)}, {len(a.out_sizes)}, {len(a.tt_ranks)}"
            )
        if min(a.inp_sizes + a.out_sizes + a.tt_ranks) <= 0:
            raise self.arg_error("sizes and ranks must be > 0")

    def run(self) -> None:
        a = self.args
        x, b, cores = self.input(0), self.input(1), self.input(2)
        for i, t in enumerate((x, b, cores)):
            if t.dtype != _F:
                raise TypeMismatchError(f"{self.describe()}: input {i} ('{self.input_names[i]}') must be float32")
        if x.ndim < 2 or b.ndim != 1 or cores.ndim != 1:
            raise ShapeError(f"{self.describe()}: X must be 2-D or more, b and cores 1-D")
        batch = x.shape[0]
        y = x.reshape(-1).astype(_F)
        idx = 0
        for i in range(len(a.inp_sizes) - 1, -1, -1):
            rows = a.inp_sizes[i] * a.tt_ranks[i + 1]
            cols = a.tt_ranks[i] * a.out_sizes[i]
            if y.size % rows or idx + rows * cols > cores.size:
                raise ShapeError(f"{self.describe()}: core {i} ({rows} x {cols}) does not fit X or the cores")
            m = y.reshape(-1, rows) @ cores[idx : idx + rows * cols].reshape(rows, cols)
            y = m.reshape(-1, a.out_sizes[i]).T.reshape(-1)
            idx += rows * cols
        out_dim = y.size // batch
        if out_dim != int(np.prod(a.out_sizes)) or b.size != out_dim:
            raise ShapeError(
                f"{self.describe()}: output width {out_dim}, product of out_sizes "
                f"{int(np.prod(a.out_sizes))}, bias {b.size}"
            )
        y = y.reshape(batch, out_dim).T.reshape(batch, out_dim)
        np.add(y, b, out=self.output(0, (batch, out_dim), _F))


should_not_do_gradient("RMACRegions", "TT")
