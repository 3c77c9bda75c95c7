"""The compiled filter gradient of 2-D NCHW convs (framework/kernels/conv_grad_filter.py): against an
independent float64 numpy reference over sizes, kernels, strides and pads; the same bits on one thread and
two; where it applies; ConvGradient running it (no column buffer) and falling back to its column path when
the compile fails or the CPU lacks FMA; no buffer allocated per warm run; the 8-lane build on a CPU
without AVX-512."""

from __future__ import annotations

import os
import subprocess
import sys
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from bench.common import allocations_per_run
from framework.core import CreateOperator
from framework.kernels import conv_grad_filter, kernel_support
from framework.kernels.geometry import Geometry
from framework.memory.workspace import Workspace
from framework.proto.framework_pb2 import NetDef
from framework.runtime.parallel import get_num_threads, set_num_threads

pytest.importorskip("numba")
pytestmark = pytest.mark.skipif(
    not conv_grad_filter.available(), reason="the compiled filter gradient needs numba and AVX2 + FMA"
)


def reference_dw(x, dy, kernel, stride, head):
    """dW[m, c, a, b] = sum over n, i, j of dY[n, m, i, j] X[n, c, i sh + a - ph, j sw + b - pw] (zero
    outside X), in float64 by one einsum per tap."""
    x, dy = x.astype(np.float64), dy.astype(np.float64)
    (kh, kw), (sh, sw), (ph, pw) = kernel, stride, head
    n, c, h, w = x.shape
    m, oh, ow = dy.shape[1:]
    big = np.zeros((n, c, ph + oh * sh + kh, pw + ow * sw + kw))
    big[:, :, ph : ph + h, pw : pw + w] = x
    dw = np.zeros((m, c, kh, kw))
    for a in range(kh):
        for b in range(kw):
            win = big[:, :, a : a + sh * oh : sh, b : b + sw * ow : sw]
            dw[:, :, a, b] = np.einsum("nmij,ncij->mc", dy, win)
    return dw


@st.composite
def geometries(draw):
    kh, kw = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    sh, sw = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    ph, pw = draw(st.integers(0, kh)), draw(st.integers(0, kw))
    pb, pr = draw(st.integers(0, kh)), draw(st.integers(0, kw))
    h = draw(st.integers(max(1, kh - ph - pb), 20))
    w = draw(st.integers(max(1, kw - pw - pr), 20))
    oh, ow = (h + ph + pb - kh) // sh + 1, (w + pw + pr - kw) // sw + 1
    return Geometry((h, w), (kh, kw), (sh, sw), (1, 1), (ph, pw), (pb, pr), (oh, ow))


def _data(n, c, m, geo, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c, *geo.spatial)).astype(np.float32)
    dy = rng.standard_normal((n, m, *geo.out)).astype(np.float32)
    return x, dy


def _check(dw, ref):
    np.testing.assert_allclose(dw, ref, rtol=1e-4, atol=1e-4 * max(1.0, np.abs(ref).max()))


@given(geo=geometries(), n=st.integers(1, 5), c=st.integers(1, 9), m=st.integers(1, 11), seed=st.integers(0, 2**31 - 1))
@settings(max_examples=80, deadline=None)
def test_kernel_matches_reference(geo, n, c, m, seed):
    x, dy = _data(n, c, m, geo, seed)
    fg = conv_grad_filter.plan(n, c, m, 1, geo, np.float32)
    dw = np.full((m, c, *geo.kernel), np.nan, np.float32)  # every cell written
    assert fg.run(x, dy, dw)
    _check(dw, reference_dw(x, dy, geo.kernel, geo.stride, geo.head))
    assert fg.run(x, 2 * dy, dw)  # a second run overwrites: nothing carried over
    _check(dw, 2 * reference_dw(x, dy, geo.kernel, geo.stride, geo.head))


