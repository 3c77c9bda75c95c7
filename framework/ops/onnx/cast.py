"""ONNXCast: ONNX's Cast between every numeric element type a tensor can hold here, including the
types Caffe2 never had (uint32/uint64 and, through ml_dtypes, bfloat16, the float8 formats,
float4_e2m1fn, int4/uint4, int2/uint2). Not differentiable (a type change).

Rules (ONNX Cast-25 and its reference implementation):

- float8 e4m3fn / e4m3fnuz / e5m2 / e5m2fnuz targets with ``saturate=1`` (the default): values
  beyond the format's largest finite value, infinities included, become that value (sign kept);
  NaN stays NaN; the rest rounds to nearest even. ``saturate=0``: plain conversion (out of range
  gives infinity where the format has one, else NaN).
- float8 e8m0 (a power of two, exponent only): the float32 exponent, rounded by ``round_mode``
  (``up``: any fraction bit rounds the exponent up, ``down``: truncation, ``nearest``: guard/round/
  sticky bits); NaN and infinities give NaN (0xFF); ``saturate`` stops rounding past the largest.
- everything else: numpy's (ml_dtypes') conversion, as the ONNX reference does: floats to
  integers truncate toward zero, bool is ``x != 0``. A float out of the integer type's range is
  undefined in ONNX; we give what the reference gives with the installed ml_dtypes (0.7 changed
  it: ``uint4(-1.0)`` was 15 and is now 0).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from framework.errors import TypeMismatchError
from framework.ops.gradient import no_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import INT, REQUIRED, STRING, Arg, TensorSpec, pointwise_cost

_SATURATING = ("float8_e4m3fn", "float8_e4m3fnuz", "float8_e5m2", "float8_e5m2fnuz")
_ROUND_MODES = ("up", "down", "nearest")


def element_type(name: str) -> np.dtype | None:
    """The numpy dtype named ``name`` (numpy names, or ml_dtypes' when it is installed); None if unknown."""
    if name in ("string", "object"):
        return None
    try:
        dt = np.dtype(name)
        return dt if dt.kind in "biuf" or dt.type.__module__.startswith("ml_dtypes") else None
    except TypeError:
        pass
    try:
        import ml_dtypes
    except ImportError:  # pragma: no cover - ml_dtypes comes with onnx
        return None
    t = getattr(ml_dtypes, name, None)
    return np.dtype(t) if isinstance(t, type) else None


def _infer(args: Any, ins: list) -> list:
    return [TensorSpec(ins[0].shape, element_type(args.to))]


def to_e8m0(x: np.ndarray, saturate: bool, round_mode: str) -> np.ndarray:
    """float8_e8m0fnu bits of ``x`` (computed from its float32 exponent), as a uint8 array."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32)
    exponent = ((bits >> 23) & 0xFF).astype(np.uint16)
    special = exponent == 0xFF
    if round_mode == "up":
        up = (bits & 0x7FFFFF) > 0
    elif round_mode == "nearest":
        guard, rnd, sticky = (bits & 0x400000) > 0, (bits & 0x200000) > 0, (bits & 0x1FFFFF) > 0
        up = guard & (rnd | sticky | (exponent > 0))
    else:
        up = np.zeros(bits.shape, bool)
    up &= ~special
    if saturate:
        up &= exponent != 0xFE
    out = (exponent + up).astype(np.uint8)
    out[special] = 0xFF
    return out


@register_op(
    "ONNXCast",
    args=[
        Arg("to", STRING, "float32", "target element type: a numpy/ml_dtypes name (float32, bfloat16, int4...)"),
        Arg("saturate", INT, 1, "float8 targets: clamp out-of-range values to the largest finite value"),
        Arg("round_mode", STRING, "up", "float8_e8m0fnu target: up, down or nearest", choices=_ROUND_MODES),
    ],
    input_docs=[("X", "tensor of any numeric or bool type")],
    output_docs=[("Y", "X converted to `to`, same shape")],
    infer=_infer,
    cost=pointwise_cost(1),
    category="onnx",
    input_types="any",
)
class ONNXCast(Operator):
    """ONNX Cast / CastLike: Y = X converted to the element type ``to`` with ONNX's rounding and
    saturation rules (see the module docs). Departs from Caffe2's Cast in taking a type name
    (ONNX types beyond TensorProto's) and in the float8 saturation; strings are not converted."""

    def setup(self) -> None:
        self._to = element_type(self.args.to)
        if self._to is None:
            raise self.arg_error(f"argument 'to' names no numeric element type here: '{self.args.to}'")

    def run(self) -> None:
        x = self.input(0)
        if x.dtype.kind in "OSUV" and not x.dtype.type.__module__.startswith("ml_dtypes"):
            raise TypeMismatchError(
                f"{self.describe()}: input 0 ('{self.input_names[0]}') has dtype {x.dtype}, "
                "expected a numeric or bool tensor"
            )
        to = self._to
        with np.errstate(all="ignore"):
            if to.name == "float8_e8m0fnu":
                y = to_e8m0(x, bool(self.args.saturate), self.args.round_mode).view(to)
            elif to.name in _SATURATING and self.args.saturate:
                import ml_dtypes

                info = ml_dtypes.finfo(to)
                f = x if x.dtype in (np.float32, np.float64) else x.astype(np.float32)
                y = np.clip(f, float(info.min), float(info.max)).astype(to)
            else:
                y = x.astype(to)
        out = self.output(0, x.shape, to)
        out[...] = y


no_gradient("ONNXCast")


def _infer_bitcast(args: Any, ins: list) -> list:
    return [TensorSpec(ins[0].shape, element_type(args.to))]


@register_op(
    "ONNXBitCast",
    args=[Arg("to", STRING, REQUIRED, "target element type, a numpy/ml_dtypes name of X's bit width")],
    input_docs=[("X", "numeric or bool tensor")],
    output_docs=[("Y", "X's bits read as `to`, same shape")],
    infer=_infer_bitcast,
    cost=pointwise_cost(0),
    category="onnx",
    input_types="any",
)
class ONNXBitCast(Operator):
    """ONNX BitCast: Y holds X's bits reinterpreted as the element type ``to``, which must have
    X's bit width (no value conversion: float32 1.0 becomes int32 1065353216). Strings are not
    bit-castable."""

    def setup(self) -> None:
        self._to = element_type(self.args.to)
        if self._to is None:
            raise self.arg_error(f"argument 'to' names no numeric element type here: '{self.args.to}'")

    def run(self) -> None:
        x = self.input(0)
        if x.dtype.kind in "OSU" or x.dtype.itemsize != self._to.itemsize:
            raise TypeMismatchError(
                f"{self.describe()}: input 0 ('{self.input_names[0]}') has dtype {x.dtype} "
                f"({x.dtype.itemsize * 8 if x.dtype.kind not in 'OSU' else 'no fixed'} bits), expected "
                f"{self._to.itemsize * 8}-bit elements to bit-cast to {self._to}"
            )
        out = self.output(0, x.shape, self._to)
        out[...] = np.ascontiguousarray(x).view(self._to)


no_gradient("ONNXBitCast")
