"""ONNXLinearAttention: ONNX's ``LinearAttention`` (opset 27), recurrent linear attention.

query ``(B, T, Hq * Dk)``, key ``(B, T, Hkv * Dk)``, value ``(B, T, Hkv * Dv)``; a state ``S``
``(B, Hkv, Dk, Dv)`` (``past_state``, else zeros) is updated at each step t, in float32:
``gated`` rules first decay it, ``S *= exp(decay_t)`` (decay per key feature ``(B, T, Hkv * Dk)``
or per head ``(B, T, Hkv)``); ``delta`` rules replace v by ``beta_t * (v_t - S^T k_t)`` (beta per
head or one); then ``S += k_t v_t^T`` and ``out_t = scale * q_t^T S`` (each KV head serving
``Hq / Hkv`` query heads; scale default ``1/sqrt(Dk)``). update_rule: linear, gated, delta,
gated_delta. Outputs: ``(B, T, Hq * Dv)`` in query's dtype and the final state (past_state's
dtype). Inputs after value: ``past_state`` (``has_past_state``), ``decay`` (gated rules), ``beta``
(delta rules), in that order. No gradient (an inference op of the ONNX backend).
"""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError
from framework.ops.gradient import no_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, FLOAT, INT, REQUIRED, STRING, UNKNOWN, Arg, TensorSpec

_RULES = ("linear", "gated", "delta", "gated_delta")


def _infer(args, ins):
    q, v = ins[0], ins[2]
    if q.shape is None or v.shape is None or len(q.shape) != 3 or len(v.shape) != 3 or None in v.shape:
        return [TensorSpec(None, q.dtype), UNKNOWN][: args.num_outputs]
    hq, hkv = int(args.q_num_heads), int(args.kv_num_heads)
    dv = v.shape[2] // hkv if hkv else None
    dk = q.shape[2] // hq if hq and q.shape[2] is not None else None
    y = TensorSpec((q.shape[0], q.shape[1], None if dv is None else hq * dv), q.dtype)
    st = ins[3].dtype if args.has_past_state else q.dtype
    return [y, TensorSpec((q.shape[0], hkv, dk, dv), st)][: args.num_outputs]


def _n_inputs(args) -> int:
    rule = args.update_rule
    return 3 + int(bool(args.has_past_state)) + int(rule in ("gated", "gated_delta")) + int("delta" in rule)


