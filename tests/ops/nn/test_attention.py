"""ScaledDotProductAttention against a float64 numpy reference written here (heads, sequence lengths,
head sizes, transposed K, masks broadcast over heads and queries, Caffe2-style softmax axes), inferred
shapes equal to the real ones, and clear errors for mismatched operands."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.memory.workspace import Workspace
from framework.ops import create_operator
from framework.ops.testing import assert_gradient_checks, assert_inferred_shapes, feed_inputs, run_op_on


def reference(q, k, v, mask=None, scale=0.0, transposed_k=False, axis=-1):
    q, k, v = (a.astype(np.float64) for a in (q, k, v))
    kt = k if transposed_k else np.swapaxes(k, -1, -2)
    s = (q @ kt) * (scale or 1.0 / math.sqrt(q.shape[-1]))
    if mask is not None:
        s = s + mask
    ax = axis % s.ndim
    flat = s.reshape(math.prod(s.shape[:ax]), -1)
    e = np.exp(flat - flat.max(axis=1, keepdims=True))
    p = (e / e.sum(axis=1, keepdims=True)).reshape(s.shape)
    return p @ v


@settings(max_examples=40, deadline=None)
@given(
    batch=st.integers(1, 3), heads=st.integers(1, 4), sq=st.integers(1, 9), sk=st.integers(1, 9),
    d=st.integers(1, 8), dv=st.integers(1, 8), transposed=st.booleans(),
    mask=st.sampled_from([None, "full", "keys", "queries_keys"]), scale=st.sampled_from([0.0, 0.3]),
    seed=st.integers(0, 999),
)  # fmt: skip
def test_against_reference(batch, heads, sq, sk, d, dv, transposed, mask, scale, seed):
    rng = np.random.default_rng(seed)
    q = rng.standard_normal((batch, heads, sq, d)).astype(np.float32)
    k = rng.standard_normal((batch, heads, d, sk) if transposed else (batch, heads, sk, d)).astype(np.float32)
    v = rng.standard_normal((batch, heads, sk, dv)).astype(np.float32)
    m_shape = {"full": (batch, heads, sq, sk), "keys": (batch, 1, 1, sk), "queries_keys": (sq, sk)}.get(mask)
    ins = [q, k, v] + ([rng.standard_normal(m_shape).astype(np.float32) * 3] if m_shape else [])
    op = CreateOperator(
        "ScaledDotProductAttention", ["Q", "K", "V", "M"][: len(ins)], ["Y"], scale=scale, transposed_k=int(transposed)
    )
    (y,) = run_op_on(op, ins)
    want = reference(*ins[:3], ins[3] if m_shape else None, scale, transposed)
    assert y.shape == want.shape and y.dtype == np.float32
    np.testing.assert_allclose(y, want, rtol=2e-5, atol=2e-6)


def test_softmax_axis_as_caffe2_softmax_and_broadcast_heads():
    rng = np.random.default_rng(3)
    q = rng.standard_normal((2, 3, 4, 5)).astype(np.float32)
    k = rng.standard_normal((1, 3, 6, 5)).astype(np.float32)  # one batch of keys for both batches
    v = rng.standard_normal((1, 3, 6, 2)).astype(np.float32)
    for axis in (-1, 2):  # 2: each head's whole (Sq, Sk) score matrix is one softmax row
        op = CreateOperator("ScaledDotProductAttention", ["Q", "K", "V"], ["Y"], axis=axis)
        (y,) = run_op_on(op, [q, k, v])
        np.testing.assert_allclose(y, reference(q, k, v, axis=axis), rtol=2e-5, atol=2e-6)


def test_shape_inference_equals_output_and_reruns_reuse_buffers():
    rng = np.random.default_rng(4)
    ws = Workspace()
    ins = [rng.standard_normal(s).astype(np.float32) for s in ((2, 4, 7, 8), (2, 4, 5, 8), (2, 4, 5, 3))]
    op_def = CreateOperator("ScaledDotProductAttention", ["Q", "K", "V"], ["Y"])
    feed_inputs(ws, op_def, ins)
    op = create_operator(op_def, ws)
    op.run()
    assert_inferred_shapes(op_def, ins, [ws.fetch_blob("Y")])
    assert ws.fetch_blob("Y").shape == (2, 4, 7, 3)
    before = op.__dict__["_scores"]
    op.run()
    assert op.__dict__["_scores"] is before


@pytest.mark.parametrize(
    "shapes",
    [
        ((1, 2, 3, 4), (1, 2, 5, 3), (1, 2, 5, 4)),
        ((1, 2, 3, 4), (1, 2, 5, 4), (1, 2, 6, 4)),
        ((2, 3, 4), (3, 5, 4), (3, 5, 4)),
    ],
)
def test_mismatched_operands_raise(shapes):
    rng = np.random.default_rng(5)
    ins = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    with pytest.raises(FrameworkError, match="ScaledDotProductAttention"):
        run_op_on(CreateOperator("ScaledDotProductAttention", ["Q", "K", "V"], ["Y"]), ins)


def test_mask_that_would_grow_the_scores_raises():
    rng = np.random.default_rng(6)
    ins = [rng.standard_normal(s).astype(np.float32) for s in ((1, 2, 3, 4), (1, 2, 5, 4), (1, 2, 5, 4), (3, 2, 3, 5))]
    with pytest.raises(FrameworkError, match="mask"):
        run_op_on(CreateOperator("ScaledDotProductAttention", ["Q", "K", "V", "M"], ["Y"]), ins)


@pytest.mark.parametrize("transposed", [False, True])
@pytest.mark.parametrize("axis", [-1, 1])
@pytest.mark.parametrize("mask", [False, True])
def test_gradient_numerical(transposed, axis, mask):
    rng = np.random.default_rng(11)
    q = rng.standard_normal((2, 2, 3, 4))
    k = rng.standard_normal((2, 1, 4, 5) if transposed else (2, 1, 5, 4))  # K, V broadcast over the heads
    v = rng.standard_normal((2, 1, 5, 3))
    ins = [q, k, v] + ([rng.standard_normal((3, 5))] if mask else [])
    op = CreateOperator(
        "ScaledDotProductAttention", ["Q", "K", "V", "M"][: len(ins)], ["Y"], scale=0.7, transposed_k=int(transposed),
        axis=axis,
    )  # fmt: skip
    for i in range(3):
        assert_gradient_checks(op, ins, i, [0], stepsize=1e-6, threshold=1e-5)
