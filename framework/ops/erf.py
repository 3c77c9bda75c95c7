"""erf in numpy, the one every op uses (Erf, Gelu and their gradients): the same numbers on every install.

numpy has no erf ufunc; scipy's would make results depend on whether scipy is installed. This is
W. J. Cody's rational Chebyshev approximation (Math. Comp. 23, 1969, the CALERF scheme): on
``|x| <= 0.46875`` erf directly, on ``(0.46875, 4]`` and beyond 4 erfc = exp(-x^2) times a rational
function (of x, resp. 1/x^2), with exp(-x^2) split as exp(-r^2) exp(-(x - r)(x + r)), r = x rounded
down to 1/16, so the square's rounding error does not reach the result. Computed in float64: within a
few float64 ulps of the correctly rounded erf, and float32 (float16) results are float64's rounded once.
"""

from __future__ import annotations

import numpy as np

# Cody's coefficients (erf on |x| <= 0.46875; erfc on (0.46875, 4]; erfc beyond 4).
_A = (3.16112374387056560e00, 1.13864154151050156e02, 3.77485237685302021e02, 3.20937758913846947e03)
_A4 = 1.85777706184603153e-1
_B = (2.36012909523441209e01, 2.44024637934444173e02, 1.28261652607737228e03, 2.84423683343917062e03)
_C = (
    5.64188496988670089e-1,
    8.88314979438837594e00,
    6.61191906371416295e01,
    2.98635138197400131e02,
    8.81952221241769090e02,
    1.71204761263407058e03,
    2.05107837782607147e03,
    1.23033935479799725e03,
)
_C8 = 2.15311535474403846e-8
_D = (
    1.57449261107098347e01,
    1.17693950891312499e02,
    5.37181101862009858e02,
    1.62138957456669019e03,
    3.29079923573345963e03,
    4.36261909014324716e03,
    3.43936767414372164e03,
    1.23033935480374942e03,
)
_P = (
    3.05326634961232344e-1,
    3.60344899949804439e-1,
    1.25781726111229246e-1,
    1.60837851487422766e-2,
    6.58749161529837803e-4,
)
_P5 = 1.63153871373020978e-2
_Q = (
    2.56852019228982242e00,
    1.87295284992346725e00,
    5.27905102951428412e-1,
    6.05183413124413191e-2,
    2.33520497626869185e-3,
)
_INV_SQRT_PI = 5.6418958354775628695e-1
_THRESH = 0.46875
_ONE_BEYOND = 6.0  # erfc(6) < 2.2e-17: erf rounds to 1 in float64 from here on


def _small(y: np.ndarray) -> np.ndarray:
    """erf(y), |y| <= 0.46875."""
    ysq = y * y
    num, den = _A4 * ysq, ysq.copy()
    for a, b in zip(_A[:3], _B[:3]):
        num += a
        num *= ysq
        den += b
        den *= ysq
    return y * (num + _A[3]) / (den + _B[3])


def _exp_neg_square(y: np.ndarray) -> np.ndarray:
    """exp(-y^2) without the rounding error of y^2."""
    r = np.trunc(y * 16.0) / 16.0
    return np.exp(-r * r) * np.exp(-(y - r) * (y + r))


def _mid(y: np.ndarray) -> np.ndarray:
    """erfc(y), 0.46875 < y <= 4."""
    num, den = _C8 * y, y.copy()
    for c, d in zip(_C[:7], _D[:7]):
        num += c
        num *= y
        den += d
        den *= y
    return _exp_neg_square(y) * ((num + _C[7]) / (den + _D[7]))


def _large(y: np.ndarray) -> np.ndarray:
    """erfc(y), 4 < y <= _ONE_BEYOND."""
    z = 1.0 / (y * y)
    num, den = _P5 * z, z.copy()
    for p, q in zip(_P[:4], _Q[:4]):
        num += p
        num *= z
        den += q
        den *= z
    r = z * (num + _P[4]) / (den + _Q[4])
    return _exp_neg_square(y) * ((_INV_SQRT_PI - r) / y)


def erf(x: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
    """erf of each element of ``x`` (a float array; others are taken as float64), written into ``out``
    when given (which may be ``x`` itself) and returned. erf(-x) = -erf(x) (-0.0 included), erf(+-inf) =
    +-1, NaN stays NaN."""
    x = np.asarray(x)
    xd = x.astype(np.float64, copy=x.dtype != np.float64)
    y = np.abs(xd)
    res = np.full(y.shape, np.nan)
    with np.errstate(under="ignore", over="ignore"):
        m = y <= _THRESH
        res[m] = _small(y[m])
        m = (y > _THRESH) & (y <= 4.0)
        res[m] = (0.5 - _mid(y[m])) + 0.5
        m = (y > 4.0) & (y < _ONE_BEYOND)
        res[m] = (0.5 - _large(y[m])) + 0.5
        res[y >= _ONE_BEYOND] = 1.0
    np.copysign(res, xd, out=res)
    if out is None:
        return res.astype(x.dtype if x.dtype.kind == "f" else np.float64, copy=False)
    np.copyto(out, res, casting="unsafe")
    return out
