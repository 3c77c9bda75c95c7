"""The kernel strategies (framework/kernels/conv_strategies.py, pool_strategies.py, catalog.py): the
first enabled strategy that fits runs; turning one off hands its convs to the next; every compiled
family belongs to a strategy (or is shared), so ``framework warmup`` compiles and reports them all; each
conv strategy computes the float64 reference's values where it is chosen."""

from __future__ import annotations

import numpy as np
import pytest

from framework.kernels import catalog, conv_nchw, conv_strategies, kernel_support, pool_strategies, window_jit
from framework.kernels.dispatch_table import THRESHOLDS
from framework.kernels.geometry import Geometry
from tests.ops.nn.test_conv_fusion import ref_conv


def _geo(size, k, s, pad):
    out = (size + 2 * pad - k) // s + 1
    return Geometry((size, size), (k, k), (s, s), (1, 1), (pad, pad), (pad, pad), (out, out))


# (n, c, m, group, size, window, stride, pad, the strategy where its kernels are usable)
CONVS = [
    (1, 16, 24, 1, 17, 1, 1, 0, "pointwise_mk"),
    (1, 480, 20, 1, 1, 1, 1, 0, "pointwise"),  # one pixel (a squeeze-excitation's): BLAS's GEMM
    (1, 4100, 24, 1, 5, 1, 1, 0, "pointwise"),  # over POINTWISE_MK_C (and _MAX_C) channels: BLAS's GEMM
    (2, 8, 8, 8, 12, 3, 1, 1, "depthwise3"),
    (1, 8, 8, 8, 19, 5, 2, 2, "depthwise3"),
    (2, 8, 8, 8, 12, 7, 1, 3, "direct_depthwise"),
    (2, 8, 8, 8, 13, 7, 2, 3, "depthwise_planes"),
    (1, 8, 32, 1, 8, 3, 1, 1, "channel"),
    (2, 40, 48, 1, 7, 1, 1, 0, "channel"),  # 1x1 on a 7x7 image: output channels in the lanes
    (16, 256, 256, 1, 30, 3, 1, 1, "winograd"),
    (2, 8, 16, 1, 20, 3, 1, 1, "direct"),
    (2, 4, 6, 2, 9, 3, 1, 1, "im2col"),  # groups
]


def _usable(strategy) -> bool:
    return not strategy.families or (window_jit.available() and all(map(kernel_support.usable, strategy.families)))


@pytest.mark.parametrize("case", CONVS, ids=[c[-1] for c in CONVS])
def test_each_conv_strategy_is_chosen_where_it_fits_and_computes_the_reference(case):
    n, c, m, group, size, k, s, pad, name = case
    strategy = conv_strategies.BY_NAME[name]
    if not _usable(strategy):
        pytest.skip(f"'{name}' is not usable here")
    geo = _geo(size, k, s, pad)
    chosen = conv_strategies.choose(geo, c, m, group, np.float32, n)
    assert chosen is strategy
    assert conv_nchw.conv_kind(geo, c, m, group, np.float32, n) == strategy.kind
    rng = np.random.default_rng(0)
    x = rng.standard_normal((n, c, size, size)).astype(np.float32)
    w = rng.standard_normal((m, c // group, k, k)).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float32)
    conv = conv_nchw.ConvNCHW(n, c, m, group, geo, np.float32, True)
    assert conv.strategy is strategy
    y = np.empty((n, m, *geo.out), np.float32)
    conv.run(x, w, b, y)
    want = ref_conv(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64), s, pad, group)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-3 * np.abs(want).max())


@pytest.mark.parametrize("window", [(2, 1), (1, 2), (1, 3), (3, 1), (1, 5), (2, 3)])
def test_rectangular_windows_over_few_channels_run_direct(window):
    """The 2x1 and 1x2 phases of a strided conv's dX, 1xk and kx1 convs: the direct kernel (whose parts run as
    native jobs), not im2col, while C x taps is at most DIRECT_K; values as the float64 reference."""
    if not _usable(conv_strategies.DIRECT):
        pytest.skip("'direct' is not usable here")
    (kh, kw), n, c, m, size, pad = window, 3, 12, 20, 15, 1
    out = (size + 2 * pad - kh + 1, size + 2 * pad - kw + 1)
    geo = Geometry((size, size), window, (1, 1), (1, 1), (pad, pad), (pad, pad), out)
    assert c * kh * kw <= THRESHOLDS["DIRECT_K"]
    conv = conv_nchw.ConvNCHW(n, c, m, 1, geo, np.float32, True)
    assert conv.strategy is conv_strategies.DIRECT
    rng = np.random.default_rng(kh * 10 + kw)
    x = rng.standard_normal((n, c, size, size)).astype(np.float32)
    w = rng.standard_normal((m, c, kh, kw)).astype(np.float32)
    b = rng.standard_normal(m).astype(np.float32)
    y = np.empty((n, m, *out), np.float32)
    conv.run(x, w, b, y)
    want = ref_conv(x.astype(np.float64), w.astype(np.float64), b.astype(np.float64), 1, pad, 1)
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-3 * np.abs(want).max())


