"""Int8SpatialBN / Int8SpatialBNRelu / Int8GroupNorm / Int8BatchPermutation (DNNLOWP) against element-by-element
references written from spatial_batch_norm_dnnlowp_op.cc, group_norm_dnnlowp_op.cc (+ its AVX2 kernels) and
batch_permutation_dnnlowp_op.cc; Caffe2's group_norm_dnnlowp_op_test (within 2 output steps of float32);
inferred shapes, no reallocation on a second run, errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import ArgumentError, GradientError, ShapeError, TypeMismatchError, UninitializedError
from framework.memory.workspace import Workspace
from framework.ops import create_operator, get_gradient_for_op
from tests.ops.quantized.dnnlowp_refs import ref_choose, ref_dequantize, ref_quantize8
from tests.ops.quantized.int8_helpers import check_int8, q8, run

f32 = np.float32


def ref_float_bn(xf, scale, bias, mean, var, eps, nhwc):
    c_axis = xf.ndim - 1 if nhwc else 1
    shape = [1] * xf.ndim
    shape[c_axis] = -1
    alpha = np.float64(scale) / np.sqrt(np.float64(var) + eps)
    return xf * alpha.reshape(shape) + (bias - alpha * mean).reshape(shape)


def ref_int8_bn(codes, in_s, in_z, out_s, out_z, scale, bias, mean, var, eps, nhwc, relu):
    """SpatialBNDNNLowPOp::RunOnDevice, one element at a time in float32."""
    out = np.empty(codes.shape, np.uint8)
    for idx, q in np.ndenumerate(codes):
        c = idx[-1] if nhwc else idx[1]
        alpha = f32(scale[c] * f32(f32(1) / f32(np.sqrt(f32(var[c] + f32(eps))))))
        beta = f32(bias[c] - f32(alpha * mean[c]))
        alpha = f32(alpha * f32(f32(in_s) / f32(out_s)))
        beta = f32(beta / f32(out_s))
        v = out_z + round(float(f32(f32(alpha * f32(int(q) - in_z)) + beta)))
        if relu:
            v = max(v, out_z)
        out[idx] = min(max(v, 0), 255)
    return out


bn_cases = st.tuples(
    st.integers(0, 3), st.integers(1, 4), st.lists(st.integers(1, 3), min_size=1, max_size=2),
    st.sampled_from(["NCHW", "NHWC"]), st.booleans(), st.booleans(), st.integers(0, 2**16),
)  # fmt: skip


@settings(max_examples=30, deadline=None)
@given(case=bn_cases, relu=st.booleans())
def test_spatial_bn(case, relu):
    n, c, spatial, order, in_int8, static, seed = case
    rng = np.random.default_rng(seed)
    nhwc = order == "NHWC"
    shape = (n, *spatial, c) if nhwc else (n, c, *spatial)
    x = (rng.standard_normal(shape) * 3).astype(f32)
    scale, bias, mean = (rng.standard_normal(c).astype(f32) for _ in range(3))
    var = (rng.random(c) + 0.1).astype(f32)
    in_s, in_z = ref_choose(x.min() if x.size else 0, x.max() if x.size else 0)
    codes = ref_quantize8(x, in_s, in_z)
    xin = q8(codes, in_s, in_z) if in_int8 else x
    kw = dict(is_test=1, order=order, epsilon=1e-5)
    if static:
        out_s, out_z = f32(0.05), 100
        kw.update(Y_scale=float(out_s), Y_zero_point=out_z)
        if relu:
            out_s, out_z = ref_choose(0, float(f32(out_s * f32(155))))
    else:
        y = ref_float_bn(ref_dequantize(codes, in_s, in_z) if in_int8 else x, scale, bias, mean, var, 1e-5, nhwc)
        lo, hi = (float(y.min()), float(y.max())) if y.size else (0.0, 0.0)
        out_s, out_z = ref_choose(max(lo, 0) if relu else lo, max(hi, 0) if relu else hi)
    op_type = "Int8SpatialBNRelu" if relu else "Int8SpatialBN"
    op = CreateOperator(op_type, ["X", "s", "b", "m", "v"], ["Y"], engine="DNNLOWP", **kw)
    expected = ref_int8_bn(codes, in_s, in_z, out_s, out_z, scale, bias, mean, var, 1e-5, nhwc, relu)
    if static or x.size == 0:
        check_int8(op, [xin, scale, bias, mean, var], [(expected, out_s, out_z)])
    else:  # a dynamic scale from float32 sums may differ from the float64 reference's by a few ulps
        _, _, (got,) = run(op, [xin, scale, bias, mean, var])
        # ... of the BN's terms, not of its result: an output range near 0 comes from cancellation
        alpha = np.abs(scale / np.sqrt(var + 1e-5))
        terms = float(np.abs(x).max() * alpha.max() * 1.1 + np.abs(bias).max() + np.abs(mean * alpha).max())
        tol = 1e-6 * out_s + 4 * float(np.finfo(f32).eps) * terms / 255
        assert abs(got.scale - out_s) <= tol and abs(got.zero_point - out_z) <= 1
        exp = ref_int8_bn(codes, in_s, in_z, got.scale, got.zero_point, scale, bias, mean, var, 1e-5, nhwc, relu)
        np.testing.assert_array_equal(got.numpy(), exp)
    # dequantize_output: float32 scale * (codes - zero_point)
    op_f = CreateOperator(op_type, ["X", "s", "b", "m", "v"], ["Y"], dequantize_output=1, **kw)
    _, _, (yf,) = run(op_f, [xin, scale, bias, mean, var])
    assert yf.dtype == np.float32 and yf.shape == x.shape
    if static:
        np.testing.assert_array_equal(yf, ref_dequantize(expected, out_s, out_z))


def test_batch_permutation():
    rng = np.random.default_rng(3)
    codes = rng.integers(0, 256, (4, 2, 3)).astype(np.uint8)
    idx = np.array([2, 0, 3, 0], np.int32)
    op = CreateOperator("Int8BatchPermutation", ["X", "I"], ["Y"], engine="DNNLOWP", Y_scale=9.0)  # ignored
    check_int8(op, [q8(codes, 0.25, 17), idx], [(codes[[2, 0, 3, 0]], 0.25, 17)])
    check_int8(op, [q8(np.zeros((2, 0), np.uint8), 0.5, 1), np.array([1, 1], np.int32)],
               [(np.zeros((2, 0), np.uint8), 0.5, 1)])  # fmt: skip


# -- group norm -------------------------------------------------------------------------------------------
def ref_multiplier(real):
    """fbgemm::ChooseRequantizationMultiplier (precision 32)."""
    m, s = f32(real), 31
    while m < 0.5:
        m, s = f32(m * 2), s + 1
    while m > 1:
        m, s = f32(m / 2), s - 1
    q = round(float(m) * 2**31)
    return (q // 2, s - 1) if q == 2**31 else (q, s)


def wrap(v):
    return (int(v) + 2**31) % 2**32 - 2**31


def ref_q32(v, scale):
    return int(round(float(f32(f32(v) * f32(f32(1) / f32(scale))))))


def ref_int8_group_norm(codes, in_s, in_z, gamma, beta, group, eps, out_s, out_z, nhwc):
    """GroupNormDNNLowPOp's integer path, scalar loops (rounding: std::round half away from zero)."""
    x = np.moveaxis(codes, -1, 1) if nhwc else codes  # NCHW view for indexing
    n, c = x.shape[:2]
    k = c // group
    g_s, g_z = ref_choose(gamma.min(), gamma.max())
    gq = [ref_q32(v, g_s) for v in gamma]
    b_s = f32(f32(in_s) * g_s)
    bq = [ref_q32(v, b_s) for v in beta]
    mu, rsig = {}, {}
    for i in range(n):
        for g in range(group):
            vals = [int(v) for v in x[i, g * k : (g + 1) * k].reshape(-1)]
            mean = f32(f32(sum(vals)) / f32(len(vals)))
            var = f32(f32(f32(sum(v * v for v in vals)) / f32(len(vals))) - f32(mean * mean))
            var = f32(f32(f32(in_s) * f32(in_s)) * var)
            mu[i, g] = int(np.floor(abs(float(mean)) + 0.5)) * (1 if mean >= 0 else -1)
            rsig[i, g] = f32(f32(1) / f32(np.sqrt(f32(var + f32(eps)))))
    r_s, _ = ref_choose(min(rsig.values()), max(rsig.values()))
    rq = {key: ref_q32(v, r_s) for key, v in rsig.items()}
    bm, bsft = ref_multiplier(f32(1) / r_s)
    bias_c = [max(min((v * bm + (1 << (bsft - 1))) >> bsft, 2**31 - 1), -(2**31)) for v in bq]
    real = f32(f32(f32(r_s * g_s) * f32(in_s)) / f32(out_s))
    om, osft = ref_multiplier(real)
    y = np.empty(x.shape, np.uint8)
    inner = codes.shape[-1]  # the AVX2 kernels' innermost axis: runs of 8 in fixed point, the rest in float
    for idx, q in np.ndenumerate(x):
        i, ch = idx[0], idx[1]
        g = ch // k
        sc = wrap(gq[ch] * rq[i, g])
        bi = wrap(bias_c[ch] - wrap(sc * mu[i, g]))
        acc = wrap(int(q) * sc + bi)
        pos = idx[1] if nhwc else np.ravel_multi_index(idx[2:], x.shape[2:])
        if pos < inner // 8 * 8:
            v = out_z + ((acc * om + (1 << (osft - 1))) >> osft)
        else:
            v = out_z + round(float(f32(f32(acc) * real)))
        y[idx] = min(max(v, 0), 255)
    return np.moveaxis(y, 1, -1) if nhwc else y


