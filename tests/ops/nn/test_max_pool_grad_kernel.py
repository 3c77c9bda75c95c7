"""MaxPoolGradient's compiled 2-D NCHW pass (framework/kernels/bn_train.py) against a float64 window loop
written here from Caffe2's rule (every cell equal to its window's max gets the window's dY), with ties,
padding and strides; the same values at one and two intra-op threads; the numpy path where it does not apply."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.kernels import bn_train
from framework.proto.framework_pb2 import NetDef
from tests.ops.threaded import assert_same, run_threads


def _reference(x, y, dy, k, s, p):
    n, c, h, w = x.shape
    _, _, oh, ow = y.shape
    dx = np.zeros(x.shape, np.float64)
    for i in range(oh):
        for j in range(ow):
            h0, w0 = i * s - p, j * s - p
            for a in range(max(h0, 0), min(h0 + k, h)):
                for b in range(max(w0, 0), min(w0 + k, w)):
                    hit = x[:, :, a, b] == y[:, :, i, j]
                    dx[:, :, a, b] += np.where(hit, dy[:, :, i, j].astype(np.float64), 0.0)
    return dx


def _net(k, s, p) -> NetDef:
    net = NetDef(name="maxpool_grad", external_input=["x", "dy"])
    net.op.extend(
        [
            CreateOperator("MaxPool", ["x"], ["y"], kernel=k, stride=s, pad=p),
            CreateOperator("MaxPoolGradient", ["x", "y", "dy"], ["dx"], kernel=k, stride=s, pad=p),
        ]
    )
    return net


def _out(size, k, s, p):
    return (size + 2 * p - k) // s + 1


@settings(max_examples=15, deadline=None)
@given(
    n=st.integers(1, 3),
    c=st.integers(1, 4),
    hw=st.integers(3, 11),
    geo=st.sampled_from([(3, 2, 1), (2, 2, 0), (3, 1, 1), (3, 2, 0), (2, 1, 0)]),
    ties=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_compiled_max_pool_gradient_matches_window_loop(n, c, hw, geo, ties, seed):
    k, s, p = geo
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, c, hw, hw)).astype(np.float32)
    if ties:
        x = np.round(x).astype(np.float32)  # few distinct values: windows share their max cells
    o = _out(hw, k, s, p)
    dy = rng.standard_normal((n, c, o, o)).astype(np.float32)
    results, tasks, allocs = run_threads(_net(k, s, p), {"x": x, "dy": dy}, ["y", "dx"], min_work=1)
    assert (tasks > 0 or n * c == 1) and allocs == 0  # one plane is never split
    assert_same(results)  # the planes are split: each as on one thread
    ref = _reference(x, results[1]["y"], dy, k, s, p)
    np.testing.assert_allclose(results[2]["dx"], ref, rtol=1e-6, atol=1e-6)


def test_kernel_applies_to_float32_nchw_only():
    if not bn_train.available():
        return
    from framework.kernels.geometry import Geometry

    geo = Geometry((4, 4), (2, 2), (2, 2), (1, 1), (0, 0), (0, 0), (2, 2))
    x = np.arange(32, dtype=np.float32).reshape(1, 2, 4, 4)
    y = x[:, :, 1::2, 1::2].copy()
    dy = np.ones_like(y)
    dx = np.full_like(x, 7.0)
    assert bn_train.max_pool_grad(x, y, dy, dx, geo)
    expect = np.zeros_like(x)
    expect[:, :, 1::2, 1::2] = 1.0
    np.testing.assert_array_equal(dx, expect)
    x64 = x.astype(np.float64)
    assert not bn_train.max_pool_grad(x64, y.astype(np.float64), dy.astype(np.float64), np.empty_like(x64), geo)


def test_float64_takes_the_numpy_path_with_the_same_rule():
    rng = np.random.default_rng(3)
    x = np.round(rng.standard_normal((2, 3, 7, 7))).astype(np.float64)
    dy = rng.standard_normal((2, 3, 4, 4))
    results, _, _ = run_threads(_net(3, 2, 1), {"x": x, "dy": dy}, ["y", "dx"], threads=(1,))
    np.testing.assert_allclose(results[1]["dx"], _reference(x, results[1]["y"], dy, 3, 2, 1), rtol=1e-12)


def test_resnet_stem_sized_pooling_splits_by_default():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 16, 56, 56)).astype(np.float32)
    dy = rng.standard_normal((2, 16, 28, 28)).astype(np.float32)
    results, tasks, allocs = run_threads(_net(3, 2, 1), {"x": x, "dy": dy}, ["dx"])
    assert tasks > 0 and allocs == 0
    assert_same(results)
