"""ONNX's linear quantization: ONNXQuantizeLinear, ONNXDequantizeLinear, ONNXDynamicQuantizeLinear.

``scale`` and ``zero_point`` are a scalar (per tensor), a 1-D tensor along ``axis`` (per axis) or,
with ``block_size`` > 0, X's shape with ``ceil(dim / block_size)`` on ``axis`` (blocked: each
value covers ``block_size`` consecutive elements there). Quantize: ``saturate(rint(x / scale) +
zero_point)`` (round half to even) into the integer type ``to`` (ONNX's type number: 2 uint8,
3 int8, 4 uint16, 5 int16; the zero point's type when there is one). Dequantize: ``(x -
zero_point) * scale`` in float32, cast to the scale's type. Dynamic: uint8 with scale ``(max(0,
max x) - min(0, min x)) / 255`` and zero point ``rint(clip(-min / scale, 0, 255))``. Caffe2's
Int8Quantize/Int8Dequantize work on Int8 tensor blobs (scale and zero point inside the blob), so
these are separate ops. The zero point may also be one of ml_dtypes' types (as onnx feeds them):
int4/uint4/int2/uint2 (saturated integers as above), float8 (e4m3fn, e5m2 and their fnuz forms:
``x / scale`` cast, clipped to the largest finite value first unless ``saturate`` is 0; the zero
point is not added) and float4_e2m1fn (``x / scale + zero_point`` cast, saturating); dequantizing
them computes in float32 (a float8 zero point must be 0; float4's is ignored, as onnx's reference).
One float32 scale and zero point on 8-bit codes run as one compiled pass each (``qlinear_kernels``), with the
same arithmetic. No gradient (quantization is inference-only here).
"""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.ops.gradient import no_gradient
from framework.ops.onnx.qlinear_kernels import dequantize_into, quantize_into
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, INT, UNKNOWN, Arg, TensorSpec
from framework.ops.validation import expect_axis

ONNX_INT_TYPES = {2: np.dtype(np.uint8), 3: np.dtype(np.int8), 4: np.dtype(np.uint16), 5: np.dtype(np.int16)}
_INT_INFOS = {dt.name: (int(np.iinfo(dt).min), int(np.iinfo(dt).max)) for dt in ONNX_INT_TYPES.values()}
_INT_INFOS |= {"int4": (-8, 7), "uint4": (0, 15), "int2": (-2, 1), "uint2": (0, 3)}  # ml_dtypes' small ints
_FLOAT_MAX = {"float8_e4m3fn": 448.0, "float8_e4m3fnuz": 240.0, "float8_e5m2": 57344.0, "float8_e5m2fnuz": 57344.0}
_FLOAT4 = "float4_e2m1fn"
_Q8 = (np.dtype(np.uint8), np.dtype(np.int8))  # the codes the one-pass kernels (qlinear_kernels) handle
QUANT_NAMES = set(_INT_INFOS) | set(_FLOAT_MAX) | {_FLOAT4}


def _check_quant_type(op: Operator, i: int, dt: np.dtype) -> None:
    if dt.name not in QUANT_NAMES:
        raise TypeMismatchError(
            f"{op.describe()}: '{op.input_names[i]}' of type {dt} is not a quantized type "
            f"(supported: {', '.join(sorted(QUANT_NAMES))})"
        )


_AXIS_ARGS = [
    Arg("axis", INT, 1, "the quantization axis of per-axis and blocked scales (negative: from the end)"),
    Arg("block_size", INT, 0, "> 0: blocked quantization, block_size elements per scale along axis", low=0),
]


