"""UpsampleBilinear and its gradient against a per-pixel loop written from Caffe2's formula."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import ArgumentError, ShapeError, TypeMismatchError
from framework.memory.workspace import Workspace
from framework.ops import create_operator, get_gradient_for_op
from framework.ops.inference import infer_op
from framework.ops.testing import assert_gradient_checks, assert_reference_checks, spec_of
from tests.ops.helpers import run_once

f32 = np.float32
SCALES = st.sampled_from([0.5, 0.75, 1.0, 1.1, 1.5, 2.0, 2.5, 3.0])


def _axis(size, out):
    """Per output index: (low, high, weight of low, weight of high), float32 as Caffe2's loop."""
    r = f32(size - 1) / f32(out - 1) if out > 1 else f32(0)
    res = []
    for o in range(out):
        pos = r * f32(o)
        lo = int(pos)
        step = 1 if lo < size - 1 else 0
        frac = pos - f32(lo)
        res.append((lo, lo + step, f32(1) - frac, frac))
    return res


def upsample_ref(x, hs, ws):
    n, c, h, w = x.shape
    oh, ow = int(f32(h) * f32(hs)), int(f32(w) * f32(ws))
    y = np.zeros((n, c, oh, ow), np.float64)
    for i, (h0, h1, a0, a1) in enumerate(_axis(h, oh)):
        for j, (w0, w1, b0, b1) in enumerate(_axis(w, ow)):
            y[:, :, i, j] = a0 * (b0 * x[:, :, h0, w0] + b1 * x[:, :, h0, w1]) + a1 * (
                b0 * x[:, :, h1, w0] + b1 * x[:, :, h1, w1]
            )
    return y.astype(x.dtype)


def upsample_grad_ref(dy, x):
    n, c, oh, ow = dy.shape
    h, w = x.shape[2:]
    dx = np.zeros(x.shape, np.float64)
    for i, (h0, h1, a0, a1) in enumerate(_axis(h, oh)):
        for j, (w0, w1, b0, b1) in enumerate(_axis(w, ow)):
            g = dy[:, :, i, j].astype(np.float64)
            dx[:, :, h0, w0] += a0 * b0 * g
            dx[:, :, h0, w1] += a0 * b1 * g
            dx[:, :, h1, w0] += a1 * b0 * g
            dx[:, :, h1, w1] += a1 * b1 * g
    return dx.astype(dy.dtype)


images = st.tuples(st.integers(0, 2), st.integers(1, 3), st.integers(1, 5), st.integers(1, 5))


@settings(max_examples=40)
@given(shape=images, hs=SCALES, ws=SCALES, dtype=st.sampled_from([np.float32, np.float64]), seed=st.integers(0, 99))
def test_upsample_bilinear_matches_loop_reference(shape, hs, ws, dtype, seed):
    x = np.random.default_rng(seed).standard_normal(shape).astype(dtype)
    op = CreateOperator("UpsampleBilinear", ["X"], ["Y"], height_scale=hs, width_scale=ws)
    (y,) = assert_reference_checks(op, [x], lambda x: upsample_ref(x, hs, ws), threshold=1e-5)
    assert y.shape == (shape[0], shape[1], int(f32(shape[2]) * f32(hs)), int(f32(shape[3]) * f32(ws)))


@settings(max_examples=20)
@given(shape=images, hs=SCALES, ws=SCALES, seed=st.integers(0, 99))
def test_upsample_bilinear_gradient(shape, hs, ws, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape)
    op = CreateOperator("UpsampleBilinear", ["X"], ["Y"], height_scale=hs, width_scale=ws)
    if 0 < x.size <= 60:
        assert_gradient_checks(op, [x], 0)
    y = upsample_ref(x, hs, ws)
    dy = rng.standard_normal(y.shape)
    g = CreateOperator("UpsampleBilinearGradient", ["dY", "X"], ["dX"], height_scale=hs, width_scale=ws)
    assert_reference_checks(g, [dy, x], upsample_grad_ref)


