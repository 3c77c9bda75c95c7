"""The numba kernels behind framework/kernels/bn_train.py (see its doc); imported only when first needed.

Arrays are (N, C, P) float32 views of NCHW tensors. Per-channel sums run over each contiguous P run
in float32 (reassociated: vectorized) and are added across images in float64. The per-channel kernels
take a channel range (c0, c1) so that threads can share one call's channels; the elementwise ones are
called on contiguous slices instead.
"""

from __future__ import annotations

import numpy as np
from numba import carray, int32

from framework.kernels import cached_jit, native_pool_kernels, recurrent_cells, simd_ir, window_kernels

# fastmath: reductions may be reassociated (vectorized); results differ from a sequential sum by
# float rounding only. No NaN/inf assumptions are made beyond that ("reassoc", "contract").
_jit = cached_jit.njit(cache=simd_ir.CACHE, fastmath={"reassoc", "contract"}, nogil=True, boundscheck=False)


@_jit
def _moments(x, mean, var, c0, c1):  # pragma: no cover - compiled
    """mean[c] and biased var[c] of x over images and pixels for c0 <= c < c1 (two passes: the variance is
    centered)."""
    n, _, p = x.shape
    cnt = n * p
    for ch in range(c0, c1):
        s = 0.0
        for i in range(n):
            acc = np.float32(0)
            for j in range(p):
                acc += x[i, ch, j]
            s += acc
        m = s / cnt
        mf = np.float32(m)
        v = 0.0
        for i in range(n):
            acc = np.float32(0)
            for j in range(p):
                d = x[i, ch, j] - mf
                acc += d * d
            v += acc
        mean[ch] = mf
        var[ch] = np.float32(v / cnt)
    return 0


@_jit
def _grad_sums(x, dy, mean, dbias, dxc, c0, c1):  # pragma: no cover - compiled
    """dbias[c] = sum dy; dxc[c] = sum dy * (x - mean[c]) over images and pixels, for c0 <= c < c1."""
    n, _, p = x.shape
    for ch in range(c0, c1):
        mf = mean[ch]
        s1 = 0.0
        s2 = 0.0
        for i in range(n):
            a1 = np.float32(0)
            a2 = np.float32(0)
            for j in range(p):
                g = dy[i, ch, j]
                a1 += g
                a2 += g * (x[i, ch, j] - mf)
            s1 += a1
            s2 += a2
        dbias[ch] = np.float32(s1)
        dxc[ch] = np.float32(s2)
    return 0


@_jit
def _affine2(dy, x, k1, k2, k3, dx):  # pragma: no cover - compiled
    """dx[n, c, :] = k1[c] * dy[n, c, :] + k2[c] * x[n, c, :] + k3[c] (dx may be dy)."""
    n, c, p = x.shape
    for i in range(n):
        for ch in range(c):
            a, b, d = k1[ch], k2[ch], k3[ch]
            for j in range(p):
                dx[i, ch, j] = a * dy[i, ch, j] + b * x[i, ch, j] + d
    return 0


@_jit
def _relu_grad(y, dy, dx):  # pragma: no cover - compiled
    """dx = dy * (y > 0) over flat arrays (as numpy's multiply by the mask: a NaN in dy stays NaN);
    branch-free, so it vectorizes. dx must not be dy (see _relu_grad_inplace)."""
    zero = np.float32(0)
    for j in range(y.size):
        dx[j] = dy[j] * np.float32(y[j] > zero)
    return 0


@_jit
def _relu_grad_inplace(y, d):  # pragma: no cover - compiled
    """d *= (y > 0): the in-place form (two distinct arrays, so LLVM need not fall back to a scalar loop
    for a possible overlap)."""
    zero = np.float32(0)
    for j in range(y.size):
        d[j] = d[j] * np.float32(y[j] > zero)
    return 0


