"""The compiled (numba) one-pass kernels of activation_jit.py: erf, GELU (erf and tanh forms, with an
optional bias added first) and LayerNorm over the last axis. Imported only through activation_jit, under
the kernels' numba cache folder."""

from __future__ import annotations

import math

import numpy as np

from framework.kernels import cached_jit
from framework.kernels import erf_cody as _c

_jit = cached_jit.njit(cache=True, nogil=True, boundscheck=False)

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)


@_jit
def erfc_tail(y: float, single: bool) -> float:
    """erfc(y) for y > _c.THRESH, computed directly (no cancellation against 1): exp(-y^2) split as in the
    numpy erf, or with ``single`` (a result for float32) in one call, whose square's rounding error
    (below 2e-15 relative) cannot reach a float32."""
    if y <= 4.0:
        num = _c.C8 * y
        den = y
        for i in range(7):
            num = (num + _c.C[i]) * y
            den = (den + _c.D[i]) * y
        ratio = (num + _c.C[7]) / (den + _c.D[7])
    elif y < _c.BIG:
        z = 1.0 / (y * y)
        num = _c.P5 * z
        den = z
        for i in range(4):
            num = (num + _c.P[i]) * z
            den = (den + _c.Q[i]) * z
        ratio = (_c.INV_SQRT_PI - z * (num + _c.P[4]) / (den + _c.Q[4])) / y
    else:
        return 0.0
    if single:
        return math.exp(-y * y) * ratio
    t = math.trunc(y * 16.0) / 16.0
    return math.exp(-t * t) * math.exp(-(y - t) * (y + t)) * ratio


@_jit
def _erf_small(y: float) -> float:
    """erf(y), 0 <= y <= _c.THRESH."""
    ysq = y * y
    num = ((_c.A4 * ysq + _c.A[0]) * ysq + _c.A[1]) * ysq
    num = (num + _c.A[2]) * ysq + _c.A[3]
    den = (((ysq + _c.B[0]) * ysq + _c.B[1]) * ysq + _c.B[2]) * ysq + _c.B[3]
    return y * num / den


@_jit
def erf_scalar(x: float) -> float:
    """erf(x) of one float64 by the numpy erf's steps . NaN stays NaN; erf(-x) = -erf(x)."""
    y = abs(x)
    if y <= _c.THRESH:
        r = _erf_small(y)
    elif y < _c.ONE_BEYOND:
        r = (0.5 - erfc_tail(y, False)) + 0.5
    elif y == y:
        r = 1.0
    else:
        return x  # NaN
    return math.copysign(r, x)


@_jit
def erf_scalar_single(x: float) -> float:
    """erf(x) in float64 for a result rounded to float32 (or float16): exp(-x^2) in one call (see
    erfc_tail) and 1 from |x| >= 4 (erfc(4) < 1.6e-8, under half a float32 ulp of 1)."""
    y = abs(x)
    if y <= _c.THRESH:
        r = _erf_small(y)
    elif y < 4.0:
        r = 1.0 - erfc_tail(y, True)
    elif y == y:
        r = 1.0
    else:
        return x  # NaN
    return math.copysign(r, x)


@_jit
def phi_scalar(z: float, single: bool) -> float:
    """The standard normal CDF Phi(z) = (1 + erf(z / sqrt 2)) / 2 with full relative precision in the lower
    tail (there as erfc(-z / sqrt 2) / 2, where 1 + erf would cancel): what GELU multiplies x by."""
    t = z * _c.INV_SQRT_2
    if t < -_c.THRESH:
        return 0.5 * erfc_tail(-t, single)
    return 0.5 + 0.5 * (erf_scalar_single(t) if single else erf_scalar(t))


@_jit
def erf_flat(x, out, single):
    """out[i] = erf(x[i]) over flat arrays, in float64, rounded once to out's type (``single``: float32)."""
    if single:
        for i in range(x.shape[0]):
            out[i] = erf_scalar_single(np.float64(x[i]))
    else:
        for i in range(x.shape[0]):
            out[i] = erf_scalar(np.float64(x[i]))


@_jit
def gelu_rows(x, bias, out, fast, single):
    """out[r, j] = gelu(x[r, j] + bias[j]) over 2-D arrays (bias of length 0: none), in float64 rounded
    once: the erf form x Phi(x) (Phi by erf_cody.phi_scalar: precise in the lower tail), or with ``fast``
    the tanh form
    0.5 x (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3)))."""
    if fast:
        _gelu_tanh(x, bias, out)
    elif single:
        _gelu_erf_single(x, bias, out)
    else:
        _gelu_erf(x, bias, out)


@_jit
def _gelu_tanh(x, bias, out):
    n, m = x.shape
    has_bias = bias.shape[0] > 0
    for r in range(n):
        for j in range(m):
            v = x[r, j] + bias[j] if has_bias else x[r, j]  # rounded to x's type, as a separate Add would
            d = np.float64(v)
            out[r, j] = d * (0.5 * math.tanh(_SQRT_2_OVER_PI * (d + 0.044715 * d * d * d)) + 0.5)


@_jit
def _gelu_erf_single(x, bias, out):
    n, m = x.shape
    has_bias = bias.shape[0] > 0
    for r in range(n):
        for j in range(m):
            v = x[r, j] + bias[j] if has_bias else x[r, j]
            d = np.float64(v)
            out[r, j] = d * phi_scalar(d, True)


@_jit
def _gelu_erf(x, bias, out):
    n, m = x.shape
    has_bias = bias.shape[0] > 0
    for r in range(n):
        for j in range(m):
            v = x[r, j] + bias[j] if has_bias else x[r, j]
            d = np.float64(v)
            out[r, j] = d * phi_scalar(d, False)


@_jit
def layer_norm_rows(x, gamma, beta, eps, out, mean, std):
    """Rows of x (n, m) normalised: out = (x - mean) / std * gamma + beta with std = sqrt(var + eps), the
    mean and the (population) variance of each row in float64 by two passes over the row while it is in
    cache, the result rounded once; gamma/beta of length 0: none. Writes each row's mean and std."""
    n, m = x.shape
    has_g = gamma.shape[0] > 0
    has_b = beta.shape[0] > 0
    for r in range(n):
        s = 0.0
        for j in range(m):
            s += x[r, j]
        mu = s / m
        q = 0.0
        for j in range(m):
            d = x[r, j] - mu
            q += d * d
        sd = math.sqrt(q / m + eps)
        mean[r] = mu
        std[r] = sd
        for j in range(m):
            v = (x[r, j] - mu) / sd
            if has_g:
                v = v * gamma[j]
            if has_b:
                v = v + beta[j]
            out[r, j] = v