@pytest.mark.parametrize("case", CONVS[:-1], ids=[c[-1] for c in CONVS[:-1]])
def test_a_disabled_strategy_hands_its_convs_to_the_next_that_fits(case, monkeypatch):
    n, c, m, group, size, k, s, pad, name = case
    strategy = conv_strategies.BY_NAME[name]
    geo = _geo(size, k, s, pad)
    monkeypatch.setattr(strategy, "enabled", False)
    chosen = conv_strategies.choose(geo, c, m, group, np.float32, n)
    assert chosen is not strategy
    later = conv_strategies.STRATEGIES[conv_strategies.STRATEGIES.index(strategy) + 1 :]
    assert chosen in later and chosen.fits(geo, c, m, group, np.float32, n)


def test_thresholds_are_read_from_the_table_when_a_conv_is_prepared(monkeypatch):
    """A 3x3 conv 16 -> 16 onto 20x20 runs direct from DIRECT_OW columns on: moving the threshold in the
    table moves the choice, with nothing reloaded."""
    if not _usable(conv_strategies.DIRECT):
        pytest.skip("the direct kernel is not usable here")
    geo = _geo(20, 3, 1, 1)
    assert conv_strategies.choose(geo, 16, 16, 1).name == "direct"
    monkeypatch.setitem(THRESHOLDS, "DIRECT_OW", 21)
    assert conv_strategies.choose(geo, 16, 16, 1).name == "im2col"


def test_float64_and_dilated_convs_take_the_numpy_strategies():
    geo = _geo(20, 3, 1, 1)
    assert conv_strategies.choose(geo, 16, 16, 1, np.float64).name == "im2col"
    assert conv_strategies.choose(geo, 8, 8, 8, np.float64).name == "depthwise"
    assert conv_strategies.choose(_geo(20, 1, 1, 0), 16, 16, 1, np.float64).name == "pointwise"
    dilated = geo._replace(dilation=(2, 2), out=(18, 18))
    assert conv_strategies.choose(dilated, 16, 16, 1).name == "im2col"


def test_pool_strategies_choose_in_order(monkeypatch):
    two, three, five = _geo(8, 2, 2, 0), _geo(9, 3, 2, 1), _geo(9, 5, 1, 2)
    assert pool_strategies.choose(five, np.float32, "max") is pool_strategies.SEPARABLE
    assert pool_strategies.choose(two, np.float64, "avg") is None  # the op's own per-cell fold
    assert pool_strategies.choose(three, np.float64, "max") is pool_strategies.SEPARABLE
    if window_jit.available() and kernel_support.usable("max_pool") and kernel_support.usable("pool"):
        assert pool_strategies.choose(three, np.float32, "max") is pool_strategies.MAX_POOL
        assert pool_strategies.choose(three, np.float32, "avg") is pool_strategies.POOL_PLANES
        monkeypatch.setattr(pool_strategies.MAX_POOL, "enabled", False)
        assert pool_strategies.choose(three, np.float32, "max") is pool_strategies.POOL_PLANES
    if window_jit.available() and kernel_support.usable("pool2x2"):
        assert pool_strategies.choose(two, np.float32, "avg") is pool_strategies.POOL2X2


def test_every_compiled_family_belongs_to_a_strategy_or_is_shared():
    """What ``framework warmup`` compiles (catalog.families, then catalog.OTHERS) is every family
    kernel_support knows, each once, and each strategy names only known families; names are unique."""
    others = [family for family, _, _ in catalog.OTHERS]
    assert sorted(catalog.families() + others) == sorted(kernel_support.NEEDS)
    for _, strategy in catalog.strategies():
        assert set(strategy.families) <= set(kernel_support.NEEDS), strategy
    names = [(op, s.name) for op, s in catalog.strategies()]
    assert len(names) == len(set(names))
    assert catalog.status(conv_strategies.IM2COL) == "numpy"


def test_status_names_what_a_cpu_lacks(monkeypatch):
    pytest.importorskip("numba")
    if not window_jit.available():
        pytest.skip("numba kernels unavailable")
    monkeypatch.setattr(kernel_support, "_FEATURES", [kernel_support.host_features() - {"fma"}])
    assert catalog.status(conv_strategies.DIRECT) == "not for this CPU (lacks fma)"
    assert catalog.status(conv_strategies.DEPTHWISE_PLANES) == "ready"  # plain numba loops: any CPU
