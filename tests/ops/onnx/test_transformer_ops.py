"""ONNXRotaryEmbedding, ONNXSwiGLU, ONNXCausalConvWithState and ONNXLinearAttention against loops."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.ops.testing import assert_reference_checks, run_op_on


def _r(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 999),
    interleaved=st.booleans(),
    dim=st.sampled_from([0, 4]),
    three_d=st.booleans(),
    pos=st.booleans(),
)
def test_rotary_embedding_matches_loop(seed, interleaved, dim, three_d, pos):
    rng = np.random.default_rng(seed)
    b, h, s, d = 2, 2, 3, 6
    x4 = _r(rng, b, h, s, d)
    rd = dim or d
    if pos:
        ids = rng.integers(0, 7, (b, s)).astype(np.int64)
        cos, sin = _r(rng, 7, rd // 2), _r(rng, 7, rd // 2)
    else:
        cos, sin = _r(rng, b, s, rd // 2), _r(rng, b, s, rd // 2)

    def ref(*_):
        out = x4.astype(np.float64).copy()
        for bi, hi, si in np.ndindex(b, h, s):
            row = cos[ids[bi, si]] if pos else cos[bi, si]
            srow = sin[ids[bi, si]] if pos else sin[bi, si]
            for p in range(rd // 2):
                i1, i2 = (2 * p, 2 * p + 1) if interleaved else (p, p + rd // 2)
                x1, x2 = x4[bi, hi, si, i1], x4[bi, hi, si, i2]
                out[bi, hi, si, i1] = x1 * row[p] - x2 * srow[p]
                out[bi, hi, si, i2] = x1 * srow[p] + x2 * row[p]
        return out.transpose(0, 2, 1, 3).reshape(b, s, h * d) if three_d else out

    x = x4.transpose(0, 2, 1, 3).reshape(b, s, h * d) if three_d else x4
    ins, names = [x, cos, sin] + ([ids] if pos else []), ["x", "c", "s"] + (["p"] if pos else [])
    op = CreateOperator(
        "ONNXRotaryEmbedding",
        names,
        ["y"],
        interleaved=int(interleaved),
        rotary_embedding_dim=dim,
        num_heads=h if three_d else 0,
    )
    assert_reference_checks(op, ins, ref, threshold=1e-5)


def test_swiglu_and_causal_conv():
    rng = np.random.default_rng(1)
    a, bb = _r(rng, 3, 4), _r(rng, 3, 4)
    ref = [[a[i, j] / (1 + math.exp(-0.5 * a[i, j])) * bb[i, j] for j in range(4)] for i in range(3)]
    assert_reference_checks(
        CreateOperator("ONNXSwiGLU", ["a", "b"], ["y"], alpha=0.5), [a, bb], lambda *_: np.array(ref)
    )
    x, w, bias, past = _r(rng, 2, 3, 5), _r(rng, 3, 1, 3), _r(rng, 3), _r(rng, 2, 3, 2)
    for act in ("none", "silu"):
        full = np.concatenate([past, x], 2)
        out = np.zeros(x.shape)
        for bi, c, t in np.ndindex(*x.shape):
            v = bias[c] + sum(w[c, 0, j] * full[bi, c, t + j] for j in range(3))
            out[bi, c, t] = v / (1 + math.exp(-v)) if act == "silu" else v
        op = CreateOperator(
            "ONNXCausalConvWithState",
            ["x", "w", "b", "p"],
            ["y", "state"],
            has_bias=1,
            has_past_state=1,
            activation=act,
        )
        assert_reference_checks(
            op, [x, w, bias, past], lambda *_, out=out, full=full: [out, full[:, :, -2:]], threshold=1e-5
        )
    with pytest.raises(FrameworkError, match="past_state 'p'"):
        run_op_on(
            CreateOperator("ONNXCausalConvWithState", ["x", "w", "p"], ["y"], has_past_state=1), [x, w, past[:, :2]]
        )


@settings(max_examples=20, deadline=None)
@given(
    seed=st.integers(0, 999),
    rule=st.sampled_from(["linear", "gated", "delta", "gated_delta"]),
    group=st.sampled_from([1, 2]),
    past=st.booleans(),
    per_head=st.booleans(),
)
def test_linear_attention_matches_loop(seed, rule, group, past, per_head):
    rng = np.random.default_rng(seed)
    b, t, hkv, dk, dv = 2, 3, 2, 3, 2
    hq = hkv * group
    q, k, v = _r(rng, b, t, hq * dk), _r(rng, b, t, hkv * dk), _r(rng, b, t, hkv * dv)
    ins, names = [q, k, v], ["q", "k", "v"]
    s0 = _r(rng, b, hkv, dk, dv) if past else np.zeros((b, hkv, dk, dv), np.float32)
    if past:
        ins, names = ins + [s0], names + ["s"]
    dec = -np.abs(_r(rng, b, t, hkv if per_head else hkv * dk))
    bet = rng.random((b, t, hkv if per_head else 1)).astype(np.float32)
    if "gated" in rule:
        ins, names = ins + [dec], names + ["dec"]
    if "delta" in rule:
        ins, names = ins + [bet], names + ["beta"]

    def ref(*_):
        out = np.zeros((b, t, hq * dv))
        state = s0.astype(np.float64).copy()
        for bi in range(b):
            for h in range(hkv):
                S = state[bi, h]
                for s in range(t):
                    kt, vt = k[bi, s, h * dk : (h + 1) * dk], v[bi, s, h * dv : (h + 1) * dv].astype(np.float64)
                    if "gated" in rule:
                        g = dec[bi, s, h] if per_head else dec[bi, s, h * dk : (h + 1) * dk]
                        S = S * np.exp(np.broadcast_to(g, (dk,)))[:, None]
                    if "delta" in rule:
                        vt = bet[bi, s, h if per_head else 0] * (vt - S.T @ kt)
                    S = S + np.outer(kt, vt)
                    for g2 in range(group):
                        hh = h * group + g2
                        out[bi, s, hh * dv : (hh + 1) * dv] = (q[bi, s, hh * dk : (hh + 1) * dk] @ S) / math.sqrt(dk)
                state[bi, h] = S
        return [out, state]

    op = CreateOperator(
        "ONNXLinearAttention",
        names,
        ["y", "st"],
        q_num_heads=hq,
        kv_num_heads=hkv,
        update_rule=rule,
        has_past_state=int(past),
    )
    assert_reference_checks(op, ins, ref, threshold=1e-4)
