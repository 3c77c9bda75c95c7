"""The numba kernels behind framework/kernels/winograd.py (see its doc): the input and output
transforms of Winograd's F(2x2, 3x3). Imported only when first needed."""

from __future__ import annotations

import numba
import numpy as np

from framework.kernels import cached_jit

_jit = cached_jit.njit(cache=True, fastmath={"contract"}, nogil=True, boundscheck=False)
_U = numba.uint64  # unsigned indices: no negative-index wraparound test, so LLVM vectorizes


@_jit
def _fill_phases(x, n, c, ph, pw, r0, r1, pe, po):  # pragma: no cover - compiled
    """Rows r0:r1 of image (n, c)'s zero-bordered plane into its even (``pe``) and odd (``po``) columns:
    pe[rr, j] = x[n, c, rr - ph, 2j - pw], po[rr, j] = x[n, c, rr - ph, 2j + 1 - pw] for the rows rr
    that hold the image; the border cells are never written (zero from the buffer's creation), and
    an image row of the plane always holds the row of the image being transformed when it is read."""
    h, w = x.shape[2], x.shape[3]
    cols = pe.shape[1]
    e0, e1 = max(0, (pw + 1) // 2), min(cols, (w - 1 + pw) // 2 + 1)
    o0, o1 = max(0, pw // 2), min(cols, (w + pw) // 2)
    for rr in range(max(r0, ph), min(r1, h + ph)):
        src = x[n, c, rr - ph]
        de, do = pe[rr], po[rr]
        for j in range(e0, e1):
            de[j] = src[2 * j - pw]
        for j in range(o0, o1):
            do[j] = src[2 * j + 1 - pw]
    return 0


@_jit
def _input(x, v, g0, g1, ph, pw, th, tw, pe, po):  # pragma: no cover - compiled
    """V = B^T d B for every 4x4 input tile d of the tile rows g0:g1 of the batch (tile row g is row
    g % th of image g // th), all channels: v (16, C, T), tile t = (g - g0) * tw + tile column.
    Vectorized over the tile columns: each of the 16 outputs of a tile row is one contiguous run,
    read from the even/odd column planes."""
    twu = _U(tw)
    for c in range(x.shape[1]):
        v0, v1, v2, v3 = v[0, c], v[1, c], v[2, c], v[3, c]
        v4, v5, v6, v7 = v[4, c], v[5, c], v[6, c], v[7, c]
        v8, v9, v10, v11 = v[8, c], v[9, c], v[10, c], v[11, c]
        v12, v13, v14, v15 = v[12, c], v[13, c], v[14, c], v[15, c]
        for n in range(g0 // th, (g1 - 1) // th + 1):
            t0, t1 = max(g0, n * th) - n * th, min(g1, (n + 1) * th) - n * th  # this image's tile rows
            _fill_phases(x, n, c, ph, pw, 2 * t0, 2 * t1 + 2, pe, po)
            for tr in range(t0, t1):
                r = 2 * tr
                tb = (n * th + tr - g0) * tw
                e0, e1, e2, e3 = pe[r], pe[r + 1], pe[r + 2], pe[r + 3]
                o0, o1, o2, o3 = po[r], po[r + 1], po[r + 2], po[r + 3]
                for t in range(twu):
                    u = t + _U(1)
                    # B^T over the rows (d0 - d2, d1 + d2, d2 - d1, d1 - d3) at columns 2t, 2t+1, 2t+2, 2t+3
                    a0, a1, a2, a3 = e0[t] - e2[t], o0[t] - o2[t], e0[u] - e2[u], o0[u] - o2[u]
                    b0, b1, b2, b3 = e1[t] + e2[t], o1[t] + o2[t], e1[u] + e2[u], o1[u] + o2[u]
                    c0, c1, c2, c3 = e2[t] - e1[t], o2[t] - o1[t], e2[u] - e1[u], o2[u] - o1[u]
                    d0, d1, d2, d3 = e1[t] - e3[t], o1[t] - o3[t], e1[u] - e3[u], o1[u] - o3[u]
                    j = tb + t
                    # ... then over the columns (the same combination)
                    v0[j], v1[j], v2[j], v3[j] = a0 - a2, a1 + a2, a2 - a1, a1 - a3
                    v4[j], v5[j], v6[j], v7[j] = b0 - b2, b1 + b2, b2 - b1, b1 - b3
                    v8[j], v9[j], v10[j], v11[j] = c0 - c2, c1 + c2, c2 - c1, c1 - c3
                    v12[j], v13[j], v14[j], v15[j] = d0 - d2, d1 + d2, d2 - d1, d1 - d3
    return 0


@_jit
def _output(mt, b, res, y, g0, g1, th, tw, relu, z):  # pragma: no cover - compiled
    """Y = A^T M A (+ b) (+ res) (Relu) for the tile rows g0:g1 (tiles of ``mt`` (16, M, T) as
    ``_input`` numbers them), all output channels; ``z`` (2, 2 * tw) holds a row pair of tiles; b/res
    empty when absent; res may be y itself (read before written). Relu as "zero if v < 0 else v"
    (NaN stays NaN, as np.maximum)."""
    oh, ow = y.shape[2], y.shape[3]
    has_b, has_r = b.shape[0] > 0, res.shape[0] > 0
    zero = np.float32(0)
    twu, owu = _U(tw), _U(ow)
    z0, z1 = z[0], z[1]
    for mo in range(y.shape[1]):
        bv = b[mo] if has_b else zero
        p0, p1, p2, p3 = mt[0, mo], mt[1, mo], mt[2, mo], mt[3, mo]
        p4, p5, p6, p7 = mt[4, mo], mt[5, mo], mt[6, mo], mt[7, mo]
        p8, p9, p10, p11 = mt[8, mo], mt[9, mo], mt[10, mo], mt[11, mo]
        p12, p13, p14, p15 = mt[12, mo], mt[13, mo], mt[14, mo], mt[15, mo]
        for g in range(g0, g1):
            n, tr = g // th, g % th
            tb = (g - g0) * tw
            for t in range(twu):
                j = tb + t
                # A^T over the rows (m0 + m1 + m2, m1 - m2 - m3), then over the columns
                s0, s1 = p0[j] + p4[j] + p8[j], p1[j] + p5[j] + p9[j]
                s2, s3 = p2[j] + p6[j] + p10[j], p3[j] + p7[j] + p11[j]
                u0, u1 = p4[j] - p8[j] - p12[j], p5[j] - p9[j] - p13[j]
                u2, u3 = p6[j] - p10[j] - p14[j], p7[j] - p11[j] - p15[j]
                q = t + t
                z0[q], z0[q + 1] = s0 + s1 + s2 + bv, s1 - s2 - s3 + bv
                z1[q], z1[q + 1] = u0 + u1 + u2 + bv, u1 - u2 - u3 + bv
            for rr in range(2):
                oy = 2 * tr + rr
                if oy >= oh:
                    break
                zr, yr = z[rr], y[n, mo, oy]
                if has_r:
                    rs = res[n, mo, oy]
                    if relu:
                        for q in range(owu):
                            val = zr[q] + rs[q]
                            yr[q] = zero if val < zero else val
                    else:
                        for q in range(owu):
                            yr[q] = zr[q] + rs[q]
                elif relu:
                    for q in range(owu):
                        val = zr[q]
                        yr[q] = zero if val < zero else val
                else:
                    for q in range(owu):
                        yr[q] = zr[q]
    return 0


_FB = 64  # filters a block of _filter transforms together (vectors over them)


@_jit
def _filter(w, out, m0, m1):  # pragma: no cover - compiled
    """U = G g G^T in float64, rounded to float32, for every 3x3 filter g = w[m, c] (w (M, C, 3, 3)), m0 <= m < m1: out
    (16, M, C), U[a, b] at plane 4a + b; G's rows (1, 0, 0), (1/2, 1/2, 1/2), (1/2, -1/2, 1/2), (0, 0, 1)
    written out. Blocks of _FB filters of one output channel: their taps gathered tap-major, then every step
    a vector over the block, each of the 16 planes written in a run of _FB values (numpy's tensordots made
    float64 temporaries 4.7 times out's size: 27 ms for a 512 x 512 filter, which training transforms anew
    every step)."""
    m_, c_ = w.shape[0], w.shape[1]
    wf = w.reshape(m_, c_ * 9)
    gg = np.empty((9, _FB))
    tt = np.empty((12, _FB))
    for m in range(m0, m1):
        for c0 in range(0, c_, _FB):
            nb = min(_FB, c_ - c0)
            for q in range(nb):
                for k in range(9):
                    gg[k, q] = wf[m, (c0 + q) * 9 + k]
            for i in range(3):  # t = g G^T (3 x 4), t[i, j] at row 4i + j
                for q in range(nb):
                    g0, g1, g2 = gg[3 * i, q], gg[3 * i + 1, q], gg[3 * i + 2, q]
                    tt[4 * i, q] = g0
                    tt[4 * i + 1, q] = 0.5 * (g0 + g1 + g2)
                    tt[4 * i + 2, q] = 0.5 * (g0 - g1 + g2)
                    tt[4 * i + 3, q] = g2
            for j in range(4):  # U = G t (4 x 4)
                for q in range(nb):
                    t0, t1, t2 = tt[j, q], tt[4 + j, q], tt[8 + j, q]
                    out[j, m, c0 + q] = np.float32(t0)
                    out[4 + j, m, c0 + q] = np.float32(0.5 * (t0 + t1 + t2))
                    out[8 + j, m, c0 + q] = np.float32(0.5 * (t0 - t1 + t2))
                    out[12 + j, m, c0 + q] = np.float32(t2)
    return 0
