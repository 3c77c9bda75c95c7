"""Caffe2's int8 GEMM ops with QNNPACK's arithmetic: Int8FC, Int8Conv / Int8ConvRelu (NHWC, groups, dilation),
Int8ConvTranspose (NHWC, groups 1).

All accumulate ``acc = sum((x - X.zero_point) * (w - W.zero_point)) + bias`` (int32; padding reads X's zero
point, so it adds nothing) and requantize with QNNPACK's Q31 fixed point (``requantization.h``:
``compute_scalar_requantization_params`` + ``q31_requantize``, which QNNPACK's vector kernels reproduce): with
``s = X.scale * W.scale / Y_scale`` (float32, must be < 1), multiplier ``m = (mantissa(s) | 2**23) << 7`` and
``shift = 126 - biased_exponent(s)``; ``q = (acc * m + 2**30) >> 31``, ``y = (q >> shift) + (remainder(q) >
threshold)`` (ties away from zero), clamped to [min, 255] - Y_zero_point, plus Y_zero_point.

How: Int8FC and group-1 convs run the integer GEMM kernel where it applies (``int8_gemm_path``: AVX-512 VNNI,
centred weights within int8): uint8 codes times the packed centred weights in int32, the input's zero point a
per-column correction, the Q31 requantization per band of rows; grouped convs too, one GEMM per group, where the
group's channels are a multiple of 4 and its windows can be read in place. Elsewhere: depthwise
convs (group = C = M) run one compiled int32 loop with the requantization inside (``int8_kernels.depthwise_into``);
other convs and Int8FC write the centered codes (im2col for windows) once as float32 and multiply them by the
cached centered filter in float32 BLAS over K-slices short enough that every partial sum stays below 2**24
(``chunk_k``: exact whatever order the BLAS sums in); the slices' products are summed in int64 by the one
requantization pass (``int8_kernels.requantize_into``). All paths give the same codes. Int8ConvTranspose keeps
its float64 tap loop.

Caffe2: ``caffe2/operators/quantized/int8_{fc,conv,conv_transpose}_op.h``. None has a gradient. Caffe2 builds its
QNNPACK object (packed weights, bias, scales) on the first run and reuses it: later changes to W or B are ignored
there; here every run reads them.
"""

from __future__ import annotations

import math

import numpy as np

from framework.errors import ArgumentError, ShapeError
from framework.kernels import int8_gemm_path
from framework.memory.allocator import check_elements
from framework.ops.gradient import no_gradient
from framework.ops.nn.conv_args import ConvPoolOp, conv_pool_args, join_layout, parse_conv_pool, resolve, window_view
from framework.ops.nn.conv_transpose import convt_geometry
from framework.ops.operator import Operator
from framework.ops.quantized.int8_common import I32, U8, Y_ARGS, check_y_scale, int8_input, int8_output
from framework.ops.quantized.int8_kernels import depthwise_into, q31_requantize, requantize_into, wrap_int32
from framework.ops.registry import register_op
from framework.ops.schema import INT, INTS, Arg, TensorSpec

F32 = np.float32


def q31_params(x_scale: float, w_scale: float, y_scale: float, where: str) -> tuple[int, int]:
    """(multiplier, shift) of QNNPACK's Q31 requantization of ``x_scale * w_scale / y_scale`` (float32)."""
    s = F32(F32(F32(x_scale) * F32(w_scale)) / F32(y_scale))
    if not 2.0**-32 <= s < 1.0:
        raise ArgumentError(
            f"{where}: requantization scale X.scale * W.scale / Y_scale = {s} must lie in [2**-32, 1) (QNNPACK)"
        )
    bits = int(np.array(s, F32).view(np.uint32))
    return ((bits & 0x007FFFFF) | 0x00800000) << 7, 126 - (bits >> 23)


def _bias(op: Operator, i: int, n: int) -> np.ndarray:
    b = int8_input(op, i, I32).t.array
    if b.size != n:
        raise ShapeError(f"{op.describe()}: bias '{op.input_names[i]}' has {b.size} values, expected {n}")
    return b.reshape(n).astype(np.int64)