def expand_param(op: Operator, i: int, value: np.ndarray, shape: tuple) -> np.ndarray:
    """Scale / zero point ``value`` (input ``i``) made broadcastable to X's ``shape``."""
    where, name = op.describe(), op.input_names[i]
    if value.ndim == 0 or value.size == 1 and value.ndim == 1 and not op.args.block_size:
        return value.reshape(())
    if not shape:
        raise ShapeError(f"{where}: '{name}' shape {value.shape} needs an axis, X is a scalar")
    axis = expect_axis(where, int(op.args.axis), len(shape), of=f"a {len(shape)}-D X")
    block = int(op.args.block_size)
    if not block:
        if value.ndim != 1 or value.size != shape[axis]:
            raise ShapeError(f"{where}: '{name}' has shape {value.shape}, expected ({shape[axis]},) (axis {axis})")
        dims = [1] * len(shape)
        dims[axis] = value.size
        return value.reshape(dims)
    want = list(shape)
    want[axis] = -(-shape[axis] // block)
    if list(value.shape) != want:
        raise ShapeError(f"{where}: '{name}' has shape {value.shape}, expected {tuple(want)} (blocks of {block})")
    return np.repeat(value, block, axis=axis).take(range(shape[axis]), axis=axis)


def _q_infer(args, ins):
    dt = ins[2].dtype if len(ins) > 2 else ONNX_INT_TYPES.get(int(args.to))
    return [TensorSpec(ins[0].shape, dt)]


@register_op(
    "ONNXQuantizeLinear",
    inputs=(2, 3),
    args=_AXIS_ARGS
    + [
        Arg("to", INT, 2, "output type (ONNX number) without a zero point", choices=(2, 3, 4, 5)),
        Arg("saturate", BOOL, True, "float8: clip to the largest finite value before the cast"),
    ],
    input_docs=[("x", "float input"), ("y_scale", "scale(s)"), ("y_zero_point", "optional zero point(s)")],
    output_docs=[("y", "quantized x, the zero point's type (or to)")],
    infer=_q_infer,
    category="onnx",
    input_types={0: "float", 1: "float", 2: "any"},
)
class ONNXQuantizeLinear(Operator):
    """ONNX QuantizeLinear into 8/16-bit integers: ``saturate(rint(x / scale) + zero_point)``."""

    def run(self) -> None:
        x, scale = self.input(0), self.input(1)
        zp = self.input(2) if len(self.inputs) == 3 else None
        dt = zp.dtype if zp is not None else ONNX_INT_TYPES[int(self.args.to)]
        if zp is not None:
            _check_quant_type(self, 2, dt)
        s = expand_param(self, 1, scale, x.shape)
        z = expand_param(self, 2, zp, x.shape) if zp is not None else None
        y = self.output(0, x.shape, dt)
        if (
            dt in _Q8 and x.dtype == np.float32 and s.dtype == np.float32 and s.ndim == 0
            and (z is None or z.ndim == 0)
            and quantize_into(x, s, int(z) if z is not None else 0, *_INT_INFOS[dt.name], y)
        ):  # fmt: skip
            return
        with np.errstate(all="ignore"):
            v = x / s
            if dt.name in _FLOAT_MAX:
                m = _FLOAT_MAX[dt.name]
                y[...] = (np.clip(v, -m, m) if self.args.saturate else v).astype(dt)
                return
            if dt.name == _FLOAT4:
                y[...] = (v + z.astype(np.float32) if z is not None else v).astype(dt)
                return
            lo, hi = _INT_INFOS[dt.name]
            q = np.rint(v)
            q = np.nan_to_num(q, nan=0.0, posinf=hi, neginf=lo)
            q = np.clip(q, lo - 2**17, hi + 2**17).astype(np.int32)
        if z is not None:
            q = q + z.astype(np.int32)
        y[...] = np.clip(q, lo, hi).astype(dt)


@register_op(
    "ONNXDequantizeLinear",
    inputs=(2, 3),
    args=_AXIS_ARGS,
    input_docs=[("x", "integer input"), ("x_scale", "float scale(s)"), ("x_zero_point", "optional, x's type")],
    output_docs=[("y", "(x - zero_point) * scale, the scale's type")],
    infer=lambda args, ins: [TensorSpec(ins[0].shape, ins[1].dtype)],
    category="onnx",
    input_types={0: "any", 1: "float", 2: "any"},
    same_type=[(0, 2)],
)
class ONNXDequantizeLinear(Operator):
    """ONNX DequantizeLinear from integers: ``(x - zero_point) * scale`` (float32 math, scale's type)."""

    def run(self) -> None:
        x, scale = self.input(0), self.input(1)
        if x.dtype != np.int32:
            _check_quant_type(self, 0, x.dtype)
        s = expand_param(self, 1, scale, x.shape)
        if x.dtype in _Q8 and s.dtype == np.float32 and s.ndim == 0:
            z = expand_param(self, 2, self.input(2), x.shape) if len(self.inputs) == 3 else np.zeros((), x.dtype)
            if z.ndim == 0 and dequantize_into(x, np.float32(z), s, self.output(0, x.shape, scale.dtype)):
                return
        dx = x.astype(np.float32)
        if len(self.inputs) == 3 and x.dtype.name in _FLOAT_MAX:
            if np.any(self.input(2).astype(np.float32) != 0):
                raise ShapeError(f"{self.describe()}: a float8 zero point '{self.input_names[2]}' must be 0")
        elif len(self.inputs) == 3 and x.dtype.name != _FLOAT4:
            dx = dx - expand_param(self, 2, self.input(2), x.shape).astype(np.float32)
        self.output(0, x.shape, scale.dtype)[...] = dx * s


@register_op(
    "ONNXDynamicQuantizeLinear",
    outputs=3,
    input_docs=[("x", "float32 input")],
    output_docs=[("y", "uint8 x"), ("y_scale", "float32 scalar"), ("y_zero_point", "uint8 scalar")],
    infer=lambda args, ins: [
        TensorSpec(ins[0].shape, np.dtype(np.uint8)) if ins[0] is not UNKNOWN else UNKNOWN,
        TensorSpec((), ins[0].dtype),
        TensorSpec((), np.dtype(np.uint8)),
    ],
    category="onnx",
    input_types="float",
)
class ONNXDynamicQuantizeLinear(Operator):
    """ONNX DynamicQuantizeLinear: uint8 quantization with the scale and zero point that map
    ``[min(0, min x), max(0, max x)]`` onto ``[0, 255]``."""

    def run(self) -> None:
        x = self.input(0)
        if x.size and not np.isfinite(x).all():
            raise ShapeError(f"{self.describe()}: x '{self.input_names[0]}' holds NaN or infinity (no range)")
        hi = np.float32(max(0.0, float(x.max()))) if x.size else np.float32(0)
        lo = np.float32(min(0.0, float(x.min()))) if x.size else np.float32(0)
        scale = np.float32(1.0 if hi == lo else (hi - lo)) / np.float32(255)
        zp = np.rint(max(0.0, min(255.0, np.float32(0) - lo / scale)))
        y = np.clip(np.rint(x / scale) + zp, 0, 255)
        self.output(0, x.shape, np.uint8)[...] = y
        self.output(1, (), x.dtype)[...] = scale
        self.output(2, (), np.uint8)[...] = zp


no_gradient("ONNXQuantizeLinear", "ONNXDequantizeLinear", "ONNXDynamicQuantizeLinear")