def float_group_norm(x, gamma, beta, group, eps, nhwc):
    if x.size == 0:
        return x.astype(np.float64)
    xx = np.moveaxis(x, -1, 1) if nhwc else x
    n, c = xx.shape[:2]
    v = xx.reshape(n, group, -1).astype(np.float64)
    y = (v - v.mean(-1, keepdims=True)) / np.sqrt(v.var(-1, keepdims=True) + eps)
    shape = (1, c) + (1,) * (xx.ndim - 2)
    y = y.reshape(xx.shape) * gamma.reshape(shape) + beta.reshape(shape)
    return np.moveaxis(y, 1, -1) if nhwc else y


@settings(max_examples=25, deadline=None)
@given(n=st.integers(1, 2), g=st.integers(1, 3), k=st.integers(1, 3), hw=st.sampled_from([(2, 3), (3, 4), (4, 5)]),
       order=st.sampled_from(["NCHW", "NHWC"]), seed=st.integers(0, 2**16))  # fmt: skip
def test_group_norm_integer_path_matches_reference(n, g, k, hw, order, seed):
    rng = np.random.default_rng(seed)
    nhwc = order == "NHWC"
    c = g * k
    x = (rng.random((n, c, *hw)) * 5 - 1).astype(f32)
    if nhwc:
        x = np.ascontiguousarray(np.moveaxis(x, 1, -1))
    gamma = (rng.random(c) * 2 - 1).astype(f32)
    beta = (rng.standard_normal(c) - 0.5).astype(f32)
    in_s, in_z = ref_choose(x.min(), x.max())
    codes = ref_quantize8(x, in_s, in_z)
    out_s, out_z = f32(0.03), 120
    op = CreateOperator("Int8GroupNorm", ["X", "gamma", "beta"], ["Y"], group=g, order=order, engine="DNNLOWP",
                        Y_scale=float(out_s), Y_zero_point=out_z)  # fmt: skip
    expected = ref_int8_group_norm(codes, in_s, in_z, gamma, beta, g, 1e-5, out_s, out_z, nhwc)
    check_int8(op, [q8(codes, in_s, in_z), gamma, beta], [(expected, out_s, out_z)])
    check_int8(op, [x, gamma, beta], [(expected, out_s, out_z)])  # a float X is quantized first


