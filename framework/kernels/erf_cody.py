"""W. J. Cody's rational Chebyshev approximation of erf (Math. Comp. 23, 1969, the CALERF scheme): its
coefficients, shared by the numpy erf (framework/ops/erf.py) and the compiled one
(activation_kernels.py).

On ``|x| <= 0.46875`` erf directly; on ``(0.46875, 4]`` and beyond 4 erfc = exp(-x^2) times a rational
function (of x, resp. 1/x^2), with exp(-x^2) split as exp(-r^2) exp(-(x - r)(x + r)), r = x rounded down
to 1/16, so the square's rounding error does not reach the result. In float64: within a few ulps of the
correctly rounded erf.
"""

from __future__ import annotations

# erf on |x| <= 0.46875
A = (3.16112374387056560e00, 1.13864154151050156e02, 3.77485237685302021e02, 3.20937758913846947e03)
A4 = 1.85777706184603153e-1
B = (2.36012909523441209e01, 2.44024637934444173e02, 1.28261652607737228e03, 2.84423683343917062e03)
# erfc on (0.46875, 4]
C = (
    5.64188496988670089e-1,
    8.88314979438837594e00,
    6.61191906371416295e01,
    2.98635138197400131e02,
    8.81952221241769090e02,
    1.71204761263407058e03,
    2.05107837782607147e03,
    1.23033935479799725e03,
)
C8 = 2.15311535474403846e-8
D = (
    1.57449261107098347e01,
    1.17693950891312499e02,
    5.37181101862009858e02,
    1.62138957456669019e03,
    3.29079923573345963e03,
    4.36261909014324716e03,
    3.43936767414372164e03,
    1.23033935480374942e03,
)
# erfc beyond 4
P = (
    3.05326634961232344e-1,
    3.60344899949804439e-1,
    1.25781726111229246e-1,
    1.60837851487422766e-2,
    6.58749161529837803e-4,
)
P5 = 1.63153871373020978e-2
Q = (
    2.56852019228982242e00,
    1.87295284992346725e00,
    5.27905102951428412e-1,
    6.05183413124413191e-2,
    2.33520497626869185e-3,
)
INV_SQRT_PI = 5.6418958354775628695e-1
INV_SQRT_2 = 0.70710678118654752440
THRESH = 0.46875
ONE_BEYOND = 6.0  # erfc(6) < 2.2e-17: erf rounds to 1 in float64 from here on


BIG = 26.6  # erfc underflows to 0 in float64 from here on
