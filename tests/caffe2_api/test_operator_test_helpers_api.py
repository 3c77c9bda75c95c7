"""caffe2.python.operator_test helper modules: adagrad_test_helper, fused_nbit_rowwise_test_helper,
detectron_keypoints, each against a reference written here from the maths."""

import functools
import importlib

import numpy as np
import pytest

import framework.caffe2 as hook
from framework.caffe2.python import hypothesis_test_util as hu


def _helper(name):
    hook.install()
    return importlib.import_module(f"caffe2.python.operator_test.{name}")


# -- adagrad -------------------------------------------------------------------------------------------


def test_ref_adagrad_step():
    ag = _helper("adagrad_test_helper")
    p, m, g = np.array([1.0, 2.0], np.float32), np.array([0.5, 1.0], np.float32), np.array([3.0, -1.0], np.float32)
    lr, eps, wd = np.float32(-0.1), 1e-4, 0.5
    g2 = g + wd * p  # weight decay enters the gradient
    m2 = 0.9 * m + g2**2
    lr_eff = lr / (np.sqrt(m2) + eps)
    out = ag.ref_adagrad(p, m, g, lr, eps, decay=0.9, weight_decay=wd, output_effective_lr_and_update=True)
    np.testing.assert_allclose(out[0], p + lr_eff * g2, rtol=1e-6)
    np.testing.assert_allclose(out[1], m2, rtol=1e-6)
    np.testing.assert_allclose(out[2], lr_eff, rtol=1e-6)
    np.testing.assert_allclose(out[3], lr_eff * g2, rtol=1e-6)
    assert all(o.dtype == np.float32 for o in out)
    assert len(ag.ref_adagrad(p, m, g, lr, eps, output_effective_lr=True)) == 3
    # row-wise: one moment for the row, the mean of the squared gradient
    pr, mr = ag.ref_adagrad(p, np.float32(0.5), g, lr, eps, row_wise=True)
    m_row = 0.5 + np.mean(g**2)
    np.testing.assert_allclose(mr, m_row, rtol=1e-6)
    np.testing.assert_allclose(pr, p + lr / (np.sqrt(m_row) + eps) * g, rtol=1e-6)
    half = ag.ref_adagrad(p.astype(np.float16), m.astype(np.float16), g, lr, eps, using_fp16=True)
    assert half[0].dtype == np.float16


class _Case(hu.HypothesisTestCase):
    def runTest(self):  # noqa: N802
        pass


@pytest.mark.parametrize("row_wise", [False, True])
def test_sparse_helper_checks_the_sparse_op(row_wise):
    ag = _helper("adagrad_test_helper")
    rng = np.random.RandomState(3)
    np.random.seed(3)
    inputs = tuple(rng.randn(5, 3).astype(np.float32) for _ in range(3))
    # the caller binds row_wise into the reference, as Caffe2's tests do
    ref = functools.partial(ag.ref_adagrad, row_wise=row_wise)
    ag.adagrad_sparse_test_helper(_Case(), inputs, 0.1, 1e-4, "", ref, hu.cpu_do, [hu.cpu_do], row_wise)


def test_sparse_helper_on_one_dimensional_tables():
    ag = _helper("adagrad_test_helper")
    np.random.seed(4)
    inputs = tuple(np.random.randn(6).astype(np.float32) for _ in range(3))
    ag.adagrad_sparse_test_helper(_Case(), inputs, 0.1, 1e-4, "", ag.ref_adagrad, hu.cpu_do, [hu.cpu_do])


def test_sparse_helper_fails_on_a_wrong_reference():
    ag = _helper("adagrad_test_helper")
    np.random.seed(5)
    inputs = tuple(np.random.randn(6, 2).astype(np.float32) for _ in range(3))

    def wrong(param, mom, grad, lr, epsilon, **kw):
        p, m = ag.ref_adagrad(param, mom, grad, lr, epsilon, **kw)
        return p + 1, m

    with pytest.raises(AssertionError):
        for _ in range(5):  # the helper picks a random subset of rows, possibly empty
            ag.adagrad_sparse_test_helper(_Case(), inputs, 0.1, 1e-4, "", wrong, hu.cpu_do, [hu.cpu_do])


# -- fused n-bit greedy --------------------------------------------------------------------------------