@settings(max_examples=20, deadline=None)
@given(n=st.integers(0, 3), g=st.integers(2, 4), k=st.integers(2, 6), h=st.integers(4, 9), w=st.integers(4, 9),
       order=st.sampled_from(["NCHW", "NHWC"]), in_q=st.booleans(), out_q=st.booleans(), w_q=st.booleans())  # fmt: skip
def test_caffe2_group_norm_dnnlowp_op_test(n, g, k, h, w, order, in_q, out_q, w_q):
    """group_norm_dnnlowp_op_test: quantized variants within 2 output steps of the float32 result."""
    rng = np.random.default_rng(n * 1000 + g * 100 + k * 10 + h + w)
    c, nhwc = g * k, order == "NHWC"
    x = (rng.random((n, c, h, w)) * 5.0 - 1.0).astype(f32)
    if nhwc:
        x = np.ascontiguousarray(np.moveaxis(x, 1, -1))
    gamma = (rng.random(c) * 2.0 - 1.0).astype(f32)
    beta = (rng.standard_normal(c) - 0.5).astype(f32)
    ref = float_group_norm(x, gamma, beta, g, 1e-5, nhwc)
    ws = Workspace()
    ws.feed_blob("X", x)
    ws.feed_blob("gamma", gamma)
    ws.feed_blob("beta", beta)
    if in_q:
        ws.run_operator_once(CreateOperator("Quantize", ["X"], ["Xq"], engine="DNNLOWP"))
    kw = {}
    if w_q:  # Int8GivenTensorFill / Int8GivenIntTensorFill as dnnlowp_utils makes them, static output range
        gs, gz = ref_choose(gamma.min(), gamma.max())
        ws.feed_blob("gamma", q8(ref_quantize8(gamma, gs, gz), gs, gz))
        xs, _ = ref_choose(x.min() if x.size else 0, x.max() if x.size else 0)
        bs = f32(xs * gs)
        ws.feed_blob("beta", q8(np.array([ref_q32(v, bs) for v in beta], np.int32), bs, 0))
        lo, hi = (ref.min(), ref.max()) if ref.size else (0, 0)
        ys, yz = ref_choose(lo, hi)
        kw = dict(Y_scale=float(ys), Y_zero_point=yz)
    ins = ["Xq" if in_q else "X", "gamma", "beta"]
    ws.run_operator_once(CreateOperator("Int8GroupNorm", ins, ["Y"], group=g, order=order,
                                        dequantize_output=0 if out_q else 1, engine="DNNLOWP", **kw))  # fmt: skip
    if out_q:
        ws.run_operator_once(CreateOperator("Dequantize", ["Y"], ["Yd"], engine="DNNLOWP"))
    got = ws.fetch_blob("Yd" if out_q else "Y")
    assert got.shape == x.shape and got.dtype == np.float32
    if ref.size:
        step = (max(ref.max(), 0) - min(ref.min(), 0)) / 255
        np.testing.assert_allclose(got, ref, atol=2.0 * step, rtol=0)


