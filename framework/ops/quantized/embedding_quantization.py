"""Row-wise quantization of embedding tables, bit-exact with Caffe2's layouts and rounding
(``fused_rowwise_8bit_conversion_ops``, ``fused_rowwise_nbit_conversion_ops``, ``lengths_reducer_rowwise_8bit_ops``,
``perfkernels/fused_nbit_rowwise_conversion.cc``).

Layouts (one row per leading index, the last axis quantized):

- fused 8-bit: ``| uint8 x cols | scale float32 | bias float32 |`` (cols + 8 bytes); ``scale = range / 255``,
  ``bias = min``, ``q = lrintf((x - min) * (255 / (range + 1e-8)))`` (round half to even);
  ``HalfScaleBias`` stores float16 scale and bias (cols + 4 bytes): Caffe2 runs the n-bit kernel below with 8 bits.
- fused n-bit (8 with HalfScaleBias, 4, 2): ``| packed codes (cols / (8 / bits) bytes, first value in the low
  bits) | scale f16 | bias f16 |``; ``bias = f16(min)``, ``scale = f16(range / (2^bits - 1))`` (1 if that
  is 0), ``q = clamp(lrintf((x - bias) * (1 / scale)))`` (Caffe2's float fast path; from float16 input,
  ``/ scale``).
- 8-bit with a separate SCALE_BIAS [rows, 2] (``FloatToRowwiseQuantized8Bits``): ``scale = range / 255`` and
  ``q = round_half_away((x - min) * (1 / scale))``; a row of range < 1e-10 gets scale 1 and codes 0.

Dequantization is ``q * scale + bias`` in float32. None of these has a gradient. (Caffe2's ``Fake`` n-bit
and ``Rand`` stochastic variants are not here.)
"""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.ops.gradient import no_gradient
from framework.ops.operator import Operator
from framework.ops.quantized.range_search import greedy_row_ranges
from framework.ops.registry import register_op
from framework.ops.schema import TensorSpec
from framework.ops.validation import expect_rank

F32, F16, U8 = np.dtype(np.float32), np.dtype(np.float16), np.dtype(np.uint8)


def lrint(x: np.ndarray) -> np.ndarray:
    """C's lrintf under the default rounding mode: round half to even."""
    return np.rint(x)


def round_half_away(x: np.ndarray) -> np.ndarray:
    """std::round (Eigen's round): halves away from zero, exactly (no x + 0.5 rounding)."""
    t = np.trunc(x)
    return t + np.where(np.abs(x - t) >= 0.5, np.sign(x), 0).astype(x.dtype)


