"""The input gradient of strided 2-D NCHW convs as one stride-1 forward conv of dY per phase of dX
(conv_grad_data.StridedDataGradient): ConvGradient's dX and dW against the independent float64 reference of
test_conv_grad_data, where the phase rule applies and where it does not, and after the filter changes in
place."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.kernels.geometry import Geometry
from framework.ops.nn import conv_grad_data
from tests.ops.nn.test_conv_grad_data import _run_grad, reference_grads


@st.composite
def strided_cases(draw):
    kh, kw = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    pads = (draw(st.integers(0, kh - 1)), draw(st.integers(0, kw - 1)))
    pads = (*pads, draw(st.integers(0, kh - 1)), draw(st.integers(0, kw - 1)))
    stride = draw(st.integers(2, 3))
    h = draw(st.integers(max(1, kh - pads[0] - pads[2]), 13))
    w = draw(st.integers(max(1, kw - pads[1] - pads[3]), 13))
    c, m, n = draw(st.integers(8, 12)), draw(st.integers(1, 9)), draw(st.integers(1, 3))
    return dict(n=n, c=c, m=m, group=1, k=(kh, kw), pads=pads, stride=stride, hw=(h, w))


def _data(case, seed):
    rng = np.random.default_rng(seed)
    (kh, kw), (h, wd), (pt, pl, pb, pr), s = case["k"], case["hw"], case["pads"], case["stride"]
    oh, ow = (h + pt + pb - kh) // s + 1, (wd + pl + pr - kw) // s + 1
    x = rng.standard_normal((case["n"], case["c"], h, wd)).astype(np.float32)
    w = rng.standard_normal((case["m"], case["c"], kh, kw)).astype(np.float32)
    return x, w, rng.standard_normal((case["n"], case["m"], oh, ow)).astype(np.float32)


def _close(got, ref):
    np.testing.assert_allclose(got, ref, rtol=1e-4, atol=1e-4 * max(1.0, np.abs(ref).max()))


@given(case=strided_cases(), seed=st.integers(0, 2**31 - 1))
@settings(max_examples=60, deadline=None)
def test_strided_conv_gradient_matches_reference(case, seed):
    x, w, dy = _data(case, seed)
    dw, dx, ws = _run_grad(case, x, w, dy)
    rdw, rdx = reference_grads(x, w, dy, case["pads"], case["stride"], 1)
    _close(dx, rdx)
    _close(dw, rdw)


@pytest.mark.parametrize(
    "k, s, p, hw", [(3, 2, 1, 16), (3, 2, 1, 7), (1, 2, 0, 14), (1, 2, 0, 7), (5, 2, 2, 9), (3, 3, 1, 11)]
)
def test_the_phase_path_runs_on_common_shapes(k, s, p, hw):
    """ResNet's stride-2 3x3 and 1x1 projections (even and odd sizes) take the phase path, with the
    reference's values; phases no tap reaches (1x1 stride 2) come out zero."""
    case = dict(n=2, c=16, m=12, group=1, k=(k, k), pads=(p,) * 4, stride=s, hw=(hw, hw))
    x, w, dy = _data(case, 7)
    dw, dx, ws = _run_grad(case, x, w, dy)
    rdw, rdx = reference_grads(x, w, dy, case["pads"], s, 1)
    _close(dx, rdx)
    _close(dw, rdw)
    o = (hw + 2 * p - k) // s + 1
    geo = Geometry((hw, hw), (k, k), (s, s), (1, 1), (p, p), (p, p), (o, o))
    phases = conv_grad_data.phase_geometries(geo)
    if phases is not None:
        assert isinstance(conv_grad_data.plan(2, 16, 12, 1, geo, np.float32), conv_grad_data.StridedDataGradient)
        cells = sum(np.prod(g.out if isinstance(g, Geometry) else g) for *_, g in phases)
        assert cells == hw * hw  # every dX cell in exactly one phase


def test_plan_declines_groups_few_channels_float64_and_negative_pads():
    g = Geometry((8, 8), (3, 3), (2, 2), (1, 1), (1, 1), (1, 1), (4, 4))
    assert isinstance(conv_grad_data.plan(2, 16, 8, 1, g, np.float32), conv_grad_data.StridedDataGradient)
    assert conv_grad_data.plan(2, 16, 8, 2, g, np.float32) is None
    assert conv_grad_data.plan(2, 4, 8, 1, g, np.float32) is None
    assert conv_grad_data.plan(2, 16, 8, 1, g, np.float64) is None
    assert conv_grad_data.plan(2, 16, 8, 1, g._replace(dilation=(2, 2)), np.float32) is None
    # 3x3 stride 2 on 5 rows padded 0 above, 2 below: dY's last row reaches only padding in the odd rows'
    # phase, whose conv would have to crop it: the column path
    odd = Geometry((5, 5), (3, 3), (2, 2), (1, 1), (0, 0), (2, 2), (3, 3))
    assert conv_grad_data.phase_geometries(odd) is None and conv_grad_data.plan(2, 16, 8, 1, odd, np.float32) is None


def test_new_filter_values_are_used_each_run():
    case = dict(n=2, c=8, m=6, group=1, k=(3, 3), pads=(1, 1, 1, 1), stride=2, hw=(8, 8))
    x, w, dy = _data(case, 3)
    _, dx1, ws = _run_grad(case, x, w, dy)
    net = ws.create_net(_one_op(case))
    ws.get_blob("W").get_mutable().mutable_data()[...] *= 2  # in place, as an optimizer update does
    net.run()
    _, rdx = reference_grads(x, 2 * w, dy, case["pads"], 2, 1)
    _close(ws.fetch_blob("dX"), rdx)


def _one_op(case):
    from framework.proto.framework_pb2 import NetDef
    from tests.ops.nn.test_conv_grad_data import _op

    net = NetDef(name="g2")
    net.op.append(_op(case))
    return net


@given(
    n=st.integers(1, 3),
    c=st.integers(1, 5),
    hw=st.tuples(st.integers(1, 9), st.integers(1, 9)),
    stride=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    zero=st.integers(0, 8),
    seed=st.integers(0, 2**16),
)
@settings(max_examples=40, deadline=None)
def test_phases_scatter_into_every_cell_of_dx_on_one_and_two_threads(n, c, hw, stride, zero, seed):
    """bn_train.scatter_phases_job writes each phase's values into its strided cells of dX and zeros where
    no tap reaches, every cell once whatever dX held before, with the same values on one and two threads."""
    from framework.kernels import bn_train
    from framework.runtime import parallel

    if not bn_train.available():
        pytest.skip("numba missing: the numpy copies run")
    rng = np.random.default_rng(seed)
    (h, w), (sh, sw) = hw, stride
    want = rng.standard_normal((n, c, h, w)).astype(np.float32)
    phases = []
    for k, (r, t) in enumerate((r, t) for r in range(min(sh, h)) for t in range(min(sw, w))):
        cells = want[:, :, r::sh, t::sw]
        if k == zero:  # a phase no tap reaches
            cells[...] = 0
            phases.append((r, t, cells.shape[2:]))
        else:
            phases.append((r, t, np.ascontiguousarray(cells)))
    old, old_min = parallel.get_num_threads(), parallel.SPLIT_MIN_WORK
    parallel.SPLIT_MIN_WORK = 1
    try:
        for threads in (1, 2):
            parallel.set_num_threads(threads)
            dx = np.full_like(want, np.nan)
            bn_train.scatter_phases_job(dx, stride, phases)()
            np.testing.assert_array_equal(dx, want)
    finally:
        parallel.set_num_threads(old)
        parallel.SPLIT_MIN_WORK = old_min
