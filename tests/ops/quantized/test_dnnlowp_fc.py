"""Int8FCRelu / Int8FCPackWeight / Int8ConvPackWeight (DNNLOWP) against element-by-element references written
from fully_connected_dnnlowp_op.cc and fbgemm_pack_op.cc (QuantizeWeight, ComputeColumnOffsets,
QuantizeConvBias, fbgemm's ReQuantizeOutput / ReQuantizeForFloat); the float32 FC within two output steps;
first-run output parameters kept; packed blobs not serializable; errors."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import ArgumentError, GradientError, SerializationError, ShapeError, TypeMismatchError
from framework.memory.serialize import serialize_blob_to_string
from framework.memory.workspace import Workspace
from framework.ops import create_operator, get_gradient_for_op
from tests.ops.quantized.dnnlowp_refs import ref_choose, ref_quantize8
from tests.ops.quantized.int8_helpers import check_int8, q8, run

f32 = np.float32


def ref_quantize_signed(x, scale, zp):
    """QuantizeAvx2<int8_t>: float32(x * (1/scale) + zp) rounded once, to nearest even, clamped to [-128, 127]."""
    inv = Fraction(float(f32(1) / f32(scale)))
    out = np.empty(np.shape(x), np.int64)
    for idx, v in np.ndenumerate(np.asarray(x, f32)):
        out[idx] = min(max(round(float(f32(float(Fraction(float(v)) * inv + zp)))), -128), 127)
    return out


def ref_weights(w2, channelwise):
    """QuantizeWeight: per tensor or per row min/max parameters, zero point - 128, int8 codes."""
    groups = [w2[j : j + 1] for j in range(w2.shape[0])] if channelwise else [w2]
    qps, codes = [], []
    for block in groups:
        s, z = ref_choose(block.min() if block.size else 0, block.max() if block.size else 0)
        qps.append((s, z - 128))
        codes.append(ref_quantize_signed(block, s, z - 128))
    return qps, np.concatenate(codes) if codes else np.zeros((0, w2.shape[1]), np.int64)


def ref_q32(v, scale):
    return int(round(float(f32(f32(v) * f32(f32(1) / f32(scale))))))


def wrap(v):
    return (int(v) + 2**31) % 2**32 - 2**31


def ref_int8_fc_relu(xq, x_s, x_z, w2, b, channelwise, out_s, out_z, relu=True):
    qps, wq = ref_weights(w2, channelwise)
    m, k = xq.shape
    n = wq.shape[0]
    b_s = f32(f32(x_s) * f32(qps[0][0]))
    y = np.empty((m, n), np.uint8)
    for j in range(n):
        w_s, w_z = qps[j if channelwise else 0]
        col = sum(int(v) for v in wq[j]) - w_z * k
        mult = f32(f32(f32(x_s) * f32(w_s)) / f32(out_s))
        for i in range(m):
            acc = sum(int(xq[i, t]) * int(wq[j, t]) for t in range(k))
            raw = wrap(acc - x_z * col - sum(int(v) for v in xq[i]) * w_z + ref_q32(b[j], b_s))
            v = out_z + round(float(f32(f32(raw) * mult)))
            y[i, j] = min(max(v, out_z if relu else 0, 0), 255)
    return y


@settings(max_examples=25, deadline=None)
@given(m=st.integers(0, 4), k=st.integers(1, 9), n=st.integers(1, 5), channelwise=st.booleans(),
       x_int8=st.booleans(), seed=st.integers(0, 2**16))  # fmt: skip
def test_int8_fc_relu_static(m, k, n, channelwise, x_int8, seed):
    rng = np.random.default_rng(seed)
    x = (rng.standard_normal((m, k)) * 2).astype(f32)
    w = rng.standard_normal((n, k)).astype(f32)
    b = rng.standard_normal(n).astype(f32)
    x_s, x_z = ref_choose(x.min() if x.size else 0, x.max() if x.size else 0)
    xq = ref_quantize8(x, x_s, x_z)
    out_s, out_z = ref_choose(0.0, float(f32(f32(0.04) * f32(255 - 30))))  # Y_scale 0.04, zero point 30, Relu
    op = CreateOperator("Int8FCRelu", ["X", "W", "b"], ["Y"], engine="DNNLOWP", Y_scale=0.04, Y_zero_point=30,
                        quantize_channelwise=int(channelwise))  # fmt: skip
    expected = ref_int8_fc_relu(xq, x_s, x_z, w, b, channelwise, out_s, out_z)
    check_int8(op, [q8(xq, x_s, x_z) if x_int8 else x, w, b], [(expected, out_s, out_z)])


@pytest.mark.parametrize("op_type", ["FC", "Int8FC"])
@pytest.mark.parametrize("engine", ["DNNLOWP", "DNNLOWP_ROWWISE"])
def test_fc_under_dnnlowp_engines_is_the_int8_fc_without_relu(op_type, engine):
    rng = np.random.default_rng(7)
    x, w, b = rng.standard_normal((3, 5)).astype(f32), rng.standard_normal((4, 5)).astype(f32), np.zeros(4, f32)
    b[0] = 0.3
    x_s, x_z = ref_choose(x.min(), x.max())
    xq = ref_quantize8(x, x_s, x_z)
    op = CreateOperator(op_type, ["X", "W", "b"], ["Y"], engine=engine, Y_scale=0.05, Y_zero_point=128)
    rowwise = engine == "DNNLOWP_ROWWISE"
    expected = ref_int8_fc_relu(xq, x_s, x_z, w, b, rowwise, f32(0.05), 128, relu=False)
    assert expected.min() < 128  # negative results survive (no Relu)
    check_int8(op, [q8(xq, x_s, x_z), w, b], [(expected, 0.05, 128)])
    op_f = CreateOperator(op_type, ["X", "W", "b"], ["Y"], engine=engine, dequantize_output=1)
    _, _, (yf,) = run(op_f, [q8(xq, x_s, x_z), w, b])
    assert yf.dtype == np.float32 and yf.min() < 0


def test_int8_fc_relu_dynamic_parameters_kept_after_the_first_run():
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 2, 4)).astype(f32)
    w = rng.standard_normal((5, 8)).astype(f32)
    b = rng.standard_normal(5).astype(f32)
    x_s, x_z = ref_choose(x.min(), x.max())
    xq = ref_quantize8(x, x_s, x_z)
    xf = (xq.astype(np.float64) - x_z) * x_s
    y = np.maximum(xf.reshape(3, 8) @ w.T.astype(np.float64) + b, 0)
    out_s, out_z = ref_choose(0.0, y.max())
    ws = Workspace()
    for name, v in (("X", q8(xq, x_s, x_z)), ("W", w), ("b", b)):
        ws.feed_blob(name, v)
    op = create_operator(CreateOperator("Int8FCRelu", ["X", "W", "b"], ["Y"], axis=2 - 1, engine="DNNLOWP"), ws)
    op.run()
    got = ws.get_blob("Y")._obj
    assert got.numpy().shape == (3, 5)
    assert abs(got.scale - out_s) <= 1e-6 * out_s and got.zero_point == out_z == 0
    np.testing.assert_array_equal(got.numpy(), ref_int8_fc_relu(xq.reshape(3, 8), x_s, x_z, w, b, False, got.scale, 0))
    first = (got.scale, got.zero_point)
    ws.feed_blob("X", q8(xq, x_s * 3, x_z))  # a wider range: Caffe2 keeps the first run's output parameters
    op.run()
    assert (ws.get_blob("Y")._obj.scale, ws.get_blob("Y")._obj.zero_point) == first


@settings(max_examples=15, deadline=None)
@given(m=st.integers(1, 6), k=st.integers(1, 16), n=st.integers(1, 6), channelwise=st.booleans(),
       out_q=st.booleans(), seed=st.integers(0, 2**16))  # fmt: skip
def test_int8_fc_relu_close_to_float(m, k, n, channelwise, out_q, seed):
    """fully_connected_dnnlowp_op_test's check (within 2 output steps of float32), on the float32 FC of the
    quantized X and W (Caffe2's test uses data its quantization represents exactly)."""
    rng = np.random.default_rng(seed)
    x = (rng.random((m, k)) * 4 - 1).astype(f32)
    w = (rng.random((n, k)) * 2 - 1).astype(f32)
    b = rng.standard_normal(n).astype(f32) * (not channelwise)  # Caffe2 quantizes b at row 0's scale (see doc)
    x_s, x_z = ref_choose(x.min(), x.max())
    qps, wq = ref_weights(w, channelwise)
    scales = np.array([qps[j if channelwise else 0][0] for j in range(n)], np.float64)[:, None]
    zps = np.array([qps[j if channelwise else 0][1] for j in range(n)])[:, None]
    xf = (ref_quantize8(x, x_s, x_z).astype(np.float64) - x_z) * x_s
    ref = np.maximum(xf @ ((wq - zps) * scales).T + b, 0)
    op = CreateOperator("Int8FCRelu", ["X", "W", "b"], ["Y"], quantize_channelwise=int(channelwise),
                        dequantize_output=0 if out_q else 1)  # fmt: skip
    _, _, (y,) = run(op, [x, w, b])
    got = ((y.numpy().astype(np.float64) - y.zero_point) * y.scale) if out_q else y
    if out_q:  # the output range comes from the float weights: a quantized result beyond it saturates
        ref = np.minimum(ref, y.scale * (255 - y.zero_point))
    step = (max(ref.max(), 0) - min(ref.min(), 0)) / 255
    np.testing.assert_allclose(got, ref, atol=2 * step + 1e-5, rtol=0)


def test_fc_pack_weight_blob_and_bias():
    rng = np.random.default_rng(4)
    w = rng.standard_normal((3, 2, 3)).astype(f32)  # axis_w 1: (3, 6)
    b = rng.standard_normal(3).astype(f32)
    ws = Workspace()
    ws.feed_blob("W", w)
    ws.feed_blob("b", b)
    ws.run_operator_once(CreateOperator("Int8FCPackWeight", ["W", "b"], ["Wq", "Bq"], in_scale=0.05,
                                        save_unpacked_weights=1, engine="DNNLOWP"))  # fmt: skip
    blob = ws.get_blob("Wq")._obj
    qps, codes = ref_weights(w.reshape(3, 6), False)
    assert [(f32(q.scale), q.zero_point) for q in blob.qparams] == qps
    np.testing.assert_array_equal(blob.w_q, codes)
    np.testing.assert_array_equal(blob.column_offsets, codes.sum(axis=1) - qps[0][1] * 6)
    bs = f32(f32(0.05) * qps[0][0])
    np.testing.assert_array_equal(blob.bias, [ref_q32(v, bs) for v in b])
    assert blob.original_tensor is blob.w_q and blob.shape == (3, 2, 3)
    bq = ws.get_blob("Bq")._obj
    assert bq.scale == bs and bq.zero_point == 0 and bq.numpy().dtype == np.int32
    with pytest.raises(SerializationError):
        serialize_blob_to_string(blob, "Wq")
    # per-row quantization (the DNNLOWP_ROWWISE engine too)
    ws.run_operator_once(CreateOperator("Int8FCPackWeight", ["W"], ["Wr"], engine="DNNLOWP_ROWWISE"))
    qps, codes = ref_weights(w.reshape(3, 6), True)
    got = ws.get_blob("Wr")._obj
    assert [(f32(q.scale), q.zero_point) for q in got.qparams] == qps and got.original_tensor is None
    np.testing.assert_array_equal(got.w_q, codes)


def test_fc_with_packed_weights_equals_fc_with_float_weights():
    rng = np.random.default_rng(5)
    x, w, b = rng.standard_normal((4, 6)).astype(f32), rng.standard_normal((3, 6)).astype(f32), np.zeros(3, f32)
    x_s, x_z = ref_choose(x.min(), x.max())
    ws = Workspace()
    for name, v in (("X", q8(ref_quantize8(x, x_s, x_z), x_s, x_z)), ("W", w), ("b", b)):
        ws.feed_blob(name, v)
    ws.run_operator_once(CreateOperator("Int8FCPackWeight", ["W"], ["Wp"]))
    kw = dict(Y_scale=0.02, Y_zero_point=0)
    ws.run_operator_once(CreateOperator("Int8FCRelu", ["X", "W", "b"], ["Y1"], **kw))
    ws.run_operator_once(CreateOperator("Int8FCRelu", ["X", "Wp", "b"], ["Y2"], **kw))
    np.testing.assert_array_equal(ws.fetch_blob("Y1")[0], ws.fetch_blob("Y2")[0])


def test_conv_pack_weight_groupwise():
    rng = np.random.default_rng(6)
    w = rng.standard_normal((4, 3, 3, 2)).astype(f32)  # M=4, 3x3 kernel, C/group = 2
    b = rng.standard_normal(4).astype(f32)
    ws = Workspace()
    ws.feed_blob("W", w)
    ws.feed_blob("b", b)
    ws.run_operator_once(CreateOperator("Int8ConvPackWeight", ["W", "b"], ["Wq"], group=2, quantize_groupwise=1,
                                        in_scale=0.1, engine="DNNLOWP"))  # fmt: skip
    blob = ws.get_blob("Wq")._obj
    w2 = w.reshape(4, 18)
    for g in range(2):
        s, z = ref_choose(w2[2 * g : 2 * g + 2].min(), w2[2 * g : 2 * g + 2].max())
        assert (f32(blob.qparams[g].scale), blob.qparams[g].zero_point) == (s, z - 128)
        codes = ref_quantize_signed(w2[2 * g : 2 * g + 2], s, z - 128)
        np.testing.assert_array_equal(blob.w_q[2 * g : 2 * g + 2], codes)
        np.testing.assert_array_equal(blob.column_offsets[2 * g : 2 * g + 2], codes.sum(axis=1) - (z - 128) * 18)
        bs = f32(f32(0.1) * s)
        np.testing.assert_array_equal(blob.bias[2 * g : 2 * g + 2], [ref_q32(v, bs) for v in b[2 * g : 2 * g + 2]])


def _fails(ws, op, err, pattern):
    before = {n: repr(ws.get_blob(n)._obj) for n in ws.blobs()}
    with pytest.raises(err, match=pattern):
        create_operator(op, ws).run()
    assert {n: repr(ws.get_blob(n)._obj) for n in before} == before


def test_errors_name_op_and_blob_and_change_nothing():
    ws = Workspace()
    ws.feed_blob("X", np.ones((2, 3), f32))
    ws.feed_blob("W", np.ones((4, 3), f32))
    ws.feed_blob("W5", np.ones((4, 5), f32))
    ws.feed_blob("Wd", np.ones((4, 3)))
    ws.feed_blob("b", np.ones(4, f32))
    ws.feed_blob("b3", np.ones(3, f32))
    ws.feed_blob("C", np.ones((3, 2, 2, 1), f32))
    ws.run_operator_once(CreateOperator("Int8FCRelu", ["X", "W", "b"], ["Y"]))
    _fails(ws, CreateOperator("Int8FCRelu", ["X", "W5", "b"], ["Y"]), ShapeError, "'W5'.*K = 3")
    _fails(ws, CreateOperator("Int8FCRelu", ["X", "W", "b3"], ["Y"]), ShapeError, "'b3'.*expected 4")
    _fails(ws, CreateOperator("Int8FCRelu", ["X", "Wd", "b"], ["Y"]), TypeMismatchError, "'Wd'")
    _fails(ws, CreateOperator("Int8FCRelu", ["X", "W", "b"], ["Y"], engine="DNNLOWP_ACC16"), ArgumentError, "ACC16")
    _fails(ws, CreateOperator("Int8FCRelu", ["X", "W", "b"], ["Y"], weight_quantization_kind="l2"), ArgumentError, "l2")
    _fails(ws, CreateOperator("Int8FCPackWeight", ["W", "b"], ["P"]), ArgumentError, "in_scale")
    _fails(ws, CreateOperator("Int8FCPackWeight", ["W"], ["P", "B"]), ArgumentError, "B_q")
    _fails(ws, CreateOperator("Int8FCPackWeight", ["W", "b3"], ["P"], in_scale=0.1), ShapeError, "'b3'.*expected 4")
    _fails(ws, CreateOperator("Int8ConvPackWeight", ["C"], ["P"], group=2), ShapeError, "'C'.*multiple of group 2")
    ws.run_operator_once(CreateOperator("Int8FCPackWeight", ["W"], ["Wp"]))
    _fails(
        ws, CreateOperator("Int8FCRelu", ["X", "Wp", "b"], ["Y"], quantize_channelwise=1), ShapeError, "'Wp'.*groups"
    )
    for op_type, ins in (("Int8FCRelu", ["X", "W", "b"]), ("Int8FCPackWeight", ["W"]), ("Int8ConvPackWeight", ["C"])):
        with pytest.raises(GradientError):
            get_gradient_for_op(CreateOperator(op_type, ins, ["Y"]), ["dY"])
