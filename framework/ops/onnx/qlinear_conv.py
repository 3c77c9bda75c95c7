"""ONNX's integer convolutions on the integer GEMM kernel or the exact float32 GEMM: ONNXQLinearConv and
ONNXConvInteger (NCHW, any number of spatial dims, groups, strides, pads, dilations).

Both convolve the zero-point-centred codes ``(x - x_zero_point) * (w - w_zero_point)`` (padding adds nothing: the
centred input is padded with 0); w_zero_point may be one per output channel. 2-D group-1 convs whose centred
weights fit int8 run the integer GEMM kernel (``framework/kernels/int8_gemm_path.py``: the input copied to
NHWC, uint8 x int8 in int32, the requantization below in its epilogue, the output written back to NCHW). Else:
the window columns of the centred input are written once as float32 (K = C / group * prod(kernel) rows, one
column per output pixel) and multiplied by the cached centred filter (float32) over K-slices short enough that
every partial sum stays below 2**24, so each slice's product is exact whatever order the BLAS sums in
(``slice_k``); the slices are summed in float64, exactly.

ConvInteger returns that sum as int32. QLinearConv adds the int32 bias B and requantizes as ONNX's reference does:
``saturate(round_half_even(acc * (x_scale * w_scale / y_scale) + y_zero_point))`` in y_zero_point's type, the
scale ratio computed in float32 (per output channel when w_scale is a vector) and applied in float64, fused into
one compiled pass (``qlinear_kernels.rescale_into``). The float path holds the accumulator exactly; the kernel's
int32 accumulator wraps, which needs K above 33,000 full-range taps. No gradient (integer ops).
"""

from __future__ import annotations

import math

import numpy as np

from framework.errors import ShapeError
from framework.kernels import int8_gemm_path
from framework.memory.allocator import check_elements
from framework.ops.gradient import no_gradient
from framework.ops.nn.conv_args import ConvPoolOp, conv_pool_args, parse_conv_pool, resolve, window_view
from framework.ops.onnx.qlinear_kernels import depthwise_into, rescale_into
from framework.ops.registry import register_op
from framework.ops.schema import UNKNOWN, TensorSpec

_I32 = np.dtype(np.int32)
_Q8 = (np.dtype(np.uint8), np.dtype(np.int8))
F32 = np.float32


