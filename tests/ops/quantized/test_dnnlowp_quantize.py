"""DNNLOWP Quantize / Dequantize / Int8QuantSchemeBlobFill / Int8GenQuantParams against element-wise references
of fbgemm's ChooseQuantizationParams / Quantize (tests/ops/quantized/dnnlowp_refs.py), Caffe2's
quantize_dnnlowp_op_test (dequantized error < scale / 1.9) and int8_gen_quant_params_test, and the errors."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import (
    ArgumentError,
    FrameworkError,
    GradientError,
    OperatorError,
    SerializationError,
    ShapeError,
    TypeMismatchError,
)
from framework.memory.serialize import serialize_blob_to_string
from framework.memory.workspace import Workspace
from framework.ops import create_operator, get_gradient_for_op
from framework.ops.quantized.dnnlowp_quant_scheme import (
    Int8QuantParamsBlob,
    Int8QuantSchemeBlob,
    create_int8_quant_scheme_blob,
    observe_int8_quant_params_blob,
)
from tests.ops.quantized.dnnlowp_refs import ref_choose, ref_dequantize, ref_quantize8, ref_quantize_scalar
from tests.ops.quantized.int8_helpers import check_int8, q8, run

f32 = np.float32
shapes = st.lists(st.integers(0, 5), min_size=1, max_size=3).map(tuple)


@settings(max_examples=30, deadline=None)
@given(shape=shapes, lo=st.floats(-50, 50, width=32), span=st.floats(0, 100, width=32), seed=st.integers(0, 2**16),
       sym=st.booleans(), pow2=st.booleans())  # fmt: skip
def test_quantize_chooses_from_min_max(shape, lo, span, seed, sym, pow2):
    rng = np.random.default_rng(seed)
    x = (lo + rng.random(shape) * span).astype(f32)
    op = CreateOperator("Quantize", ["X"], ["Y"], engine="DNNLOWP", preserve_activation_sparsity=int(sym),
                        force_scale_power_of_two=int(pow2))  # fmt: skip
    scale, zp = ref_choose(x.min() if x.size else 0, x.max() if x.size else 0, 8, sym, pow2)
    check_int8(op, [x], [(ref_quantize8(x, scale, zp), scale, zp)])


@settings(max_examples=20, deadline=None)
@given(shape=shapes, precision=st.integers(1, 7), seed=st.integers(0, 2**16))
def test_quantize_lower_precision_takes_the_scalar_path(shape, precision, seed):
    x = (np.random.default_rng(seed).standard_normal(shape) * 3).astype(f32)
    op = CreateOperator("Quantize", ["X"], ["Y"], activation_precision=precision)
    scale, zp = ref_choose(x.min() if x.size else 0, x.max() if x.size else 0, precision)
    check_int8(op, [x], [(ref_quantize_scalar(x, scale, zp, precision), scale, zp)])


def test_quantize_fused_multiply_add_ties_and_specials():
    # 1/0.1f rounds up: x * inv lands just above .5 where a float32 product would round to exactly k.5
    scale, zp = 0.1, 3
    x = np.array([0.25, 0.35, -0.05, 1e-30, 1e30, -1e30, np.nan, np.inf, -np.inf, 25.45], f32)
    op = CreateOperator("Quantize", ["X"], ["Y"], Y_scale=scale, Y_zero_point=zp)
    check_int8(op, [x], [(ref_quantize8(x, scale, zp), scale, zp)])
    _, _, (y,) = run(op, [x])
    assert y.numpy()[6] == 255 and y.numpy()[7] == 255 and y.numpy()[8] == 0  # the AVX2 kernel's NaN/inf


@pytest.mark.parametrize("is_empty", [False, True])
def test_caffe2_quantize_dnnlowp_op_test(is_empty):
    """quantize_dnnlowp_op_test: with and without scale/zero_point inputs, dequantized error < scale / 1.9."""
    rng = np.random.default_rng(0)
    x = (rng.random(0 if is_empty else 1500) * 30.0 - 10.0).astype(f32)
    x_min, x_max = (x.min(), x.max()) if x.size else (0, 1)
    x_scale = (max(x_max, 0) - min(x_min, 0)) / 255
    x_zero = np.round(-x_min / x_scale)
    for op_type in ("Quantize",):
        ws = Workspace()
        ws.feed_blob("X", x)
        ws.feed_blob("scale", np.array([x_scale], f32))
        ws.feed_blob("zero", np.array([x_zero], np.int32))
        ws.run_operator_once(CreateOperator(op_type, ["X"], ["X_q"], engine="DNNLOWP"))
        ws.run_operator_once(CreateOperator(op_type, ["X", "scale", "zero"], ["X_q_2"], engine="DNNLOWP"))
        for name in ("X_q", "X_q_2"):
            q = ws.fetch_blob(name)[0].astype(np.float64)
            np.testing.assert_allclose(x_scale * (q - x_zero), x, atol=x_scale / 1.9, rtol=0)


def test_quantize_parameter_sources():
    x = np.array([-1.0, 0.5, 2.0], f32)
    # followed_by Relu narrows the static range to [0, max]: max = 0.05 * (255 - 10)
    relu = ref_choose(0.0, float(f32(0.05) * f32(245)))
    check_int8(CreateOperator("Quantize", ["X"], ["Y"], Y_scale=0.05, Y_zero_point=10, followed_by="Relu"), [x],
               [(ref_quantize8(x, *relu), *relu)])  # fmt: skip
    tanh_scale = f32(3.0 / 127)
    check_int8(CreateOperator("Quantize", ["X"], ["Y"], followed_by="Tanh"), [x],
               [(ref_quantize8(x, tanh_scale, 128), tanh_scale, 128)])  # fmt: skip
    sig_scale = f32(f32(2 * f32(tanh_scale * f32(127))) / f32(127))
    check_int8(CreateOperator("Quantize", ["X"], ["Y"], followed_by="Sigmoid", Y_scale=9.0), [x],
               [(ref_quantize8(x, sig_scale, 128), sig_scale, 128)])  # fmt: skip
    # the params blob of Int8GenQuantParams (Caffe2's two-input form)
    ws = Workspace()
    ws.feed_blob("X", x)
    create_int8_quant_scheme_blob("s", "min_max", False, ws=ws)
    ws.run_operator_once(CreateOperator("Int8GenQuantParams", ["X", "s"], ["p"]))
    ws.run_operator_once(CreateOperator("Quantize", ["X", "p"], ["Y"], Y_scale=9.0))
    s, z = ref_choose(-1.0, 2.0)
    assert ws.fetch_blob("Y")[1:] == (s, z) and ws.fetch_blob("Y")[0].tolist() == ref_quantize8(x, s, z).tolist()
    # inputs win over arguments
    ins = [x, np.array([0.02], f32), np.array([7], np.int32)]
    check_int8(CreateOperator("Quantize", ["X", "s", "z"], ["Y"], Y_scale=9.0), ins,
               [(ref_quantize8(x, 0.02, 7), 0.02, 7)])  # fmt: skip


@settings(max_examples=20, deadline=None)
@given(shape=shapes, scale=st.floats(0.0009765625, 10, width=32), zp=st.integers(0, 255), seed=st.integers(0, 2**16))
def test_dequantize(shape, scale, zp, seed):
    codes = np.random.default_rng(seed).integers(0, 256, shape).astype(np.uint8)
    op = CreateOperator("Dequantize", ["Q"], ["Y"], engine="DNNLOWP")
    (y,) = check_int8(op, [q8(codes, scale, zp)], [ref_dequantize(codes, scale, zp)])
    np.testing.assert_array_equal(y, ref_dequantize(codes, scale, zp))


def test_quantize_dequantize_round_trip_and_no_gradient():
    x = np.linspace(-3, 5, 40, dtype=f32).reshape(5, 8)
    ws = Workspace()
    ws.feed_blob("X", x)
    ws.run_operator_once(CreateOperator("Quantize", ["X"], ["Q"]))
    ws.run_operator_once(CreateOperator("Dequantize", ["Q"], ["Y"]))
    scale = ws.fetch_blob("Q")[1]
    np.testing.assert_allclose(ws.fetch_blob("Y"), x, atol=scale / 1.9)
    for op_type, ins in (("Quantize", ["X"]), ("Dequantize", ["Q"])):
        with pytest.raises(GradientError):
            get_gradient_for_op(CreateOperator(op_type, ins, ["Z"]), ["dZ"])


def ref_p99(x):
    """dnnlowp::P99 over Histogram(2048, min, max), written from p99.cc and dynamic_histogram.cc."""
    lo, hi = f32(x.min()), f32(x.max())
    width = f32(f32(hi - lo) / f32(2048))
    bins = [0] * 2048
    for v in x.reshape(-1):
        b = int(f32(f32(v - lo) / width))
        bins[min(max(b, 0), 2047)] += 1
    zero_bin = int(np.ceil(f32(-lo / width)))
    best = 0
    for w in range(2048):
        a, b = (0, w - 1) if lo == 0 else (max(0, zero_bin - w), min(2047, zero_bin + w))
        if (sum(bins[a : b + 1]) if b >= a else 0) / len(x.reshape(-1)) >= 0.99:
            best = w
            break
    if lo == 0:
        return ref_choose(lo, f32(lo + f32(width * f32(best))))
    return ref_choose(f32(lo + f32(width * f32(zero_bin - best))), f32(lo + f32(width * f32(zero_bin + best + 1))))


def ref_hist(x, lo, hi, nbins=2048):
    width = f32(f32(hi - lo) / f32(nbins))
    bins = [0] * nbins
    for v in x.reshape(-1):
        bins[min(max(int(f32(f32(v - lo) / width)), 0), nbins - 1)] += 1
    return bins, width


def ref_l2_norm(begin, end, density):
    b, e, d = f32(begin), f32(end), f32(density)
    return f32(d * f32(f32(f32(f32(e * e) * e) - f32(f32(b * b) * b)) / f32(3)))


def ref_l2_approx(x):
    """L2ErrorMinimization::NonlinearQuantizationParamsSearch (norm_minimization.cc), scalar, for 8 bits."""
    lo, hi = f32(x.min()), f32(x.max())
    bins, width = ref_hist(x, lo, hi)
    extra = 0
    if lo > 0:
        extra = int(np.ceil(f32(lo / width)))
        lo = f32(lo - f32(f32(extra) * width))
        bins = [0] * extra + bins
    elif hi < 0:
        extra = int(np.ceil(f32(-hi / width)))
        hi = f32(hi + f32(f32(extra) * width))
        bins = bins + [0] * extra
    nbins = len(bins)
    width = f32(f32(hi - lo) / f32(nbins))
    cdf = list(np.cumsum(bins))
    total = cdf[-1]
    alpha, beta, start, stop, norm_min = 0.0, 1.0, 0, nbins - 1, float("inf")
    while alpha < beta:
        na, nb = alpha + 0.00001, beta - 0.00001
        i, j = start, stop
        while i < stop and cdf[i] < na * total:
            i += 1
        while j > start and cdf[j] > nb * total:
            j -= 1
        s2, e2 = start, stop
        if i - start > stop - j:
            s2, alpha = i, na
        else:
            e2, beta = j, nb
        if (s2, e2) == (start, stop):
            continue
        dw = float(f32(f32(width * f32(e2 - s2 + 1)) / f32(256)))
        norm = 0.0
        for src in range(nbins):
            b0 = float(f32(f32(src - s2) * width))
            b1 = b0 + float(width)
            db = int(min(255.0, max(0.0, np.floor(b0 / dw))))
            de = int(min(255.0, max(0.0, np.floor(b1 / dw))))
            cb = db * dw + dw / 2
            dens = f32(f32(bins[src]) / width)
            if db == de:
                norm += float(ref_l2_norm(b0 - cb, b1 - cb, dens))
            else:
                norm += float(ref_l2_norm(b0 - cb, dw / 2, dens))
                norm += float(f32(f32(de - db - 1) * ref_l2_norm(-dw / 2, dw / 2, dens)))
                norm += float(ref_l2_norm(-dw / 2, b1 - (de * dw + dw / 2), dens))
        if norm > norm_min:
            break
        norm_min, start, stop = norm, s2, e2
    return ref_choose(f32(lo + f32(width * f32(start))), f32(lo + f32(width * f32(stop + 1))))


@settings(max_examples=12, deadline=None)
@given(n=st.integers(1, 6), m=st.integers(1, 8), k=st.integers(8, 64), sym=st.booleans(), seed=st.integers(1, 5),
       kind=st.sampled_from(["MIN_MAX_QUANTIZATION", "min_max", "P99_QUANTIZATION", "p99",
                             "L2_MIN_QUANTIZATION_APPROX", "l2_approx"]))  # fmt: skip
def test_int8_gen_quant_params(n, m, k, sym, seed, kind):
    """int8_gen_quant_params_test's data (rounded uniform over 255 values, from 0 when symmetric)."""
    rng = np.random.default_rng(seed)
    x_min = 0 if sym else -77
    x = np.round(rng.random((n, m, k)) * 255 + x_min).astype(f32)
    ws = Workspace()
    ws.feed_blob("X", x)
    create_int8_quant_scheme_blob("quant_scheme", kind, sym, ws=ws)
    op = CreateOperator("Int8GenQuantParams", ["X", "quant_scheme"], ["quant_param"])
    if "l2" in kind.lower() and sym:  # Caffe2 runs the brute-force L2 search then: not ported
        with pytest.raises(OperatorError, match="not ported"):
            create_operator(op, ws).run()
        return
    ws.run_operator_once(op)
    scale, zp = observe_int8_quant_params_blob("quant_param", ws=ws)
    if kind.lower().startswith("min_max"):
        expected = ref_choose(x.min(), x.max(), 8, sym)
    else:
        expected = ref_p99(x) if "99" in kind else ref_l2_approx(x)
    assert (f32(scale), zp) == expected