@_jit
def _max_pool_grad(x, y, dy, dx, kh, kw, sh, sw, ph, pw, dh, dw):  # pragma: no cover - compiled
    """dx of a 2-D max pooling over (P, H, W) planes (y, dy: (P, OH, OW)): dx = 0, then for each row of
    windows, kernel offset by kernel offset, ``dx += dy * (x == y)`` over the windows' cells inside the input
    (pads ph, pw before the first row and column; the window's cells ``dh``/``dw`` apart). The columns of
    windows whose cell at an offset lies inside the input are computed first, so the inner loop has no
    branch."""
    planes, h, w = x.shape
    _, oh, ow = y.shape
    zero = np.float32(0)
    for q in range(planes):
        for i in range(h):
            for j in range(w):
                dx[q, i, j] = zero
        for oi in range(oh):
            h0 = oi * sh - ph
            for ki in range(kh):
                i = h0 + ki * dh
                if i < 0 or i >= h:
                    continue
                for kj in range(kw):
                    off = kj * dw - pw
                    lo = 0 if off >= 0 else (sw - 1 - off) // sw  # first oj with oj * sw + off >= 0
                    hi = min(ow, (w - off + sw - 1) // sw)  # past the last oj with oj * sw + off < w
                    for oj in range(lo, hi):
                        j = oj * sw + off
                        dx[q, i, j] += dy[q, oi, oj] * np.float32(x[q, i, j] == y[q, oi, oj])
    return 0


# No fastmath: the update must give numpy's float32 values bit for bit (no contraction into FMAs).
_exact = cached_jit.njit(cache=simd_ir.CACHE, nogil=True, boundscheck=False)


@_exact
def _momentum_update(g, m, p, lr, mu, nesterov):  # pragma: no cover - compiled
    """In place over flat float32 arrays (Caffe2's momentum_sgd_update): m = mu m + lr g; g = the step
    (m, or lr g + mu m with Nesterov); p -= g. Each value computed as numpy's passes compute it."""
    for j in range(g.size):
        lg = lr * g[j]
        nm = m[j] * mu + lg
        step = lg + nm * mu if nesterov else nm
        m[j] = nm
        g[j] = step
        p[j] = p[j] - step
    return 0


@_exact
def _bn_finish(sm, bvar, scale, bias, siv, alpha, beta, rm, rv, eps, mom, one_m, unbias_1m, c0, c1):
    """Training SpatialBN's per-channel values once the batch moments (sm, bvar) are known, for c0 <= c < c1, as
    numpy's float32 passes compute them: siv = 1 / sqrt(bvar + eps); alpha = scale siv; beta = bias - sm alpha
    (Y = X alpha + beta); the running statistics rm = rm mom + sm (1 - mom), rv = rv mom + bvar (unbias (1 - mom))."""
    one = np.float32(1)
    for ch in range(c0, c1):
        s = one / np.sqrt(bvar[ch] + eps)
        siv[ch] = s
        a = scale[ch] * s
        alpha[ch] = a
        beta[ch] = bias[ch] - sm[ch] * a
        rm[ch] = rm[ch] * mom + sm[ch] * one_m
        rv[ch] = rv[ch] * mom + bvar[ch] * unbias_1m
    return 0


@_exact
def _bn_grad_finish(scale, mean, rstd, dscale, dbias, k1, k2, k3, neg_inv_n, c0, c1):
    """Training SpatialBNGradient's per-channel values once ``dbias`` (sum dY) and ``k2`` (sum dY (X - mean)) are
    known, for c0 <= c < c1, as numpy's float32 passes compute them: dscale = k2 rstd, and the coefficients of
    dX = k1 dY + k2 X + k3 (the expansion of scale rstd (dY - dbias / n - xhat dscale / n)): k1 = scale rstd,
    k2 = -scale rstd^2 dscale / n, k3 = -scale rstd dbias / n - k2 mean."""
    for ch in range(c0, c1):
        r = rstd[ch]
        ds = k2[ch] * r
        dscale[ch] = ds
        a = scale[ch] * r
        k1[ch] = a
        b = ds * r * a * neg_inv_n
        k2[ch] = b
        k3[ch] = a * dbias[ch] * neg_inv_n - b * mean[ch]
    return 0


@_exact
def _scatter_phase(dx, src, y0, x0, sh, sw, hr, wr, p0, p1, zero):  # pragma: no cover - compiled
    """dx[q, y0 + i sh, x0 + j sw] = src[q, i, j] (or 0 where ``zero``) for planes p0 <= q < p1, i < hr, j < wr."""
    z = np.float32(0)
    for q in range(p0, p1):
        for i in range(hr):
            y = y0 + i * sh
            if zero:
                for j in range(wr):
                    dx[q, y, x0 + j * sw] = z
            else:
                for j in range(wr):
                    dx[q, y, x0 + j * sw] = src[q, i, j]
    return 0


# Native tasks (native_pool): each reads up to twelve arrays (slot A + 4 * i: address and three sizes, unused
# ones 1), up to 64 scalars (S: int64, or float64 bits) and its task's row range (RANGES + 2 * k), and runs its
# kernel there.
A, S, RANGES = 1, 49, 113
PHASES = 11  # of _task_scatter_phases: dX, then one array per phase


@_jit
def _arrays(block, k):  # pragma: no cover - compiled
    """(the block, task k's rows i0, i1, the block's first three arrays)."""
    b = native_pool_kernels.block_of(block)
    f32_3 = native_pool_kernels.f32_3
    return b, b[RANGES + 2 * k], b[RANGES + 2 * k + 1], f32_3(b, A), f32_3(b, A + 4), f32_3(b, A + 8)


def _task_bn_stats(block, k):  # pragma: no cover - compiled
    b, i0, i1, x, sm, bvar = _arrays(block, k)
    f32_3 = native_pool_kernels.f32_3
    scale, bias, siv, alpha = f32_3(b, A + 12), f32_3(b, A + 16), f32_3(b, A + 20), f32_3(b, A + 24)
    beta, rm, rv = f32_3(b, A + 28), f32_3(b, A + 32), f32_3(b, A + 36)
    f = b[S : S + 4].view(np.float64)
    _moments(x, sm[0, 0], bvar[0, 0], i0, i1)
    _bn_finish(
        sm[0, 0],
        bvar[0, 0],
        scale[0, 0],
        bias[0, 0],
        siv[0, 0],
        alpha[0, 0],
        beta[0, 0],
        rm[0, 0],
        rv[0, 0],
        np.float32(f[0]),
        np.float32(f[1]),
        np.float32(f[2]),
        np.float32(f[3]),
        i0,
        i1,
    )


def _task_bn_grad_stats(block, k):  # pragma: no cover - compiled
    b, i0, i1, x, dy, mean = _arrays(block, k)
    f32_3 = native_pool_kernels.f32_3
    scale, rstd, dscale, dbias = f32_3(b, A + 12), f32_3(b, A + 16), f32_3(b, A + 20), f32_3(b, A + 24)
    k1, k2, k3 = f32_3(b, A + 28), f32_3(b, A + 32), f32_3(b, A + 36)
    neg_inv_n = np.float32(b[S : S + 1].view(np.float64)[0])
    _grad_sums(x, dy, mean[0, 0], dbias[0, 0], k2[0, 0], i0, i1)
    _bn_grad_finish(
        scale[0, 0], mean[0, 0], rstd[0, 0], dscale[0, 0], dbias[0, 0], k1[0, 0], k2[0, 0], k3[0, 0], neg_inv_n, i0, i1
    )


def _task_scatter_phases(block, k):  # pragma: no cover - compiled
    """Planes i0..i1 of dX (array 0) from its phases: scalars sh, sw, the phase count, then per phase y0, x0, hr,
    wr and its array's slot (-1: a phase no tap reaches, zeros)."""
    b, i0, i1, dx, _, _ = _arrays(block, k)
    sh, sw = b[S], b[S + 1]
    for ph in range(b[S + 2]):
        at = S + 3 + 5 * ph
        slot = b[at + 4]
        src = native_pool_kernels.f32_3(b, A + 4 * max(slot, 0))
        _scatter_phase(dx, src, b[at], b[at + 1], sh, sw, b[at + 2], b[at + 3], i0, i1, slot < 0)


def _task_affine2(block, k):  # pragma: no cover - compiled
    b, i0, i1, dy, x, k1 = _arrays(block, k)
    k2, k3, dx = (
        native_pool_kernels.f32_3(b, A + 12),
        native_pool_kernels.f32_3(b, A + 16),
        native_pool_kernels.f32_3(b, A + 20),
    )
    _affine2(dy[i0:i1], x[i0:i1], k1[0, 0], k2[0, 0], k3[0, 0], dx[i0:i1])


def _task_relu_grad(block, k):  # pragma: no cover - compiled
    b, i0, i1, y, dy, dx = _arrays(block, k)
    _relu_grad(y[0, 0, i0:i1], dy[0, 0, i0:i1], dx[0, 0, i0:i1])


def _task_relu_grad_inplace(block, k):  # pragma: no cover - compiled
    b, i0, i1, y, d, _ = _arrays(block, k)
    _relu_grad_inplace(y[0, 0, i0:i1], d[0, 0, i0:i1])


def _task_max_pool_grad(block, k):  # pragma: no cover - compiled
    b, i0, i1, x, y, dy = _arrays(block, k)
    dx = native_pool_kernels.f32_3(b, A + 12)
    kh, kw, sh, sw, ph, pw, dh, dw = b[S], b[S + 1], b[S + 2], b[S + 3], b[S + 4], b[S + 5], b[S + 6], b[S + 7]
    _max_pool_grad(x[i0:i1], y[i0:i1], dy[i0:i1], dx[i0:i1], kh, kw, sh, sw, ph, pw, dh, dw)


def _task_momentum_update(block, k):  # pragma: no cover - compiled
    b, i0, i1, g, m, p = _arrays(block, k)
    lr = native_pool_kernels.f32_3(b, A + 12)[0, 0, 0]  # read at each call: a bound job's rate may change
    mu = np.float32(b[S : S + 1].view(np.float64)[0])
    _momentum_update(g[0, 0, i0:i1], m[0, 0, i0:i1], p[0, 0, i0:i1], lr, mu, b[S + 1] != 0)


@_exact
def _add(a, b, out):  # pragma: no cover - compiled
    """out = a + b over flat float32 arrays (numpy's float32 sums: one rounding each)."""
    for j in range(out.size):
        out[j] = a[j] + b[j]
    return 0


def _task_add(block, k):  # pragma: no cover - compiled
    b, i0, i1, x0, x1, out = _arrays(block, k)
    _add(x0[0, 0, i0:i1], x1[0, 0, i0:i1], out[0, 0, i0:i1])


@_exact
def _relu(x, y):  # pragma: no cover - compiled
    """y = max(x, 0) over flat float32 arrays as numpy's clip(x, 0, inf): NaN and -0.0 stay (y may be x)."""
    zero = np.float32(0)
    for j in range(y.size):
        v = x[j]
        y[j] = zero if v < zero else v
    return 0


def _task_relu(block, k):  # pragma: no cover - compiled
    b, i0, i1, x, y, _ = _arrays(block, k)
    _relu(x[0, 0, i0:i1], y[0, 0, i0:i1])


def _task_scale_shift(block, k):  # pragma: no cover - compiled
    b, i0, i1, x, alpha, beta = _arrays(block, k)
    y = native_pool_kernels.f32_3(b, A + 12)
    window_kernels._scale_shift(x[i0:i1], alpha[0, 0], beta[0, 0], y[i0:i1], b[S])


@_exact
def _row_max(row):  # pragma: no cover - compiled
    """(the largest value of ``row``, whether it holds a NaN): eight running maxima side by side, independent
    chains the CPU overlaps (one running max took 4 ms over the LM's 7 M logits) with no assumption about NaNs
    (a NaN never wins a comparison; it is counted instead)."""
    d = row.shape[0]
    m0 = m1 = m2 = m3 = m4 = m5 = m6 = m7 = row[0]
    nan = 0
    j = 0
    while j + 8 <= d:
        v0, v1, v2, v3, v4, v5, v6, v7 = (
            row[j],
            row[j + 1],
            row[j + 2],
            row[j + 3],
            row[j + 4],
            row[j + 5],
            row[j + 6],
            row[j + 7],
        )
        m0, m1, m2, m3 = max(m0, v0), max(m1, v1), max(m2, v2), max(m3, v3)
        m4, m5, m6, m7 = max(m4, v4), max(m5, v5), max(m6, v6), max(m7, v7)
        nan += (v0 != v0) + (v1 != v1) + (v2 != v2) + (v3 != v3) + (v4 != v4) + (v5 != v5) + (v6 != v6) + (v7 != v7)
        j += 8
    m = max(max(max(m0, m1), max(m2, m3)), max(max(m4, m5), max(m6, m7)))
    for k in range(j, d):
        m = max(m, row[k])
        nan += row[k] != row[k]
    return m, nan > 0


@_jit
def _exp_run(row, out, m):  # pragma: no cover - compiled
    """out = exp(row - m) (recurrent_cells.exp; 0 below e^-87), and their float32 sum (vectorized)."""
    lo, zero = np.float32(-87.0), np.float32(0)
    s = zero
    for j in range(row.shape[0]):
        t = row[j] - m
        e = recurrent_cells.exp(t) if t > lo else zero
        out[j] = e
        s += e
    return s


@_jit
def _softmax_xent(x, p, labels, picked, r0, r1):  # pragma: no cover - compiled
    """Rows r0..r1 of (N, D) ``x``: p = exp(x - max) / sum (p may be x itself), picked[i] = x[i, labels[i]] -
    max - log(sum), the label's log-probability from x. One read of the row from memory: its max, then the
    exponentials (recurrent_cells.exp; below e^-87 they are 0) into p, summed in float32 runs of 256 (a
    vectorized sum) added in float64, as close as numpy's pairwise sum; then p divided by the sum while the
    row is in cache. A row holding a NaN or whose max is infinite is NaN throughout, as in numpy's softmax."""
    d = x.shape[1]
    for i in range(r0, r1):
        row, out = x[i], p[i]
        xl = row[labels[i]]  # before out (possibly the row itself) is written
        m, nan = _row_max(row)
        if nan or m == np.inf or m == -np.inf:
            out[:] = np.nan
            picked[i] = np.nan
            continue
        acc, j0 = 0.0, 0
        while j0 + 256 <= d:
            acc += _exp_run(row[j0 : j0 + 256], out[j0 : j0 + 256], m)
            j0 += 256
        acc += _exp_run(row[j0:], out[j0:], m)
        s = np.float32(acc)
        for j in range(d):
            out[j] = out[j] / s
        picked[i] = xl - m - np.log(s)
    return 0


def _task_softmax_xent(block, k):  # pragma: no cover - compiled
    b, i0, i1, x, p, picked = _arrays(block, k)
    at = A + 12  # the labels (int32), padded to 3-D like the others: their count is the last size
    labels = carray(native_pool_kernels.pointer(b[at], int32), (b[at + 3],))
    _softmax_xent(x[0], p[0], labels, picked[0, 0], i0, i1)


_TASK_FNS = {
    "_add": (_task_add, None),
    "_relu": (_task_relu, None),
    "_scale_shift": (_task_scale_shift, None),
    "_affine2": (_task_affine2, None),
    "_scatter_phases": (_task_scatter_phases, None),
    "_bn_stats": (_task_bn_stats, None),
    "_bn_grad_stats": (_task_bn_grad_stats, None),
    "_relu_grad": (_task_relu_grad, None),
    "_relu_grad_inplace": (_task_relu_grad_inplace, None),
    "_max_pool_grad": (_task_max_pool_grad, None),
    "_momentum_update": (_task_momentum_update, None),
    "_softmax_xent": (_task_softmax_xent, None),
}
_TASKS: dict = {}


def task(kernel: str):
    """The native task function running ``kernel`` over a task's rows (a C callback), compiled or loaded from
    the cache on first use."""
    return native_pool_kernels.task_of(_TASKS, _TASK_FNS, kernel, simd_ir.CACHE)[0]