@pytest.mark.parametrize(
    "n, c, m, hw, k, s, p",
    [
        (4, 16, 16, 32, 3, 1, 1),
        (3, 16, 32, 32, 3, 2, 1),
        (3, 16, 32, 32, 1, 2, 0),
        (9, 64, 64, 7, 3, 1, 1),
        (5, 24, 128, 8, 3, 1, 1),
        (6, 8, 16, 14, 3, 2, 1),
    ],
)
def test_resnet_shapes_and_image_runs(n, c, m, hw, k, s, p):
    """ResNet's shapes (the 7x7 maps take runs of several images per register block) and their
    stride-2 and 1x1 projections, with the layout chosen for them (small maps: over channels)."""
    o = (hw + 2 * p - k) // s + 1
    geo = Geometry((hw, hw), (k, k), (s, s), (1, 1), (p, p), (p, p), (o, o))
    x, dy = _data(n, c, m, geo, 5)
    dw = np.empty((m, c, k, k), np.float32)
    fg = conv_grad_filter.plan(n, c, m, 1, geo, np.float32)
    assert fg.mode == ("channels" if hw <= 8 and k == 3 else "pixels")
    assert fg.run(x, dy, dw)
    _check(dw, reference_dw(x, dy, geo.kernel, geo.stride, geo.head))


@given(
    geo=geometries(),
    n=st.integers(1, 4),
    m=st.integers(1, 150),
    mode=st.sampled_from(["pixels", "channels"]),
    seed=st.integers(0, 2**31 - 1),
)
@settings(max_examples=20, deadline=None)
def test_two_threads_give_the_same_bits(geo, n, m, mode, seed):
    """Split over images (layout) and blocks of output channels (sums): each dW cell is summed in the same
    order as on one thread."""
    c = 3
    x, dy = _data(n, c, m, geo, seed)
    one = np.empty((m, c, *geo.kernel), np.float32)
    assert conv_grad_filter.plan(n, c, m, 1, geo, np.float32, mode).run(x, dy, one)
    old = get_num_threads()
    set_num_threads(2)
    try:
        fg = conv_grad_filter.plan(n, c, m, 1, geo, np.float32, mode)
        two = np.empty_like(one)
        for _ in range(2):  # the first run is serial (it may compile); the second on the threads
            assert fg.run(x, dy, two)
    finally:
        set_num_threads(old)
    np.testing.assert_array_equal(one, two)


@pytest.mark.parametrize("n", [1, 5])
def test_two_threads_split_the_copy_out_and_the_filter_packs_with_the_same_bits(monkeypatch, n):
    """The channels layout's copy-out of dW (one half, or two halves summed) and the forward kernels' filter
    packs split by rows over two threads as native jobs (thresholds lowered here): one thread's bits."""
    from framework.kernels import channel_kernel, native_pool, window_jit

    monkeypatch.setattr(conv_grad_filter, "COPY_SPLIT_MIN", 1)
    monkeypatch.setattr(window_jit, "PACK_SPLIT_MIN", 1)
    geo = Geometry((6, 6), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1), (6, 6))
    c, m = 5, 70
    x, dy = _data(n, c, m, geo, 3)
    one = np.empty((m, c, 3, 3), np.float32)
    assert conv_grad_filter.plan(n, c, m, 1, geo, np.float32, "channels").run(x, dy, one)
    w = np.random.default_rng(1).standard_normal((m, c * 9)).astype(np.float32)
    packed_one = np.full(channel_kernel.padded_channels(m, 2) * c * 9, np.nan, np.float32)
    channel_kernel.pack(w, 2, packed_one)
    jobs = []
    real_run = native_pool.run
    monkeypatch.setattr(native_pool, "run", lambda *a: (jobs.append(a[2]), real_run(*a)))
    old = get_num_threads()
    set_num_threads(2)
    try:
        fg = conv_grad_filter.plan(n, c, m, 1, geo, np.float32, "channels")
        two = np.empty_like(one)
        for _ in range(2):  # the first run is serial (it may compile); the second on the threads
            assert fg.run(x, dy, two)
        copy_jobs = len(jobs)
        packed_two = np.full_like(packed_one, np.nan)
        assert window_jit._pack_split(channel_kernel, w, 2, packed_two)
    finally:
        set_num_threads(old)
    assert copy_jobs >= 2 and len(jobs) == copy_jobs + 1  # the sums' job and the copy-out's, then the pack's
    np.testing.assert_array_equal(one, two)
    np.testing.assert_array_equal(packed_one, packed_two)


