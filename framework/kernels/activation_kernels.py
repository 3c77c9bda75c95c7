"""The compiled (numba) one-pass kernels of activation_jit.py: erf, GELU (erf and tanh forms, with an
optional bias added first) and LayerNorm over the last axis. Imported only through activation_jit, under
the kernels' numba cache folder.

Results rounded to float32 come from a branch-free form LLVM vectorizes (a select between Cody's two
regions, exp(-y^2) by its own range reduction and polynomial instead of a libm call); float64 results
from the scalar form with the numpy erf's steps.
"""

from __future__ import annotations

import math

import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from framework.kernels import cached_jit
from framework.kernels import erf_cody as _c

# error_model numpy: a division by zero gives inf/NaN instead of a Python exception check, which would
# stop the loops vectorizing
_jit = cached_jit.njit(cache=True, nogil=True, boundscheck=False, error_model="numpy")
# the scalar pieces inlined into the loops in numba's IR, so LLVM sees one straight-line body to vectorize
_inline = cached_jit.njit(nogil=True, boundscheck=False, error_model="numpy", inline="always")

_SQRT_2_OVER_PI = math.sqrt(2.0 / math.pi)
_LOG2E = 1.4426950408889634
_LN2_HI = 6.93147180369123816490e-01  # ln 2 in 32 bits: n * _LN2_HI is exact for the n used here
_LN2_LO = 1.90821492927058770002e-10
_TAIL_END = 10.5  # erfc(10.5) < 1e-49: beyond it x Phi(x) is 0 in float32


@intrinsic
def _two_to_minus(typingctx, n):
    """2.0 ** -n as a float64 for an int64 0 <= n <= 1022, its exponent field written directly (a shift
    and a bit cast, which vectorize; no loop over n's bits)."""
    if not isinstance(n, types.Integer):
        return None

    def codegen(context, builder, signature, args):
        i64 = ir.IntType(64)
        biased = builder.sub(ir.Constant(i64, 1023), args[0])
        return builder.bitcast(builder.shl(biased, ir.Constant(i64, 52)), ir.DoubleType())

    return types.float64(types.int64), codegen


@_inline
def _exp_neg(s):
    """exp(-s) for 0 <= s <= 128, branch-free: exp(-s) = 2^-n exp(r), n = s / ln 2 rounded, |r| <= ln 2 / 2,
    exp(r) by its Taylor series to r^11 (relative error below 1e-14), 2^-n exact from n's bits."""
    n = np.floor(s * _LOG2E + 0.5)
    r = (n * _LN2_HI - s) + n * _LN2_LO
    p = 1.0 / 39916800.0
    for k in range(10, -1, -1):
        p = p * r + _INV_FACT[k]
    return p * _two_to_minus(np.int64(n))


_INV_FACT = tuple(1.0 / math.factorial(k) for k in range(11))


@_inline
def _erf_small(y):
    """erf(y), 0 <= y <= THRESH."""
    ysq = y * y
    num = ((_c.A4 * ysq + _c.A[0]) * ysq + _c.A[1]) * ysq
    num = (num + _c.A[2]) * ysq + _c.A[3]
    den = (((ysq + _c.B[0]) * ysq + _c.B[1]) * ysq + _c.B[2]) * ysq + _c.B[3]
    return y * num / den


@_inline
def _mid_ratio(y):
    """erfc(y) exp(y^2), THRESH < y <= 4."""
    num = _c.C8 * y
    den = y
    for i in range(7):
        num = (num + _c.C[i]) * y
        den = (den + _c.D[i]) * y
    return (num + _c.C[7]) / (den + _c.D[7])


@_inline
def _large_ratio(y):
    """erfc(y) exp(y^2), y > 4."""
    z = 1.0 / (y * y)
    num = _c.P5 * z
    den = z
    for i in range(4):
        num = (num + _c.P[i]) * z
        den = (den + _c.Q[i]) * z
    return (_c.INV_SQRT_PI - z * (num + _c.P[4]) / (den + _c.Q[4])) / y


@_inline
def _small_terms(y, w):
    """(numerator, denominator) of erf(y) on |y| <= THRESH (w = y^2)."""
    num = ((((_c.A4 * w + _c.A[0]) * w + _c.A[1]) * w + _c.A[2]) * w + _c.A[3]) * y
    den = (((w + _c.B[0]) * w + _c.B[1]) * w + _c.B[2]) * w + _c.B[3]
    return num, den


@_inline
def _mid_terms(y):
    """(numerator, denominator) of erfc(y) exp(y^2) on (THRESH, 4]."""
    num = _c.C8 * y
    den = y
    for i in range(7):
        num = (num + _c.C[i]) * y
        den = (den + _c.D[i]) * y
    return num + _c.C[7], den + _c.D[7]


