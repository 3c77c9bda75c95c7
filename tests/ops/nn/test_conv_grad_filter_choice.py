"""ConvGradient's choice between the compiled filter-gradient kernel and the column GEMM: a large dW summed over
few output pixels (dW's elements at least conv_grad_filter._GEMM_RATIO per product summed into each) takes the
column path, the rest the kernel; either gives dW, db and dX against independent float64 references, at one
thread and two (the column path split by images), and allocates nothing per warm run."""

from __future__ import annotations

import numpy as np
import pytest

from bench.common import allocations_per_run
from framework.core import CreateOperator
from framework.kernels import conv_grad_filter
from framework.kernels.geometry import Geometry
from framework.memory.workspace import Workspace
from framework.proto.framework_pb2 import NetDef
from framework.runtime.parallel import get_num_threads, set_num_threads
from tests.ops.nn.test_conv_grad_filter import reference_dw

pytest.importorskip("numba")


def _geo(h, k=3, s=1, p=1):
    o = (h + 2 * p - k) // s + 1
    return Geometry((h, h), (k, k), (s, s), (1, 1), (p, p), (p, p), (o, o))


def test_plan_leaves_large_filters_on_few_pixels_to_the_gemm():
    if not conv_grad_filter.available():
        pytest.skip("the compiled kernel cannot run here")
    ratio = conv_grad_filter._GEMM_RATIO
    # 512 -> 512 channels 3x3 on one 7x7 image: 2.36 M dW elements, 49 products each
    assert conv_grad_filter.plan(1, 512, 512, 1, _geo(7), np.float32) is None
    assert conv_grad_filter.plan(1, 512, 512, 1, _geo(7), np.float32, "channels") is not None  # forced
    # the same filter on 16 images of 56x56 (50176 products each), and a small filter on few pixels
    assert conv_grad_filter.plan(16, 512, 512, 1, _geo(56), np.float32) is not None
    assert conv_grad_filter.plan(1, 16, 16, 1, _geo(7), np.float32) is not None
    # the bound: m * 8 channels * 9 taps against ratio * 16 pixels of one 4x4 image
    m_at = -(-ratio * 16 // 72)
    assert conv_grad_filter.plan(1, 8, m_at, 1, _geo(4), np.float32) is None
    assert conv_grad_filter.plan(1, 8, m_at - 1, 1, _geo(4), np.float32) is not None


def _reference_dx(dy, w, h, stride, pad):
    """dX[n, c, y, x] = sum over m, a, b of dY[n, m, i, j] W[m, c, a, b] where y = i s + a - p (float64)."""
    n, m, oh, ow = dy.shape
    c, kh, kw = w.shape[1:]
    big = np.zeros((n, c, pad + oh * stride + kh, pad + ow * stride + kw))
    dy, w = dy.astype(np.float64), w.astype(np.float64)
    for a in range(kh):
        for b in range(kw):
            big[:, :, a : a + stride * oh : stride, b : b + stride * ow : stride] += np.einsum(
                "nmij,mc->ncij", dy, w[:, :, a, b]
            )
    return big[:, :, pad : pad + h, pad : pad + h]


@pytest.mark.parametrize("threads", [1, 2])
@pytest.mark.parametrize("n, c, m, h, s", [(2, 160, 96, 4, 1), (3, 96, 128, 6, 2), (2, 8, 8, 6, 1)])
def test_conv_gradient_on_either_path(threads, n, c, m, h, s):
    rng = np.random.default_rng(n * c + m)
    geo = _geo(h, s=s)
    o = geo.out[0]
    x = rng.standard_normal((n, c, h, h)).astype(np.float32)
    w = rng.standard_normal((m, c, 3, 3)).astype(np.float32)
    dy = rng.standard_normal((n, m, o, o)).astype(np.float32)
    gemm = m * c * 9 >= conv_grad_filter._GEMM_RATIO * n * o * o
    net = NetDef(name="choice")
    net.op.append(CreateOperator("ConvGradient", ["X", "W", "dY"], ["dW", "db", "dX"], kernel=3, stride=s, pad=1))
    old = get_num_threads()
    set_num_threads(threads)
    try:
        ws = Workspace()
        for name, v in (("X", x), ("W", w), ("dY", dy)):
            ws.feed_blob(name, v)
        created = ws.create_net(net)
        created.run()
        op = created.ops[0]
        if conv_grad_filter.available():
            assert (op._dwk is None) == gemm
        assert allocations_per_run(created.run, n=2, warm=1) == 0
        ref = reference_dw(x, dy, (3, 3), (s, s), (1, 1))
        np.testing.assert_allclose(ws.fetch_blob("dW"), ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())
        np.testing.assert_allclose(ws.fetch_blob("db"), dy.astype(np.float64).sum(axis=(0, 2, 3)), rtol=1e-4, atol=1e-3)
        ref_dx = _reference_dx(dy, w, h, s, 1)
        np.testing.assert_allclose(ws.fetch_blob("dX"), ref_dx, rtol=1e-4, atol=1e-4 * np.abs(ref_dx).max())
    finally:
        set_num_threads(old)
