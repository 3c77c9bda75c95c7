"""erf in numpy, the one every op uses (Erf, Gelu and their gradients): the same numbers on every install.

numpy has no erf ufunc; scipy's would make results depend on whether scipy is installed. This is
W. J. Cody's rational Chebyshev approximation (Math. Comp. 23, 1969, the CALERF scheme): on
``|x| <= 0.46875`` erf directly, on ``(0.46875, 4]`` and beyond 4 erfc = exp(-x^2) times a rational
function (of x, resp. 1/x^2), with exp(-x^2) split as exp(-r^2) exp(-(x - r)(x + r)), r = x rounded
down to 1/16, so the square's rounding error does not reach the result. Computed in float64: within a
few float64 ulps of the correctly rounded erf, and float32 (float16) results are float64's rounded once.

Where numba is installed, float32/float64 arrays go through the compiled one-pass form of the same
approximation (framework/kernels/activation_jit.py); float32 results are the same numbers.
"""

from __future__ import annotations

import numpy as np

from framework.kernels import activation_jit
from framework.kernels import erf_cody as _c


def _small(y: np.ndarray) -> np.ndarray:
    """erf(y), |y| <= 0.46875."""
    ysq = y * y
    num, den = _c.A4 * ysq, ysq.copy()
    for a, b in zip(_c.A[:3], _c.B[:3]):
        num += a
        num *= ysq
        den += b
        den *= ysq
    return y * (num + _c.A[3]) / (den + _c.B[3])


def _exp_neg_square(y: np.ndarray) -> np.ndarray:
    """exp(-y^2) without the rounding error of y^2."""
    r = np.trunc(y * 16.0) / 16.0
    return np.exp(-r * r) * np.exp(-(y - r) * (y + r))


def _mid(y: np.ndarray) -> np.ndarray:
    """erfc(y), 0.46875 < y <= 4."""
    num, den = _c.C8 * y, y.copy()
    for c, d in zip(_c.C[:7], _c.D[:7]):
        num += c
        num *= y
        den += d
        den *= y
    return _exp_neg_square(y) * ((num + _c.C[7]) / (den + _c.D[7]))


def _large(y: np.ndarray) -> np.ndarray:
    """erfc(y), 4 < y < 6 (erf rounds to 1 beyond)."""
    z = 1.0 / (y * y)
    num, den = _c.P5 * z, z.copy()
    for p, q in zip(_c.P[:4], _c.Q[:4]):
        num += p
        num *= z
        den += q
        den *= z
    r = z * (num + _c.P[4]) / (den + _c.Q[4])
    return _exp_neg_square(y) * ((_c.INV_SQRT_PI - r) / y)


_JIT_MIN = 64  # below this many elements the numpy path's fixed cost is smaller than a compiled call's


def erf(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """erf of each element of ``x`` (a float array; others are taken as float64), written into ``out``
    when given (which may be ``x`` itself) and returned. erf(-x) = -erf(x) (-0.0 included), erf(+-inf) =
    +-1, NaN stays NaN."""
    x = np.asarray(x)
    if x.size >= _JIT_MIN and (out is None or (out.shape == x.shape and out.dtype == x.dtype)):
        res = np.empty_like(x) if out is None else out
        if activation_jit.fits(x, res) and activation_jit.erf(x, res):
            return res
    xd = x.astype(np.float64, copy=x.dtype != np.float64)
    y = np.abs(xd)
    res = np.full(y.shape, np.nan)
    with np.errstate(under="ignore", over="ignore"):
        m = y <= _c.THRESH
        res[m] = _small(y[m])
        m = (y > _c.THRESH) & (y <= 4.0)
        res[m] = (0.5 - _mid(y[m])) + 0.5
        m = (y > 4.0) & (y < _c.ONE_BEYOND)
        res[m] = (0.5 - _large(y[m])) + 0.5
        res[y >= _c.ONE_BEYOND] = 1.0
    np.copysign(res, xd, out=res)
    if out is None:
        return res.astype(x.dtype if x.dtype.kind == "f" else np.float64, copy=False)
    np.copyto(out, res, casting="unsafe")
    return out
