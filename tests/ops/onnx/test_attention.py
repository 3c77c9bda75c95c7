"""ONNXAttention against a per-(batch, head, query) loop written from the ONNX spec."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.ops.testing import assert_reference_checks, run_op_on


def ref_attention(
    q,
    k,
    v,
    mask=None,
    past=None,
    nonpad=None,
    scale=0.0,
    causal=False,
    softcap=0.0,
    mode=0,
    left=-1,
    right=-1,
    heads=None,
):
    three_d = q.ndim == 3
    if three_d:
        hq, hkv = heads
        b, sq, _ = q.shape
        q = q.reshape(b, sq, hq, -1).transpose(0, 2, 1, 3)
        k = k.reshape(b, k.shape[1], hkv, -1).transpose(0, 2, 1, 3)
        v = v.reshape(b, v.shape[1], hkv, -1).transpose(0, 2, 1, 3)
    if past is not None:
        k = np.concatenate([past[0], k], 2)
        v = np.concatenate([past[1], v], 2)
    b, hq, sq, d = q.shape
    hkv, total = k.shape[1], k.shape[2]
    p = past[0].shape[2] if past is not None else 0
    scale = scale or 1 / math.sqrt(d)
    y = np.zeros((b, hq, sq, v.shape[3]))
    qk = np.zeros((b, hq, sq, total))
    full_mask = None
    if mask is not None:
        m = mask if mask.dtype != bool else np.where(mask, 0.0, -np.inf)
        m = np.concatenate([m, np.full(m.shape[:-1] + (total - m.shape[-1],), -np.inf)], -1)
        full_mask = np.broadcast_to(m, (b, hq, sq, total))
    for bi in range(b):
        for h in range(hq):
            kh = h // (hq // hkv)
            for i in range(sq):
                off = p if nonpad is None else nonpad[bi] - sq
                bias = np.zeros(total)
                for j in range(total):
                    if full_mask is not None:
                        bias[j] += full_mask[bi, h, i, j]
                    if causal and j > i + off:
                        bias[j] = -np.inf
                    if left >= 0 and i + off - j > left:
                        bias[j] = -np.inf
                    if right >= 0 and j - (i + off) > right:
                        bias[j] = -np.inf
                    if nonpad is not None and j >= nonpad[bi]:
                        bias[j] = -np.inf
                s = np.array([float(np.dot(q[bi, h, i], k[bi, kh, j])) * scale for j in range(total)])
                if softcap > 0:
                    s = softcap * np.tanh(s / softcap)
                w = np.zeros(total)
                if not np.all(np.isneginf(bias)):
                    z = s + bias
                    w = np.exp(z - z.max())
                    w /= w.sum()
                y[bi, h, i] = w @ v[bi, kh]
                qk[bi, h, i] = {0: s, 1: s, 2: s + bias, 3: w}[mode]
    if three_d:
        y = y.transpose(0, 2, 1, 3).reshape(b, sq, -1)
    return y, k, v, qk


def _rand(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


@settings(max_examples=25, deadline=None)
@given(
    seed=st.integers(0, 1000),
    gqa=st.sampled_from([1, 2]),
    three_d=st.booleans(),
    mask=st.sampled_from([None, "bool", "float2", "float4"]),
    past=st.booleans(),
    causal=st.booleans(),
    softcap=st.sampled_from([0.0, 2.0]),
    mode=st.integers(0, 3),
    window=st.sampled_from([(-1, -1), (1, -1), (2, 1)]),
    scale=st.sampled_from([0.0, 0.3]),
)
def test_attention_matches_loop(seed, gqa, three_d, mask, past, causal, softcap, mode, window, scale):
    rng = np.random.default_rng(seed)
    b, hkv, sq, skv, d, dv, p = 2, 2, 3, 4, 4, 5, (2 if past else 0)
    hq, total = hkv * gqa, skv + p
    q4, k4, v4 = _rand(rng, b, hq, sq, d), _rand(rng, b, hkv, skv, d), _rand(rng, b, hkv, skv, dv)
    q, k, v = q4, k4, v4
    args = {}
    if three_d:
        q = q4.transpose(0, 2, 1, 3).reshape(b, sq, -1)
        k = k4.transpose(0, 2, 1, 3).reshape(b, skv, -1)
        v = v4.transpose(0, 2, 1, 3).reshape(b, skv, -1)
        args = {"q_num_heads": hq, "kv_num_heads": hkv}
    ins, names, m = [q, k, v], ["q", "k", "v"], None
    if mask == "bool":
        m = rng.random((sq, total - 1)) > 0.3
    elif mask == "float2":
        m = _rand(rng, sq, total)
    elif mask == "float4":
        m = _rand(rng, b, 1, sq, total)
    if m is not None:
        ins.append(m)
        names.append("m")
        args["has_attn_mask"] = 1
    pk = pv = None
    if past:
        pk, pv = _rand(rng, b, hkv, p, d), _rand(rng, b, hkv, p, dv)
        ins += [pk, pv]
        names += ["pk", "pv"]
        args["has_past"] = 1
    op = CreateOperator(
        "ONNXAttention",
        names,
        ["y", "pk_out", "pv_out", "qk"],
        scale=scale,
        is_causal=int(causal),
        softcap=softcap,
        qk_matmul_output_mode=mode,
        left_window_size=window[0],
        right_window_size=window[1],
        **args,
    )

    def ref(*_):
        y, kk, vv, qk = ref_attention(
            q, k, v, m, (pk, pv) if past else None, None, scale, causal, softcap, mode, window[0], window[1], (hq, hkv)
        )
        return [y, kk, vv, qk]

    assert_reference_checks(op, ins, ref, threshold=1e-4)


def test_attention_external_cache_float16_and_fully_masked_rows():
    rng = np.random.default_rng(3)
    q, k, v = _rand(rng, 2, 2, 2, 4), _rand(rng, 2, 2, 5, 4), _rand(rng, 2, 2, 5, 3)
    nonpad = np.array([4, 1], np.int64)
    op = CreateOperator("ONNXAttention", ["q", "k", "v", "n"], ["y"], has_nonpad_kv_seqlen=1, is_causal=1)
    # batch 1: offset 1 - 2 = -1, so query 0 sees no key: a zero row, never NaN
    (y,) = assert_reference_checks(
        op, [q, k, v, nonpad], lambda *_: ref_attention(q, k, v, nonpad=nonpad, causal=True)[0]
    )
    assert np.all(y[1, :, 0] == 0) and np.isfinite(y).all()
    q16, k16, v16 = q.astype(np.float16), k.astype(np.float16), v.astype(np.float16)
    op = CreateOperator("ONNXAttention", ["q", "k", "v"], ["y"])
    (y16,) = run_op_on(op, [q16, k16, v16])
    assert y16.dtype == np.float16
    np.testing.assert_allclose(y16, ref_attention(q, k, v)[0], atol=1e-2)
    empty = CreateOperator("ONNXAttention", ["q", "k", "v"], ["y"])
    (ye,) = run_op_on(empty, [q[:0], k[:0], v[:0]])
    assert ye.shape == (0, 2, 2, 3)


@pytest.mark.parametrize(
    "shapes, args, match",
    [
        (((2, 2, 3, 4), (2, 2, 5, 4), (2, 2, 6, 4)), {}, "do not match"),
        (((2, 3, 3, 4), (2, 2, 5, 4), (2, 2, 5, 4)), {}, "multiple"),
        (((2, 3, 12), (2, 5, 12), (2, 5, 12)), {}, "q_num_heads"),
        (((2, 3, 12), (2, 5, 12), (2, 5, 12)), {"q_num_heads": 5, "kv_num_heads": 2}, "divisible"),
        (((2, 2, 3, 4), (2, 2, 5, 3), (2, 2, 5, 4)), {}, "head sizes"),
    ],
)
def test_attention_bad_shapes_name_the_op(shapes, args, match):
    ins = [np.zeros(s, np.float32) for s in shapes]
    with pytest.raises(FrameworkError, match=match) as e:
        run_op_on(CreateOperator("ONNXAttention", ["q", "k", "v"], ["y"], **args), ins)
    assert "ONNXAttention" in str(e.value)


def test_attention_bad_mask_and_nonpad():
    q, k, v = np.zeros((2, 2, 3, 4), np.float32), np.zeros((2, 2, 5, 4), np.float32), np.zeros((2, 2, 5, 4), np.float32)
    with pytest.raises(FrameworkError, match="attn_mask 'm'"):
        run_op_on(
            CreateOperator("ONNXAttention", ["q", "k", "v", "m"], ["y"], has_attn_mask=1),
            [q, k, v, np.zeros((3, 6), np.float32)],
        )
    with pytest.raises(FrameworkError, match="nonpad_kv_seqlen 'n'"):
        run_op_on(
            CreateOperator("ONNXAttention", ["q", "k", "v", "n"], ["y"], has_nonpad_kv_seqlen=1),
            [q, k, v, np.array([1, 9], np.int64)],
        )
    with pytest.raises(FrameworkError, match="has_"):
        run_op_on(CreateOperator("ONNXAttention", ["q", "k", "v", "m"], ["y"]), [q, k, v, q])


def test_attention_bfloat16_runs_in_bfloat16():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    rng = np.random.default_rng(5)
    q, k, v = _rand(rng, 1, 2, 3, 4), _rand(rng, 1, 2, 5, 4), _rand(rng, 1, 2, 5, 4)
    bf = [a.astype(ml_dtypes.bfloat16) for a in (q, k, v)]
    (y,) = run_op_on(CreateOperator("ONNXAttention", ["q", "k", "v"], ["y"], is_causal=1), bf)
    assert y.dtype == bf[0].dtype
    want = ref_attention(*[a.astype(np.float32) for a in bf], causal=True)[0]
    np.testing.assert_allclose(y.astype(np.float32), want, atol=5e-2, rtol=5e-2)
    with pytest.raises(FrameworkError, match="expected floats"):
        run_op_on(CreateOperator("ONNXAttention", ["q", "k", "v"], ["y"]), [np.ones((1, 1, 2, 2), np.int32)] * 3)
