"""The numba kernels behind framework/kernels/window_jit.py (see its doc); imported only when first
needed, so ``import framework`` never pays for importing numba."""

from __future__ import annotations

import numba
import numpy as np

from framework.kernels import cached_jit, simd_ir
from framework.kernels.pool_columns import rows3s2

COLS_L = simd_ir.L  # outputs per step of rows3s2
_jit = cached_jit.njit(cache=simd_ir.CACHE, fastmath={"contract"}, nogil=True, boundscheck=False)
_U = numba.uint64  # unsigned indices: no negative-index wraparound test, so LLVM vectorizes


@_jit
def _mx(a, b):  # pragma: no cover - compiled
    return a if (a > b or a != a) else b  # NaN wins, as np.maximum


_NO_PAIRS = np.zeros(1, np.uint64)


@_jit
def _fill(x, i, ch, planes, s, ph, pw, hq, wq, pad):  # pragma: no cover - compiled
    """The s*s phase planes of image i, channel ch (pad value outside the image)."""
    h, w = x.shape[2], x.shape[3]
    su, wu, iu, cu = _U(s), _U(wq), _U(i), _U(ch)
    # stride 2 over rows of an even width (8-byte aligned): a row read as 64-bit pairs, the even and
    # odd columns as their low and high halves, which LLVM vectorizes (the stride-2 reads it does not).
    pairs = s == 2 and w % 2 == 0 and (x.ctypes.data & 7) == 0
    xp = x.reshape(-1).view(np.uint64) if pairs else _NO_PAIRS
    pu = planes.view(np.uint32)
    for pa in range(s):
        for pb in range(s):
            k = _U(pa * s + pb)
            v0 = max(0, (pw - pb + s - 1) // s)
            v1 = min(wq, (w - 1 - pb + pw) // s + 1)
            nv = _U(max(v1 - v0, 0))
            c0 = _U(max(v0 * s + pb - pw, 0))
            v0u, v1u = _U(v0), _U(max(v1, v0))
            for u in range(hq):
                ir = u * s + pa - ph
                base = _U(u) * wu
                if ir < 0 or ir >= h or nv == 0:
                    for v in range(wu):
                        planes[k, base + v] = pad
                    continue
                iru = _U(ir)
                for v in range(v0u):
                    planes[k, base + v] = pad
                for v in range(v1u, wu):
                    planes[k, base + v] = pad
                dst = base + v0u
                if s == 1:
                    for v in range(nv):
                        planes[k, dst + v] = x[iu, cu, iru, c0 + v]
                elif pairs:
                    at = ((iu * _U(x.shape[1]) + cu) * _U(h) + iru) * _U(w // 2) + (c0 >> _U(1))
                    shift = (c0 & _U(1)) * _U(32)
                    for v in range(nv):
                        pu[k, dst + v] = np.uint32((xp[at + v] >> shift) & _U(0xFFFFFFFF))
                else:
                    for v in range(nv):
                        planes[k, dst + v] = x[iu, cu, iru, c0 + v * su]


@_jit
def _taps(planes, wv, z, s, kh, kw, wq, mode):  # pragma: no cover - compiled
    """z = sum_t wv[t] * tap_t (mode 0), max_t tap_t (mode 1), sum_t tap_t (mode 2)."""
    n = _U(z.shape[0])
    su, wu = _U(s), _U(wq)
    if kh == 3 and kw == 3:  # one pass, the 9 taps in registers
        k0, k1, k2 = _U(0), _U(1 % s), _U(2 % s)
        o1, o2 = _U(1 // s), _U(2 // s)
        p0, p1, p2 = k0 * su, k1 * su, k2 * su  # plane row of tap row a: (a % s) * s
        r0, r1, r2 = _U(0), o1 * wu, o2 * wu
        if mode == 0:
            w0, w1, w2, w3, w4, w5, w6, w7, w8 = wv[0], wv[1], wv[2], wv[3], wv[4], wv[5], wv[6], wv[7], wv[8]
            for j in range(n):
                z[j] = (
                    w0 * planes[p0 + k0, j + r0]
                    + w1 * planes[p0 + k1, j + r0 + o1]
                    + w2 * planes[p0 + k2, j + r0 + o2]
                    + w3 * planes[p1 + k0, j + r1]
                    + w4 * planes[p1 + k1, j + r1 + o1]
                    + w5 * planes[p1 + k2, j + r1 + o2]
                    + w6 * planes[p2 + k0, j + r2]
                    + w7 * planes[p2 + k1, j + r2 + o1]
                    + w8 * planes[p2 + k2, j + r2 + o2]
                )
            return
        if mode == 1:
            for j in range(n):
                m = _mx(planes[p0 + k0, j + r0], planes[p0 + k1, j + r0 + o1])
                m = _mx(m, planes[p0 + k2, j + r0 + o2])
                m = _mx(m, planes[p1 + k0, j + r1])
                m = _mx(m, planes[p1 + k1, j + r1 + o1])
                m = _mx(m, planes[p1 + k2, j + r1 + o2])
                m = _mx(m, planes[p2 + k0, j + r2])
                m = _mx(m, planes[p2 + k1, j + r2 + o1])
                z[j] = _mx(m, planes[p2 + k2, j + r2 + o2])
            return
    for a in range(kh):
        for b in range(kw):
            t = a * kw + b
            k = _U((a % s) * s + b % s)
            off = _U((a // s) * wq + b // s)
            first = t == 0
            if mode == 0:
                c = wv[t]
                for j in range(n):
                    z[j] = c * planes[k, j + off] + (z[j] if not first else np.float32(0))
            elif first:
                for j in range(n):
                    z[j] = planes[k, j + off]
            elif mode == 1:
                for j in range(n):
                    z[j] = _mx(z[j], planes[k, j + off])
            else:
                for j in range(n):
                    z[j] += planes[k, j + off]


@_jit
def _depthwise(x, w, b, y, res, planes, z, s, ph, pw, wq, relu, i0, i1):  # pragma: no cover - compiled
    """y[i] = depthwise conv of x[i] (+ b) (+ res[i]) (Relu), images i0:i1; b/res empty if absent."""
    c = x.shape[1]
    oh = y.shape[2]
    kh, kw = w.shape[2], w.shape[3]
    hq = oh + (kh - 1) // s + 1
    w3 = w.reshape(c, kh * kw)
    has_b, has_r = b.shape[0] > 0, res.shape[0] > 0
    zero = np.float32(0)
    for i in range(i0, i1):
        for ch in range(c):
            _fill(x, i, ch, planes, s, ph, pw, hq, wq, zero)
            _taps(planes, w3[ch], z, s, kh, kw, wq, 0)
            _store_wide(z, wq, b[ch] if has_b else zero, res, has_r, relu, y, i, ch)
    return 0


@_jit
def _store_wide(z, wq, bv, res, has_r, relu, y, i, ch):  # pragma: no cover - compiled
    """y[i, ch] = the valid columns of the wide output z (rows of wq) + bv (+ res[i, ch]) (Relu: "0 if
    v < 0 else v", NaN stays; ``relu`` 2: Relu6, then "6 if v > 6 else v"; 3 HardSwish, 4 Swish: the codes
    of window_jit.RELU...); res may be y itself."""
    oh, ow = y.shape[2], y.shape[3]
    zero, six, one, half, sixth = np.float32(0), np.float32(6), np.float32(1), np.float32(0.5), np.float32(1 / 6)
    relu = int(relu)
    owu, wu = _U(ow), _U(wq)
    for r in range(oh):
        base = _U(r) * wu
        for q in range(owu):
            v = z[base + q] + bv
            if has_r:
                v += res[i, ch, r, q]
            if relu == 1 or relu == 2:
                if v < zero:
                    v = zero
                if relu == 2 and v > six:
                    v = six
            elif relu == 3:
                v = v * min(max(v * sixth + half, zero), one)
            elif relu == 4:
                v = v / (one + np.exp(-v))
            y[i, ch, r, q] = v
    return 0


@_jit
def _pool(x, y, inv, planes, z, s, kh, kw, ph, pw, wq, mode, pad, i0, i1):  # pragma: no cover - compiled
    """Max (mode 1) or average (mode 2, times inv (OH, OW)) pooling of images i0:i1."""
    c = x.shape[1]
    oh, ow = y.shape[2], y.shape[3]
    hq = oh + (kh - 1) // s + 1
    wv = np.empty(0, np.float32)
    owu, wu = _U(ow), _U(wq)
    for i in range(i0, i1):
        for ch in range(c):
            _fill(x, i, ch, planes, s, ph, pw, hq, wq, pad)
            _taps(planes, wv, z, s, kh, kw, wq, mode)
            for r in range(oh):
                base = _U(r) * wu
                if mode == 2:
                    for q in range(owu):
                        y[i, ch, r, q] = z[base + q] * inv[r, q]
                else:
                    for q in range(owu):
                        y[i, ch, r, q] = z[base + q]
    return 0


@_jit
def _max_plane_s1(xf, yf, vm, xb, yb, h, w, oh, ow, kh, kw, ph, pw, pad):  # pragma: no cover - compiled
    """Stride-1 max pooling of one channel plane (``_max_pool``'s values, in its order): the max over each
    window's rows for the whole plane into ``vm`` (OH rows of W cells), then over each window's columns
    into y. The rows whose windows lie inside the image are one contiguous loop per window row over all
    of them, and with OW == W (``same`` padding) the columns are one loop over the plane whose cells next
    to a row's ends are then redone with the pad: loops hundreds of cells long instead of one per output
    row, which on 14x14 and 7x7 planes cost more in loop set-up than in maxima."""
    wu = _U(w)
    r_lo = min(max(ph, 0), oh)
    r_hi = max(min(h - kh + ph + 1, oh), r_lo)
    for r in range(oh):  # the rows whose windows reach into the padding, as _max_pool's
        if r_lo <= r < r_hi:
            continue
        ir0 = r * 1 - ph
        a0, a1 = max(0, -ir0), min(kh, h - ir0)
        vb = _U(r) * wu
        if a1 <= a0:
            for j in range(wu):
                vm[vb + j] = pad
            continue
        src = _U(xb + (ir0 + a0) * w)
        for j in range(wu):
            vm[vb + j] = xf[src + j]
        for a in range(a0 + 1, a1):
            src = _U(xb + (ir0 + a) * w)
            for j in range(wu):
                vm[vb + j] = _mx(vm[vb + j], xf[src + j])
        for j in range(wu):
            vm[vb + j] = _mx(vm[vb + j], pad)
    if r_hi > r_lo:
        n, v0, x0 = _U((r_hi - r_lo) * w), _U(r_lo * w), _U(xb + (r_lo - ph) * w)
        for k in range(n):
            vm[v0 + k] = xf[x0 + k]
        for a in range(1, kh):
            xa = x0 + _U(a) * wu
            for k in range(n):
                vm[v0 + k] = _mx(vm[v0 + k], xf[xa + k])
    if ow == w and kw <= w:  # one pass over the plane, then the cells whose windows cross a row's ends
        tail = kw - 1 - pw
        lo, hi = _U(pw), _U(max(oh * w - tail, pw))
        ybu = _U(yb)
        for k in range(lo, hi):
            yf[ybu + k] = vm[k - _U(pw)]
        for b in range(1, kw):
            for k in range(lo, hi):
                yf[ybu + k] = _mx(yf[ybu + k], vm[k - _U(pw) + _U(b)])
        edges = min(pw, ow) + min(tail, ow)
        for r in range(oh):
            for e in range(edges):
                q = e if e < pw else ow - tail + (e - pw)
                m = pad
                for b in range(kw):
                    col = q - pw + b
                    v = vm[r * w + col] if 0 <= col < w else pad
                    m = v if b == 0 else _mx(m, v)
                yf[yb + r * ow + q] = m
        return
    for r in range(oh):
        for q in range(ow):
            m = pad
            for b in range(kw):
                col = q - pw + b
                v = vm[r * w + col] if 0 <= col < w else pad
                m = v if b == 0 else _mx(m, v)
            yf[yb + r * ow + q] = m


@_jit
def _max_planes_same(xf, yf, vm, xb, planes, h, w, kh, kw, ph, pw, pad):  # pragma: no cover - compiled
    """``_max_plane_s1`` for ``planes`` consecutive channel planes of an output as large as the input (stride
    1, the pads adding up to the window less one in both axes), all at once: each pass one loop over
    every plane, whose cells whose windows cross a plane's top or bottom rows (or a row's ends) are then
    redone one by one with the pad, as ``_max_pool`` computes them. On 14x14 and 7x7 planes the per-plane
    loops would cost more than the maxima."""
    wu, hw = _U(w), h * w
    tail_h, tail_w = kh - 1 - ph, kw - 1 - pw
    n = planes * hw
    lo, hi = _U(ph * w), _U(max(n - tail_h * w, ph * w))
    x0 = _U(xb)
    if kh == 3:  # rows: x rows r - ph + a (three in one pass)
        x1, x2 = x0 + wu, x0 + _U(2) * wu
        for k in range(lo, hi):
            vm[k] = _mx(_mx(xf[x0 + k - lo], xf[x1 + k - lo]), xf[x2 + k - lo])
    else:
        for k in range(lo, hi):
            vm[k] = xf[x0 + k - lo]
        for a in range(1, kh):
            off = x0 + _U(a) * wu
            for k in range(lo, hi):
                vm[k] = _mx(vm[k], xf[off + k - lo])
    for p in range(planes):  # the rows whose windows reach into the padding: their rows in order, then the pad
        for e in range(ph + tail_h):
            r = e if e < ph else h - tail_h + (e - ph)
            a0, a1 = max(0, ph - r), min(kh, h - r + ph)
            vb = _U(p * hw + r * w)
            src = _U(xb + p * hw + (r - ph + a0) * w)
            if a1 - a0 == 2:  # (a 3-row window's first or last row: one vector loop)
                for j in range(wu):
                    vm[vb + j] = _mx(_mx(xf[src + j], xf[src + wu + j]), pad)
                continue
            for j in range(wu):
                m = xf[src + j] if a1 > a0 else pad
                for a in range(1, a1 - a0):
                    m = _mx(m, xf[src + _U(a) * wu + j])
                vm[vb + j] = _mx(m, pad)
    lo, hi = _U(pw), _U(max(n - tail_w, pw))
    y0 = _U(xb)  # (the output's planes sit where the input's do)
    if kw == 3:  # columns (three in one pass)
        for k in range(lo, hi):
            yf[y0 + k] = _mx(_mx(vm[k - lo], vm[k - lo + _U(1)]), vm[k - lo + _U(2)])
    else:
        for k in range(lo, hi):
            yf[y0 + k] = vm[k - lo]
        for b in range(1, kw):
            for k in range(lo, hi):
                yf[y0 + k] = _mx(yf[y0 + k], vm[k - lo + _U(b)])
    if kw == 3 and pw == 1:  # the cells whose windows cross a row's ends: pad cells first, or last
        for row in range(_U(planes * h)):
            rb = x0 + row * wu
            vb = row * wu
            yf[rb] = _mx(_mx(pad, vm[vb]), vm[vb + _U(1)])
            yf[rb + wu - _U(1)] = _mx(_mx(vm[vb + wu - _U(2)], vm[vb + wu - _U(1)]), pad)
        return
    for row in range(planes * h):
        rb = row * w
        for q in range(pw):
            m = pad
            for b in range(pw - q, kw):
                m = _mx(m, vm[rb + q - pw + b])
            yf[xb + rb + q] = m
        for q in range(w - tail_w, w):
            m = vm[rb + q - pw]
            for b in range(1, w - q + pw):
                m = _mx(m, vm[rb + q - pw + b])
            yf[xb + rb + q] = _mx(m, pad)


@_jit
def _max_pool(x, y, vm, s, kh, kw, ph, pw, pad, i0, i1):  # pragma: no cover - compiled
    """Max pooling of images i0:i1 read in place (y C-contiguous), per output row: the max over the
    window's input rows into ``vm`` (its cells pw:pw+W; the others hold the pad value), one contiguous
    pass per input row, then over each window's columns of it (stride-s reads); 3-wide stride-2 windows
    L outputs at a time over the rows in registers, no scratch (pool_columns.rows3s2). Same values as
    ``_pool`` mode 1 (pad cells count, NaN wins).
    ``vm`` of window_jit.max_pool_row cells."""
    c, h, w = x.shape[1], x.shape[2], x.shape[3]
    oh, ow = y.shape[2], y.shape[3]
    wu, pwu, su = _U(w), _U(pw), _U(s)
    fused = kw == 3 and s == 2  # rows and columns in one step (pool_columns.rows3s2), no row scratch
    xf, yf = x.reshape(-1), y.reshape(-1)
    if s == 1 and oh == h and ow == w and kh <= h and kw <= w:  # planes in blocks (window_jit.max_pool_row)
        per = max(vm.shape[0] // (h * w), 1)
        if vm.shape[0] >= h * w:
            for i in range(i0, i1):
                for c0 in range(0, c, per):
                    nb = min(per, c - c0)
                    _max_planes_same(xf, yf, vm, (i * c + c0) * h * w, nb, h, w, kh, kw, ph, pw, pad)
            return 0
    if s == 1 and vm.shape[0] >= oh * w:  # whole planes (window_jit.max_pool_row)
        for i in range(i0, i1):
            for ch in range(c):
                _max_plane_s1(
                    xf, yf, vm, (i * c + ch) * h * w, (i * c + ch) * oh * ow, h, w, oh, ow, kh, kw, ph, pw, pad
                )
        return 0
    for j in range(vm.shape[0]):
        vm[j] = pad
    for i in range(i0, i1):
        for ch in range(c):
            for r in range(oh):
                ir0 = r * s - ph
                a0, a1 = max(0, -ir0), min(kh, h - ir0)
                if fused:
                    yb = ((i * c + ch) * oh + r) * ow
                    if a1 <= a0:  # a window wholly in the padding rows
                        for q in range(ow):
                            yf[yb + q] = pad
                        continue
                    r0 = ((i * c + ch) * h + ir0 + a0) * w
                    padded = 1 if a0 > 0 or a1 < kh else 0
                    for q0 in range(0, ow, COLS_L):
                        rows3s2(xf, r0, w, a1 - a0, 2 * q0 - pw, w, pad, padded, yf, yb + q0, min(COLS_L, ow - q0))
                    continue
                if a1 <= a0:  # a window wholly in the padding rows
                    for j in range(wu):
                        vm[pwu + j] = pad
                else:
                    row = _U(ir0 + a0)
                    for j in range(wu):
                        vm[pwu + j] = x[i, ch, row, j]
                    for a in range(a0 + 1, a1):
                        row = _U(ir0 + a)
                        for j in range(wu):
                            vm[pwu + j] = _mx(vm[pwu + j], x[i, ch, row, j])
                    if a0 > 0 or a1 < kh:  # some of the window's rows in the padding
                        for j in range(wu):
                            vm[pwu + j] = _mx(vm[pwu + j], pad)
                if kw == 3:
                    for q in range(_U(ow)):
                        o = q * su
                        y[i, ch, r, q] = _mx(_mx(vm[o], vm[o + 1]), vm[o + 2])
                else:
                    for q in range(_U(ow)):
                        o = q * su
                        m = vm[o]
                        for b in range(1, kw):
                            m = _mx(m, vm[o + b])
                        y[i, ch, r, q] = m
    return 0


@_jit
def _pool2x2(x, y, sh, sw, is_max, inv, i0, i1):  # pragma: no cover - compiled
    """2x2 max (``is_max``, NaN wins) or average (the sum times ``inv``) pooling of images i0:i1 at
    strides (sh, sw), every window inside the image: each output from its four cells in registers, in
    the order of the per-cell fold ((x00 + x01) + x10) + x11, so the same values."""
    c, oh, ow = y.shape[1], y.shape[2], y.shape[3]
    shu, swu, owu = _U(sh), _U(sw), _U(ow)
    for i in range(i0, i1):
        for ch in range(c):
            for r in range(oh):
                r0 = _U(r) * shu
                r1 = r0 + _U(1)
                if is_max:
                    for q in range(owu):
                        c0 = q * swu
                        m = _mx(_mx(x[i, ch, r0, c0], x[i, ch, r0, c0 + 1]), x[i, ch, r1, c0])
                        y[i, ch, r, q] = _mx(m, x[i, ch, r1, c0 + 1])
                else:
                    for q in range(owu):
                        c0 = q * swu
                        a = x[i, ch, r0, c0] + x[i, ch, r0, c0 + 1]
                        a = a + x[i, ch, r1, c0]
                        y[i, ch, r, q] = (a + x[i, ch, r1, c0 + 1]) * inv
    return 0


@_jit
def _epilogue(acc, b, res, y, relu):  # pragma: no cover - compiled
    """y = acc (+ b per row) (+ res) (Relu) in one pass over (rows, P); b/res empty if absent; acc
    and res may be y itself."""
    rows, p = y.shape
    has_b, has_r = b.shape[0] > 0, res.shape[0] > 0
    zero = np.float32(0)
    pu = _U(p)
    for r in range(rows):
        bv = b[r] if has_b else zero
        if has_r and relu:  # "zero if v < zero else v": NaN stays NaN, as np.maximum and Caffe2's Relu
            for j in range(pu):
                v = acc[r, j] + bv + res[r, j]
                y[r, j] = zero if v < zero else v
        elif has_r:
            for j in range(pu):
                y[r, j] = acc[r, j] + bv + res[r, j]
        elif relu:
            for j in range(pu):
                v = acc[r, j] + bv
                y[r, j] = zero if v < zero else v
        else:
            for j in range(pu):
                y[r, j] = acc[r, j] + bv
    return 0


@_jit
def _scale_shift(x, a, b, y, relu):  # pragma: no cover - compiled
    """y[n, c, :] = x[n, c, :] * a[c] + b[c] over (N, C, P) arrays (test-mode SpatialBN); then with
    ``relu`` 1 std::max(0, y) as Caffe2's SpatialBNRelu (a NaN becomes 0), with 2 "0 if y < 0 else y"
    as a separate Relu (NaN stays)."""
    n, c, p = x.shape
    pu = _U(p)
    zero = np.float32(0)
    for i in range(n):
        for ch in range(c):
            av, bv = a[ch], b[ch]
            if relu == 1:
                for j in range(pu):
                    v = x[i, ch, j] * av + bv
                    y[i, ch, j] = v if v > zero else zero
            elif relu == 2:
                for j in range(pu):
                    v = x[i, ch, j] * av + bv
                    y[i, ch, j] = zero if v < zero else v
            else:
                for j in range(pu):
                    y[i, ch, j] = x[i, ch, j] * av + bv
    return 0


# the sums may be reassociated: LLVM keeps one partial sum per vector lane (the loop vectorizes)
_jit_sum = cached_jit.njit(cache=simd_ir.CACHE, fastmath={"contract", "reassoc"}, nogil=True, boundscheck=False)


@_jit_sum
def _channel_means(x, s):  # pragma: no cover - compiled
    """s[n, c] = the mean of x[n, c, :] over (N, C, P) float32 arrays, summed in float32 (one partial sum per
    vector lane, then across them: no more rounding error than numpy's pairwise sum's order of magnitude)."""
    n, c, p = x.shape
    pu = _U(p)
    inv = np.float32(1.0 / max(p, 1))
    for i in range(n):
        for ch in range(c):
            acc = np.float32(0)
            for j in range(pu):
                acc += x[i, ch, j]
            s[i, ch] = acc * inv
    return 0


@_jit_sum
def _squeeze_excite(x, w1, b1, w2, b2, s, h, g, y, act, gate, alpha, beta):  # pragma: no cover - compiled
    """A squeeze-excitation block over (N, C, P) float32 ``x`` into ``y`` (may be ``x``), all in one call: per image
    s = the channel means, h = act(w1 @ s + b1) (w1 (R, C); act 0 none, 1 Relu, 2 Relu6, 3 Swish h / (1 + exp(-h)),
    4 HardSwish h * clip(h / 6 + 1/2, 0, 1)), g = gate(w2 @ h + b2) (w2 (C, R); gate 0 Sigmoid 1 / (1 + exp(-v)),
    1 HardSigmoid clip(alpha v + beta, 0, 1)), y = x * g per channel. ``s``/``g`` (C,), ``h`` (R,) scratch. The
    clamps keep a NaN (as numpy's maximum/minimum/clip); sums in float32, reassociated per vector lane."""
    n, c, p = x.shape
    r = w1.shape[0]
    pu, cu, ru = _U(p), _U(c), _U(r)
    inv = np.float32(1.0 / max(p, 1))
    zero, one, six = np.float32(0), np.float32(1), np.float32(6)
    for i in range(n):
        for ch in range(cu):
            acc = zero
            for j in range(pu):
                acc += x[i, ch, j]
            s[ch] = acc * inv
        for k in range(ru):
            acc = zero
            for ch in range(cu):
                acc += w1[k, ch] * s[ch]
            v = acc + b1[k]
            if act == 1 or act == 2:
                v = zero if v < zero else v
                if act == 2:
                    v = six if v > six else v
            elif act == 3:
                v = v / (one + np.exp(-v))
            elif act == 4:
                t = v * np.float32(1.0 / 6) + np.float32(0.5)
                t = zero if t < zero else (one if t > one else t)
                v = v * t
            h[k] = v
        for ch in range(cu):
            acc = zero
            for k in range(ru):
                acc += w2[ch, k] * h[k]
            v = acc + b2[ch]
            if gate == 1:
                v = alpha * v + beta
                g[ch] = zero if v < zero else (one if v > one else v)
            else:
                g[ch] = one / (one + np.exp(-v))
        for ch in range(cu):
            gv = g[ch]
            for j in range(pu):
                y[i, ch, j] = x[i, ch, j] * gv
    return 0


@_jit
def _epilogue_block(acc, b, res, y, relu):  # pragma: no cover - compiled
    """y[i] = acc[:, i] (+ b per row) (+ res[i]) (Relu) for every image i of a GEMM over a block of
    images: acc (rows, images, P), res/y (images, rows, P); b/res empty if absent; res may be y."""
    rows, nb, p = acc.shape
    has_b, has_r = b.shape[0] > 0, res.shape[0] > 0
    zero = np.float32(0)
    pu = _U(p)
    for i in range(nb):
        for r in range(rows):
            bv = b[r] if has_b else zero
            if has_r and relu:
                for j in range(pu):
                    v = acc[r, i, j] + bv + res[i, r, j]
                    y[i, r, j] = zero if v < zero else v
            elif has_r:
                for j in range(pu):
                    y[i, r, j] = acc[r, i, j] + bv + res[i, r, j]
            elif relu:
                for j in range(pu):
                    v = acc[r, i, j] + bv
                    y[i, r, j] = zero if v < zero else v
            else:
                for j in range(pu):
                    y[i, r, j] = acc[r, i, j] + bv
    return 0


@_jit
def _direct_fill(x, i, planes, s, ph, pw, hq, wq):  # pragma: no cover - compiled
    """Image i's zero-bordered planes (C*s*s, hq*wq + slack): at stride 1 one per channel, only the
    image's cells written (the border stays zero); at stride 2 the 4 phase planes of ``_fill``."""
    c, h, w = x.shape[1], x.shape[2], x.shape[3]
    if s > 1:
        ss = s * s
        for ch in range(c):
            _fill(x, i, ch, planes[ch * ss : (ch + 1) * ss], s, ph, pw, hq, wq, np.float32(0))
        return
    wu, wd, iu = _U(wq), _U(w), _U(i)
    for ch in range(c):
        cu = _U(ch)
        for r in range(h):
            base = _U(r + ph) * wu + _U(pw)
            ru = _U(r)
            for v in range(wd):
                planes[cu, base + v] = x[iu, cu, ru, v]
