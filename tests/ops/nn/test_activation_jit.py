"""The compiled one-pass kernels of framework/kernels/activation_jit.py (erf, GELU in both forms, with a
bias) against references built on Python's own ``math.erf``/``math.tanh``; the Erf and Gelu ops with the
kernels on and off giving the same float32 numbers; BatchMatMul of an N-D A by a 2-D B (one GEMM over the
flattened rows) against an einsum reference, strided A included."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.kernels import activation_jit
from framework.ops.erf import erf
from framework.ops.testing import assert_reference_checks, run_op_on

pytest.importorskip("numba")

_erf_ref = np.vectorize(math.erf, otypes=[np.float64])
_erfc_ref = np.vectorize(math.erfc, otypes=[np.float64])
_tanh_ref = np.vectorize(math.tanh, otypes=[np.float64])


def _values(rng, n, dtype, scale):
    x = (rng.standard_normal(n) * scale).astype(dtype)
    x[: min(n, 6)] = np.array([0.0, -0.0, np.inf, -np.inf, 4.0, -0.46875], dtype)[: min(n, 6)]
    return x


def _ulps(a, b):
    a, b = np.asarray(a), np.asarray(b)
    iv = np.int32 if a.dtype == np.float32 else np.int64
    return np.abs(a.view(iv).astype(np.int64) - b.view(iv).astype(np.int64))


@settings(max_examples=25, deadline=None)
@given(n=st.integers(64, 3000), scale=st.sampled_from([0.3, 1.0, 3.0, 10.0]), seed=st.integers(0, 2**16))
@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_erf_against_math_erf(dtype, n, scale, seed):
    x = _values(np.random.default_rng(seed), n, dtype, scale)
    assert activation_jit.fits(x)
    out = np.empty_like(x)
    activation_jit.erf(x, out)
    want = _erf_ref(x.astype(np.float64)).astype(dtype)
    assert np.all(_ulps(out, want) <= (1 if dtype == np.float32 else 4))
    assert np.signbit(out[1]) and out[2] == 1.0 and out[3] == -1.0


def test_erf_nan_and_in_place():
    x = np.linspace(-5, 5, 200).astype(np.float32)
    x[7] = np.nan
    want = _erf_ref(x.astype(np.float64)).astype(np.float32)
    erf(x, out=x)
    assert np.isnan(x[7]) and np.all(_ulps(np.delete(x, 7), np.delete(want, 7)) <= 1)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_erf_compiled_equals_numpy_path(dtype, monkeypatch):
    x = _values(np.random.default_rng(3), 5000, dtype, 3.0)
    compiled = erf(x)
    monkeypatch.setattr(activation_jit, "_k", None)
    plain = erf(x)
    assert np.all(_ulps(compiled, plain) <= (0 if dtype == np.float32 else 4))


def _gelu_ref(x, fast):
    d = x.astype(np.float64)
    if fast:
        return 0.5 * d * (1.0 + _tanh_ref(math.sqrt(2 / math.pi) * (d + 0.044715 * d**3)))
    return 0.5 * d * _erfc_ref(-d / math.sqrt(2.0))  # Phi without cancelling in the lower tail


@settings(max_examples=20, deadline=None)
@given(rows=st.integers(1, 9), cols=st.integers(1, 70), fast=st.booleans(), bias=st.booleans(), seed=st.integers(0, 99))
def test_gelu_kernel(rows, cols, fast, bias, seed):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((rows, cols)) * 3).astype(np.float32)
    b = rng.standard_normal(cols).astype(np.float32) if bias else None
    out = np.empty_like(x)
    activation_jit.gelu(x, out, fast, b)
    xb = x if b is None else (x + b).astype(np.float32)
    # the erf form is precise in the lower tail; the tanh form's 1 + tanh cancels there (as its definition)
    np.testing.assert_allclose(out, _gelu_ref(xb, fast), rtol=2e-7, atol=1e-14 if fast else 1e-30)


@pytest.mark.parametrize("fast", [0, 1])
def test_gelu_op_compiled_and_numpy(fast, monkeypatch):
    x = (np.random.default_rng(1).standard_normal((3, 50)) * 3).astype(np.float32)
    op = CreateOperator("Gelu", ["X"], ["Y"], fast_gelu=fast)
    (compiled,) = run_op_on(op, [x])
    monkeypatch.setattr(activation_jit, "_k", None)
    (plain,) = run_op_on(op, [x])
    np.testing.assert_allclose(compiled, _gelu_ref(x, fast), rtol=2e-7, atol=1e-14 if fast else 1e-30)
    # the numpy path forms 1 + erf in float32: absolute, not relative, precision in the lower tail
    np.testing.assert_allclose(plain, compiled, rtol=1e-6, atol=1e-6)


@settings(max_examples=30, deadline=None)
@given(
    lead=st.lists(st.integers(1, 4), min_size=1, max_size=3),
    m=st.integers(1, 5), k=st.integers(1, 6), n=st.integers(1, 5),
    ta=st.booleans(), tb=st.booleans(), strided=st.booleans(), seed=st.integers(0, 99),
)  # fmt: skip
def test_batch_matmul_nd_by_2d(lead, m, k, n, ta, tb, strided, seed):
    rng = np.random.default_rng(seed)
    a_shape = (*lead, k, m) if ta else (*lead, m, k)
    a = rng.standard_normal(a_shape).astype(np.float32)
    if strided and len(lead) >= 1:  # a transposed (non-contiguous) A, as an exporter's Transpose feeds it
        a = np.ascontiguousarray(np.swapaxes(a, 0, -2)).swapaxes(0, -2)
    b = rng.standard_normal((n, k) if tb else (k, n)).astype(np.float32)
    op = CreateOperator("BatchMatMul", ["A", "B"], ["Y"], trans_a=int(ta), trans_b=int(tb), broadcast=1)

    def ref(a, b):
        a2 = np.swapaxes(a, -1, -2) if ta else a
        b2 = b.T if tb else b
        return np.einsum("...mk,kn->...mn", a2.astype(np.float64), b2.astype(np.float64)).astype(np.float32)

    assert_reference_checks(op, [a, b], ref)


@settings(max_examples=25, deadline=None)
@given(
    lead=st.lists(st.integers(1, 5), min_size=1, max_size=3), width=st.integers(1, 80), affine=st.booleans(),
    offset=st.sampled_from([0.0, 100.0]), seed=st.integers(0, 99),
)  # fmt: skip
def test_layer_norm_one_pass(lead, width, affine, offset, seed):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((*lead, width)) + offset).astype(np.float32)
    gb = [rng.standard_normal(width).astype(np.float32) for _ in range(2)] if affine else []
    axis = len(lead)
    op = CreateOperator(
        "LayerNorm", ["X"] + ["g", "b"][: len(gb)], ["Y", "mean", "std"], axis=axis, epsilon=1e-5,
        elementwise_affine=int(affine),
    )  # fmt: skip

    def ref(x, *gb):
        d = x.astype(np.float64)
        mu = d.mean(axis=-1, keepdims=True)
        sd = np.sqrt(((d - mu) ** 2).mean(axis=-1, keepdims=True) + 1e-5)
        y = (d - mu) / sd
        if gb:
            y = y * gb[0] + gb[1]
        return y.astype(np.float32), mu.astype(np.float32), sd.astype(np.float32)

    outs = run_op_on(op, [x, *gb])
    for got, want in zip(outs, ref(x, *gb)):
        assert got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=2e-6, atol=1e-6)


@settings(max_examples=30, deadline=None)
@given(
    rows=st.integers(1, 5), width=st.integers(1, 300), gamma=st.booleans(), beta=st.booleans(),
    dtype=st.sampled_from([np.float32, np.float64]), offset=st.sampled_from([0.0, 100.0]), seed=st.integers(0, 99),
)  # fmt: skip
def test_layer_norm_kernel_rows(rows, width, gamma, beta, dtype, offset, seed):
    # widths across the vector lanes and their tails; an offset mean tests the two-pass variance
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((rows, width)) + offset).astype(dtype)
    g = rng.standard_normal(width).astype(dtype) if gamma else None
    b = rng.standard_normal(width).astype(dtype) if beta else None
    out, mean, std = np.empty_like(x), np.empty((rows, 1), dtype), np.empty((rows, 1), dtype)
    assert activation_jit.layer_norm(x, g, b, 1e-5, out, mean, std)
    d = x.astype(np.float64)
    mu = d.mean(axis=1, keepdims=True)
    sd = np.sqrt(((d - mu) ** 2).mean(axis=1, keepdims=True) + 1e-5)
    want = (d - mu) / sd
    if g is not None:
        want = want * g
    if b is not None:
        want = want + b
    tol = 1e-6 if dtype == np.float32 else 1e-12
    np.testing.assert_allclose(out, want, rtol=tol, atol=tol)
    np.testing.assert_allclose(mean, mu, rtol=tol, atol=tol)
    np.testing.assert_allclose(std, sd, rtol=tol)


def _softmax_ref(x):
    d = x.astype(np.float64)
    e = np.exp(d - d.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


@settings(max_examples=30, deadline=None)
@given(
    rows=st.integers(1, 40), width=st.integers(1, 70), scale=st.sampled_from([0.1, 3.0, 50.0]),
    dtype=st.sampled_from([np.float32, np.float64]), seed=st.integers(0, 99),
)  # fmt: skip
def test_softmax_rows_kernel(rows, width, scale, dtype, seed):
    x = (np.random.default_rng(seed).standard_normal((rows, width)) * scale).astype(dtype)
    want = _softmax_ref(x)
    assert activation_jit.softmax_rows(x)
    tol = 2e-6 if dtype == np.float32 else 1e-13
    np.testing.assert_allclose(x, want, rtol=tol, atol=tol * 1e-3)


def test_softmax_rows_non_finite_rows_as_numpy():
    x = np.array(
        [[1.0, np.nan, 2.0], [np.inf, 0.0, 1.0], [-np.inf, -np.inf, -np.inf], [-np.inf, 0.0, 1.0], [0.0, 1.0, 2.0]],
        np.float32,
    )
    with np.errstate(invalid="ignore"):
        want = _softmax_ref(x).astype(np.float32)
    got = x.copy()
    assert activation_jit.softmax_rows(got)
    assert np.all(np.isnan(got[:3]))
    np.testing.assert_array_equal(np.isnan(want), np.isnan(got))
    np.testing.assert_allclose(got[3:], want[3:], rtol=2e-6, atol=0)


def test_softmax_rows_declines_other_arrays():
    assert not activation_jit.softmax_rows(np.ones((3, 4), np.float16))
    assert not activation_jit.softmax_rows(np.ones((4, 3), np.float32).T)
    assert not activation_jit.softmax_rows(np.ones((3, 0), np.float32))