def test_plan_applies_to_group_one_undilated_float32_2d_only():
    g = Geometry((8, 8), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1), (8, 8))
    assert conv_grad_filter.plan(2, 4, 4, 1, g, np.float32) is not None
    assert conv_grad_filter.plan(2, 4, 4, 2, g, np.float32) is None
    assert conv_grad_filter.plan(2, 4, 4, 1, g._replace(dilation=(2, 1)), np.float32) is None
    assert conv_grad_filter.plan(2, 4, 4, 1, g, np.float64) is None
    g3 = Geometry((4, 4, 4), (3, 3, 3), (1,) * 3, (1,) * 3, (1,) * 3, (1,) * 3, (4, 4, 4))
    assert conv_grad_filter.plan(2, 4, 4, 1, g3, np.float32) is None


def _grad_net(k=3, s=1, p=1):
    net = NetDef(name="dw")
    net.op.append(CreateOperator("ConvGradient", ["X", "W", "dY"], ["dW", "db", "dX"], kernel=k, stride=s, pad=p))
    return net


def _run_op(x, w, dy, **geo):
    ws = Workspace()
    for name, v in (("X", x), ("W", w), ("dY", dy)):
        ws.feed_blob(name, v)
    net = ws.create_net(_grad_net(**geo))
    net.run()
    return net, ws


def _op_data(s=1):
    rng = np.random.default_rng(2)
    x = rng.standard_normal((3, 5, 9, 9)).astype(np.float32)
    w = rng.standard_normal((7, 5, 3, 3)).astype(np.float32)
    o = (9 + 2 - 3) // s + 1
    return x, w, rng.standard_normal((3, 7, o, o)).astype(np.float32)


@pytest.mark.parametrize("s", [1, 2])
def test_conv_gradient_runs_it_without_columns_and_allocates_nothing_when_warm(s):
    x, w, dy = _op_data(s)
    net, ws = _run_op(x, w, dy, s=s)
    op = net.ops[0]
    assert op._dwk is not None and op._col.size == 0
    _check(ws.fetch_blob("dW"), reference_dw(x, dy, (3, 3), (s, s), (1, 1)))
    np.testing.assert_allclose(ws.fetch_blob("db"), dy.sum(axis=(0, 2, 3)), rtol=1e-5, atol=1e-4)
    assert allocations_per_run(net.run, n=3, warm=1) == 0


@pytest.fixture
def fresh(monkeypatch):
    """No family disabled and no kernel called yet, as in a new process (restored afterwards)."""
    monkeypatch.setattr(kernel_support, "_DISABLED", {})
    monkeypatch.setattr(kernel_support, "_COMPILED", set())
    return monkeypatch


def test_failed_compile_warns_once_and_the_column_path_runs(fresh):
    mod = conv_grad_filter._module()
    calls = []

    def broken(*args):
        calls.append(1)
        raise RuntimeError("injected: LLVM cannot select this intrinsic")

    fresh.setattr(mod, "_fill", broken)
    x, w, dy = _op_data()
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        _, ws = _run_op(x, w, dy)
        _, ws2 = _run_op(x, w, dy)  # the family is disabled: planned without the kernel, no second warning
    ours = [str(m.message) for m in seen if "'conv_grad_filter'" in str(m.message)]
    assert len(ours) == 1 and "injected" in ours[0], ours
    assert calls == [1] and "conv_grad_filter" in kernel_support.disabled()
    assert not conv_grad_filter.available()
    for got in (ws, ws2):
        _check(got.fetch_blob("dW"), reference_dw(x, dy, (3, 3), (1, 1), (1, 1)))