@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 2**16), outliers=st.lists(st.floats(-60, 60, width=32), max_size=3),
       shift=st.floats(-3, 3, width=32))  # fmt: skip
def test_int8_gen_quant_params_l2_approx_trims_outliers(seed, outliers, shift):
    x = (np.random.default_rng(seed).standard_normal(800) + shift).astype(f32)
    x[: len(outliers)] = outliers
    ws = Workspace()
    ws.feed_blob("X", x)
    create_int8_quant_scheme_blob("s", "l2_approx", False, ws=ws)
    ws.run_operator_once(CreateOperator("Int8GenQuantParams", ["X", "s"], ["p"]))
    scale, zp = observe_int8_quant_params_blob("p", ws=ws)
    assert (f32(scale), zp) == ref_l2_approx(x)


def test_quant_scheme_blob_fill_and_params_blob_objects():
    ws = Workspace()
    ws.run_operator_once(CreateOperator("Int8QuantSchemeBlobFill", [], ["s"]))
    assert ws.get_blob("s")._obj == Int8QuantSchemeBlob("MIN_MAX_QUANTIZATION", False)
    ws.run_operator_once(CreateOperator("Int8QuantSchemeBlobFill", [], ["s"], quantization_kind="p99",
                                        preserve_sparsity=1))  # fmt: skip
    assert ws.get_blob("s")._obj == Int8QuantSchemeBlob("p99", True)
    ws.feed_blob("E", np.zeros((0, 3), f32))
    ws.run_operator_once(CreateOperator("Int8GenQuantParams", ["E", "s"], ["p"]))
    assert ws.get_blob("p")._obj == Int8QuantParamsBlob(float(f32(0.1)), 0)  # [0, 0]: scale 0.1
    for name in ("s", "p"):
        with pytest.raises(SerializationError):
            serialize_blob_to_string(ws.get_blob(name)._obj, name)
    for op_type, ins in (("Int8QuantSchemeBlobFill", []), ("Int8GenQuantParams", ["E", "s"])):
        with pytest.raises(GradientError):
            get_gradient_for_op(CreateOperator(op_type, ins, ["Z"]), ["dZ"])