def slice_k(k: int, x_amax: int, w_amax: int) -> int:
    """The longest K-slice whose dot products float32 computes exactly: every partial sum of
    ``slice * x_amax * w_amax`` stays below 2**24."""
    step = x_amax * w_amax
    return k if step == 0 else max(1, min(k, (2**24 - 1) // step))


def _infer(x, w, args):
    if not (x.known and w.known) or len(x.shape) < 3 or len(w.shape) != len(x.shape):
        return None
    try:
        spec = parse_conv_pool(args, "QLinearConv", "QLinearConv", need_kernel=False)
        geo = resolve(spec, x.shape[2:], "QLinearConv", kernel=w.shape[2:])
    except Exception:
        return None
    return (x.shape[0], w.shape[0], *geo.out)


class _IntegerConv(ConvPoolOp):
    """The centred integer convolution shared by both ops (module doc)."""

    need_kernel = False
    x_index, w_index, xz_index, wz_index = 0, 1, 2, 3

    def setup(self) -> None:
        super().setup()
        if self.order != "NCHW":
            raise self.arg_error(f"only NCHW order (got {self.order})")
        if self.spec.group < 1:
            raise self.arg_error(f"group must be >= 1, got {self.spec.group}")

    def _zero_point(self, i: int | None, like: np.ndarray, per: int) -> np.ndarray:
        """The zero point as int32, a scalar or (``per`` > 0) one per output channel."""
        if i is None or i >= len(self.inputs):
            return np.zeros((), np.int32)
        z = self.input(i)
        if z.dtype != like.dtype:
            raise ShapeError(
                f"{self.describe()}: zero point '{self.input_names[i]}' is {z.dtype}, its operand {like.dtype}"
            )
        if z.size == 1:
            return np.int32(z.reshape(-1)[0])
        if per and z.ndim == 1 and z.size == per:
            return z.astype(np.int32)
        raise ShapeError(f"{self.describe()}: zero point '{self.input_names[i]}' has shape {list(z.shape)}")

    def _filter(self, w: np.ndarray, wz: np.ndarray, m: int) -> tuple[np.ndarray, int]:
        """(w - w_zero_point) as float32 (M, K) and its largest magnitude; kept while W's array, version and zero
        point are unchanged (the op holds the array, so the identity test cannot be fooled)."""
        key = (self.input_tensor(self.w_index).version, wz.tobytes())
        cache = getattr(self, "_qw", None)
        if cache is not None and cache[0] is w and cache[1] == key:
            return cache[2], cache[3]
        wc = w.reshape(m, -1).astype(np.int32) - (wz.reshape(-1, 1) if wz.ndim else wz)
        amax = int(np.abs(wc).max()) if wc.size else 0
        prepared = np.ascontiguousarray(wc, dtype=F32)
        self._qw = (w, key, prepared, amax)
        return prepared, amax

    def conv_inputs(self) -> tuple:
        """(x, w, resolved geometry, output shape, x's zero point, w's zero point(s)), checked."""
        x, w = self.input(self.x_index), self.input(self.w_index)
        for name, a in (("x", x), ("w", w)):
            if a.dtype not in _Q8:
                raise ShapeError(f"{self.describe()}: {name} must be int8 or uint8, got {a.dtype}")
        if x.ndim < 3 or w.ndim != x.ndim:
            raise ShapeError(f"{self.describe()}: x (N, C, ...) and w (M, C / group, ...) must have the same rank "
                             f">= 3, got {list(x.shape)} and {list(w.shape)}")  # fmt: skip
        g = self.spec.group
        n, c, m, kc = x.shape[0], x.shape[1], w.shape[0], w.shape[1]
        if c % g or m % g or kc != c // g:
            raise ShapeError(
                f"{self.describe()}: input channels {c} and output channels {m} must divide by group {g}, and w's "
                f"dim 1 ({kc}) must be C / group"
            )
        geo = resolve(self.spec, x.shape[2:], self.describe(), kernel=w.shape[2:])
        out_shape = (n, m, *geo.out)
        check_elements(out_shape, 8, f"output 0 of {self.describe()}")
        xz = self._zero_point(self.xz_index, x, 0)
        wz = self._zero_point(self.wz_index, w, m)
        return x, w, geo, out_shape, xz, wz

    def integer_gemm(self, inputs: tuple, bias, ratio, y_zp: float, lo: int, hi: int, out: np.ndarray) -> bool:
        """The convolution on the integer GEMM kernel (int8_gemm_path), requantized (``ratio`` given: float64
        (M,) each, with the float64 ``bias``) or as int32 sums into ``out`` (N, M, *out); False where the kernel
        does not apply (not 2-D, groups, weights outside int8, no VNNI): nothing written."""
        x, w, geo, out_shape, xz, wz = inputs
        m = w.shape[0]
        if x.ndim == 4 and self.spec.group == x.shape[1] == m > 1 and w.shape[1] == 1:
            return self._depthwise(inputs, bias, ratio, y_zp, lo, hi, out)
        if x.ndim != 4 or self.spec.group != 1 or not int8_gemm_path.available():
            return False
        key = (self.input_tensor(self.w_index).version, wz.tobytes(), "nhwc")
        wzc = wz.reshape(-1, 1, 1, 1) if wz.ndim else wz
        packed = int8_gemm_path.cached_weights(
            self, w, key, lambda: (w.astype(np.int32) - wzc).transpose(0, 2, 3, 1).reshape(m, -1)
        )
        if packed is None or (ratio is not None and not np.isfinite(ratio).all()):
            return False
        flip = x.dtype == np.int8  # int8 codes as uint8 codes shifted by 128
        x_zp = int(xz) + 128 if flip else int(xz)
        src = (x.view(np.uint8) if flip else x).transpose(0, 2, 3, 1)
        a = int8_gemm_path.window_rows(self, src, x_zp, geo, window_view, flip)
        n, p = out_shape[0], math.prod(geo.out)
        flat = out.reshape(n, m, p)
        mode = 1 if ratio is None else 2
        for b in range(n):
            if not int8_gemm_path.run(self, a, p, packed, x_zp, None, bias, ratio, (0, 0, 0, y_zp, lo, hi),
                                      mode, True, flat[b], image=b):  # fmt: skip
                return False
        return True

    def _depthwise(self, inputs: tuple, bias, ratio, y_zp: float, lo: int, hi: int, out: np.ndarray) -> bool:
        """A depthwise conv (group = C = M) on the compiled int32 depthwise loop (``qlinear_kernels``) over an NHWC
        copy of x, ONNX's epilogue in the loop, the NHWC result copied back to NCHW; False without numba."""
        x, w, geo, out_shape, xz, wz = inputs
        n, c, m = x.shape[0], x.shape[1], w.shape[0]
        key = (self.input_tensor(self.w_index).version, wz.tobytes())
        cache = getattr(self, "_dw_taps", None)
        if cache is None or cache[0] is not w or cache[1] != key:
            wzc = wz.reshape(-1, 1, 1, 1) if wz.ndim else wz
            taps = np.ascontiguousarray((w.astype(np.int32) - wzc).reshape(m, *w.shape[2:]).transpose(1, 2, 0))
            cache = self._dw_taps = (w, key, taps)
        flip = x.dtype == np.int8  # int8 codes as uint8 codes shifted by 128
        x_zp = int(xz) + 128 if flip else int(xz)
        nhwc = int8_gemm_path.buffer(self, "dw_in", (n, *x.shape[2:], c), np.uint8)
        int8_gemm_path.copy_codes(nhwc, (x.view(np.uint8) if flip else x).transpose(0, 2, 3, 1), flip)
        y = int8_gemm_path.buffer(self, "dw_out", (n, *geo.out, m), out.dtype)
        if not depthwise_into(nhwc, x_zp, cache[2], bias, ratio, geo, y_zp, lo, hi, y):
            return False
        out[...] = y.transpose(0, 3, 1, 2)
        return True

    def integer_conv(self, inputs: tuple) -> np.ndarray:
        """float32 partial products (N, parts, M, P) of exact integers (the float32 GEMM path)."""
        x, w, geo, out_shape, xz, wz = inputs
        n, c, m = x.shape[0], x.shape[1], w.shape[0]
        g = self.spec.group
        wc, w_amax = self._filter(w, wz, m)
        info = np.iinfo(x.dtype)
        x_amax = max(int(xz) - info.min, info.max - int(xz))
        xp = x
        if geo.padded:  # padded with the zero point: centred, the padding adds nothing
            pads = ((0, 0), (0, 0), *((max(h, 0), max(t, 0)) for h, t in zip(geo.head, geo.tail)))
            check_elements((n, c, *geo.buf_spatial), 1, f"the padded input of {self.describe()}")
            xp = np.pad(x, pads, constant_values=x.dtype.type(xz))
        view = window_view(xp, geo, "NCHW")  # (N, C, *kernel, *out)
        kk, p = math.prod(geo.kernel), math.prod(geo.out)
        cg, mg = c // g, m // g
        ks = slice_k(cg * kk, x_amax, w_amax)
        parts = max(1, -(-(cg * kk) // ks))
        acc = np.empty((n, parts, m, p), F32)
        cols = np.empty((c * kk, p), F32)  # (C * prod(kernel), P): the centred window columns of one image
        for b in range(n):
            np.subtract(view[b], int(xz), out=cols.reshape(view.shape[1:]), dtype=F32)
            for gi in range(g):
                cgi, wg = cols[gi * cg * kk : (gi + 1) * cg * kk], wc[gi * mg : (gi + 1) * mg]
                for s in range(parts):
                    k0, k1 = s * ks, (s + 1) * ks
                    np.matmul(wg[:, k0:k1], cgi[k0:k1], out=acc[b, s, gi * mg : (gi + 1) * mg])
        return acc


def _conv_args():
    return conv_pool_args(group=True, dilation=True)


@register_op(
    "ONNXConvInteger",
    inputs=(2, 4),
    args=_conv_args(),
    input_docs=[
        ("x", "int8/uint8 NCHW"),
        ("w", "int8/uint8 (M, C / group, *kernel)"),
        ("x_zero_point", "optional scalar, x's type"),
        ("w_zero_point", "optional scalar or per output channel, w's type"),
    ],
    output_docs=[("y", "int32 (N, M, *out)")],
    infer=lambda args, ins: [TensorSpec(_infer(ins[0], ins[1], args), _I32)],
    category="onnx",
    input_types="int",
)
class ONNXConvInteger(_IntegerConv):
    """ONNX ConvInteger: the exact int32 convolution of the zero-point-centred 8-bit codes (module doc)."""

    def run(self) -> None:
        inputs = self.conv_inputs()
        shape = inputs[3]
        out = self.output(0, shape, _I32)
        if not (out.flags.c_contiguous and self.integer_gemm(inputs, None, None, 0.0, 0, 0, out)):
            out[...] = self.integer_conv(inputs).sum(axis=1, dtype=np.float64).reshape(shape)


@register_op(
    "ONNXQLinearConv",
    inputs=(8, 9),
    args=_conv_args(),
    input_docs=[
        ("x", "int8/uint8 NCHW"),
        ("x_scale", "float32 scalar"),
        ("x_zero_point", "scalar, x's type"),
        ("w", "int8/uint8 (M, C / group, *kernel)"),
        ("w_scale", "float32 scalar or per output channel"),
        ("w_zero_point", "scalar or per output channel, w's type"),
        ("y_scale", "float32 scalar"),
        ("y_zero_point", "scalar: the output's type"),
        ("B", "optional int32 bias (M,)"),
    ],
    output_docs=[("y", "requantized convolution (N, M, *out), y_zero_point's type")],
    infer=lambda args, ins: [
        TensorSpec(_infer(ins[0], ins[3], args), ins[7].dtype) if ins[7] is not UNKNOWN else UNKNOWN
    ],
    category="onnx",
    input_types={0: "int", 1: "float", 2: "int", 3: "int", 4: "float", 5: "int", 6: "float", 7: "int", 8: "int"},
)
class ONNXQLinearConv(_IntegerConv):
    """ONNX QLinearConv: the centred integer convolution plus B, requantized to y's scale and zero point with
    round half to even and saturation (module doc)."""

    x_index, w_index, xz_index, wz_index = 0, 3, 2, 5

    def run(self) -> None:
        yz = self.input(7)
        if yz.dtype not in _Q8 or yz.size != 1:
            raise ShapeError(f"{self.describe()}: y_zero_point '{self.input_names[7]}' must be an int8/uint8 scalar")
        xs, ws, ys = self.input(1), self.input(4), self.input(6)
        m = self.input(3).shape[0] if self.input(3).ndim else 0
        for i, s in ((1, xs), (6, ys)):
            if s.size != 1:
                raise ShapeError(f"{self.describe()}: '{self.input_names[i]}' must be a scalar")
        if ws.size != 1 and (ws.ndim != 1 or ws.size != m):
            raise ShapeError(f"{self.describe()}: w_scale '{self.input_names[4]}' must be a scalar or one per output "
                             f"channel ({m})")  # fmt: skip
        bias = np.zeros(m, np.float64)
        if len(self.inputs) > 8:
            b = self.input(8)
            if b.dtype != _I32 or b.size != m:
                raise ShapeError(f"{self.describe()}: B '{self.input_names[8]}' must be int32 with {m} values")
            bias = b.reshape(m).astype(np.float64)
        inputs = self.conv_inputs()
        shape = inputs[3]
        with np.errstate(all="ignore"):
            ratio32 = xs.reshape(()).astype(F32) * ws.reshape(-1).astype(F32) / ys.reshape(()).astype(F32)
        ratio = np.broadcast_to(ratio32.astype(np.float64), (m,)).copy()
        info = np.iinfo(yz.dtype)
        out = self.output(0, shape, yz.dtype)
        dst = out if out.flags.c_contiguous else np.empty(shape, yz.dtype)
        zp = float(yz.reshape(-1)[0])
        if self.integer_gemm(inputs, bias, ratio, zp, info.min, info.max, dst):
            if dst is not out:
                out[...] = dst
            return
        acc = self.integer_conv(inputs)
        n = shape[0]
        flat = dst.reshape(n, m, -1)
        for b in range(n):
            rescale_into(acc[b], bias, ratio, zp, info.min, info.max, flat[b])
        if dst is not out:
            out[...] = dst


no_gradient("ONNXConvInteger", "ONNXQLinearConv")