def test_without_fma_the_column_path_runs(fresh):
    fresh.setattr(kernel_support, "_FEATURES", [kernel_support.host_features() - {"fma"}])
    assert kernel_support.missing("conv_grad_filter") == ("fma",)
    g = Geometry((8, 8), (3, 3), (1, 1), (1, 1), (1, 1), (1, 1), (8, 8))
    assert conv_grad_filter.plan(2, 4, 4, 1, g, np.float32) is None
    x, w, dy = _op_data()
    net, ws = _run_op(x, w, dy)
    _check(ws.fetch_blob("dW"), reference_dw(x, dy, (3, 3), (1, 1), (1, 1)))


_EIGHT_LANES = """
import numpy as np
from framework.kernels import conv_grad_filter, simd_ir
from framework.kernels.geometry import Geometry
from tests.ops.nn.test_conv_grad_filter import reference_dw
assert simd_ir.L == 8 and conv_grad_filter._module().R == 3
rng = np.random.default_rng(0)
for k, s, p, hw in ((3, 1, 1, 11), (3, 2, 1, 13), (1, 1, 0, 5), (5, 2, 2, 9)):
    o = (hw + 2 * p - k) // s + 1
    geo = Geometry((hw, hw), (k, k), (s, s), (1, 1), (p, p), (p, p), (o, o))
    x = rng.standard_normal((3, 5, hw, hw)).astype(np.float32)
    dy = rng.standard_normal((3, 7, o, o)).astype(np.float32)
    ref = reference_dw(x, dy, (k, k), (s, s), (p, p))
    for mode in ("pixels", "channels"):
        dw = np.empty((7, 5, k, k), np.float32)
        assert conv_grad_filter.plan(3, 5, 7, 1, geo, np.float32, mode).run(x, dy, dw)
        np.testing.assert_allclose(dw, ref, rtol=1e-4, atol=1e-4 * np.abs(ref).max())
print("eight lanes ok")
"""


def test_the_8_lane_build_matches_reference():
    """Without AVX-512 (masked off) the kernel is built for 8 lanes and a 3 x 3 block."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))
    env = dict(os.environ, FRAMEWORK_CPU_FEATURES="-avx512f", PYTHONPATH=root)
    out = subprocess.run(
        [sys.executable, "-c", _EIGHT_LANES], env=env, cwd=root, capture_output=True, text=True, timeout=900
    )
    assert out.returncode == 0 and "eight lanes ok" in out.stdout, out.stderr[-4000:]


def test_warm_up_compiles_both_kernels(fresh):
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)
        conv_grad_filter.warm_up()
    mod = conv_grad_filter._module()
    for fn in (mod._fill, mod._accumulate, mod._transpose_dy, mod._accumulate_m):
        assert fn in kernel_support._COMPILED, fn


@pytest.mark.parametrize("s", [1, 2])
def test_empty_batch_gives_zero_gradients(s):
    """No images: the kernel is not planned; the column path gives dW = 0 and db = 0 (Caffe2's sums over
    nothing) and an empty dX."""
    x = np.zeros((0, 5, 9, 9), np.float32)
    w = np.ones((7, 5, 3, 3), np.float32)
    o = (9 + 2 - 3) // s + 1
    net, ws = _run_op(x, w, np.zeros((0, 7, o, o), np.float32), s=s)
    assert net.ops[0]._dwk is None
    np.testing.assert_array_equal(ws.fetch_blob("dW"), np.zeros((7, 5, 3, 3), np.float32))
    np.testing.assert_array_equal(ws.fetch_blob("db"), np.zeros(7, np.float32))
    assert ws.fetch_blob("dX").shape == (0, 5, 9, 9)
