"""Training-mode SpatialBN and SpatialBNGradient on the compiled one-pass kernels (framework/kernels/bn_train.py)
against an independent float64 numpy reference, against the numpy path, and by float32 central differences."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.kernels import bn_train
from framework.memory.workspace import Workspace

EPS, MOM = 1e-3, 0.9

shapes = st.tuples(st.integers(1, 5), st.integers(1, 6), st.integers(1, 7), st.integers(1, 7))


def reference(x, scale, bias, rm, rv, dy):
    """Forward outputs and (dX, dscale, dbias) of training-mode SpatialBN in float64 (Caffe2's formulas)."""
    x, dy = x.astype(np.float64), dy.astype(np.float64)
    axes = (0, 2, 3)
    b = (1, -1, 1, 1)
    n = x.size // x.shape[1]
    mean = x.mean(axis=axes)
    var = ((x - mean.reshape(b)) ** 2).mean(axis=axes)
    inv = 1 / np.sqrt(var + EPS)
    xhat = (x - mean.reshape(b)) * inv.reshape(b)
    y = xhat * scale.reshape(b) + bias.reshape(b)
    rm2 = rm * MOM + mean * (1 - MOM)
    rv2 = rv * MOM + var * (n / (n - 1) if n > 1 else 1.0) * (1 - MOM)
    dbias = dy.sum(axis=axes)
    dscale = (dy * xhat).sum(axis=axes)
    dx = (scale * inv).reshape(b) * (dy - dbias.reshape(b) / n - xhat * dscale.reshape(b) / n)
    return (y, rm2, rv2, mean, inv), (dx, dscale, dbias)


def _data(shape, seed):
    rng = np.random.default_rng(seed)
    c = shape[1]
    x = (rng.standard_normal(shape) * 2 + rng.standard_normal((1, c, 1, 1)) * 3).astype(np.float32)
    scale = (rng.random(c) + 0.5).astype(np.float32)
    bias = rng.standard_normal(c).astype(np.float32)
    rm = rng.standard_normal(c).astype(np.float32)
    rv = (rng.random(c) + 0.5).astype(np.float32)
    dy = rng.standard_normal(shape).astype(np.float32)
    return x, scale, bias, rm, rv, dy


def run_bn(x, scale, bias, rm, rv, dy):
    ws = Workspace()
    for k, v in dict(X=x, s=scale, b=bias, rm=rm, rv=rv, dY=dy).items():
        ws.feed_blob(k, v.copy())
    fwd = CreateOperator(
        "SpatialBN", ["X", "s", "b", "rm", "rv"], ["Y", "rm", "rv", "sm", "siv"], epsilon=EPS, momentum=MOM
    )
    grad = CreateOperator("SpatialBNGradient", ["X", "s", "dY", "sm", "siv"], ["dX", "ds", "db"], epsilon=EPS)
    ws.run_operator_once(fwd)
    ws.run_operator_once(grad)
    names = ("Y", "rm", "rv", "sm", "siv"), ("dX", "ds", "db")
    return tuple(tuple(ws.fetch_blob(k).copy() for k in group) for group in names)


def _close(got, want, rtol):
    scale = max(1.0, float(np.abs(want).max()))
    np.testing.assert_allclose(got, want, rtol=rtol, atol=rtol * scale)


@given(shape=shapes, seed=st.integers(0, 2**31 - 1))
@settings(max_examples=40, deadline=None)
def test_training_bn_matches_float64_reference(shape, seed):
    data = _data(shape, seed)
    (fwd, bwd), (rf, rb) = run_bn(*data), reference(*data)
    for got, want in zip(fwd + bwd, rf + rb):
        _close(got, want, 2e-4)


def test_kernels_apply_here():
    """The compiled path is the one under test above (where numba is available)."""
    x, scale, bias, rm, rv, dy = _data((2, 3, 4, 5), 0)
    vectors = [scale, bias, rm.copy(), rv.copy(), *(np.empty(3, np.float32) for _ in range(5))]
    y = np.empty_like(x)
    job = bn_train.spatial_bn_job(x, y, *vectors[:6], tuple(vectors[6:]), (EPS, MOM, 1 - MOM, 1 - MOM), 0)
    if job is None:
        pytest.skip("numba unavailable: the numpy path runs (covered by the reference test)")
    job()
    _close(vectors[4], x.mean(axis=(0, 2, 3)), 1e-6)
    _close(vectors[6], x.var(axis=(0, 2, 3)), 1e-5)
    x64 = x.astype(np.float64)
    assert bn_train.spatial_bn_job(x64, x64, *vectors[:6], tuple(vectors[6:]), (EPS,) * 4, 0) is None  # float32 only
    siv_is_rv = (*vectors[:5], vectors[3])
    assert bn_train.spatial_bn_job(x, y, *siv_is_rv, tuple(vectors[6:]), (EPS,) * 4, 0) is None  # overlapping


@given(shape=shapes, seed=st.integers(0, 2**31 - 1))
@settings(max_examples=20, deadline=None)
def test_compiled_path_agrees_with_numpy_path(shape, seed):
    data = _data(shape, seed)
    fast = run_bn(*data)
    with pytest.MonkeyPatch.context() as mp:
        for name in ("spatial_bn_job", "spatial_bn_grad_job"):
            mp.setattr(bn_train, name, lambda *a: None)
        slow = run_bn(*data)
    for got, want in zip(fast[0] + fast[1], slow[0] + slow[1]):
        _close(got, want, 1e-5)


@given(shape=shapes, seed=st.integers(0, 2**31 - 1))
@settings(max_examples=15, deadline=None)
def test_training_bn_float32_numerical_gradient(shape, seed):
    """Directional central differences of L = sum(Y * R) in float32 along a random direction of X."""
    x, scale, bias, rm, rv, r = _data(shape, seed)
    if x.size // x.shape[1] < 2:
        return  # one value per channel: Y is constant in X
    (_, (dx, _, _)) = run_bn(x, scale, bias, rm, rv, r)
    v = np.random.default_rng(seed + 1).standard_normal(x.shape).astype(np.float32)
    eps = np.float32(1e-2)

    def loss(xv):
        (y, *_), _ = run_bn(xv, scale, bias, rm, rv, r)
        return float((y.astype(np.float64) * r).sum())

    numeric = (loss(x + eps * v) - loss(x - eps * v)) / (2 * float(eps))
    analytic = float((dx.astype(np.float64) * v).sum())
    assert abs(analytic - numeric) <= 2e-2 * max(1.0, abs(numeric)) + 1e-3 * np.sqrt(x.size), (analytic, numeric)


def test_in_place_forward_and_repeated_runs():
    """Y written over X (Caffe2 allows it) and a second run over the new values."""
    x, scale, bias, rm, rv, _ = _data((3, 4, 5, 6), 7)
    ws = Workspace()
    for k, v in dict(X=x, s=scale, b=bias, rm=rm, rv=rv).items():
        ws.feed_blob(k, v.copy())
    op = CreateOperator("SpatialBN", ["X", "s", "b", "rm", "rv"], ["X", "rm", "rv", "sm", "siv"], epsilon=EPS)
    ws.run_operator_once(op)
    (y, rm2, rv2, _, _), _ = reference(x, scale, bias, rm, rv, x)
    _close(ws.fetch_blob("X"), y, 2e-4)
    ws.run_operator_once(op)  # the input is now normalized: mean ~bias, var ~scale^2
    (y2, _, _, m2, _), _ = reference(y.astype(np.float32), scale, bias, rm2.astype(np.float32), rv2, x)
    _close(ws.fetch_blob("X"), y2, 2e-4)
    _close(ws.fetch_blob("sm"), m2, 2e-4)


@given(
    shape=st.lists(st.integers(1, 9), min_size=1, max_size=4),
    seed=st.integers(0, 2**31 - 1),
    in_place=st.booleans(),
)
@settings(max_examples=30, deadline=None)
def test_relu_gradient_one_pass(shape, seed, in_place):
    """ReluGradient (compiled for float32) bit for bit as numpy's dY * (Y > 0) (NaN and -0.0 in Y mask, a NaN
    in dY stays); in a net run three times (its compiled fast path), and with dX written over dY."""
    from framework.proto.framework_pb2 import NetDef

    rng = np.random.default_rng(seed)
    y = np.maximum(rng.standard_normal(shape), 0).astype(np.float32)
    y.reshape(-1)[:: max(1, y.size // 3)] = np.nan
    y.reshape(-1)[1::5] = -0.0
    dy = rng.standard_normal(shape).astype(np.float32)
    dy.reshape(-1)[-1] = np.nan  # stays NaN whatever Y is (numpy's multiply by the mask)
    want = dy * (y > 0)
    ws = Workspace()
    ws.feed_blob("Y", y)
    ws.feed_blob("dY", dy.copy())
    out = "dY" if in_place else "dX"
    net = NetDef(name="relu_grad")
    net.op.append(CreateOperator("ReluGradient", ["Y", "dY"], [out]))
    created = ws.create_net(net)
    for _ in range(3):  # the first run prepares; later ones take the compiled closure
        ws.get_blob("dY").get_mutable().mutable_data()[...] = dy  # in place: the bound arrays stay
        created.run()
        got = ws.fetch_blob(out)
        np.testing.assert_array_equal(got, want)
        assert np.array_equal(np.signbit(got), np.signbit(want))
