"""The numba kernels behind framework/kernels/recurrent.py (see its doc): LSTM, GRU and plain RNN cells over
a whole sequence, one compiled loop per layer and direction. Imported only when first needed.

Each step is one GEMM of the previous hidden state by the transposed recurrence weights, a contiguous
[hidden, G * hidden] copy (``np.dot``, which numba lowers to BLAS's sgemm; OpenBLAS runs these small-M
products three times slower on a transposed operand), and one pass over the gates computing the
nonlinearities and the state update, the new hidden state written straight into its slot of the output
sequence. Everything is float32 and
batch-major: states [batch, hidden], gates [batch, G * hidden], the projected inputs [steps, batch, G *
hidden].

The nonlinearities are plain arithmetic, so LLVM vectorizes the gate loops (it cannot vectorize calls to
libm's tanhf/expf). tanh is a rational minimax approximation on [-7.9053, 7.9053] (beyond which float32
tanh rounds to +-1): tanh(x) = x P(x^2) / Q(x^2), P of degree 6 and Q of degree 3, the coefficients of the
one Eigen publishes for float; its error is under 4e-7 (a few ulp). sigmoid(x) = 1 / (1 + exp(-x)), so a
sigmoid near 0 keeps its relative precision (0.5 tanh(x / 2) + 0.5 would lose it to cancellation, and a
GRU's (1 - z) with it); exp(x) = 2^n exp(r), n = round(x / ln 2), r = x - n ln 2 in two parts (Cody and
Waite), exp(r) by its Taylor polynomial of degree 7 (relative error under 1e-8 on |r| <= ln 2 / 2), 2^n
built from its bits.
"""

from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import types
from numba.extending import intrinsic

from framework.kernels import cached_jit

_FM = {"contract", "nnan", "ninf", "nsz", "arcp"}
_jit = cached_jit.njit(cache=True, fastmath=_FM, nogil=True, boundscheck=False, error_model="numpy")
_inl = cached_jit.njit(cache=True, fastmath=_FM, nogil=True, boundscheck=False, error_model="numpy", inline="always")

_F = np.float32
_CLAMP = _F(7.90531110763549805)
_P1, _P3, _P5, _P7 = (
    _F(4.89352455891786e-03),
    _F(6.37261928875436e-04),
    _F(1.48572235717979e-05),
    _F(5.12229709037114e-08),
)
_P9, _P11, _P13 = _F(-8.60467152213735e-11), _F(2.00018790482477e-13), _F(-2.76076847742355e-16)
_Q0, _Q2, _Q4, _Q6 = (
    _F(4.89352518554385e-03),
    _F(2.26843463243900e-03),
    _F(1.18534705686654e-04),
    _F(1.19825839466702e-06),
)
_HALF, _ONE, _ZERO = _F(0.5), _F(1.0), _F(0.0)
_LOG2E, _LN2_HI, _LN2_LO = _F(1.44269504088896341), _F(0.693359375), _F(-2.12194440e-4)
_EXP_LO, _EXP_HI = _F(-87.0), _F(88.0)  # 2^n stays a normal float32: n in [-126, 127]
_E2, _E3, _E4, _E5, _E6, _E7 = (_F(1.0 / f) for f in (2.0, 6.0, 24.0, 120.0, 720.0, 5040.0))


@intrinsic
def _int_bits_as_float(typingctx, bits):
    """The float32 whose IEEE-754 bits are the int32 ``bits`` (an LLVM bitcast)."""
    sig = types.float32(types.int32)

    def codegen(context, builder, signature, args):
        return builder.bitcast(args[0], ir.FloatType())

    return sig, codegen


@_inl
def exp(x):  # pragma: no cover - compiled
    x = min(max(x, _EXP_LO), _EXP_HI)
    n = np.floor(x * _LOG2E + _HALF)
    r = x - n * _LN2_HI - n * _LN2_LO
    p = ((((((_E7 * r + _E6) * r + _E5) * r + _E4) * r + _E3) * r + _E2) * r + _ONE) * r + _ONE
    return p * _int_bits_as_float((np.int32(n) + np.int32(127)) << np.int32(23))


@_inl
def tanh(x):  # pragma: no cover - compiled
    x = min(max(x, -_CLAMP), _CLAMP)
    t = x * x
    p = ((((((_P13 * t + _P11) * t + _P9) * t + _P7) * t + _P5) * t + _P3) * t + _P1) * x
    q = ((_Q6 * t + _Q4) * t + _Q2) * t + _Q0
    return p / q


@_inl
def sigmoid(x):  # pragma: no cover - compiled
    return _ONE / (_ONE + exp(-x))


@_inl
def _clip(v, clip):  # pragma: no cover - compiled
    return min(max(v, -clip), clip) if clip > _ZERO else v