def _filter(op: Operator, wq, rows: int, depthwise: tuple | None = None) -> tuple[np.ndarray, int]:
    """W - W.zero_point as its kernel reads it, and the largest magnitude: int32 taps (KH, KW, C) for the
    depthwise loop (``depthwise`` = (KH, KW)), else float32 (K, rows) for the GEMM. Kept on the op while W's
    array, its version and zero point are unchanged (the op holds the array, so the identity test cannot be
    fooled); only the prepared form is kept."""
    arr = wq.t.array
    key = (wq.t.version, wq.zero_point, depthwise)
    cache = getattr(op, "_int8_w", None)
    if cache is not None and cache[0] is arr and cache[1] == key:
        return cache[2], cache[3]
    wc = arr.reshape(rows, -1).astype(np.int32) - np.int32(wq.zero_point)
    amax = int(np.abs(wc).max()) if wc.size else 0
    if depthwise is not None:
        prepared = np.ascontiguousarray(wc.reshape(rows, *depthwise).transpose(1, 2, 0))
    else:
        prepared = np.ascontiguousarray(wc.T, dtype=np.float32)
    op._int8_w = (arr, key, prepared, amax)
    return prepared, amax


def _packed(op: Operator, wq, rows: int, groups: int = 1):
    """W - W.zero_point packed for the integer GEMM kernel (a list per group when ``groups`` > 1) when it may run
    and the codes fit int8, else None."""
    if not int8_gemm_path.available():
        return None
    arr = wq.t.array
    return int8_gemm_path.cached_weights(
        op, arr, (wq.t.version, wq.zero_point),
        lambda: arr.reshape(rows, -1).astype(np.int32) - np.int32(wq.zero_point), groups,
    )  # fmt: skip


def _integer_gemm(op: Operator, a, p: int, packed, x_zp: int, b, params, y_zp: int, lo: int, out) -> bool:
    """The integer GEMM kernel over the rows ``a`` with QNNPACK's requantization into ``out`` (P, M); False: not
    run."""
    mult, shift = params
    return int8_gemm_path.run(op, a, p, packed, x_zp, b, None, None, (mult, shift, y_zp, 0.0, lo, 255), 0, False, out)


