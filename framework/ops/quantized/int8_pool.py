"""Caffe2's int8 spatial ops on NHWC uint8 codes, with QNNPACK's arithmetic: Int8MaxPool / Int8MaxPoolRelu,
Int8AveragePool / Int8AveragePoolRelu, Int8ResizeNearest.

Caffe2: ``caffe2/operators/quantized/int8_{max_pool,average_pool,resize_nearest}_op.h``; sizes are
ConvPoolOpBase's (``framework.ops.nn.conv_args``: kernel/stride/pads spellings, legacy_pad, global_pooling).
QNNPACK: ``max-pooling.c`` + ``indirection.c`` (padding reads clamp to the input's border),
``average-pooling.c`` + ``requantization.h`` (avgpool fixed-point requantization). None has a gradient.
"""

from __future__ import annotations

import numpy as np

from framework.errors import ArgumentError, ShapeError
from framework.memory.allocator import check_elements
from framework.ops.gradient import no_gradient
from framework.ops.nn.conv_args import ConvPoolOp, conv_pool_args, infer_geometry, join_layout, window_view
from framework.ops.operator import Operator
from framework.ops.quantized.int8_common import U8, Y_ARGS, check_y_scale, int8_input, int8_output, same_params
from framework.ops.registry import register_op
from framework.ops.schema import FLOAT, Arg, TensorSpec

F32 = np.float32
_POOL_ARGS = [*conv_pool_args(group=False, dilation=False), *Y_ARGS]


def _f32_bits(v) -> int:
    return int(np.array(v, F32).view(np.uint32))


def _infer_pool(args, ins):
    x = ins[0]
    if x.shape is None or len(x.shape) != 4 or args.order != "NHWC" or not x.known:
        return [TensorSpec(None, U8)]
    try:
        _, n, c, geo = infer_geometry(args, x.shape, "Int8 pool")
    except Exception:
        return [TensorSpec(None, U8)]
    return [TensorSpec(join_layout(n, c, geo.out, "NHWC"), U8)]


class _Pool(ConvPoolOp):
    relu = False

    def setup(self) -> None:
        super().setup()
        if self.order != "NHWC":
            raise self.arg_error(f"Int8 only supports NHWC order (got order {self.order})")

    def prepare(self):
        """(input Int8TensorCPU, codes, N, C, geometry) with Caffe2's checks."""
        q = int8_input(self, 0)
        x = q.t.array
        if x.ndim != 4:
            raise ShapeError(f"{self.describe()}: '{self.input_names[0]}' must be 4-D NHWC, got {list(x.shape)}")
        n, c, geo = self.geometry(x.shape)
        if 0 in x.shape[1:3]:
            raise ShapeError(f"{self.describe()}: '{self.input_names[0]}' {list(x.shape)} has an empty spatial dim")
        # sizes of one image and channel too: an empty batch must not let a hostile geometry through
        check_elements(join_layout(max(n, 1), max(c, 1), geo.out, "NHWC"), 1, f"output 0 of {self.describe()}")
        buf = join_layout(max(n, 1), max(c, 1), geo.buf_spatial, "NHWC")
        check_elements(buf, 8, f"the padded input of {self.describe()}")
        return q, x, n, c, geo

    @staticmethod
    def _pads(geo) -> tuple:
        return ((0, 0), *((max(h, 0), max(t, 0)) for h, t in zip(geo.head, geo.tail)), (0, 0))


class _MaxPool(_Pool):
    def run(self) -> None:
        q, x, n, c, geo = self.prepare()
        same_params(self, q, self.args.Y_scale, self.args.Y_zero_point)
        xp = np.pad(x, self._pads(geo), mode="edge")  # QNNPACK's indirection clamps reads to the border
        windows = window_view(xp, geo, "NHWC")  # (N, OH, OW, KH, KW, C)
        lo = q.zero_point if self.relu else 0
        y = int8_output(self, 0, join_layout(n, c, geo.out, "NHWC"), q.scale, q.zero_point)
        if y.size:
            np.maximum(windows.max(axis=(3, 4)), np.uint8(lo), out=y)


def avgpool_params(x_scale: float, y_scale: float, pool: int, where: str) -> tuple[int, int]:
    """QNNPACK's avgpool requantization: (multiplier, right shift) of ``x_scale / (y_scale * pool)`` (float32)."""
    ratio = F32(F32(x_scale) / F32(y_scale))
    if not 2.0**-8 <= ratio < 2.0**8:
        raise ArgumentError(f"{where}: input/output scale ratio {ratio} must lie in [2**-8, 2**8) (QNNPACK)")
    scale = F32(F32(x_scale) / F32(F32(y_scale) * F32(pool)))
    bits = _f32_bits(scale)
    return (bits & 0x007FFFFF) | 0x00800000, 127 + 23 - (bits >> 23)


def avgpool_quantize(acc: np.ndarray, params: tuple, y_zp: int, lo: int) -> np.ndarray:
    """QNNPACK's avgpool_quantize: ``(acc * multiplier - (acc < 0) + 2**(shift-1)) >> shift``, clamped."""
    mult, shift = params
    prod = acc.astype(np.int64) * mult - (acc < 0)
    n = (prod + (np.int64(1) << (shift - 1))) >> shift
    return np.clip(n, lo - y_zp, 255 - y_zp) + y_zp


