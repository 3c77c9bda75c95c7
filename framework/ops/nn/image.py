"""Layout and image ops: NCHW2NHWC, NHWC2NCHW, ChannelShuffle, PadImage, Im2Col/Col2Im,
ResizeNearest, with their gradient ops (Caffe2 semantics)."""

from __future__ import annotations

import math

import numpy as np

from framework.errors import ShapeError
from framework.memory.allocator import check_elements
from framework.ops.gradient import gradient
from framework.ops.nn.conv_args import (
    ConvPoolOp,
    conv_pool_args,
    index,
    infer_geometry,
    join_layout,
    kernel_slices,
    parse_conv_pool,
    split_layout,
    window_view,
)
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import FLOAT, INT, STRING, UNKNOWN, Arg, TensorSpec, same_as_input


def _perm_infer(to_nhwc: bool):
    def infer(args, ins):
        x = ins[0]
        if x.shape is None:
            return [UNKNOWN]
        s = x.shape
        return [TensorSpec((s[0], *s[2:], s[1]) if to_nhwc else (s[0], s[-1], *s[1:-1]), x.dtype)]

    return infer


class _Transpose(Operator):
    to_nhwc = True

    def run(self) -> None:
        x = self.input(0)
        if x.ndim < 3:
            raise ShapeError(f"{self.describe()}: input '{self.input_names[0]}' needs >= 3 dims, got {x.shape}")
        v = np.moveaxis(x, 1, -1) if self.to_nhwc else np.moveaxis(x, -1, 1)
        np.copyto(self.output(0, v.shape, x.dtype), v)


@register_op(
    "NCHW2NHWC",
    input_docs=[("X", "NCHW input")],
    output_docs=[("Y", "NHWC output")],
    infer=_perm_infer(True),
    category="image",
)
class NCHW2NHWC(_Transpose):
    """Moves the channel axis (1) last: (N, C, *S) -> (N, *S, C)."""


@register_op(
    "NHWC2NCHW",
    input_docs=[("X", "NHWC input")],
    output_docs=[("Y", "NCHW output")],
    infer=_perm_infer(False),
    category="image",
)
class NHWC2NCHW(_Transpose):
    """Moves the channel axis (last) to 1: (N, *S, C) -> (N, C, *S)."""

    to_nhwc = False


@gradient("NCHW2NHWC")
def _n2n_grad(g):
    return [g.op("NHWC2NCHW", [g.GO(0)], [g.GI(0)])]


@gradient("NHWC2NCHW")
def _n2c_grad(g):
    return [g.op("NCHW2NHWC", [g.GO(0)], [g.GI(0)])]


# -- ChannelShuffle -------------------------------------------------------------------------

_CS_ARGS = [Arg("group", INT, 1, "number of channel groups"), Arg("order", STRING, "NCHW", "NCHW or NHWC")]