@_jit
def lstm_step(g, xt, bias, p, c, out, clip, input_forget, oi, oo, of, oc):  # pragma: no cover - compiled
    """One LSTM step after the recurrence GEMM: g [B, 4H] holds h_{t-1} R^T, xt [B, 4H] the projected input,
    bias [4H] the summed biases; the gates i, o, f, c start at columns oi, oo, of, oc of each row. Peepholes
    p [3H] (Pi, Po, Pf; size 0: none). Updates the cell state c [B, H] in place, writes h_t to out [B, H].
    Pre-activations are clipped to [-clip, clip] when clip > 0; with input_forget f = 1 - i. (The gates are
    read through slices: indexing with a runtime offset keeps LLVM from vectorizing the loop, as numba tests
    such an index for negative wraparound.)"""
    n, hsz = c.shape
    peep = p.shape[0] > 0
    pi, po, pf = p[:hsz], p[hsz : 2 * hsz], p[2 * hsz :]  # empty without peepholes (then never read)
    bi, bo, bf, bc = bias[oi : oi + hsz], bias[oo : oo + hsz], bias[of : of + hsz], bias[oc : oc + hsz]
    for b in range(n):
        gb, xb, cb, hb = g[b], xt[b], c[b], out[b]
        gi, go, gf, gc = gb[oi : oi + hsz], gb[oo : oo + hsz], gb[of : of + hsz], gb[oc : oc + hsz]
        xi, xo, xf, xc = xb[oi : oi + hsz], xb[oo : oo + hsz], xb[of : of + hsz], xb[oc : oc + hsz]
        for j in range(hsz):
            c_prev = cb[j]
            vi = gi[j] + xi[j] + bi[j]
            vf = gf[j] + xf[j] + bf[j]
            vo = go[j] + xo[j] + bo[j]
            if peep:
                vi += pi[j] * c_prev
                vf += pf[j] * c_prev
            i = sigmoid(_clip(vi, clip))
            f = _ONE - i if input_forget else sigmoid(_clip(vf, clip))
            cn = f * c_prev + i * tanh(_clip(gc[j] + xc[j] + bc[j], clip))
            if peep:
                vo += po[j] * cn
            cb[j] = cn
            hb[j] = sigmoid(_clip(vo, clip)) * tanh(cn)


@_jit
def lstm_seq(xw, rt, bias, p, h0, c, y, k, reverse, clip, input_forget, oi, oo, of, oc, g):  # pragma: no cover
    """A whole LSTM direction: xw [T, B, 4H] projected inputs, rt [H, 4H] recurrence weights (R^T), h0 [B, H] the
    initial hidden state, c [B, H] the cell state (initial in, final out); writes h_t to y[t, k] ([T, D, B, H])
    in time order (backwards when reverse). g [B, 4H] is scratch. See lstm_step for the rest."""
    steps = xw.shape[0]
    prev = h0
    for s in range(steps):
        t = steps - 1 - s if reverse else s
        np.dot(prev, rt, g)
        out = y[t, k]
        lstm_step(g, xw[t], bias, p, c, out, clip, input_forget, oi, oo, of, oc)
        prev = out


@_jit
def gru_gates(g, xt, bias, zr, clip):  # pragma: no cover - compiled
    """z and r of a GRU step (ONNX's order z, r, h): zr[b, :2H] = sigmoid(g + xt + bias) over the first 2H
    columns of g [B, >=2H], xt [B, 3H] and bias [3H] (clipped when clip > 0)."""
    n, cols = zr.shape
    for b in range(n):
        gb, xb, zb = g[b], xt[b], zr[b]
        for j in range(cols):
            zb[j] = sigmoid(_clip(gb[j] + xb[j] + bias[j], clip))


@_jit
def gru_update(zr, rh, xt, bias, rbh, hprev, out, clip, linear_before_reset):  # pragma: no cover - compiled
    """The rest of a GRU step: with linear_before_reset, rh [B, >=3H] holds h_{t-1} R^T (its last H columns
    are used) and h~ = tanh(x_h + b_h + r * (rh + rbh)); without, rh [B, H] holds (r * h_{t-1}) R_h^T and
    h~ = tanh(x_h + b_h + rh). out = h~ + z * (h_{t-1} - h~)."""
    n, hsz = hprev.shape
    base = 2 * hsz if linear_before_reset else 0
    bh, rbh_ = bias[2 * hsz :], rbh[:hsz]
    for b in range(n):
        zb, xh, hb, ob = zr[b], xt[b][2 * hsz :], hprev[b], out[b]
        rb, r_ = rh[b][base : base + hsz], zr[b][hsz:]
        for j in range(hsz):
            if linear_before_reset:
                v = xh[j] + bh[j] + r_[j] * (rb[j] + rbh_[j])
            else:
                v = xh[j] + bh[j] + rb[j]
            hh = tanh(_clip(v, clip))
            ob[j] = hh + zb[j] * (hb[j] - hh)


@_jit
def reset_hidden(zr, hprev, rhp):  # pragma: no cover - compiled
    """rhp = r * h_{t-1}, r the last H columns of zr [B, 2H]."""
    n, hsz = hprev.shape
    for b in range(n):
        r_, hb, ob = zr[b][hsz:], hprev[b], rhp[b]
        for j in range(hsz):
            ob[j] = r_[j] * hb[j]


