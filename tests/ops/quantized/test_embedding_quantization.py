"""Row-wise quantization ops, bit-exact against element-by-element references of Caffe2's C loops
(``perfkernels/fused_nbit_rowwise_conversion.cc``, ``lengths_reducer_rowwise_8bit_ops.h``)."""

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.ops.testing import assert_gradient_checks, assert_reference_checks, run_op_on

f32, f16 = np.float32, np.float16


def c_lrintf(v):
    """lrintf on x86-64: round half to even (the default rounding mode); NaN, infinities and values
    out of range give the "integer indefinite" LONG_MIN (cvtss2si), e.g. (v - min) * inf when a row's
    range underflows float16 to a zero scale."""
    r = np.rint(f32(v))
    if not np.isfinite(r) or abs(float(r)) >= 2.0**63:
        return -(2**63)
    return int(r)


def ref_fused_8bit(x):
    out = []
    for row in x.reshape(-1, x.shape[-1]):
        mn, mx = f32(min(row)), f32(max(row))
        rng = f32(mx - mn)
        inv = f32(f32(255.0) / f32(rng + f32(1e-8)))
        codes = bytes(c_lrintf(f32(f32(v - mn) * inv)) for v in row)
        out.append(codes + struct.pack("<ff", f32(rng / f32(255.0)), mn))
    return np.frombuffer(b"".join(out), np.uint8).reshape((*x.shape[:-1], x.shape[-1] + 8))