class _Shuffle(Operator):
    inverse = False

    def run(self) -> None:
        x = self.input(0)
        order = self.args.order.upper()
        ca = 1 if order == "NCHW" else x.ndim - 1
        c, g = x.shape[ca], self.args.group
        if g < 1 or c % g:
            raise ShapeError(
                f"{self.describe()}: {c} channels of '{self.input_names[0]}' are not divisible by group {g}"
            )
        a, b = (c // g, g) if self.inverse else (g, c // g)
        split = x.shape[:ca] + (a, b) + x.shape[ca + 1 :]
        y = self.output(0, x.shape, x.dtype)
        np.copyto(y.reshape(x.shape[:ca] + (b, a) + x.shape[ca + 1 :]), x.reshape(split).swapaxes(ca, ca + 1))


@register_op(
    "ChannelShuffle",
    args=_CS_ARGS,
    input_docs=[("X", "input")],
    output_docs=[("Y", "shuffled")],
    infer=same_as_input(0),
    category="image",
    ranks={0: (2, None)},
)
class ChannelShuffle(_Shuffle):
    """ShuffleNet's channel shuffle: channels seen as (group, C/group) are transposed to
    (C/group, group)."""


@register_op(
    "ChannelShuffleGradient",
    args=_CS_ARGS,
    input_docs=[("dY", "gradient of Y")],
    output_docs=[("dX", "gradient of X")],
    infer=same_as_input(0),
    category="image",
    ranks={0: (2, None)},
    private=True,
)
class ChannelShuffleGradient(_Shuffle):
    """The inverse shuffle of dY."""

    inverse = True


@gradient("ChannelShuffle")
def _cs_grad(g):
    return [g.op("ChannelShuffleGradient", [g.GO(0)], [g.GI(0)])]


# -- PadImage -------------------------------------------------------------------------------

_PAD_ARGS = conv_pool_args(group=False) + [
    Arg("mode", STRING, "constant", "constant, reflect or edge"),
    Arg("value", FLOAT, 0.0, "fill value of mode constant"),
]


def _pad_maps(size, head, tail, mode):
    check_elements((size + head + tail,), 8, "the padded size")
    idx = np.arange(-head, size + tail)
    if mode == "reflect":
        period = 2 * (size - 1) if size > 1 else 1
        idx = np.abs(idx) % period
        idx = np.where(idx >= size, period - idx, idx)
    else:
        idx = np.clip(idx, 0, size - 1)
    return idx


def _infer_pad(args, ins):
    x = ins[0]
    if x.shape is None:
        return [UNKNOWN]
    spec = parse_conv_pool(args, "PadImage", "PadImage", need_kernel=False, negative_pads=True)
    n, c, sp = split_layout(x.shape, spec.order)
    p = spec.pads if isinstance(spec.pads, tuple) else (spec.pads,) * (2 * len(sp))
    r = len(sp)
    return [TensorSpec(join_layout(n, c, tuple(s + p[i] + p[r + i] for i, s in enumerate(sp)), spec.order), x.dtype)]


def _overlap(size: int, head: int, tail: int) -> tuple[slice, slice]:
    """(output slice, input slice) where a padded (or, for negative pads, cropped) axis
    copies the input: output o reads input o - head when 0 <= o - head < size."""
    lo, hi = max(0, -head), min(size, size + tail)
    n = max(hi - lo, 0)
    return slice(max(head, 0), max(head, 0) + n), slice(lo, lo + n)


class _Pad(ConvPoolOp):
    need_kernel = False
    negative_pads = True  # Caffe2 crops with negative pads

    def setup(self) -> None:
        super().setup()
        if self.args.mode not in ("constant", "reflect", "edge"):
            raise self.arg_error(f"mode must be constant, reflect or edge, got {self.args.mode!r}")

    def _prepare(self, xshape) -> None:
        n, c, sp = split_layout(xshape, self.order)
        r = len(sp)
        p = self.spec.pads if isinstance(self.spec.pads, tuple) else (self.spec.pads,) * (2 * r)
        if len(p) != 2 * r:
            raise ShapeError(f"{self.describe()}: pads has {len(p)} values for {r} spatial dims")
        self._heads, self._tails = p[:r], p[r:]
        if self.args.mode == "reflect" and any(h >= s or t >= s for h, t, s in zip(p[:r], p[r:], sp)):
            raise ShapeError(f"{self.describe()}: reflect padding must be smaller than the input size {sp}")
        out_sp = tuple(s + h + t for s, h, t in zip(sp, p[:r], p[r:]))
        if any(o < 0 for o in out_sp):
            raise ShapeError(f"{self.describe()}: pads {list(p)} crop more than the input's spatial size {sp}")
        self._ypshape = join_layout(n, c, out_sp, self.order)
        regions = [_overlap(s, h, t) for s, h, t in zip(sp, p[:r], p[r:])]
        self._inner = index(self.order, tuple(o for o, _ in regions))  # in the output
        self._src = index(self.order, tuple(i for _, i in regions))  # in the input
        axes = range(2, 2 + r) if self.order == "NCHW" else range(1, 1 + r)
        self._maps = [(a, _pad_maps(s, h, t, self.args.mode)) for a, s, h, t in zip(axes, sp, p[:r], p[r:])]
        self._key = xshape


def _infer_pad_grad(args, ins):
    dy = ins[0]
    if dy.shape is None:
        return [UNKNOWN]
    spec = parse_conv_pool(args, "PadImageGradient", "PadImageGradient", need_kernel=False, negative_pads=True)
    n, c, sp = split_layout(dy.shape, spec.order)
    r = len(sp)
    p = spec.pads if isinstance(spec.pads, tuple) else (spec.pads,) * (2 * r)
    return [TensorSpec(join_layout(n, c, tuple(s - p[i] - p[r + i] for i, s in enumerate(sp)), spec.order), dy.dtype)]


@register_op(
    "PadImage",
    args=_PAD_ARGS,
    input_docs=[("X", "input")],
    output_docs=[("Y", "padded")],
    infer=_infer_pad,
    category="image",
    ranks={0: (3, None)},
)
class PadImage(_Pad):
    """Pads the spatial dims (Caffe2's PadImage): pads as Conv's, mode constant (value),
    reflect (mirror without repeating the edge) or edge (repeat the edge). Negative pads crop
    (output cell o reads input o - pad_head, as Caffe2's loops)."""

    def run(self) -> None:
        x = self.input(0)
        if self._key != x.shape:
            self._prepare(x.shape)
            self._stage = []
        y = self.output(0, self._ypshape, x.dtype)
        if self.args.mode == "constant":
            y.fill(self.args.value)
            np.copyto(y[self._inner], x[self._src])
            return
        cur = x
        for k, (a, m) in enumerate(self._maps):
            out = y if k == len(self._maps) - 1 else None
            shape = cur.shape[:a] + (len(m),) + cur.shape[a + 1 :]
            if out is None:
                if len(self._stage) <= k or self._stage[k].shape != shape or self._stage[k].dtype != x.dtype:
                    self._stage[k:] = [np.empty(shape, x.dtype)]
                out = self._stage[k]
            np.take(cur, m, axis=a, out=out)
            cur = out


@register_op(
    "PadImageGradient",
    args=_PAD_ARGS,
    input_docs=[("dY", "gradient of Y")],
    output_docs=[("dX", "gradient of X")],
    infer=_infer_pad_grad,
    category="image",
    private=True,
    ranks={0: (3, None)},
)
class PadImageGradient(_Pad):
    """Sums the gradient of every padded cell back onto the input cell it copies."""

    def run(self) -> None:
        dy = self.input(0)
        n, c, psp = split_layout(dy.shape, self.order)
        r = len(psp)
        p = self.spec.pads if isinstance(self.spec.pads, tuple) else (self.spec.pads,) * (2 * r)
        if len(p) != 2 * r:
            raise ShapeError(f"{self.describe()}: {len(p)} pads for {r} spatial dims of dY {list(dy.shape)}")
        sp = tuple(s - p[i] - p[r + i] for i, s in enumerate(psp))
        if any(s < 0 for s in sp):
            raise ShapeError(f"{self.describe()}: dY {list(dy.shape)} is smaller than the pads {list(p)}")
        xshape = join_layout(n, c, sp, self.order)
        if self._key != xshape:
            self._prepare(xshape)
        dx = self.output(0, xshape, dy.dtype)
        if self.args.mode == "constant":
            dx.fill(0)
            np.copyto(dx[self._src], dy[self._inner])
            return
        cur = dy
        for a, m in self._maps:
            acc = np.zeros(cur.shape[:a] + (sp[a - (2 if self.order == "NCHW" else 1)],) + cur.shape[a + 1 :], dy.dtype)
            np.add.at(acc, (slice(None),) * a + (m,), cur)
            cur = acc
        np.copyto(dx, cur)


@gradient("PadImage")
def _pad_grad(g):
    return [g.op("PadImageGradient", [g.GO(0)], [g.GI(0)])]


# -- Im2Col / Col2Im ------------------------------------------------------------------------


def _infer_im2col(args, ins):
    x = ins[0]
    if x.shape is None:
        return [UNKNOWN]
    spec, n, c, geo = infer_geometry(args, x.shape, "Im2Col")
    kp = int(np.prod(geo.kernel))
    shape = (n, c * kp, *geo.out) if spec.order == "NCHW" else (n, *geo.out, kp * c)
    return [TensorSpec(shape, x.dtype)]


_IM2COL_ARGS = conv_pool_args(group=False)


@register_op(
    "Im2Col",
    args=_IM2COL_ARGS,
    input_docs=[("X", "image")],
    output_docs=[("Y", "NCHW: (N, C*kh*kw, oh, ow); NHWC: (N, oh, ow, kh*kw*C)")],
    infer=_infer_im2col,
    category="image",
)
class Im2Col(ConvPoolOp):
    """The column matrix of a convolution's windows (Caffe2's Im2Col), padding with zeros."""

    def run(self) -> None:
        x = self.input(0)
        if self._key != x.shape:
            n, c, geo = self.geometry(x.shape)
            self._geo = geo
            self._xp = self.padded_buffer(n, c, geo, x.dtype)[0] if geo.padded else None
            kp = int(np.prod(geo.kernel))
            self._yshape = (n, c * kp, *geo.out) if self.order == "NCHW" else (n, *geo.out, kp * c)
            self._key = x.shape
        if self._xp is not None:
            if self._xp.dtype != x.dtype:
                self._xp = self._xp.astype(x.dtype)
            np.copyto(self._xp[index(self.order, self._geo.interior)], x)
        v = window_view(self._xp if self._xp is not None else x, self._geo, self.order)
        y = self.output(0, self._yshape, x.dtype)
        np.copyto(y.reshape(v.shape), v)


@register_op(
    "Col2Im",
    inputs=2,
    args=_IM2COL_ARGS,
    input_docs=[("dY", "columns"), ("X", "the image (shape)")],
    output_docs=[("dX", "sum of the columns back onto the image")],
    infer=lambda a, ins: [ins[1]],
    category="image",
    private=True,
    input_types=["float", "numeric"],
)
class Col2Im(ConvPoolOp):
    """Inverse of Im2Col's gather: each column entry is added back to its image cell."""

    def run(self) -> None:
        dy, x = self.input(0), self.input(1)
        n, c, geo = self.geometry(x.shape)
        buf, interior = self.padded_buffer(n, c, geo, dy.dtype)
        r = len(geo.spatial)
        want = n * c * int(np.prod(geo.kernel)) * int(np.prod(geo.out))
        if dy.size != want:
            raise ShapeError(
                f"{self.describe()}: dY '{self.input_names[0]}' {list(dy.shape)} holds {dy.size} values, the "
                f"columns of X {list(x.shape)} hold {want}"
            )
        if self.order == "NCHW":
            colv = dy.reshape(n, c, *geo.kernel, *geo.out)
            parts = [(index("NCHW", sl), colv[(slice(None),) * 2 + k]) for k, sl in kernel_slices(geo)]
        else:
            colv = dy.reshape(n, *geo.out, *geo.kernel, c)
            parts = [(index("NHWC", sl), colv[(slice(None),) * (1 + r) + k]) for k, sl in kernel_slices(geo)]
        for idx, part in parts:
            buf[idx] += part
        np.copyto(self.output(0, x.shape, dy.dtype), interior)


@gradient("Im2Col")
def _im2col_grad(g):
    return [g.op("Col2Im", [g.GO(0), g.I(0)], [g.GI(0)])]


# -- ResizeNearest --------------------------------------------------------------------------

_RN_ARGS = [
    Arg("width_scale", FLOAT, 1.0, "output width = int(W * width_scale)"),
    Arg("height_scale", FLOAT, 1.0, "output height = int(H * height_scale)"),
    Arg("order", STRING, "NCHW", "NCHW or NHWC"),
]


def _rn_size(n: int, scale: float) -> int:
    """Caffe2's ``int output = input * scale``: an int times a float, in float32."""
    return int(np.float32(n) * np.float32(scale))


def _rn_index(n_out: int, n_in: int, scale: float) -> np.ndarray:
    """Caffe2's source index ``min((int)(i / scale), n_in - 1)`` with ``i / scale`` in
    float32 (the scale is a C++ float): e.g. 3 / 0.1f is 30.0f, not 29.99... as in float64."""
    q = np.arange(n_out, dtype=np.float32) / np.float32(scale)
    return np.minimum(q.astype(np.int64), n_in - 1)


def _rn_maps(h, w, hs, ws, oh=None, ow=None):
    oh = _rn_size(h, hs) if oh is None else oh
    ow = _rn_size(w, ws) if ow is None else ow
    check_elements((oh, ow), 8, "the resized image")
    return _rn_index(oh, h, hs), _rn_index(ow, w, ws)


def _infer_rn(args, ins):
    x = ins[0]
    if x.shape is None or len(x.shape) != 4:
        return [UNKNOWN]
    n, c, (h, w) = split_layout(x.shape, args.order.upper())
    if args.num_inputs == 2:  # the scales come from a tensor: the size is known only when it runs
        return [TensorSpec(join_layout(n, c, (None, None), args.order.upper()), x.dtype)]
    return [
        TensorSpec(
            join_layout(n, c, (_rn_size(h, args.height_scale), _rn_size(w, args.width_scale)), args.order.upper()),
            x.dtype,
        )
    ]


@register_op(
    "ResizeNearest",
    inputs=(1, 2),
    args=_RN_ARGS,
    input_docs=[("X", "4-d image"), ("scales", "optional float 1-D [height_scale, width_scale], over the arguments")],
    output_docs=[("Y", "resized")],
    infer=_infer_rn,
    category="image",
)
class ResizeNearest(Operator):
    """Nearest-neighbour resize (Caffe2's ResizeNearest): output (int(H*height_scale),
    int(W*width_scale)); output cell (y, x) reads input (min(int(y/hs), H-1), min(int(x/ws), W-1)).
    Sizes and indices are computed in float32, as Caffe2's C++ (the scales are floats). An optional
    ``scales`` input (float, [height_scale, width_scale]: ONNX's Upsample) replaces the arguments."""

    scales_input = 1

    def setup(self) -> None:
        self._check_scales(self.args.height_scale, self.args.width_scale, "width_scale and height_scale")
        self._key = None

    def _check_scales(self, hs: float, ws: float, what: str) -> None:
        if not (0 < ws < math.inf and 0 < hs < math.inf):
            raise self.arg_error(f"{what} must be > 0 (and finite), got {ws}, {hs}")

    def scales(self) -> tuple[float, float]:
        """(height_scale, width_scale): from the ``scales`` input when there is one, else the arguments."""
        i = self.scales_input
        if len(self.inputs) <= i:
            return self.args.height_scale, self.args.width_scale
        s = self.input(i)
        if s.ndim != 1 or s.size != 2 or s.dtype.kind != "f":
            raise ShapeError(
                f"{self.describe()}: scales '{self.input_names[i]}' must be a float 1-D tensor of 2 values, "
                f"got {s.dtype} {list(s.shape)}"
            )
        hs, ws = float(s[0]), float(s[1])
        self._check_scales(hs, ws, f"scales '{self.input_names[i]}'")
        return hs, ws

    def _prep(self, shape, out_hw=None, hw_scales=None):
        order = self.args.order.upper()
        if len(shape) != 4:
            raise ShapeError(f"{self.describe()}: input must be 4-d, got {shape}")
        n, c, (h, w) = split_layout(shape, order)
        hs, ws = hw_scales
        ih, iw = _rn_maps(h, w, hs, ws, *(out_hw or (None, None)))
        self._ha, self._wa = (2, 3) if order == "NCHW" else (1, 2)
        self._ih, self._iw = ih, iw
        self._yshape = join_layout(n, c, (len(ih), len(iw)), order)
        mid = list(shape)
        mid[self._ha] = len(ih)
        self._mid = tuple(mid)
        self._key = (shape, out_hw, hw_scales)

    def run(self) -> None:
        x = self.input(0)
        hw_scales = self.scales()
        if self._key != (x.shape, None, hw_scales):
            self._prep(x.shape, None, hw_scales)
            self._tmp = np.empty(self._mid, x.dtype)
        if self._tmp.dtype != x.dtype:
            self._tmp = np.empty(self._mid, x.dtype)
        np.take(x, self._ih, axis=self._ha, out=self._tmp)
        np.take(self._tmp, self._iw, axis=self._wa, out=self.output(0, self._yshape, x.dtype))


@register_op(
    "ResizeNearestGradient",
    inputs=(2, 3),
    args=_RN_ARGS,
    input_docs=[("dY", "gradient of Y"), ("X", "input"), ("scales", "optional: the forward's scales input")],
    output_docs=[("dX", "gradient of X")],
    infer=lambda a, ins: [ins[1]],
    category="image",
    private=True,
    input_types=["float", "numeric"],
)
class ResizeNearestGradient(ResizeNearest):
    """Sums dY over the output cells reading each input cell (Caffe2's loop: every cell
    (y, x) of dY adds into dX[min(int(y/hs), H-1), min(int(x/ws), W-1)], float32 arithmetic)."""

    scales_input = 2

    def run(self) -> None:
        dy, x = self.input(0), self.input(1)
        if dy.ndim != 4 or x.ndim != 4:
            raise ShapeError(
                f"{self.describe()}: dY '{self.input_names[0]}' and X '{self.input_names[1]}' must be 4-d, "
                f"got {list(dy.shape)} and {list(x.shape)}"
            )
        n, c, out_hw = split_layout(dy.shape, self.args.order.upper())
        if (n, c) != split_layout(x.shape, self.args.order.upper())[:2]:
            raise ShapeError(
                f"{self.describe()}: dY '{self.input_names[0]}' {list(dy.shape)} and X '{self.input_names[1]}' "
                f"{list(x.shape)} differ in batch or channels"
            )
        hw_scales = self.scales()
        if self._key != (x.shape, tuple(out_hw), hw_scales):
            self._prep(x.shape, tuple(out_hw), hw_scales)
        dx = self.output(0, x.shape, dy.dtype)
        dx.fill(0)
        if self._ha == 2:
            np.add.at(dx, (slice(None), slice(None), self._ih[:, None], self._iw[None, :]), dy)
        else:
            np.add.at(dx, (slice(None), self._ih[:, None], self._iw[None, :], slice(None)), dy)


@gradient("ResizeNearest")
def _rn_grad(g):
    # the scales input (when given) goes along; it gets no gradient
    scales = [g.I(1)] if len(g.def_.input) == 2 else []
    return [g.op("ResizeNearestGradient", [g.GO(0), g.I(0), *scales], [g.GI(0)])]