@_inline
def _large_terms(y, w):
    """(numerator, denominator) of erfc(y) exp(y^2) beyond 4: Cody's rational function of z = 1 / y^2 with
    numerator and denominator multiplied by y^10, a rational function of w = y^2 (no division for z)."""
    pw = _c.P5 + w * (_c.P[0] + w * (_c.P[1] + w * (_c.P[2] + w * (_c.P[3] + w * _c.P[4]))))
    qw = 1.0 + w * (_c.Q[0] + w * (_c.Q[1] + w * (_c.Q[2] + w * (_c.Q[3] + w * _c.Q[4]))))
    return _c.INV_SQRT_PI * w * qw - pw, w * y * qw


@_inline
def _erf_erfc_single(y):
    """(erf(y) if y <= THRESH, erfc(y) otherwise) for y >= 0 (NaN: NaN), for results in float32: every
    region's numerator and denominator computed, one pair selected and divided once (division is the slow
    vector instruction); erfc is 0 from _TAIL_END."""
    yc = min(y, _TAIL_END)
    w = yc * yc
    ns, ds = _small_terms(yc, w)
    nm, dm = _mid_terms(yc)
    nl, dl = _large_terms(yc, w)
    small = yc <= _c.THRESH
    num = ns if small else (nm if yc <= 4.0 else nl)
    den = ds if small else (dm if yc <= 4.0 else dl)
    q = num / den
    tail = _exp_neg(w) * q
    tail = 0.0 if y >= _TAIL_END else tail
    return q if small else tail


@_inline
def _erf_single(x):
    """erf(x) for a result in float32: 1 from |x| >= 4 (erfc(4) < 1.6e-8, under half a float32 ulp of 1),
    so only Cody's first two regions, one division."""
    y = abs(x)
    yc = min(y, 4.0)
    w = yc * yc
    ns, ds = _small_terms(yc, w)
    nm, dm = _mid_terms(yc)
    small = yc <= _c.THRESH
    q = (ns if small else nm) / (ds if small else dm)
    r = q if small else 1.0 - _exp_neg(w) * q
    r = math.copysign(r, x)
    return r if x == x else x


@_inline
def _phi_single(z):
    """Phi(z) for a result in float32, precise in the lower tail (erfc(-z / sqrt 2) / 2 there)."""
    t = z * _c.INV_SQRT_2
    y = abs(t)
    e = _erf_erfc_single(y)
    if y <= _c.THRESH:
        return 0.5 + 0.5 * math.copysign(e, t)
    return 0.5 * e if t < 0.0 else 1.0 - 0.5 * e


@_inline
def _half_one_plus_tanh(u):
    """(1 + tanh(u)) / 2 = 1 / (1 + exp(-2u)) for a result in float32, branch-free, without cancelling for
    negative u (there exp(2u) / (1 + exp(2u)))."""
    e = _exp_neg(min(2.0 * abs(u), 128.0))
    h = 1.0 / (1.0 + e)
    return h if u >= 0.0 else e * h


@_jit
def _erfc_tail(y):
    """erfc(y) for y > THRESH as the numpy erf computes it (exp(-y^2) split so the square's rounding
    error does not reach the result)."""
    if y >= _c.BIG:
        return 0.0
    ratio = _mid_ratio(y) if y <= 4.0 else _large_ratio(y)
    t = math.trunc(y * 16.0) / 16.0
    return math.exp(-t * t) * math.exp(-(y - t) * (y + t)) * ratio


@_jit
def _erf_double(x):
    """erf(x) of one float64 by the numpy erf's steps. NaN stays NaN; erf(-x) = -erf(x)."""
    y = abs(x)
    if y <= _c.THRESH:
        r = _erf_small(y)
    elif y < _c.ONE_BEYOND:
        r = (0.5 - _erfc_tail(y)) + 0.5
    elif y == y:
        r = 1.0
    else:
        return x
    return math.copysign(r, x)


@_jit
def _phi_double(z):
    t = z * _c.INV_SQRT_2
    if t < -_c.THRESH:
        return 0.5 * _erfc_tail(-t)
    return 0.5 + 0.5 * _erf_double(t)


@_inline
def _erf_loop(x, out, single):
    if single:
        for i in range(x.shape[0]):
            out[i] = _erf_single(np.float64(x[i]))
    else:
        for i in range(x.shape[0]):
            out[i] = _erf_double(np.float64(x[i]))


@_jit
def erf_flat(x, out, single):
    """out[i] = erf(x[i]) over flat arrays that do not overlap, in float64, rounded once to out's type
    (``single``: float32)."""
    _erf_loop(x, out, single)


@_jit
def erf_in_place(x, single):
    """erf_flat writing over ``x``: one array, so LLVM sees each element read and written at the same
    place (two names of one buffer fail its overlap check and the loop runs unvectorized)."""
    _erf_loop(x, x, single)