def test_caffe2_doc_example_and_defaults():
    """A 2x2 image doubled: corners aligned, interior points at thirds."""
    x = np.array([[[[1.0, 2.0], [3.0, 4.0]]]], np.float32)
    op = CreateOperator("UpsampleBilinear", ["X"], ["Y"], width_scale=2.0, height_scale=2.0)
    row = lambda a, b: [a, a + (b - a) / 3, a + 2 * (b - a) / 3, b]  # noqa: E731
    top, bottom = row(1.0, 2.0), row(3.0, 4.0)
    expect = np.array([[row(t, b)[k] for t, b in zip(top, bottom)] for k in range(4)], np.float32)
    assert_reference_checks(op, [x], lambda x: expect[None, None], threshold=1e-6)
    # no scale arguments: identity
    assert_reference_checks(CreateOperator("UpsampleBilinear", ["X"], ["Y"]), [x], lambda x: x)


@settings(max_examples=15)
@given(shape=images, hs=SCALES, ws=SCALES, seed=st.integers(0, 99))
def test_scales_input_overrides_the_arguments(shape, hs, ws, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(np.float32)
    scales = np.array([hs, ws], np.float32)
    op = CreateOperator("UpsampleBilinear", ["X", "S"], ["Y"], height_scale=9.0, width_scale=9.0)
    (y,) = assert_reference_checks(op, [x, scales], lambda x, s: upsample_ref(x, hs, ws), check_inference=False)
    (spec,) = infer_op(op, [spec_of(x), spec_of(scales)], strict=True)  # value-dependent: H, W unknown
    assert spec.shape == (shape[0], shape[1], None, None) and spec.dtype == np.float32
    ops, g_in = get_gradient_for_op(op, ["Y_grad"])
    assert [o.type for o in ops] == ["UpsampleBilinearGradient"]
    assert list(ops[0].input) == ["Y_grad", "X", "S"] and g_in == ["X_grad", None]
    if 0 < x.size <= 60:
        assert_gradient_checks(op, [x.astype(np.float64), scales], 0)


def test_gradient_maker_follows_caffe2():
    ops, g_in = get_gradient_for_op(CreateOperator("UpsampleBilinear", ["X"], ["Y"], width_scale=2.0), ["Y_grad"])
    assert list(ops[0].input) == ["Y_grad", "X"] and list(ops[0].output) == ["X_grad"] and g_in == ["X_grad"]
    assert any(a.name == "width_scale" for a in ops[0].arg)


def test_errors_name_the_op_and_blob():
    x = np.zeros((1, 2, 3, 3), np.float32)
    with pytest.raises(ArgumentError, match=r'UpsampleBilinear "up".*must be > 0'):
        create_operator(CreateOperator("UpsampleBilinear", ["X"], ["Y"], name="up", width_scale=0.0), Workspace())
    with pytest.raises(ShapeError, match=r"UpsampleBilinear.*'X' must be 4-D.*\(2, 3, 3\)"):
        run_once(CreateOperator("UpsampleBilinear", ["X"], ["Y"]), [x[0]])
    with pytest.raises(TypeMismatchError, match=r"UpsampleBilinear.*'X' must hold floats.*int32"):
        run_once(CreateOperator("UpsampleBilinear", ["X"], ["Y"]), [x.astype(np.int32)])
    with pytest.raises(ShapeError, match=r"scales 'S' must be 1-D with 2 values.*\(3,\)"):
        run_once(CreateOperator("UpsampleBilinear", ["X", "S"], ["Y"]), [x, np.ones(3, np.float32)])
    with pytest.raises(ShapeError, match=r"scales 'S' must be > 0"):
        run_once(CreateOperator("UpsampleBilinear", ["X", "S"], ["Y"]), [x, np.array([1.0, -2.0], np.float32)])
    with pytest.raises(ShapeError, match=r"UpsampleBilinearGradient.*'dY'.*'X'.*differ in N or C"):
        run_once(
            CreateOperator("UpsampleBilinearGradient", ["dY", "X"], ["dX"]),
            [np.zeros((1, 3, 6, 6), np.float32), x],
        )


def test_against_torch_align_corners():
    torch = pytest.importorskip("torch")
    x = np.random.default_rng(5).standard_normal((2, 3, 4, 5)).astype(np.float32)
    ws = Workspace()
    ws.feed_blob("X", x)
    create_operator(CreateOperator("UpsampleBilinear", ["X"], ["Y"], height_scale=2.0, width_scale=3.0), ws).run()
    t = torch.nn.functional.interpolate(torch.from_numpy(x), size=(8, 15), mode="bilinear", align_corners=True)
    np.testing.assert_allclose(ws.fetch_blob("Y"), t.numpy(), rtol=1e-5, atol=1e-5)