def _fails(ws, op, err, pattern):
    before = {n: repr(ws.get_blob(n)._obj) for n in ws.blobs()}
    with pytest.raises(err, match=pattern):
        create_operator(op, ws).run()
    assert {n: repr(ws.get_blob(n)._obj) for n in before} == before


def test_errors_name_op_and_blob_and_change_nothing():
    ws = Workspace()
    ws.feed_blob("X", np.ones((2, 3), f32))
    ws.feed_blob("Xd", np.ones((2, 3), np.float64))
    ws.feed_blob("bad", np.array([1.0, np.nan], f32))
    ws.feed_blob("s2", np.array([0.1, 0.2], f32))
    ws.feed_blob("s0", np.array([0.0], f32))
    ws.feed_blob("z", np.array([3], np.int32))
    ws.feed_blob("Q", q8(np.ones((2, 2)), 0.5, 1))
    ws.run_operator_once(CreateOperator("Quantize", ["X"], ["Y"]))
    _fails(ws, CreateOperator("Quantize", ["Xd"], ["Y"]), TypeMismatchError, "Quantize.*'Xd'")
    _fails(ws, CreateOperator("Quantize", ["bad"], ["Y"]), ShapeError, "Quantize.*'bad'.*NaN")
    _fails(ws, CreateOperator("Quantize", ["X", "s2", "z"], ["Y"]), ShapeError, "'s2'.*one element")
    _fails(ws, CreateOperator("Quantize", ["X", "z", "z"], ["Y"]), TypeMismatchError, "'z'.*float32")
    _fails(ws, CreateOperator("Quantize", ["X", "s2"], ["Y"]), TypeMismatchError, "'s2'.*Int8QuantParamsBlob")
    _fails(ws, CreateOperator("Quantize", ["X", "s0", "z"], ["Y"]), ShapeError, "'s0'.*positive")
    _fails(ws, CreateOperator("Quantize", ["X"], ["Y"], Y_scale=-1.0), ArgumentError, "Y_scale")
    _fails(ws, CreateOperator("Quantize", ["X"], ["Y"], Y_scale=1.0, Y_zero_point=300), ArgumentError, "Y_zero_point")
    _fails(ws, CreateOperator("Quantize", ["X"], ["Y"], engine="DNNLOWP_16"), ArgumentError, "DNNLOWP_16")
    _fails(ws, CreateOperator("Quantize", ["X"], ["Y"], activation_precision=9), ArgumentError, "activation_precision")
    _fails(ws, CreateOperator("Dequantize", ["X"], ["Z"]), TypeMismatchError, "Dequantize.*'X'.*Int8TensorCPU")
    ws.run_operator_once(CreateOperator("Int8QuantSchemeBlobFill", [], ["kl"], quantization_kind="kl"))
    ws.run_operator_once(CreateOperator("Int8QuantSchemeBlobFill", [], ["junk"], quantization_kind="junk"))
    ws.run_operator_once(CreateOperator("Int8QuantSchemeBlobFill", [], ["mm"]))
    _fails(ws, CreateOperator("Int8GenQuantParams", ["X", "kl"], ["p"]), OperatorError, "'kl'.*not ported")
    _fails(ws, CreateOperator("Int8GenQuantParams", ["X", "junk"], ["p"]), OperatorError, "unknown.*'junk'")
    _fails(ws, CreateOperator("Int8GenQuantParams", ["X", "X"], ["p"]), TypeMismatchError, "'X'.*Int8QuantSchemeBlob")
    _fails(ws, CreateOperator("Int8GenQuantParams", ["bad", "mm"], ["p"]), ShapeError, "'bad'.*NaN")
    ws.feed_blob("scalar", np.array(2.0, f32))
    _fails(ws, CreateOperator("Int8GenQuantParams", ["scalar", "mm"], ["p"]), FrameworkError, "'scalar'")