def test_compress_uniform_error():
    nb = _helper("fused_nbit_rowwise_test_helper")
    x = np.array([0.0, 0.1, 0.5, 0.9, 1.0, 0.3, 0.7, 0.2, 0.6, 0.45], np.float32)
    xq, loss = nb._compress_uniform_simplified(x, 2, np.float32(0.0), np.float32(1.0))
    scale = np.float32(np.float16(1 / 3))
    expected = np.clip(np.round(x / scale), 0, 3) * scale
    np.testing.assert_allclose(xq, expected, rtol=1e-6)
    np.testing.assert_allclose(loss, np.sqrt(np.sum((x.astype(np.float64) - expected) ** 2)), rtol=1e-5)
    # a constant row: scale 1, no error
    same = np.full(4, 2.5, np.float32)
    xq, loss = nb._compress_uniform_simplified(same, 4, np.float32(2.5), np.float32(2.5))
    np.testing.assert_array_equal(xq, same)
    assert loss == 0


def test_greedy_search_narrows_the_range_of_an_outlier():
    nb = _helper("fused_nbit_rowwise_test_helper")
    rng = np.random.default_rng(0)
    x = np.concatenate([rng.uniform(-1, 1, 63), [40.0]]).astype(np.float32)
    lo, hi = nb.param_search_greedy(x, 2)
    _, full = nb._compress_uniform_simplified(x, 2, x.min(), x.max())
    _, best = nb._compress_uniform_simplified(x, 2, lo, hi)
    assert x.min() <= lo < hi <= x.max()
    assert best <= full
    # never narrower than (1 - ratio) of the range, in steps of range / n_bins
    step = (x.max() - x.min()) / 200
    assert hi - lo >= 0.84 * 200 * step - 2 * step
    # a uniform row is best quantized over its full range
    u = np.linspace(0, 1, 16, dtype=np.float32)
    assert nb.param_search_greedy(u, 4) == (u.min(), u.max())


# -- detectron keypoints -------------------------------------------------------------------------------


def test_approx_keypoint_recovers_a_quadratic_peak():
    kp = _helper("detectron_keypoints")
    size = 8
    yy, xx = np.mgrid[0:size, 0:size].astype(np.float64)
    px, py = 3.3, 4.6  # sub-cell maximum of an exact quadratic
    heat = (5.0 - (xx - px) ** 2 - 0.5 * (yy - py) ** 2).astype(np.float32)
    boxes = np.array([[10.0, 20.0, 26.0, 36.0]], np.float32)
    out = kp.approx_heatmap_keypoint(heat[None, None], boxes)
    assert out.shape == (1, 4, 1)
    np.testing.assert_allclose(out[0, 0, 0], 10 + (px + 0.5) * 16 / size, rtol=1e-5)
    np.testing.assert_allclose(out[0, 1, 0], 20 + (py + 0.5) * 16 / size, rtol=1e-5)
    np.testing.assert_allclose(out[0, 2, 0], 5.0, rtol=1e-5)
    probs = np.exp(heat - heat.max()) / np.exp(heat - heat.max()).sum()
    np.testing.assert_allclose(out[0, 3, 0], probs.max(), rtol=1e-5)


def test_approx_keypoint_at_the_border_mirrors():
    kp = _helper("detectron_keypoints")
    heat = np.zeros((1, 1, 4, 4), np.float32)
    heat[0, 0, 0, 0] = 1.0  # maximum in the corner: the mirrored grid is symmetric, no shift
    out = kp.approx_heatmap_keypoint(heat, np.array([[0, 0, 4, 4]], np.float32))
    np.testing.assert_allclose(out[0, :2, 0], [0.5, 0.5], atol=1e-6)


def test_heatmaps_to_keypoints():
    kp = _helper("detectron_keypoints")
    heat = np.zeros((1, 2, 4, 4), np.float32)
    heat[0, 0, 1, 2] = 3.0
    heat[0, 1, 3, 0] = 2.0
    rois = np.array([[100.0, 50.0, 108.0, 58.0]], np.float32)  # 8 x 8: each cell becomes 2 x 2
    out = kp.heatmaps_to_keypoints(heat, rois)
    assert out.shape == (1, 4, 2)
    # the bicubic (a = -0.75) upsampling by 2 peaks on one of the cell's two pixels, nearer the centre
    x, y = out[0, 0, 0] - 100, out[0, 1, 0] - 50
    assert 4 <= x <= 6 and 2 <= y <= 4
    weights = [-0.10546875, 0.87890625, 0.26171875, -0.03515625]  # taps -1..2 at fraction 0.25
    peak = 3.0 * max(weights) ** 2
    np.testing.assert_allclose(out[0, 2, 0], peak, rtol=1e-4)
    assert 0 < out[0, 3, 0] < 1


def test_bicubic_resize_is_identity_at_scale_one():
    kp = _helper("detectron_keypoints")
    rng = np.random.default_rng(1)
    m = rng.standard_normal((3, 5, 6)).astype(np.float32)
    np.testing.assert_allclose(kp._resize_bicubic(m, 6, 5), m, atol=1e-6)
