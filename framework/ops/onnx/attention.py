"""ONNXAttention: ONNX's ``Attention`` (opsets 23-25), scaled dot-product attention with its masks.

Q, K, V are 4-D ``(batch, heads, seq, head_size)`` or 3-D ``(batch, seq, heads * head_size)``
(the head counts then come from ``q_num_heads`` / ``kv_num_heads``). The optional inputs present
are listed after V in ONNX's order, each flagged by an argument: ``attn_mask`` (``has_attn_mask``),
``past_key`` and ``past_value`` (``has_past``), ``nonpad_kv_seqlen`` (``has_nonpad_kv_seqlen``).

The computation follows the ONNX spec (and its reference implementation) step by step, in the
input's dtype: the KV cache is extended (``present = concat(past, new)`` on the sequence axis),
``sqrt(scale)`` multiplies Q and K (default scale ``1/sqrt(head_size)``), GQA repeats each KV
head ``q_heads / kv_heads`` times, scores ``Q K^T`` are soft-capped (``softcap * tanh(s/softcap)``,
when > 0), the additive bias is added: the mask (boolean: False = ``-inf``; padded with ``-inf``
to the total KV length), the causal frontier (a query ``i`` sees keys ``j <= i + offset``, offset
= past length, or ``nonpad_kv_seqlen[b] - q_len`` for an external cache), the sliding window
(opset 25) and the padding of ``nonpad_kv_seqlen``; softmax over the keys (in
``softmax_precision`` when given); a query row whose bias is all ``-inf`` gets zero weights.
``qk_matmul_output`` is the scores (modes 0/1, after softcap), scores plus bias (mode 2) or the
softmax (mode 3). bfloat16 (ml_dtypes) runs in bfloat16 like float16, step by step as the
reference. No gradient (an inference op of the ONNX backend).
"""

from __future__ import annotations

import numpy as np

from framework.errors import ShapeError, TypeMismatchError
from framework.ops.gradient import no_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import BOOL, FLOAT, INT, UNKNOWN, Arg, TensorSpec

_PRECISIONS = {0: None, 1: np.float32, 10: np.float16, 11: np.float64}


def _layout(args, q, k, v):
    """(batch, q_heads, kv_heads, q_len, kv_len, head_size, v_head_size) from the 3-D/4-D shapes."""
    if len(q) == 4:
        return q[0], q[1], k[1], q[2], k[2], q[3], v[3]
    hq, hkv = int(args.q_num_heads), int(args.kv_num_heads)
    return q[0], hq, hkv, q[1], k[1], q[2] // hq, v[2] // hkv


def _n_inputs(args) -> int:
    return 3 + int(bool(args.has_attn_mask)) + 2 * int(bool(args.has_past)) + int(bool(args.has_nonpad_kv_seqlen))


def _infer(args, ins):
    q, k, v = ins[0], ins[1], ins[2]
    if q.shape is None or k.shape is None or v.shape is None or len(q.shape) not in (3, 4):
        return [UNKNOWN] * args.num_outputs
    if len(q.shape) == 3 and (not args.q_num_heads or not args.kv_num_heads):
        return [UNKNOWN] * args.num_outputs
    b, hq, hkv, sq, skv, _, dv = _layout(args, q.shape, k.shape, v.shape)
    past = 0
    if args.has_past:
        pk = ins[3 + int(bool(args.has_attn_mask))]
        past = pk.shape[2] if pk.shape is not None and len(pk.shape) == 4 else None
    total = None if past is None or skv is None else past + skv
    y = (b, hq, sq, dv) if len(q.shape) == 4 else (b, sq, None if hq is None or dv is None else hq * dv)
    dk = _layout(args, q.shape, k.shape, v.shape)[5]
    outs = [
        TensorSpec(y, q.dtype),
        TensorSpec((b, hkv, total, dk), q.dtype),
        TensorSpec((b, hkv, total, dv), q.dtype),
        TensorSpec((b, hq, sq, total), q.dtype),
    ]
    return outs[: args.num_outputs]