@_inline
def _gelu_loop(x, bias, out, fast, single):
    n, m = x.shape
    has_bias = bias.shape[0] > 0
    for r in range(n):
        if has_bias:  # x + bias rounded to x's type, as a separate Add would
            for j in range(m):
                out[r, j] = x[r, j] + bias[j]
            src = out
        else:
            src = x
        if fast and single:
            for j in range(m):
                d = np.float64(src[r, j])
                out[r, j] = d * _half_one_plus_tanh(_SQRT_2_OVER_PI * (d + 0.044715 * d * d * d))
        elif fast:
            for j in range(m):
                d = np.float64(src[r, j])
                out[r, j] = d * (0.5 * math.tanh(_SQRT_2_OVER_PI * (d + 0.044715 * d * d * d)) + 0.5)
        elif single:
            for j in range(m):
                d = np.float64(src[r, j])
                out[r, j] = d * _phi_single(d)
        else:
            for j in range(m):
                d = np.float64(src[r, j])
                out[r, j] = d * _phi_double(d)


@_jit
def gelu_rows(x, bias, out, fast, single):
    """out[r, j] = gelu(x[r, j] + bias[j]) over 2-D arrays that do not overlap (bias of length 0: none), in
    float64 rounded once: the erf form x Phi(x) (Phi precise in the lower tail), or with ``fast`` the tanh
    form 0.5 x (1 + tanh(sqrt(2/pi)(x + 0.044715 x^3)))."""
    _gelu_loop(x, bias, out, fast, single)


@_jit
def gelu_rows_in_place(x, bias, fast, single):
    """gelu_rows writing over ``x`` (see erf_in_place)."""
    _gelu_loop(x, bias, x, fast, single)


# the row sums of layer_norm_rows may be reassociated: a strict left-to-right float64 sum is one dependent add
# per element (latency bound, about 4 cycles each), lane-wise partial sums vectorize; the float64 sums differ
# only in their last bits, far below a float32 result's rounding
_jit_sums = cached_jit.njit(cache=True, nogil=True, boundscheck=False, error_model="numpy", fastmath={"reassoc"})


@_jit_sums
def _row_mean_var(x, r):
    """(mean, population variance) of row ``r`` of 2-D ``x`` in float64, by two passes over the row."""
    m = x.shape[1]
    s = 0.0
    for j in range(m):
        s += np.float64(x[r, j])
    mu = s / m
    q = 0.0
    for j in range(m):
        d = np.float64(x[r, j]) - mu
        q += d * d
    return mu, q / m


@_jit
def layer_norm_rows(x, gamma, beta, eps, out, mean, std):
    """Rows of x (n, m) normalised: out = (x - mean) / std * gamma + beta with std = sqrt(var + eps), the
    mean and the (population) variance of each row in float64 by two passes over the row while it is in
    cache (partial sums in any order), the result rounded once; gamma/beta of length 0: none. Writes each
    row's mean and std."""
    n, m = x.shape
    has_g = gamma.shape[0] > 0
    has_b = beta.shape[0] > 0
    for r in range(n):
        mu, var = _row_mean_var(x, r)
        sd = math.sqrt(var + eps)
        mean[r] = mu
        std[r] = sd
        if has_g and has_b:  # one branch-free loop per case, so each vectorizes
            for j in range(m):
                out[r, j] = (x[r, j] - mu) / sd * gamma[j] + beta[j]
        elif has_g:
            for j in range(m):
                out[r, j] = (x[r, j] - mu) / sd * gamma[j]
        elif has_b:
            for j in range(m):
                out[r, j] = (x[r, j] - mu) / sd + beta[j]
        else:
            for j in range(m):
                out[r, j] = (x[r, j] - mu) / sd


# the row maxima may assume no NaN (so they vectorize): a row holding a NaN gets a NaN sum in
# softmax_sum_divide, which then writes the whole row NaN, as numpy's softmax does
_jit_max = cached_jit.njit(cache=True, nogil=True, boundscheck=False, error_model="numpy", fastmath={"reassoc", "nnan"})


@_jit_max
def _row_max(x, r):
    """The largest value of row ``r`` of 2-D ``x`` (meaningless for a row holding a NaN)."""
    m = x[r, 0]
    for j in range(1, x.shape[1]):
        v = x[r, j]
        m = v if v > m else m
    return m


@_jit
def softmax_subtract_max(x):
    """Softmax's first step over the rows of 2-D ``x`` in place: each row minus its maximum, in x's type."""
    for r in range(x.shape[0]):
        mx = _row_max(x, r)
        for j in range(x.shape[1]):
            x[r, j] = x[r, j] - mx


@_jit_sums
def _row_sum(x, r):
    s = 0.0
    for j in range(x.shape[1]):
        s += x[r, j]
    return s


@_jit
def softmax_sum_divide(x):
    """Softmax's last step over the rows of 2-D ``x`` (exp already taken) in place: each row divided by its
    sum (summed in float64, rounded to x's type as a numpy sum of x's type would hold it); a NaN sum makes
    the row NaN."""
    for r in range(x.shape[0]):
        s = _row_sum(x, r)
        if s != s:
            for j in range(x.shape[1]):
                x[r, j] = np.nan
            continue
        d = x.dtype.type(s)
        for j in range(x.shape[1]):
            x[r, j] = x[r, j] / d