def row_min_max(flat: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per-row min and max as std::min_element / max_element pick them: the first extreme element (so the
    sign of a zero is the first zero's)."""
    if not flat.shape[1]:
        z = np.zeros(len(flat), flat.dtype)
        return z, z
    r = np.arange(len(flat))
    return flat[r, flat.argmin(axis=1)], flat[r, flat.argmax(axis=1)]


def float_rows(op: Operator, i: int, dtypes=(F32,)) -> np.ndarray:
    x = op.input(i)
    if x.dtype not in dtypes or x.ndim < 1:
        names = " or ".join(str(d) for d in dtypes)
        raise TypeMismatchError(
            f"{op.describe()}: '{op.input_names[i]}' must be a {names} tensor of at least 1 dimension, got "
            f"{x.dtype} {list(x.shape)}"
        )
    return x


def fused_rows(op: Operator, i: int, extra: int, per_byte: int = 1) -> np.ndarray:
    q = op.input(i)
    if q.dtype != U8 or q.ndim < 1 or q.shape[-1] < extra:
        raise TypeMismatchError(
            f"{op.describe()}: '{op.input_names[i]}' must be a fused uint8 tensor whose rows end in {extra} bytes "
            f"of scale and bias, got {q.dtype} {list(q.shape)}"
        )
    return q


# -- 8-bit, scale and bias inside the row --------------------------------------------------------------
def quantize_8bit(x: np.ndarray, half_scale_bias: bool) -> np.ndarray:
    """Fused 8-bit rows of float32 ``x`` (..., cols) -> uint8 (..., cols + 8) (or + 4 with float16 scale/bias:
    Caffe2 runs its n-bit kernel with 8 bits there)."""
    if half_scale_bias:
        return quantize_nbit(x, 8)
    cols = x.shape[-1] if x.ndim else 0
    if x.ndim < 1 or (cols == 0 and int(np.prod(x.shape[:-1], dtype=np.int64)) > 0):
        raise ShapeError(f"row-wise quantization needs rows of at least one column, got shape {list(x.shape)}")
    flat = x.reshape(int(np.prod(x.shape[:-1], dtype=np.int64)), cols)
    mn, mx = row_min_max(flat)
    rng = (mx - mn).astype(F32)
    out = np.empty((len(flat), cols + 8), U8)
    inv = np.float32(255.0) / (rng + np.float32(1e-8))
    q = lrint((flat - mn[:, None]) * inv[:, None])
    out[:, -8:-4] = (rng / np.float32(255.0)).astype(F32).view(U8).reshape(-1, 4)
    out[:, -4:] = mn.astype(F32).view(U8).reshape(-1, 4)
    with np.errstate(invalid="ignore"):  # NaN input: undefined codes, as in Caffe2
        out[:, :cols] = np.clip(q, 0, 255)
    return out.reshape((*x.shape[:-1], cols + 8))


def dequantize_8bit(q: np.ndarray, half_scale_bias: bool) -> np.ndarray:
    if half_scale_bias:
        return dequantize_nbit(q, 8)
    width = q.shape[-1]
    flat = np.ascontiguousarray(q.reshape(-1, width))
    scale = flat[:, -8:-4].copy().view(F32)
    bias = flat[:, -4:].copy().view(F32)
    out = flat[:, : width - 8].astype(F32) * scale + bias
    return out.reshape((*q.shape[:-1], width - 8))


# -- n-bit (4, 2), fp16 scale and bias ----------------------------------------------------------------
def quantize_nbit(x: np.ndarray, bits: int, from_half: bool = False, greedy: bool = False) -> np.ndarray:
    """Fused n-bit rows of ``x``; ``greedy``: each row's range from Caffe2's greedy search (its GREEDY engine,
    which quantizes through its helper path, as ``from_half``) instead of [min, max]."""
    per = 8 // bits
    if x.ndim < 1 or (x.shape[-1] == 0 and int(np.prod(x.shape[:-1], dtype=np.int64)) > 0):
        raise ShapeError(f"row-wise quantization needs rows of at least one column, got shape {list(x.shape)}")
    cols = x.shape[-1]
    flat = x.reshape(int(np.prod(x.shape[:-1], dtype=np.int64)), cols).astype(F32)
    mn, mx = greedy_row_ranges(flat, bits) if greedy and cols else row_min_max(flat)
    from_half = from_half or greedy
    bias = mn.astype(F16)
    rng = (mx - bias.astype(F32)).astype(F32)
    scale = np.where(rng == 0, np.float32(1.0), rng / np.float32((1 << bits) - 1)).astype(F16)
    scale = np.where(scale == 0, np.float16(1.0), scale).astype(F16)
    s32 = scale.astype(F32)
    if from_half:  # Caffe2's helper path divides by the scale
        q = lrint((flat - bias.astype(F32)[:, None]) / s32[:, None])
    else:  # the float fast path multiplies by 1 / scale (1 where that is inf)
        inv = np.float32(1.0) / s32
        bad = np.isinf(inv)
        inv = np.where(bad, np.float32(1.0), inv).astype(F32)
        scale = np.where(bad, np.float16(1.0), scale).astype(F16)
        q = lrint((flat - bias.astype(F32)[:, None]) * inv[:, None])
    with np.errstate(invalid="ignore"):
        codes = np.clip(q, 0, (1 << bits) - 1).astype(U8)
    nbytes = (cols + per - 1) // per
    padded = np.zeros((len(flat), nbytes * per), U8)
    padded[:, :cols] = codes
    packed = np.zeros((len(flat), nbytes), U8)
    for k in range(per):
        packed |= padded[:, k::per] << np.uint8(k * bits)
    out = np.empty((len(flat), nbytes + 4), U8)
    out[:, :nbytes] = packed
    out[:, nbytes : nbytes + 2] = scale.view(U8).reshape(-1, 2)
    out[:, nbytes + 2 :] = bias.view(U8).reshape(-1, 2)
    return out.reshape((*x.shape[:-1], nbytes + 4))


def dequantize_nbit(q: np.ndarray, bits: int) -> np.ndarray:
    per = 8 // bits
    width = q.shape[-1]
    cols = (width - 4) * per
    flat = np.ascontiguousarray(q.reshape(-1, width))
    nbytes = width - 4
    scale = flat[:, nbytes : nbytes + 2].copy().view(F16).astype(F32)
    bias = flat[:, nbytes + 2 :].copy().view(F16).astype(F32)
    codes = np.empty((len(flat), cols), U8)
    mask = np.uint8((1 << bits) - 1)
    for k in range(per):
        codes[:, k::per] = (flat[:, :nbytes] >> np.uint8(k * bits)) & mask
    out = scale * codes.astype(F32) + bias
    return out.reshape((*q.shape[:-1], cols))


# -- 8-bit with a separate [rows, 2] SCALE_BIAS ----------------------------------------------------------
def quantize_rowwise_8bits(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    rows = x.shape[0]
    flat = x.reshape(rows, -1) if rows else x.reshape(0, int(np.prod(x.shape[1:], dtype=np.int64)))
    mn, mx = row_min_max(flat)
    flat_rows = (mx - mn) < np.float32(1e-10)
    scale = np.where(flat_rows, np.float32(1.0), (mx - mn) / np.float32(255.0)).astype(F32)
    inv = (np.float32(1.0) / scale).astype(F32)
    q = round_half_away((flat - mn[:, None]) * inv[:, None])
    q[flat_rows] = 0
    sb = np.stack([scale, mn.astype(F32)], axis=1) if rows else np.zeros((0, 2), F32)
    with np.errstate(invalid="ignore"):
        return q.astype(U8).reshape(x.shape), sb


def _fused_shape(ins, extra, per=1, to=U8):
    x = ins[0]
    if x.shape is None or not x.shape or x.shape[-1] is None:
        return [TensorSpec(None, to)]
    return [TensorSpec((*x.shape[:-1], (x.shape[-1] + per - 1) // per + extra), to)]


def _unfused_shape(ins, extra, per=1, to=F32):
    x = ins[0]
    if x.shape is None or not x.shape or x.shape[-1] is None:
        return [TensorSpec(None, to)]
    return [TensorSpec((*x.shape[:-1], (x.shape[-1] - extra) * per), to)]


def _register(name, doc, cls_run, infer, in_doc, out_doc, inputs=1, outputs=1):
    cls = type(name, (Operator,), {"run": cls_run, "__doc__": doc})
    register_op(
        name,
        inputs=inputs,
        outputs=outputs,
        input_docs=in_doc,
        output_docs=out_doc,
        infer=infer,
        category="quantized",
    )(cls)
    no_gradient(name)


def _to_fused_8bit(half_in: bool, half_sb: bool):
    extra = 4 if half_sb else 8

    def run(self):
        x = float_rows(self, 0, (F16,) if half_in else (F32,))
        q = quantize_8bit(x.astype(F32), half_sb)
        self.output(0, q.shape, U8)[...] = q

    return run, (lambda args, ins: _fused_shape(ins, extra))


def _from_fused_8bit(half_out: bool, half_sb: bool):
    extra = 4 if half_sb else 8
    to = F16 if half_out else F32

    def run(self):
        q = fused_rows(self, 0, extra)
        y = dequantize_8bit(q, half_sb)
        self.output(0, y.shape, to)[...] = y

    return run, (lambda args, ins: _unfused_shape(ins, extra, 1, to))


# (values in float16, scale and bias in float16, quantizer name, dequantizer name)
for _half, _half_sb, _to_name, _from_name in (
    (False, False, "FloatToFused8BitRowwiseQuantized", "Fused8BitRowwiseQuantizedToFloat"),
    (True, False, "HalfFloatToFused8BitRowwiseQuantized", "Fused8BitRowwiseQuantizedToHalfFloat"),
    (False, True, "FloatToFused8BitRowwiseQuantizedHalfScaleBias", "Fused8BitRowwiseQuantizedHalfScaleBiasToFloat"),
    (
        True,
        True,
        "HalfFloatToFused8BitRowwiseQuantizedHalfScaleBias",
        "Fused8BitRowwiseQuantizedHalfScaleBiasToHalfFloat",
    ),
):
    _values, _sb = ("float16" if _half else "float"), ("float16" if _half_sb else "float32")
    _register(
        _to_name,
        f"Row-wise 8-bit quantization of a {_values} tensor into the fused layout "
        f"(codes, then {_sb} scale and bias per row; see the module doc).",
        *_to_fused_8bit(_half, _half_sb),
        [("input", "float16" if _half else "float tensor; its last axis is quantized")],
        [("output", f"uint8, last axis cols + {4 if _half_sb else 8}")],
    )
    _register(
        _from_name,
        f"Dequantize fused 8-bit rows ({_sb} scale and bias): ``q * scale + bias`` as {_values}.",
        *_from_fused_8bit(_half, _half_sb),
        [("input", "fused uint8 rows")],
        [("output", "dequantized values")],
    )


def _to_nbit(bits: int, half_in: bool):
    per = 8 // bits

    def run(self):
        x = float_rows(self, 0, (F16,) if half_in else (F32,))
        if x.shape[-1] % per:
            raise ShapeError(f"{self.describe()}: the last axis ({x.shape[-1]}) must be a multiple of {per}")
        q = quantize_nbit(x, bits, from_half=half_in, greedy=self.op_def.engine == "GREEDY")
        self.output(0, q.shape, U8)[...] = q

    return run, (lambda args, ins: _fused_shape(ins, 4, per))


def _from_nbit(bits: int, half_out: bool):
    to = F16 if half_out else F32

    def run(self):
        q = fused_rows(self, 0, 4)
        y = dequantize_nbit(q, bits)
        self.output(0, y.shape, to)[...] = y

    return run, (lambda args, ins: _unfused_shape(ins, 4, 8 // bits, to))


for _bits in (4, 2):
    for _half in (False, True):
        _src = "Half" if _half else "Float"
        _run, _infer = _to_nbit(_bits, _half)
        _register(
            f"{_src}ToFused{_bits}BitRowwiseQuantized",
            f"Row-wise {_bits}-bit quantization of a {'float16' if _half else 'float'} tensor: {8 // _bits} codes "
            "per byte (first in the low bits), then float16 scale and bias per row (module doc); engine GREEDY "
            "searches each row's range as Caffe2's greedy engine does (``range_search``).",
            _run,
            _infer,
            [("input", f"last axis a multiple of {8 // _bits}")],
            [("output", "fused uint8 rows")],
        )
        _run, _infer = _from_nbit(_bits, _half)
        _register(
            f"Fused{_bits}BitRowwiseQuantizedTo{'Half' if _half else 'Float'}",
            f"Dequantize fused {_bits}-bit rows: ``q * scale + bias`` as {'float16' if _half else 'float'}.",
            _run,
            _infer,
            [("input", "fused uint8 rows")],
            [("output", "dequantized values")],
        )


def _to_rowwise_8bits(self):
    x = float_rows(self, 0)
    if x.ndim < 1:
        raise ShapeError(f"{self.describe()}: input must have rows")
    q, sb = quantize_rowwise_8bits(x)
    self.output(0, q.shape, U8)[...] = q
    self.output(1, sb.shape, F32)[...] = sb


_register(
    "FloatToRowwiseQuantized8Bits",
    "Row-wise 8-bit quantization with a separate SCALE_BIAS [rows, 2] (module doc).",
    _to_rowwise_8bits,
    lambda args, ins: [
        TensorSpec(ins[0].shape, U8),
        TensorSpec((ins[0].shape[0], 2) if ins[0].shape else None, F32),
    ],
    [("input", "float tensor")],
    [("quantized", "uint8, input's shape"), ("scale_bias", "float [rows, 2]")],
    outputs=2,
)


def _from_rowwise_8bits(self):
    q, sb = self.input(0), self.input(1)
    if q.dtype != U8 or q.ndim < 1:
        raise TypeMismatchError(f"{self.describe()}: input must be a uint8 tensor with rows")
    if sb.shape != (q.shape[0], 2):
        raise ShapeError(f"{self.describe()}: scale_bias must be [{q.shape[0]}, 2], got {list(sb.shape)}")
    flat = q.reshape(q.shape[0], -1) if q.shape[0] else q.reshape(0, int(np.prod(q.shape[1:], dtype=np.int64)))
    sbf = sb.astype(F32)
    y = flat.astype(F32) * sbf[:, :1] + sbf[:, 1:]
    self.output(0, q.shape, F32)[...] = y.reshape(q.shape)


_register(
    "Rowwise8BitQuantizedToFloat",
    "Dequantize rows of uint8 with their SCALE_BIAS: ``q * scale + bias``.",
    _from_rowwise_8bits,
    lambda args, ins: [TensorSpec(ins[0].shape, F32)],
    [("quantized", "uint8 rows"), ("scale_bias", "float [rows, 2]")],
    [("output", "float, the input's shape")],
    inputs=2,
)


# -- "fake" n-bit: the n-bit grid stored in the fused 8-bit layout ----------------------------------------
def quantize_fake_nbit(x: np.ndarray, bits: int, greedy: bool = False) -> np.ndarray:
    """Caffe2's FloatToFused{4,2}BitFakeRowwiseQuantized: codes of the n-bit grid, one per byte, then float32
    scale and bias (scale and bias rounded to float16 first; codes clamped to [0, 2^bits - 1]); ``greedy``:
    each row's range from Caffe2's greedy search (its GREEDY engine) instead of [min, max]."""
    flat = x.astype(F32)
    mn, mx = greedy_row_ranges(flat, bits) if greedy and flat.shape[1] else row_min_max(flat)
    bias = mn.astype(F16).astype(F32)
    rng = (mx - bias).astype(F32)
    scale = np.where(rng == 0, np.float32(1.0), (rng / np.float32((1 << bits) - 1)).astype(F16).astype(F32))
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        inv = (np.float32(1.0) / scale).astype(F32)
        q = lrint((flat - bias[:, None]) * inv[:, None])
    q = np.where(np.isfinite(q), q, 0)
    out = np.empty((len(flat), flat.shape[1] + 8), U8)
    out[:, : flat.shape[1]] = np.clip(q, 0, (1 << bits) - 1)
    out[:, -8:-4] = scale.astype(F32).view(U8).reshape(-1, 4)
    out[:, -4:] = bias.view(U8).reshape(-1, 4)
    return out


def _to_fake(bits: int, half_in: bool):
    def run(self):
        x = float_rows(self, 0, (F16,) if half_in else (F32,))
        expect_rank(self, 0, x, 2, "a matrix")
        q = quantize_fake_nbit(x, bits, greedy=self.op_def.engine == "GREEDY")
        self.output(0, q.shape, U8)[...] = q

    return run, (lambda args, ins: _fused_shape(ins, 8))


for _bits in (4, 2):
    for _half in (False, True):
        _run, _infer = _to_fake(_bits, _half)
        _register(
            f"{'Half' if _half else 'Float'}ToFused{_bits}BitFakeRowwiseQuantized",
            f"{_bits}-bit row-wise quantization stored in the fused 8-bit layout (one code per byte, float32 scale "
            "and bias rounded through float16), as Caffe2's fake n-bit ops; engine GREEDY searches each row's "
            "range as Caffe2's greedy engine does (``range_search``).",
            _run,
            _infer,
            [("input", "a matrix")],
            [("output", "uint8, columns + 8")],
        )