def chunk_k(k: int, x_zp: int, w_amax: int) -> int:
    """The longest K-slice whose dot products of centered codes float32 BLAS computes exactly: every partial sum
    stays below 2**24 (``slice * max|x - x_zp| * max|w - w_zp|``), whatever order the BLAS sums in."""
    step = max(x_zp, 255 - x_zp) * w_amax
    return k if step == 0 else max(1, min(k, (2**24 - 1) // step))


def exact_gemm(xc: np.ndarray, wt: np.ndarray, kc: int, out: np.ndarray | None = None) -> np.ndarray:
    """``xc @ wt`` (float32 centered codes, (P, K) x (K, M)) as float32 partial products over K-slices of at
    most ``kc``, each exact: (ceil(K / kc), P, M); the requantization sums them in int64."""
    k = xc.shape[1]
    n = max(1, -(-k // kc))
    if out is None:
        out = np.empty((n, xc.shape[0], wt.shape[1]), np.float32)
    for i in range(n):
        np.matmul(xc[:, i * kc : (i + 1) * kc], wt[i * kc : (i + 1) * kc], out=out[i])
    return out


# -- Int8FC -----------------------------------------------------------------------------------------------
def _fc_infer(args, ins):
    x, w = ins[0], ins[1]
    if not (x.known and w.known) or len(x.shape) < 1 or len(w.shape) < 1:
        return [TensorSpec(None, U8)]
    k = math.prod(x.shape[1:])
    return [TensorSpec((math.prod(x.shape) // k if k else 0, w.shape[0]), U8)]


@register_op(
    "Int8FC",
    inputs=3,
    args=list(Y_ARGS),
    input_docs=[
        ("X", "Int8TensorCPU input, flattened to (M, K) at dim 1"),
        ("W", "Int8TensorCPU weights (N, K)"),
        ("b", "Int8TensorCPU int32 bias (N,), made by Int8GivenIntTensorFill"),
    ],
    output_docs=[("Y", "Int8TensorCPU (M, N)")],
    infer=_fc_infer,
    category="quantized",
)
class Int8FC(Operator):
    """Fully connected on uint8 codes: ``Y = requantize(X W^T + b)`` with X flattened to (M, K) at dim 1, W
    (N, K) and an int32 bias (see the module doc for QNNPACK's arithmetic). No gradient."""

    def setup(self) -> None:
        self.scale = check_y_scale(self)

    def run(self) -> None:
        xq, wq = int8_input(self, 0), int8_input(self, 1)
        x, w = xq.t.array, wq.t.array
        if x.ndim < 1 or w.ndim != 2:
            raise ShapeError(f"{self.describe()}: X needs rank >= 1 and W rank 2, got {list(x.shape)}, {list(w.shape)}")
        k = math.prod(x.shape[1:])
        n = w.shape[0]
        if k == 0 or w.shape[1] != k:
            raise ShapeError(f"{self.describe()}: X {list(x.shape)} gives K = {k}, W is {list(w.shape)} (N, K)")
        b = _bias(self, 2, n)
        params = q31_params(xq.scale, wq.scale, self.scale, self.describe())
        m = x.size // k
        y_zp = self.args.Y_zero_point
        out = int8_output(self, 0, (m, n), self.scale, y_zp)
        packed = _packed(self, wq, n)
        if packed is not None and not np.may_share_memory(out, x):
            a = int8_gemm_path.rows(self, x.reshape(m, k))
            if _integer_gemm(self, a, m, packed, xq.zero_point, b, params, y_zp, 0, out):
                return
        wt, amax = _filter(self, wq, n)
        xc = np.subtract(x.reshape(m, k), xq.zero_point, dtype=np.float32)
        acc = exact_gemm(xc, wt, chunk_k(k, xq.zero_point, amax))
        requantize_into(acc, b, params, y_zp, 0, out)


# -- Int8Conv / Int8ConvRelu ------------------------------------------------------------------------------
_CONV_ARGS = [*conv_pool_args(group=True, dilation=True), *Y_ARGS]


def _conv_infer(args, ins):
    x, w = ins[0], ins[1]
    if not (x.known and w.known) or len(x.shape) != 4 or len(w.shape) != 4 or args.order != "NHWC":
        return [TensorSpec(None, U8)]
    try:
        spec = parse_conv_pool(args, "Int8Conv", "Int8Conv", need_kernel=False)
        geo = resolve(spec, x.shape[1:3], "Int8Conv", kernel=w.shape[1:3])
    except Exception:
        return [TensorSpec(None, U8)]
    return [TensorSpec(join_layout(x.shape[0], w.shape[0], geo.out, "NHWC"), U8)]


class _Conv(ConvPoolOp):
    need_kernel = False
    relu = False

    def setup(self) -> None:
        super().setup()
        if self.order != "NHWC":
            raise self.arg_error(f"Int8Conv only supports NHWC order (got order {self.order})")
        if self.spec.group < 1:
            raise self.arg_error(f"group must be >= 1, got {self.spec.group}")
        self.scale = check_y_scale(self)

    def _integer_conv(self, x, x_zp, wq, geo, g, depthwise, b, params, y_zp, lo, out) -> bool:
        """The conv on the integer GEMM kernel into ``out`` (P, M): one GEMM, or one per group (group channels
        a multiple of 4, windows read in place); False where it does not apply (nothing written)."""
        m = out.shape[1]
        if g == 1:
            packed = _packed(self, wq, m)
            if packed is None:
                return False
            a = int8_gemm_path.window_rows(self, x, x_zp, geo, window_view)
            return _integer_gemm(self, a, out.shape[0], packed, x_zp, b, params, y_zp, lo, out)
        if depthwise or (x.shape[3] // g) % 4 or not int8_gemm_path.available():
            return False
        rows = int8_gemm_path.group_rows(self, x, x_zp, geo, g)
        packed = _packed(self, wq, m, g) if rows is not None else None
        if packed is None:
            return False
        mg = m // g
        for gi, (a, pk) in enumerate(zip(rows, packed)):
            cols = slice(gi * mg, (gi + 1) * mg)
            if not _integer_gemm(self, a, out.shape[0], pk, x_zp, b[cols], params, y_zp, lo, out[:, cols]):
                return False
        return True

    def run(self) -> None:
        xq, wq = int8_input(self, 0), int8_input(self, 1)
        x, w = xq.t.array, wq.t.array
        if x.ndim != 4 or w.ndim != 4:
            raise ShapeError(f"{self.describe()}: X (NHWC) and W (M, KH, KW, C/group) must be 4-D, got "
                             f"{list(x.shape)} and {list(w.shape)}")  # fmt: skip
        g = self.spec.group
        n, c = x.shape[0], x.shape[3]
        m, kc = w.shape[0], w.shape[3]
        if c % g or m % g or kc != c // g:
            raise ShapeError(
                f"{self.describe()}: input channels {c} and output channels {m} must divide by group {g}, and W's "
                f"last dim ({kc}) must be C / group"
            )
        given = self.spec.kernel
        geo = resolve(self.spec, x.shape[1:3], self.describe(), kernel=w.shape[1:3])
        if given is not None and resolve(self.spec, x.shape[1:3], self.describe()).kernel != geo.kernel:
            raise ShapeError(f"{self.describe()}: the kernel arguments do not match W {list(w.shape)}")
        b = _bias(self, 2, m)
        params = q31_params(xq.scale, wq.scale, self.scale, self.describe())
        out_shape = join_layout(n, m, geo.out, "NHWC")
        check_elements(join_layout(max(n, 1), max(m, 1), geo.out, "NHWC"), 8, f"output 0 of {self.describe()}")
        buf = join_layout(max(n, 1), max(c, 1), geo.buf_spatial, "NHWC")
        check_elements(buf, 8, f"the padded input of {self.describe()}")
        y_zp = self.args.Y_zero_point
        lo = y_zp if self.relu else 0
        kk = geo.kernel[0] * geo.kernel[1]
        depthwise = g == c == m and kc == 1
        out = int8_output(self, 0, out_shape, self.scale, y_zp)
        dst = np.empty(out_shape, U8) if np.may_share_memory(out, x) else out
        p = n * geo.out[0] * geo.out[1]
        if self._integer_conv(x, xq.zero_point, wq, geo, g, depthwise, b, params, y_zp, lo, dst.reshape(p, m)):
            if dst is not out:
                out[...] = dst
            return
        wk, amax = _filter(self, wq, m, tuple(geo.kernel) if depthwise else None)
        if depthwise:
            depthwise_into(x, xq.zero_point, wk, b, geo, params, y_zp, lo, dst)  # wk: taps (KH, KW, C)
        else:
            pads = ((0, 0), *((max(h, 0), max(t, 0)) for h, t in zip(geo.head, geo.tail)), (0, 0))
            xp = np.pad(x, pads, mode="constant", constant_values=xq.zero_point) if geo.padded else x
            cg, mg = c // g, m // g
            p = n * geo.out[0] * geo.out[1]
            view = window_view(xp, geo, "NHWC")  # (N, OH, OW, KH, KW, C)
            cols = np.subtract(view, xq.zero_point, out=np.empty(view.shape, np.float32), dtype=np.float32)
            ks = chunk_k(kk * cg, xq.zero_point, amax)  # wk: (KH * KW * C / group, M) float32
            if g == 1:
                acc = exact_gemm(cols.reshape(p, kk * c), wk, ks)
            else:
                acc = np.empty((max(1, -(-kk * cg // ks)), p, m), np.float32)
                for gi in range(g):
                    xg = cols[..., gi * cg : (gi + 1) * cg].reshape(p, kk * cg)
                    acc[:, :, gi * mg : (gi + 1) * mg] = exact_gemm(xg, wk[:, gi * mg : (gi + 1) * mg], ks)
            requantize_into(acc, b, params, y_zp, lo, dst.reshape(p, m))
        if dst is not out:
            out[...] = dst


_CONV_DOC = """2-D convolution of NHWC uint8 codes (``order`` must be NHWC, as Caffe2): X (N, H, W, C), W (M, KH, KW,
C / group) and an int32 bias (M,), over ConvPoolOpBase sizes (kernel from W; stride, pads, dilation, group,
legacy_pad), requantized to ``Y_scale``/``Y_zero_point`` with QNNPACK's Q31 arithmetic (module doc){relu}.
No gradient."""

for _name, _relu in (("Int8Conv", False), ("Int8ConvRelu", True)):
    _doc = _CONV_DOC.format(relu=", then Relu (outputs clamped below at Y_zero_point)" if _relu else "")
    register_op(
        _name,
        inputs=3,
        args=_CONV_ARGS,
        input_docs=[
            ("X", "4-D NHWC Int8TensorCPU"),
            ("W", "Int8TensorCPU filter (M, KH, KW, C / group)"),
            ("b", "Int8TensorCPU int32 bias (M,)"),
        ],
        output_docs=[("Y", "4-D NHWC Int8TensorCPU (N, OH, OW, M)")],
        infer=_conv_infer,
        category="quantized",
    )(type(_name, (_Conv,), {"relu": _relu, "__doc__": _doc, "__module__": __name__}))


# -- Int8ConvTranspose ------------------------------------------------------------------------------------
_CT_ARGS = [
    *conv_pool_args(group=False, dilation=False),
    Arg("adj", INT, 0, "extra output size at the tail of every spatial dimension (< stride)"),
    Arg("adjs", INTS, [], "adj per spatial dimension"),
    *Y_ARGS,
]


def _ct_adjs(args):
    return tuple(args.adjs) if args.has("adjs") else args.adj


def _convt_infer(args, ins):
    x, w = ins[0], ins[1]
    if not (x.known and w.known) or len(x.shape) != 4 or len(w.shape) != 4 or args.order != "NHWC":
        return [TensorSpec(None, U8)]
    try:
        spec = parse_conv_pool(args, "Int8ConvTranspose", "Int8ConvTranspose", need_kernel=False)
        _, n, _, m, out, _ = convt_geometry(spec, _ct_adjs(args), x.shape, w.shape, "Int8ConvTranspose")
    except Exception:
        return [TensorSpec(None, U8)]
    return [TensorSpec(join_layout(n, m, out, "NHWC"), U8)]


@register_op(
    "Int8ConvTranspose",
    inputs=3,
    args=_CT_ARGS,
    input_docs=[
        ("X", "4-D NHWC Int8TensorCPU (N, H, W, C)"),
        ("W", "Int8TensorCPU filter (C, KH, KW, M)"),
        ("b", "Int8TensorCPU int32 bias (M,)"),
    ],
    output_docs=[("Y", "4-D NHWC Int8TensorCPU")],
    infer=_convt_infer,
    category="quantized",
)
class Int8ConvTranspose(ConvPoolOp):
    """Transposed 2-D convolution of NHWC uint8 codes (``order`` must be NHWC, as Caffe2; groups 1, no
    dilation, as Caffe2 passes to QNNPACK): X (N, H, W, C), W (C, KH, KW, M), int32 bias (M,); output size per
    dim ``(in - 1) * stride + kernel + adj - pad_head - pad_tail`` (ConvTransposeUnpoolBase). Output pixels no
    input reaches (the adj tail) get the bias alone. Requantized with QNNPACK's Q31 arithmetic (module doc).
    No gradient."""

    need_kernel = False

    def setup(self) -> None:
        super().setup()
        if self.order != "NHWC":
            raise self.arg_error(f"Int8ConvTransposeOp only supports NHWC order (got order {self.order})")
        self.scale = check_y_scale(self)

    def run(self) -> None:
        xq, wq = int8_input(self, 0), int8_input(self, 1)
        x, w = xq.t.array, wq.t.array
        if x.ndim != 4 or w.ndim != 4:
            raise ShapeError(f"{self.describe()}: X and W must be 4-D, got {list(x.shape)} and {list(w.shape)}")
        geo, n, c, m, out, full = convt_geometry(
            self.spec, _ct_adjs(self.args), x.shape, w.shape, self.describe(), self.input_names
        )
        b = _bias(self, 2, m)
        params = q31_params(xq.scale, wq.scale, self.scale, self.describe())
        out_shape = join_layout(n, m, out, "NHWC")
        check_elements(join_layout(max(n, 1), max(m, 1), full, "NHWC"), 8, f"output 0 of {self.describe()}")
        xc = x.astype(np.float64) - xq.zero_point
        wc = w.astype(np.float64) - wq.zero_point
        acc = np.zeros(join_layout(n, m, full, "NHWC"), np.float64)
        (sh, sw), (kh, kw) = geo.stride, geo.kernel
        h, wd = x.shape[1:3]
        for ky in range(kh):
            for kx in range(kw):
                acc[:, ky : ky + (h - 1) * sh + 1 : sh, kx : kx + (wd - 1) * sw + 1 : sw, :] += xc @ wc[:, ky, kx, :]
        (ht, hl), (tb, tr) = geo.head, geo.tail
        acc = acc[:, ht : full[0] - tb, hl : full[1] - tr, :]
        total = wrap_int32(acc) + b
        y_zp = self.args.Y_zero_point
        int8_output(self, 0, out_shape, self.scale, y_zp)[...] = q31_requantize(total, params, y_zp, 0)


no_gradient("Int8FC", "Int8Conv", "Int8ConvRelu", "Int8ConvTranspose")