@register_op(
    "ONNXLinearAttention",
    inputs=(3, 6),
    outputs=(1, 2),
    args=[
        Arg("q_num_heads", INT, REQUIRED, "query heads", low=1),
        Arg("kv_num_heads", INT, REQUIRED, "key/value heads (divides q_num_heads)", low=1),
        Arg("scale", FLOAT, 0.0, "output scale; 0 = 1/sqrt(Dk)"),
        Arg("update_rule", STRING, "gated_delta", "linear, gated, delta or gated_delta", choices=_RULES),
        Arg("has_past_state", BOOL, False, "a past_state input follows value"),
    ],
    input_docs=[
        ("query", "(B, T, Hq * Dk)"),
        ("key", "(B, T, Hkv * Dk)"),
        ("value", "(B, T, Hkv * Dv)"),
        ("past_state", "optional (B, Hkv, Dk, Dv)"),
        ("decay", "gated rules: log-decay (B, T, Hkv * Dk) or (B, T, Hkv)"),
        ("beta", "delta rules: (B, T, Hkv) or (B, T, 1)"),
    ],
    output_docs=[("output", "(B, T, Hq * Dv)"), ("present_state", "(B, Hkv, Dk, Dv)")],
    infer=_infer,
    category="onnx",
    input_types="float",
    ranks={0: 3, 1: 3, 2: 3},
)
class ONNXLinearAttention(Operator):
    """Recurrent linear attention with optional gating (decay) and delta-rule correction (ONNX LinearAttention)."""

    def setup(self) -> None:
        if len(self.inputs) != _n_inputs(self.args):
            raise self.arg_error(
                f"has {len(self.inputs)} inputs; update_rule {self.args.update_rule!r} and "
                f"has_past_state call for {_n_inputs(self.args)}"
            )
        if self.args.q_num_heads % self.args.kv_num_heads:
            raise self.arg_error("q_num_heads must be a multiple of kv_num_heads")

    def _split(self, i: int, heads: int, b: int, t: int) -> np.ndarray:
        x = self.input(i)
        if x.shape[:2] != (b, t) or x.shape[2] % heads:
            raise ShapeError(
                f"{self.describe()}: '{self.input_names[i]}' has shape {x.shape}; expected ({b}, {t}, "
                f"a multiple of {heads})"
            )
        return x.reshape(b, t, heads, x.shape[2] // heads).transpose(0, 2, 1, 3).astype(np.float32)

    def run(self) -> None:
        q0 = self.input(0)
        b, t, _ = q0.shape
        hq, hkv = int(self.args.q_num_heads), int(self.args.kv_num_heads)
        q, k, v = self._split(0, hq, b, t), self._split(1, hkv, b, t), self._split(2, hkv, b, t)
        dk, dv = q.shape[3], v.shape[3]
        where = self.describe()
        if k.shape[3] != dk:
            raise ShapeError(f"{where}: query and key head sizes differ ({dk}, {k.shape[3]})")
        rule = self.args.update_rule
        i = 3
        state_dtype = q0.dtype
        state = np.zeros((b, hkv, dk, dv), np.float32)
        if self.args.has_past_state:
            past = self.input(3)
            if past.shape != (b, hkv, dk, dv):
                raise ShapeError(
                    f"{where}: past_state '{self.input_names[3]}' has shape {past.shape}, expected "
                    f"({b}, {hkv}, {dk}, {dv})"
                )
            state, state_dtype, i = past.astype(np.float32), past.dtype, 4
        decay = beta = None
        if rule in ("gated", "gated_delta"):
            d = self.input(i)
            if d.shape not in ((b, t, hkv), (b, t, hkv * dk)):
                raise ShapeError(
                    f"{where}: decay '{self.input_names[i]}' has shape {d.shape}; expected ({b}, {t}, "
                    f"{hkv}) or ({b}, {t}, {hkv * dk})"
                )
            decay = np.exp(d.reshape(b, t, hkv, -1).transpose(0, 2, 1, 3).astype(np.float32))
            i += 1
        if "delta" in rule:
            be = self.input(i)
            if be.shape not in ((b, t, hkv), (b, t, 1)):
                raise ShapeError(
                    f"{where}: beta '{self.input_names[i]}' has shape {be.shape}; expected ({b}, {t}, "
                    f"{hkv}) or ({b}, {t}, 1)"
                )
            beta = be.reshape(b, t, be.shape[2], 1).transpose(0, 2, 1, 3).astype(np.float32)
        scale = float(self.args.scale) or 1.0 / np.sqrt(dk)
        group = hq // hkv
        out = np.zeros((b, hq, t, dv), np.float32)
        for s in range(t):
            kt, vt = k[:, :, s, :], v[:, :, s, :]
            if decay is not None:
                state = state * decay[:, :, s, :][..., None]
            if beta is not None:
                vt = beta[:, :, s, :] * (vt - np.einsum("bhdm,bhd->bhm", state, kt))
            state = state + kt[..., :, None] * vt[..., None, :]
            read = state if group == 1 else np.repeat(state, group, axis=1)
            out[:, :, s, :] = scale * np.einsum("bhd,bhdm->bhm", q[:, :, s, :], read)
        self.output(0, (b, t, hq * dv), q0.dtype)[...] = out.transpose(0, 2, 1, 3).reshape(b, t, hq * dv)
        if self.args.num_outputs > 1:
            self.output(1, state.shape, state_dtype)[...] = state


no_gradient("ONNXLinearAttention")