@_jit
def gru_seq(xw, rt, rt_zr, rt_h, bias, rbh, h0, y, k, reverse, clip, lbr, g, zr, gh, rhp):  # pragma: no cover
    """A whole GRU direction (gates z, r, h): xw [T, B, 3H], rt [H, 3H] = R^T (rt_zr [H, 2H], rt_h [H, H]
    the transposes of R's first 2H and last H rows), bias [3H] every bias added outside the reset gate,
    rbh [H] the recurrence bias of h (used when lbr, ONNX's linear_before_reset); h_t to y[t, k]. Scratch:
    g [B, 3H], zr [B, 2H], gh [B, H], rhp [B, H]."""
    steps = xw.shape[0]
    prev = h0
    for s in range(steps):
        t = steps - 1 - s if reverse else s
        out = y[t, k]
        xt = xw[t]
        if lbr:  # linear_before_reset
            np.dot(prev, rt, g)
            gru_gates(g, xt, bias, zr, clip)
            gru_update(zr, g, xt, bias, rbh, prev, out, clip, True)
        else:
            np.dot(prev, rt_zr, zr)
            gru_gates(zr, xt, bias, zr, clip)
            reset_hidden(zr, prev, rhp)
            np.dot(rhp, rt_h, gh)
            gru_update(zr, gh, xt, bias, rbh, prev, out, clip, False)
        prev = out


@_jit
def rnn_step(g, xt, bias, out, clip, act):  # pragma: no cover - compiled
    """out = f(g + xt + bias), f tanh (act 0), relu (1) or sigmoid (2), the argument clipped when clip > 0."""
    n, hsz = out.shape
    for b in range(n):
        gb, xb, ob = g[b], xt[b], out[b]
        for j in range(hsz):
            v = _clip(gb[j] + xb[j] + bias[j], clip)
            if act == 0:
                ob[j] = tanh(v)
            elif act == 1:
                ob[j] = max(v, _ZERO)
            else:
                ob[j] = sigmoid(v)


@_jit
def rnn_seq(xw, rt, bias, h0, y, k, reverse, clip, act, g):  # pragma: no cover - compiled
    """A whole plain-RNN direction: xw [T, B, H], rt [H, H] = R^T; h_t to y[t, k]; g [B, H] scratch."""
    steps = xw.shape[0]
    prev = h0
    for s in range(steps):
        t = steps - 1 - s if reverse else s
        np.dot(prev, rt, g)
        out = y[t, k]
        rnn_step(g, xw[t], bias, out, clip, act)
        prev = out


@_jit
def lstm_unit(x, c_prev, h, c, forget_bias):  # pragma: no cover - compiled
    """Caffe2's LSTMUnit on every row: x [N, 4D] pre-activations in Caffe2's order i, f, o, g; c = sigmoid(x_f
    + forget_bias) * c_prev + sigmoid(x_i) * tanh(x_g), h = sigmoid(x_o) * tanh(c) ([N, D] each; c may be
    c_prev itself)."""
    n, d = c.shape
    for b in range(n):
        xb, cp, cb, hb = x[b], c_prev[b], c[b], h[b]
        xi, xf, xo, xg = xb[:d], xb[d : 2 * d], xb[2 * d : 3 * d], xb[3 * d :]
        for j in range(d):
            cn = sigmoid(xf[j] + forget_bias) * cp[j] + sigmoid(xi[j]) * tanh(xg[j])
            cb[j] = cn
            hb[j] = sigmoid(xo[j]) * tanh(cn)


@_jit
def lstm_unit_grad(x, c_prev, c, dh, dc, dh_prev, dc_prev, dx, forget_bias):  # pragma: no cover - compiled
    """The gradient of lstm_unit on every row: from the gates x [N, 4D], c_prev and the forward's c, and the
    output gradients dh, dc ([N, D]), writes dc_prev = c_term * f and dh_prev = 0 ([N, D]) and dx [N, 4D]
    (i, f, o, g), c_term = dh * o * (1 - tanh(c)^2) + dc. Each element's inputs are read before its outputs
    are written, so an output may be the same array as an input."""
    n, d = c.shape
    for b in range(n):
        xb, dxb = x[b], dx[b]
        xi, xf, xo, xg = xb[:d], xb[d : 2 * d], xb[2 * d : 3 * d], xb[3 * d :]
        dxi, dxf, dxo, dxg = dxb[:d], dxb[d : 2 * d], dxb[2 * d : 3 * d], dxb[3 * d :]
        cp, cb, dhb, dcb, dhp, dcp = c_prev[b], c[b], dh[b], dc[b], dh_prev[b], dc_prev[b]
        for j in range(d):
            i = sigmoid(xi[j])
            f = sigmoid(xf[j] + forget_bias)
            o = sigmoid(xo[j])
            g = tanh(xg[j])
            tc = tanh(cb[j])
            cpj, dhj = cp[j], dhb[j]
            ct = dhj * o * (_ONE - tc * tc) + dcb[j]
            dcp[j] = ct * f
            dhp[j] = _ZERO
            dxi[j] = ct * g * i * (_ONE - i)
            dxf[j] = ct * cpj * f * (_ONE - f)
            dxo[j] = dhj * tc * o * (_ONE - o)
            dxg[j] = ct * i * (_ONE - g * g)