def ref_fused_nbit(x, bits, from_half=False, ranges=None):
    per = 8 // bits
    out = []
    for r, row in enumerate(x.reshape(-1, x.shape[-1]).astype(f32)):
        lo, hi = ranges[r] if ranges is not None else (min(row), max(row))
        mn = f32(f16(lo))
        rng = f32(f32(hi) - mn)
        scale = f16(1.0) if rng == 0 else f16(f32(rng / f32((1 << bits) - 1)))
        if scale == 0:
            scale = f16(1.0)
        inv = f32(f32(1.0) / f32(scale))
        if not from_half and np.isinf(inv):
            scale, inv = f16(1.0), f32(1.0)
        packed = bytearray((len(row) + per - 1) // per)
        for c, v in enumerate(row):
            t = f32(v - mn)
            q = c_lrintf(f32(t / f32(scale)) if from_half else f32(t * inv))
            q = max(0, min(q, (1 << bits) - 1))
            packed[c // per] |= q << ((c % per) * bits)
        out.append(bytes(packed) + np.array([scale, f16(mn)], f16).tobytes())
    nbytes = (x.shape[-1] + per - 1) // per + 4
    return np.frombuffer(b"".join(out), np.uint8).reshape((*x.shape[:-1], nbytes))


def ref_dequant_nbit(q, bits):
    per = 8 // bits
    rows = q.reshape(-1, q.shape[-1])
    cols = (q.shape[-1] - 4) * per
    out = np.zeros((len(rows), cols), f32)
    for r, row in enumerate(rows):
        scale, bias = np.frombuffer(bytes(row[-4:]), f16).astype(f32)
        for c in range(cols):
            code = (int(row[c // per]) >> ((c % per) * bits)) & ((1 << bits) - 1)
            out[r, c] = f32(scale * f32(code)) + bias
    return out.reshape((*q.shape[:-1], cols))


rows_st = st.tuples(st.integers(0, 4), st.integers(1, 3)).flatmap(
    lambda s: st.lists(
        st.floats(-8, 8, width=32) | st.sampled_from([0.0, 1.0, -1.5]),
        min_size=s[0] * s[1] * 4,
        max_size=s[0] * s[1] * 4,
    ).map(lambda v, s=s: np.array(v, f32).reshape(s[0], s[1] * 4))
)


@settings(max_examples=40, deadline=None)
@given(rows_st)
def test_fused_8bit_float_scale_bias_is_bit_exact(x):
    op = CreateOperator("FloatToFused8BitRowwiseQuantized", ["x"], ["q"])
    q = assert_reference_checks(op, [x], ref_fused_8bit)[0]
    back = q[:, :-8].astype(f32) * q[:, -8:-4].copy().view(f32) + q[:, -4:].copy().view(f32) if len(q) else q[:, :0]
    assert_reference_checks(
        CreateOperator("Fused8BitRowwiseQuantizedToFloat", ["q"], ["y"]),
        [q],
        lambda _: back.astype(f32).reshape(x.shape),
        threshold=0,
        atol=0,
    )
    h = assert_reference_checks(
        CreateOperator("Fused8BitRowwiseQuantizedToHalfFloat", ["q"], ["y"]),
        [q],
        lambda _: back.astype(f16).reshape(x.shape),
        threshold=0,
        atol=0,
    )[0]
    assert h.dtype == f16
    assert_reference_checks(
        CreateOperator("HalfFloatToFused8BitRowwiseQuantized", ["x"], ["q"]),
        [x.astype(f16)],
        lambda xh: ref_fused_8bit(xh.astype(f32)),
    )


@pytest.mark.parametrize("bits", [8, 4, 2])
@settings(max_examples=30, deadline=None)
@given(x=rows_st)
def test_fused_nbit_and_half_scale_bias_are_bit_exact(bits, x):
    if bits == 8:
        to, back, half_to = (
            "FloatToFused8BitRowwiseQuantizedHalfScaleBias",
            "Fused8BitRowwiseQuantizedHalfScaleBiasToFloat",
            "HalfFloatToFused8BitRowwiseQuantizedHalfScaleBias",
        )
    else:
        to, back, half_to = (
            f"FloatToFused{bits}BitRowwiseQuantized",
            f"Fused{bits}BitRowwiseQuantizedToFloat",
            f"HalfToFused{bits}BitRowwiseQuantized",
        )
    q = assert_reference_checks(CreateOperator(to, ["x"], ["q"]), [x], lambda v: ref_fused_nbit(v, bits))[0]
    assert_reference_checks(
        CreateOperator(back, ["q"], ["y"]), [q], lambda v: ref_dequant_nbit(v, bits), threshold=0, atol=0
    )
    xh = x.astype(f16)
    assert_reference_checks(
        CreateOperator(half_to, ["x"], ["q"]), [xh], lambda v: ref_fused_nbit(v.astype(f32), bits, from_half=bits != 8)
    )
    if bits != 8:
        out = run_op_on(CreateOperator(f"Fused{bits}BitRowwiseQuantizedToHalf", ["q"], ["y"]), [q])[0]
        np.testing.assert_array_equal(out, ref_dequant_nbit(q, bits).astype(f16))


def test_quantization_error_is_within_half_a_step():
    x = np.random.default_rng(0).standard_normal((20, 16)).astype(f32)
    for bits, to, back in (
        (4, "FloatToFused4BitRowwiseQuantized", "Fused4BitRowwiseQuantizedToFloat"),
        (2, "FloatToFused2BitRowwiseQuantized", "Fused2BitRowwiseQuantizedToFloat"),
    ):
        q = run_op_on(CreateOperator(to, ["x"], ["q"]), [x])[0]
        y = run_op_on(CreateOperator(back, ["q"], ["y"]), [q])[0]
        step = (x.max(axis=1) - x.min(axis=1)) / ((1 << bits) - 1)
        assert (np.abs(y - x) <= step[:, None] * 0.51 + 2e-3).all()


def ref_rowwise_8bits(x):
    q = np.zeros(x.shape, np.uint8)
    sb = np.zeros((len(x), 2), f32)
    for i, row in enumerate(x):
        mn, mx = f32(min(row)), f32(max(row))
        if f32(mx - mn) < f32(1e-10):
            sb[i] = [1.0, mn]
            continue
        scale = f32(f32(mx - mn) / f32(255.0))
        sb[i] = [scale, mn]
        inv = f32(f32(1.0) / scale)
        for j, v in enumerate(row):
            t = float(f32(f32(v - mn) * inv))
            q[i, j] = int(np.floor(t + 0.5))  # t >= 0 exactly in float64: halves go up (std::round)
    return q, sb


@settings(max_examples=40, deadline=None)
@given(rows_st)
def test_rowwise_8bits_with_separate_scale_bias(x):
    q, sb = assert_reference_checks(
        CreateOperator("FloatToRowwiseQuantized8Bits", ["x"], ["q", "sb"]), [x], ref_rowwise_8bits
    )
    y = q.astype(f32) * sb[:, :1] + sb[:, 1:] if len(q) else np.zeros(x.shape, f32)
    assert_reference_checks(
        CreateOperator("Rowwise8BitQuantizedToFloat", ["q", "sb"], ["y"]),
        [q, sb],
        lambda *_: y.reshape(x.shape),
        threshold=0,
        atol=0,
    )


def test_half_float_conversions_fills_and_gradients():
    x = np.array([1.0, 1e5, -70000.0, 0.1], f32)
    out = run_op_on(CreateOperator("FloatToHalf", ["x"], ["y"]), [x])[0]
    assert out.dtype == f16 and np.isinf(out[1]) and out[0] == 1.0
    clipped = run_op_on(CreateOperator("FloatToHalf", ["x"], ["y"], clip=True), [x])[0]
    np.testing.assert_array_equal(clipped, np.array([1.0, 65504, -65504, 0.1], f16))
    back = run_op_on(CreateOperator("HalfToFloat", ["x"], ["y"]), [clipped])[0]
    assert back.dtype == f32 and back[1] == 65504
    assert_gradient_checks(
        CreateOperator("HalfToFloat", ["x"], ["y"]),
        [np.array([0.5, -2.0], f16)],
        0,
        float64=False,
        stepsize=0.125,
        threshold=1e-2,
    )
    y = run_op_on(CreateOperator("Float16ConstantFill", [], ["y"], shape=[2, 3], value=1.5), [])[0]
    np.testing.assert_array_equal(y, np.full((2, 3), 1.5, f16))
    u = run_op_on(CreateOperator("Float16UniformFill", [], ["y"], shape=[1000], min=-2.0, max=3.0), [])[0]
    assert u.dtype == f16 and u.min() >= -2.0 and u.max() <= 3.0 and u.std() > 1.0
    with pytest.raises(FrameworkError, match="Float16UniformFill.*bigger than min"):
        run_op_on(CreateOperator("Float16UniformFill", [], ["y"], shape=[2], min=1.0, max=1.0), [])


@pytest.mark.parametrize(
    "op_type, value, message",
    [
        ("FloatToFused4BitRowwiseQuantized", np.ones((2, 3), f32), "multiple of 2"),
        ("FloatToFused8BitRowwiseQuantized", np.ones((2, 3), np.float64), "float32"),
        ("Fused8BitRowwiseQuantizedToFloat", np.ones((2, 3), np.uint8), "8 bytes"),
        ("HalfToFloat", np.ones(2, f32), "float16"),
    ],
)
def test_bad_input_is_a_named_error(op_type, value, message):
    with pytest.raises(FrameworkError, match=f"{op_type}.*{message}"):
        run_op_on(CreateOperator(op_type, ["x"], ["y"]), [value])


def test_the_conversion_family_is_complete():
    from framework.ops import all_schemas

    mods = ("embedding_quantization", "half_float")
    names = sorted(s.type for s in all_schemas() if s.operator_class.__module__.endswith(mods))
    assert names == [
        "Float16ConstantFill",
        "Float16UniformFill",
        "FloatToFused2BitFakeRowwiseQuantized",
        "FloatToFused2BitRowwiseQuantized",
        "FloatToFused4BitFakeRowwiseQuantized",
        "FloatToFused4BitRowwiseQuantized",
        "FloatToFused8BitRowwiseQuantized",
        "FloatToFused8BitRowwiseQuantizedHalfScaleBias",
        "FloatToHalf",
        "FloatToRowwiseQuantized8Bits",
        "Fused2BitRowwiseQuantizedToFloat",
        "Fused2BitRowwiseQuantizedToHalf",
        "Fused4BitRowwiseQuantizedToFloat",
        "Fused4BitRowwiseQuantizedToHalf",
        "Fused8BitRowwiseQuantizedHalfScaleBiasToFloat",
        "Fused8BitRowwiseQuantizedHalfScaleBiasToHalfFloat",
        "Fused8BitRowwiseQuantizedToFloat",
        "Fused8BitRowwiseQuantizedToHalfFloat",
        "HalfFloatToFused8BitRowwiseQuantized",
        "HalfFloatToFused8BitRowwiseQuantizedHalfScaleBias",
        "HalfToFloat",
        "HalfToFused2BitFakeRowwiseQuantized",
        "HalfToFused2BitRowwiseQuantized",
        "HalfToFused4BitFakeRowwiseQuantized",
        "HalfToFused4BitRowwiseQuantized",
        "Rowwise8BitQuantizedToFloat",
    ]


def ref_fake(x, bits, ranges=None):
    out = []
    for r, row in enumerate(x.astype(f32)):
        lo, hi = ranges[r] if ranges is not None else (min(row), max(row))
        mn = f32(f16(lo))
        rng = f32(f32(hi) - mn)
        scale = f32(1.0) if rng == 0 else f32(f16(f32(rng / f32((1 << bits) - 1))))
        inv = f32(f32(1.0) / scale)
        codes = bytes(max(0, min(c_lrintf(f32(f32(v - mn) * inv)), (1 << bits) - 1)) for v in row)
        out.append(codes + struct.pack("<ff", scale, mn))
    return np.frombuffer(b"".join(out), np.uint8).reshape(len(x), x.shape[1] + 8)


@pytest.mark.parametrize("bits", [4, 2])
@settings(max_examples=20, deadline=None)
@given(x=rows_st)
def test_fake_nbit_is_bit_exact(bits, x):
    for src, arr in (("Float", x), ("Half", x.astype(f16))):
        op = CreateOperator(f"{src}ToFused{bits}BitFakeRowwiseQuantized", ["x"], ["q"])
        assert_reference_checks(op, [arr], lambda v: ref_fake(v.astype(f32), bits))


# -- engine GREEDY: Caffe2's greedy range search ---------------------------------------------------------


def ref_loss(row, lo, hi, bits):
    """Caffe2's compress_uniform_simplified_ error, element by element: float16 bias and scale, codes rounded
    half to even, squares summed in 8 float32 lanes first (its AVX loop), then the tail."""
    lo = f32(f16(lo))
    rng = f32(hi - lo)
    qmax = f32((1 << bits) - 1)
    scale = f32(1.0) if rng == 0 else f32(f16(f32(rng / qmax)))
    inv = f32(f32(1.0) / scale)
    lanes, tail = [f32(0)] * 8, f32(0)
    body = len(row) // 8 * 8
    for c, v in enumerate(row):
        q = min(max(f32(np.rint(f32(f32(v - lo) * inv))), f32(0)), qmax)
        e = f32(v - f32(f32(q * scale) + lo))
        if c < body:
            lanes[c % 8] = f32(lanes[c % 8] + f32(e * e))
        else:
            tail = f32(tail + f32(e * e))
    total = f32(0)
    for v in lanes:
        total = f32(total + v)
    return f32(np.sqrt(f32(total + tail))) if body < len(row) else f32(np.sqrt(total))


def ref_greedy_range(row, bits):
    """Caffe2's param_search_greedy: 200 bins, narrow from the cheaper side while > 168 bins remain."""
    xmin, xmax = f32(min(row)), f32(max(row))
    step = f32(f32(xmax - xmin) / f32(200))
    thr = f32(f32(168) * step)
    best = cur = ref_loss(row, xmin, xmax, bits)
    lo, hi = xmin, xmax
    while f32(lo + thr) < hi:
        left, right = ref_loss(row, f32(lo + step), hi, bits), ref_loss(row, lo, f32(hi - step), bits)
        if cur < left and cur < right and cur < best:
            best, xmin, xmax = cur, lo, hi
        if left < right:
            lo, cur = f32(lo + step), left
        else:
            hi, cur = f32(hi - step), right
    return xmin, xmax


@pytest.mark.parametrize("bits", [4, 2])
@settings(max_examples=6, deadline=None)
@given(seed=st.integers(0, 2**16), cols=st.sampled_from([4, 12, 16, 24]))
def test_greedy_engine_searches_the_range(bits, seed, cols):
    x = np.random.default_rng(seed).standard_normal((3, cols)).astype(f32)
    ranges = [ref_greedy_range(row, bits) for row in x]
    op = CreateOperator(f"FloatToFused{bits}BitRowwiseQuantized", ["x"], ["q"], engine="GREEDY")
    (q,) = assert_reference_checks(op, [x], lambda v: ref_fused_nbit(v, bits, from_half=True, ranges=ranges))
    fake = CreateOperator(f"FloatToFused{bits}BitFakeRowwiseQuantized", ["x"], ["q"], engine="GREEDY")
    assert_reference_checks(fake, [x], lambda v: ref_fake(v, bits, ranges=ranges))
    # the greedy range does not lose to [min, max] (Caffe2's own check, with its 3% margin)
    minmax = run_op_on(CreateOperator(f"FloatToFused{bits}BitRowwiseQuantized", ["x"], ["q"]), [x])[0]
    err_greedy = np.linalg.norm(ref_dequant_nbit(q, bits) - x, axis=1)
    err_minmax = np.linalg.norm(ref_dequant_nbit(minmax, bits) - x, axis=1)
    assert (err_greedy <= err_minmax * 1.03).all()


@pytest.mark.parametrize("bits", [4, 2])
def test_greedy_engine_is_not_the_min_max_kernel(bits):
    x = np.random.default_rng(0).standard_normal((20, 16)).astype(f32)
    ranges = [ref_greedy_range(row, bits) for row in x]
    assert sum(r != (row.min(), row.max()) for r, row in zip(ranges, x)) >= 2
    greedy = run_op_on(CreateOperator(f"FloatToFused{bits}BitRowwiseQuantized", ["x"], ["q"], engine="GREEDY"), [x])[0]
    np.testing.assert_array_equal(greedy, ref_fused_nbit(x, bits, from_half=True, ranges=ranges))
    assert (greedy != run_op_on(CreateOperator(f"FloatToFused{bits}BitRowwiseQuantized", ["x"], ["q"]), [x])[0]).any()