@register_op(
    "ONNXAttention",
    inputs=(3, 7),
    outputs=(1, 4),
    args=[
        Arg("has_attn_mask", BOOL, False, "an attn_mask input follows V"),
        Arg("has_past", BOOL, False, "past_key and past_value inputs follow (the mask)"),
        Arg("has_nonpad_kv_seqlen", BOOL, False, "a nonpad_kv_seqlen input (int64, one per batch) comes last"),
        Arg("scale", FLOAT, 0.0, "score scale; 0 = 1/sqrt(head_size)"),
        Arg("is_causal", BOOL, False, "bottom-right aligned causal mask"),
        Arg("q_num_heads", INT, 0, "query heads (3-D inputs)", low=0),
        Arg("kv_num_heads", INT, 0, "key/value heads (3-D inputs)", low=0),
        Arg("softcap", FLOAT, 0.0, "softcap * tanh(scores / softcap) when > 0"),
        Arg("qk_matmul_output_mode", INT, 0, "0/1: scores, 2: scores + bias, 3: softmax", choices=(0, 1, 2, 3)),
        Arg("softmax_precision", INT, 0, "ONNX type of the softmax (0: the input's)", choices=(0, 1, 10, 11)),
        Arg("left_window_size", INT, -1, "keys at most this far before the query (-1: unbounded)", low=-1),
        Arg("right_window_size", INT, -1, "keys at most this far after the query (-1: unbounded)", low=-1),
    ],
    input_docs=[
        ("Q", "(B, Hq, Sq, D) or (B, Sq, Hq*D)"),
        ("K", "(B, Hkv, Skv, D) or (B, Skv, Hkv*D)"),
        ("V", "(B, Hkv, Skv, Dv) or (B, Skv, Hkv*Dv)"),
        ("attn_mask", "optional: bool or additive float mask, broadcastable to (B, Hq, Sq, total)"),
        ("past_key", "optional: (B, Hkv, P, D)"),
        ("past_value", "optional: (B, Hkv, P, Dv)"),
        ("nonpad_kv_seqlen", "optional: int64 (B,), valid keys per batch"),
    ],
    output_docs=[
        ("Y", "attention output, Q's layout with Dv"),
        ("present_key", "(B, Hkv, P + Skv, D)"),
        ("present_value", "(B, Hkv, P + Skv, Dv)"),
        ("qk_matmul_output", "(B, Hq, Sq, P + Skv), per qk_matmul_output_mode"),
    ],
    infer=_infer,
    category="onnx",
    input_types={0: "any", 1: "any", 2: "any"},  # floats, and ml_dtypes' bfloat16 (checked in run)
    same_type=[(0, 1, 2)],
    ranks={0: (3, 4), 1: (3, 4), 2: (3, 4)},
)
class ONNXAttention(Operator):
    """ONNX Attention (opsets 23-25): softmax(Q K^T * scale + bias) V with GQA, KV cache, causal and
    sliding-window masks, softcap and the qk_matmul_output modes (see the module doc)."""

    def setup(self) -> None:
        if len(self.inputs) != _n_inputs(self.args):
            raise self.arg_error(f"has {len(self.inputs)} inputs; the has_* arguments call for {_n_inputs(self.args)}")

    def _optional(self) -> tuple:
        i = 3
        mask = past_k = past_v = nonpad = None
        if self.args.has_attn_mask:
            mask, i = self.input(i), i + 1
        if self.args.has_past:
            past_k, past_v, i = self.input(i), self.input(i + 1), i + 2
        if self.args.has_nonpad_kv_seqlen:
            nonpad = self.input(i)
        return mask, past_k, past_v, nonpad, i

    def _check(self, q, k, v, mask, past_k, past_v, nonpad, last) -> tuple:
        where = self.describe()
        if not q.ndim == k.ndim == v.ndim:
            raise ShapeError(f"{where}: Q, K, V ranks differ ({q.ndim}, {k.ndim}, {v.ndim})")
        if q.ndim == 3:
            hq, hkv = int(self.args.q_num_heads), int(self.args.kv_num_heads)
            if hq <= 0 or hkv <= 0:
                raise ShapeError(f"{where}: 3-D inputs need q_num_heads and kv_num_heads")
            if q.shape[2] % hq or k.shape[2] % hkv or v.shape[2] % hkv:
                raise ShapeError(
                    f"{where}: hidden sizes {q.shape[2]}, {k.shape[2]}, {v.shape[2]} not divisible by "
                    f"the head counts {hq}, {hkv}"
                )
        b, hq, hkv, sq, skv, d, dv = _layout(self.args, q.shape, k.shape, v.shape)
        if k.shape[0] != b or v.shape[0] != b or (q.ndim == 4 and (v.shape[1] != hkv or v.shape[2] != skv)):
            raise ShapeError(f"{where}: K {k.shape} and V {v.shape} do not match Q {q.shape}")
        if q.ndim == 3 and v.shape[1] != skv:
            raise ShapeError(f"{where}: K {k.shape} and V {v.shape} differ in sequence length")
        if (q.ndim == 4 and k.shape[3] != d) or (q.ndim == 3 and k.shape[2] // hkv != d):
            raise ShapeError(f"{where}: Q and K head sizes differ ({q.shape}, {k.shape})")
        if hkv == 0 or hq % hkv:
            raise ShapeError(f"{where}: {hq} query heads are not a multiple of {hkv} key/value heads")
        past = 0
        if past_k is not None:
            pi = 3 + int(mask is not None)
            for j, (p, hd) in enumerate(((past_k, d), (past_v, dv))):
                if p.dtype != q.dtype or p.shape != (b, hkv, past_k.shape[2] if past_k.ndim == 4 else -1, hd):
                    raise ShapeError(
                        f"{where}: {'past_value' if j else 'past_key'} '{self.input_names[pi + j]}' has "
                        f"shape {p.shape} ({p.dtype}); expected ({b}, {hkv}, P, {hd}) of {q.dtype}"
                    )
            past = past_k.shape[2]
            if nonpad is not None:
                raise ShapeError(f"{where}: nonpad_kv_seqlen cannot be combined with past_key/past_value")
        total = past + skv
        if mask is not None:
            mi = 3
            if mask.dtype != np.bool_ and mask.dtype != q.dtype and mask.dtype.kind != "f":
                raise TypeMismatchError(f"{where}: attn_mask '{self.input_names[mi]}' must be bool or float")
            if mask.ndim < 1 or mask.ndim > 4 or mask.shape[-1] > total:
                raise ShapeError(
                    f"{where}: attn_mask '{self.input_names[mi]}' shape {mask.shape} does not fit "
                    f"(B, Hq, Sq, {total}) = ({b}, {hq}, {sq}, {total})"
                )
            full = (b, hq, sq, mask.shape[-1])
            for m, f in zip(mask.shape[::-1], full[::-1]):
                if m not in (1, f):
                    raise ShapeError(
                        f"{where}: attn_mask '{self.input_names[mi]}' shape {mask.shape} does not broadcast to {full}"
                    )
        if nonpad is not None:
            if nonpad.dtype.kind not in "iu" or nonpad.shape != (b,):
                raise ShapeError(
                    f"{where}: nonpad_kv_seqlen '{self.input_names[last]}' must be integers of shape "
                    f"({b},), got {nonpad.dtype} {nonpad.shape}"
                )
            if nonpad.size and (nonpad.min() < 0 or nonpad.max() > total):
                raise ShapeError(
                    f"{where}: nonpad_kv_seqlen '{self.input_names[last]}' values must lie in [0, {total}]"
                )
        return b, hq, hkv, sq, skv, d, dv, past, total

    def run(self) -> None:
        q, k, v = self.input(0), self.input(1), self.input(2)
        if q.dtype.kind != "f" and q.dtype.name != "bfloat16":
            raise TypeMismatchError(f"{self.describe()}: Q '{self.input_names[0]}' is {q.dtype}; expected floats")
        mask, past_k, past_v, nonpad, last = self._optional()
        b, hq, hkv, sq, skv, d, dv, past, total = self._check(q, k, v, mask, past_k, past_v, nonpad, last)
        dt = q.dtype
        if q.ndim == 3:
            q = q.reshape(b, sq, hq, d).transpose(0, 2, 1, 3)
            k = k.reshape(b, skv, hkv, d).transpose(0, 2, 1, 3)
            v = v.reshape(b, skv, hkv, dv).transpose(0, 2, 1, 3)
        if past_k is not None:
            k = np.concatenate([past_k, k], axis=2)
            v = np.concatenate([past_v, v], axis=2)
        outs = self.args.num_outputs
        y_shape = (b, hq, sq, dv) if self.input(0).ndim == 4 else (b, sq, hq * dv)
        y = self.output(0, y_shape, dt)
        if outs > 1:
            self.output(1, k.shape, dt)[...] = k
        if outs > 2:
            self.output(2, v.shape, dt)[...] = v
        bias = self._bias(dt, b, sq, total, mask, past, nonpad)
        scale = float(self.args.scale) or 1.0 / np.sqrt(d)
        s = dt.type(np.sqrt(scale))
        if hq != hkv:
            k = np.repeat(k, hq // hkv, axis=1)
            v = np.repeat(v, hq // hkv, axis=1)
        with np.errstate(all="ignore"):
            scores = np.matmul(q * s, np.swapaxes(k * s, 2, 3))
            cap = float(self.args.softcap)
            if cap > 0:
                scores = np.tanh(scores / dt.type(cap)) * dt.type(cap)
            biased = scores + bias
            mode = int(self.args.qk_matmul_output_mode)
            qk = biased if mode == 2 else scores
            prec = _PRECISIONS[int(self.args.softmax_precision)]
            probs = _softmax(biased if prec is None else biased.astype(prec))
            dead = np.isneginf(np.max(bias, axis=-1, keepdims=True))
            probs = np.where(dead, probs.dtype.type(0), probs)
            if mode == 3:
                qk = probs
            out = np.matmul(probs.astype(dt), v)
        if self.input(0).ndim == 3:
            out = out.transpose(0, 2, 1, 3).reshape(y_shape)
        y[...] = out
        if outs > 3:
            self.output(3, (b, hq, sq, total), dt)[...] = qk

    def _bias(self, dt, b, sq, total, mask, past, nonpad) -> np.ndarray:
        """The additive bias (0 or -inf, plus a float mask), broadcastable to (B, Hq, Sq, total)."""
        neg = dt.type(-np.inf)
        bias = np.zeros((sq, total), dt)
        if mask is not None:
            pad = total - mask.shape[-1]
            if pad:
                fill = False if mask.dtype == np.bool_ else -np.inf
                mask = np.pad(mask, [(0, 0)] * (mask.ndim - 1) + [(0, pad)], constant_values=fill)
            bias = bias + (np.where(mask, dt.type(0), neg) if mask.dtype == np.bool_ else mask.astype(dt))
        offset = past if nonpad is None else (nonpad.astype(np.int64) - sq).reshape(-1, 1, 1, 1)
        i = np.arange(sq).reshape(sq, 1)
        j = np.arange(total).reshape(1, total)
        diff = (i + offset) - j
        allowed = np.ones(np.shape(diff), bool)
        if self.args.is_causal:
            allowed &= diff >= 0
        left, right = int(self.args.left_window_size), int(self.args.right_window_size)
        if left >= 0:
            allowed &= diff <= left
        if right >= 0:
            allowed &= -diff <= right
        if not allowed.all() or allowed.ndim == 4:
            bias = bias + np.where(allowed, dt.type(0), neg)
        if nonpad is not None:
            keep = np.arange(total).reshape(1, total) < nonpad.reshape(-1, 1)
            bias = bias + np.where(keep, dt.type(0), neg).reshape(b, 1, 1, total)
        return bias


def _softmax(x: np.ndarray) -> np.ndarray:
    """Softmax over the last axis; an all -inf row gives zeros (not NaN)."""
    m = np.max(x, axis=-1, keepdims=True)
    m = np.where(np.isneginf(m), x.dtype.type(0), m)
    e = np.exp(x - m)
    s = np.sum(e, axis=-1, keepdims=True)
    return e / np.where(s == 0, x.dtype.type(1), s)


no_gradient("ONNXAttention")