class _AvgPool(_Pool):
    def setup(self) -> None:
        super().setup()
        self.scale = check_y_scale(self)

    def run(self) -> None:
        q, x, n, c, geo = self.prepare()
        y_zp = self.args.Y_zero_point
        pool = int(np.prod(geo.kernel))
        params = avgpool_params(q.scale, self.scale, pool, self.describe())
        xp = np.pad(x, self._pads(geo), mode="constant", constant_values=q.zero_point)  # QNNPACK's zero buffer
        windows = window_view(xp, geo, "NHWC")
        acc = windows.sum(axis=(3, 4), dtype=np.int64) - q.zero_point * pool
        lo = y_zp if self.relu else 0
        y = int8_output(self, 0, join_layout(n, c, geo.out, "NHWC"), self.scale, y_zp)
        y[...] = avgpool_quantize(acc, params, y_zp, lo)


_MAX_DOC = """Max pooling of NHWC uint8 codes over ConvPoolOpBase windows (``order`` must be NHWC, as Caffe2){relu}.
``Y_scale``/``Y_zero_point`` must equal X's (the codes are not requantized). Padding reads clamp to the input's
border, as QNNPACK's indirection buffer does (so a window lying wholly in the padding takes the nearest border
pixel). No gradient."""

_AVG_DOC = """Average pooling of NHWC uint8 codes over ConvPoolOpBase windows (``order`` must be NHWC, as Caffe2),
requantized to ``Y_scale``/``Y_zero_point`` with QNNPACK's arithmetic{relu}: padding counts as X's zero point
and every window divides by the full kernel size; ``acc = sum(x - X.zero_point)`` over the window, then with
``s = X.scale / (Y_scale * kh * kw)`` (float32; X.scale / Y_scale must lie in [2**-8, 2**8)), multiplier
``m = mantissa(s) | 2**23`` and shift ``150 - biased_exponent(s)``: ``y = (acc * m - (acc < 0) + 2**(shift-1))
>> shift`` (ties away from zero), clamped, plus ``Y_zero_point``. Caffe2's global-pooling path (kernel = input,
no stride or padding) uses the same arithmetic. No gradient."""

_RELU = ", then Relu (outputs clamped below at the zero point)"


def _register(name: str, base: type, relu: bool, doc: str) -> None:
    cls = type(name, (base,), {"relu": relu, "__doc__": doc.format(relu=_RELU if relu else ""), "__module__": __name__})
    register_op(
        name,
        args=_POOL_ARGS,
        input_docs=[("X", "4-D NHWC Int8TensorCPU")],
        output_docs=[("Y", "pooled NHWC Int8TensorCPU")],
        infer=_infer_pool,
        category="quantized",
    )(cls)


_register("Int8MaxPool", _MaxPool, False, _MAX_DOC)
_register("Int8MaxPoolRelu", _MaxPool, True, _MAX_DOC)
_register("Int8AveragePool", _AvgPool, False, _AVG_DOC)
_register("Int8AveragePoolRelu", _AvgPool, True, _AVG_DOC)


def _resize_size(args, ih: int, iw: int) -> tuple[int, int]:
    return int(F32(ih) * F32(args.height_scale)), int(F32(iw) * F32(args.width_scale))


def _infer_resize(args, ins):
    x = ins[0]
    if not x.known or len(x.shape) != 4:
        return [TensorSpec(None, U8)]
    oh, ow = _resize_size(args, x.shape[1], x.shape[2])
    return [TensorSpec((x.shape[0], oh, ow, x.shape[3]), U8)]


@register_op(
    "Int8ResizeNearest",
    args=[
        Arg("width_scale", FLOAT, 1.0, "scale along width (> 0): output width = floor(input width * width_scale)"),
        Arg("height_scale", FLOAT, 1.0, "scale along height (> 0)"),
        *Y_ARGS,
    ],
    input_docs=[("X", "4-D NHWC Int8TensorCPU")],
    output_docs=[("Y", "resized NHWC Int8TensorCPU")],
    infer=_infer_resize,
    category="quantized",
)
class Int8ResizeNearest(Operator):
    """Nearest-neighbour resize of NHWC codes: ``OH = int(IH * height_scale)``, ``OW = int(IW * width_scale)``
    (float32 products, truncated), output pixel (y, x) reads ``(min(int(y / height_scale), IH - 1),
    min(int(x / width_scale), IW - 1))``. ``Y_scale``/``Y_zero_point`` must equal X's. No gradient."""

    def setup(self) -> None:
        for name in ("width_scale", "height_scale"):
            v = getattr(self.args, name)
            if not (np.isfinite(v) and v > 0):
                raise self.arg_error(f"{name} must be a positive number, got {v}")

    def run(self) -> None:
        q = int8_input(self, 0)
        same_params(self, q, self.args.Y_scale, self.args.Y_zero_point)
        x = q.t.array
        if x.ndim != 4:
            raise ShapeError(f"{self.describe()}: '{self.input_names[0]}' must be 4-D NHWC, got {list(x.shape)}")
        n, ih, iw, c = x.shape
        oh, ow = _resize_size(self.args, ih, iw)
        check_elements((max(n, 1), oh, ow, max(c, 1)), 8, f"output 0 of {self.describe()}")
        rows = np.minimum((np.arange(oh, dtype=F32) / F32(self.args.height_scale)).astype(np.int64), ih - 1)
        cols = np.minimum((np.arange(ow, dtype=F32) / F32(self.args.width_scale)).astype(np.int64), iw - 1)
        y = int8_output(self, 0, (n, oh, ow, c), q.scale, q.zero_point)
        if y.size:
            y[...] = x[:, rows][:, :, cols]


no_gradient("Int8MaxPool", "Int8MaxPoolRelu", "Int8AveragePool", "Int8AveragePoolRelu", "Int8ResizeNearest")