def test_group_norm_three_outputs_and_empty():
    x = np.zeros((0, 4, 2, 2), f32)
    gamma, beta = np.ones(4, f32), np.zeros(4, f32)
    op = CreateOperator("Int8GroupNorm", ["X", "g", "b"], ["Y", "mean", "inv_std"], group=2)
    ws = Workspace()
    for name, v in zip("Xgb", (x, gamma, beta)):
        ws.feed_blob(name, v)
    ws.run_operator_once(op)
    y = ws.get_blob("Y")._obj
    assert y.numpy().shape == (0, 4, 2, 2) and (y.scale, y.zero_point) == (f32(0.1), 0)
    assert ws.get_blob("mean")._obj is None and ws.get_blob("inv_std")._obj is None  # as Caffe2: never written


def _fails(ws, op, err, pattern):
    before = {n: repr(ws.get_blob(n)._obj) for n in ws.blobs()}
    with pytest.raises(err, match=pattern):
        create_operator(op, ws).run()
    assert {n: repr(ws.get_blob(n)._obj) for n in before} == before


def test_errors_name_op_and_blob_and_change_nothing():
    ws = Workspace()
    ws.feed_blob("Q", q8(np.ones((2, 4, 2, 2)), 0.1, 3))
    ws.feed_blob("Q2", q8(np.ones((2, 4)), 0.1, 3))
    ws.feed_blob("p4", np.ones(4, f32))
    ws.feed_blob("p3", np.ones(3, f32))
    ws.feed_blob("I", np.array([1, 0], np.int32))
    ws.feed_blob("Ibad", np.array([1, 2], np.int32))
    ws.feed_blob("I3", np.array([1, 0, 0], np.int32))
    ws.feed_blob("E", q8(np.ones((0, 3)), 0.1, 3))
    ws.feed_blob("Xd", np.ones((2, 4, 2, 2)))
    ws.run_operator_once(CreateOperator("Int8SpatialBN", ["Q", "p4", "p4", "p4", "p4"], ["Y"], is_test=1))
    bn = ["Q", "p4", "p4", "p4", "p4"]
    _fails(ws, CreateOperator("Int8SpatialBN", bn, ["Y"]), ArgumentError, "is_test")
    _fails(ws, CreateOperator("Int8SpatialBN", bn, ["Y"], is_test=1, epsilon=0.0), ArgumentError, "epsilon")
    _fails(ws, CreateOperator("Int8SpatialBN", ["Q", "p4", "p3", "p4", "p4"], ["Y"], is_test=1), ShapeError, "'p3'")
    _fails(
        ws, CreateOperator("Int8SpatialBN", ["Q2", "p4", "p4", "p4", "p4"], ["Y"], is_test=1), ShapeError, "'Q2'.*rank"
    )
    _fails(ws, CreateOperator("Int8SpatialBNRelu", ["Xd", *bn[1:]], ["Y"], is_test=1), TypeMismatchError, "'Xd'")
    _fails(ws, CreateOperator("Int8SpatialBN", ["missing", *bn[1:]], ["Y"], is_test=1), UninitializedError, "missing")
    _fails(ws, CreateOperator("Int8BatchPermutation", ["Q", "Ibad"], ["Y"]), FrameworkError_like(), "'Ibad'")
    _fails(ws, CreateOperator("Int8BatchPermutation", ["Q", "I3"], ["Y"]), ShapeError, "'I3'.*3 entries")
    _fails(ws, CreateOperator("Int8BatchPermutation", ["E", "I"], ["Y"]), ShapeError, "'E'.*N > 0")
    _fails(ws, CreateOperator("Int8BatchPermutation", ["p4", "I"], ["Y"]), TypeMismatchError, "'p4'.*Int8TensorCPU")
    _fails(ws, CreateOperator("Int8BatchPermutation", ["Q", "I"], ["Y"], dequantize_output=1), ArgumentError, "dequant")
    _fails(ws, CreateOperator("Int8GroupNorm", ["Q", "p4", "p4"], ["Y"], group=3), ShapeError, "multiple of group 3")
    _fails(ws, CreateOperator("Int8GroupNorm", ["Q", "p3", "p4"], ["Y"], group=2), ShapeError, "'p3'.*C = 4")
    _fails(ws, CreateOperator("Int8GroupNorm", ["Q", "p4", "Q"], ["Y"], group=2), TypeMismatchError, "'Q'.*uint8")
    for op_type, ins in (("Int8SpatialBN", bn), ("Int8SpatialBNRelu", bn), ("Int8GroupNorm", bn[:3]),
                         ("Int8BatchPermutation", ["Q", "I"])):  # fmt: skip
        with pytest.raises(GradientError):
            get_gradient_for_op(CreateOperator(op_type, ins, ["Y"]), ["dY"])


def FrameworkError_like():  # noqa: N802
    from framework.errors import FrameworkError

    return FrameworkError


@settings(max_examples=20, deadline=None)
@given(size=st.integers(3, 6), c=st.integers(2, 6), n=st.integers(0, 3), order=st.sampled_from(["NCHW", "NHWC"]),
       in_q=st.booleans(), out_q=st.booleans(), relu=st.booleans(), seed=st.integers(0, 2**16))  # fmt: skip
def test_caffe2_spatial_bn_dnnlowp_op_test(size, c, n, order, in_q, out_q, relu, seed):
    """spatial_batch_norm_dnnlowp_op_test: inputs the quantization represents exactly, Y_scale/Y_zero_point
    from the float32 result's range (dnnlowp_utils.add_quantization_param_args), within 0.53 output steps."""
    rng = np.random.default_rng(seed)
    x = np.round(rng.random((n, size, size, c))).astype(f32)
    if n:
        x[0, 0, 0, 0], x[0, 0, 0, 1] = -77, 178
    eps = float(abs(rng.random()))
    scale, bias, mean, var = (rng.random(c).astype(f32) for _ in range(4))
    if order == "NCHW":
        x = np.ascontiguousarray(x.transpose(0, 3, 1, 2))
    ref = ref_float_bn(x.astype(np.float64), scale, bias, mean, var, eps, order == "NHWC")
    if relu:
        ref = np.maximum(ref, 0)
    lo, hi = (ref.min(), ref.max()) if ref.size else (0.0, 0.0)
    y_s, y_z = ref_choose(lo, hi)
    ws = Workspace()
    for name, v in zip(("X", "scale", "bias", "mean", "var"), (x, scale, bias, mean, var)):
        ws.feed_blob(name, v)
    if in_q:
        ws.run_operator_once(CreateOperator("Quantize", ["X"], ["X_q"], engine="DNNLOWP"))
    op_type = "Int8SpatialBNRelu" if relu else "Int8SpatialBN"
    ws.run_operator_once(CreateOperator(op_type, ["X_q" if in_q else "X", "scale", "bias", "mean", "var"],
                                        ["Y_q" if out_q else "Y"], is_test=1, epsilon=eps, order=order,
                                        engine="DNNLOWP", dequantize_output=int(not out_q),
                                        Y_scale=float(y_s), Y_zero_point=y_z))  # fmt: skip
    if out_q:
        ws.run_operator_once(CreateOperator("Dequantize", ["Y_q"], ["Y"], engine="DNNLOWP"))
    got = ws.fetch_blob("Y")
    assert got.shape == x.shape
    if ref.size:
        step = (max(ref.max(), 0) - min(ref.min(), 0)) / 255
        np.testing.assert_allclose(got, ref, atol=0.53 * step, rtol=0)
