"""ONNXCast: every element type ONNX's Cast reaches (bfloat16, float8 with and without saturation,
float8_e8m0 rounding modes, float4, int4/int2, uint32/uint64), against references written here
(out-of-range float -> integer casts, undefined in ONNX, against onnx's reference implementation)."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import ArgumentError, TypeMismatchError
from framework.ops.testing import arrays, assert_reference_checks, run_op_on, shapes

ml_dtypes = pytest.importorskip("ml_dtypes")

# largest finite value of each float8 format (from the formats' definitions, not from ml_dtypes)
F8_MAX = {"float8_e4m3fn": 448.0, "float8_e4m3fnuz": 240.0, "float8_e5m2": 57344.0, "float8_e5m2fnuz": 57344.0}
SPECIAL = np.array([0.4789, 1e6, -1e6, 1e-7, np.inf, -np.inf, np.nan, 0.0, 300.0, -250.5], np.float32)


def _cast(to, **kw):
    return CreateOperator("ONNXCast", ["X"], ["Y"], to=to, **kw)


@pytest.mark.parametrize("to", list(F8_MAX))
@pytest.mark.parametrize("src", [np.float32, np.float16])
def test_float8_saturates_by_default(to, src):
    with np.errstate(over="ignore"):
        x = SPECIAL.astype(src)
    m = F8_MAX[to]

    def ref(x):
        f = x.astype(np.float64)
        f = np.where(np.isnan(f), f, np.minimum(np.maximum(f, -m), m))
        return f.astype(np.float32).astype(getattr(ml_dtypes, to))

    (y,) = run_op_on(_cast(to), [x])
    assert y.dtype == np.dtype(getattr(ml_dtypes, to))
    got, exp = y.astype(np.float32), ref(x).astype(np.float32)
    np.testing.assert_array_equal(np.isnan(got), np.isnan(exp))
    np.testing.assert_array_equal(got[~np.isnan(got)], exp[~np.isnan(exp)])
    assert abs(got[1]) == m and got[4] == m and got[5] == -m  # 1e6 and infinities clamp


@pytest.mark.parametrize("to", ["float8_e4m3fn", "float8_e5m2"])
def test_float8_without_saturation_overflows(to):
    (y,) = run_op_on(_cast(to, saturate=0), [SPECIAL])
    got = y.astype(np.float32)
    if to == "float8_e5m2":  # has infinities
        assert got[1] == np.inf and got[2] == -np.inf and got[4] == np.inf
    else:  # e4m3fn has none: NaN
        assert np.isnan(got[1]) and np.isnan(got[4])


@given(data=st.data())
@settings(max_examples=20, deadline=None)
def test_e8m0_round_modes(data):
    mode = data.draw(st.sampled_from(["up", "down", "nearest"]))
    x = data.draw(arrays(data.draw(shapes(1, 2, 1, 5)), np.float32, elements=st.floats(2.0**-100, 2.0**100, width=32)))

    def ref(x):
        out = []
        for v in x.reshape(-1).tolist():
            m, e = math.frexp(v)  # v = m * 2**e, 0.5 <= m < 1: the power below is 2**(e-1)
            p = e - 1
            frac = m * 2 - 1  # in [0, 1)
            if mode == "up" and frac > 0:
                p += 1
            elif mode == "nearest" and (frac > 0.5 or (frac == 0.5 and p + 127 > 0)):
                p += 1
            out.append(p + 127)
        return np.array(out, np.uint8).reshape(x.shape).view(ml_dtypes.float8_e8m0fnu)

    (y,) = run_op_on(_cast("float8_e8m0fnu", round_mode=mode), [x])
    np.testing.assert_array_equal(y.view(np.uint8), ref(x).view(np.uint8))


def test_e8m0_specials():
    x = np.array([np.nan, np.inf, 1.0, 2.0**127 * 1.5], np.float32)
    (y,) = run_op_on(_cast("float8_e8m0fnu"), [x])
    np.testing.assert_array_equal(y.view(np.uint8), [255, 255, 127, 254])  # saturate: no rounding past 2**127
    (y,) = run_op_on(_cast("float8_e8m0fnu", saturate=0), [x])
    assert y.view(np.uint8)[3] == 255


_SMALL_INT_RANGES = {
    "int4": (-8, 7),
    "uint4": (0, 15),
    "int2": (-2, 1),
    "uint2": (0, 3),
    "uint32": (0, 15),
    "uint64": (0, 15),
}


@given(data=st.data())
@settings(max_examples=20, deadline=None)
def test_in_range_integers_truncate_and_floats_round_trip(data):
    to = data.draw(st.sampled_from([*_SMALL_INT_RANGES, "bfloat16", "float4_e2m1fn"]))
    lo, hi = _SMALL_INT_RANGES.get(to, (-9, 15))
    # in range after truncation toward zero: (lo - 1, hi + 1) exclusive
    values = st.floats(lo - 0.75, hi + 0.75, width=32) if to in _SMALL_INT_RANGES else st.integers(-9, 15).map(float)
    x = data.draw(arrays(data.draw(shapes(0, 3, 0, 4)), np.float32, elements=values))

    def ref(x):
        if to in _SMALL_INT_RANGES:
            return np.trunc(x.astype(np.float64))
        if to == "bfloat16":
            return x  # small integers are exact in bfloat16
        grid = np.array([0, 0.5, 1, 1.5, 2, 3, 4, 6])  # float4_e2m1: nearest even on this grid, saturating at 6
        a = np.minimum(np.abs(x.astype(np.float64)), 6)
        return np.sign(x) * grid[np.abs(grid[None, :] - a.reshape(-1, 1)).argmin(axis=1)].reshape(x.shape)

    (y,) = run_op_on(_cast(to), [x])
    assert y.shape == x.shape and y.dtype.name == to
    np.testing.assert_array_equal(y.astype(np.float64), np.asarray(ref(x), np.float64))


@pytest.mark.parametrize("to", list(_SMALL_INT_RANGES))
def test_out_of_range_floats_give_what_onnx_reference_gives(to):
    """ONNX's Cast leaves float -> integer undefined out of range; ours is its reference implementation's
    answer (which changed with ml_dtypes 0.7: uint4(-1.0) was 15, is 0), whatever version is installed."""
    pytest.importorskip("onnx")
    from onnx import TensorProto, helper
    from onnx.reference import ReferenceEvaluator

    code = getattr(TensorProto, to.upper())
    node = helper.make_node("Cast", ["x"], ["y"], to=code)
    graph = helper.make_graph(
        [node],
        "cast",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None])],
        [helper.make_tensor_value_info("y", code, [None])],
    )
    x = np.arange(-9, 17, dtype=np.float32)
    with np.errstate(all="ignore"):
        (expected,) = ReferenceEvaluator(helper.make_model(graph)).run(None, {"x": x})
    (y,) = run_op_on(_cast(to), [x])
    np.testing.assert_array_equal(y.astype(np.int64), expected.astype(np.int64))


@given(data=st.data())
@settings(max_examples=15, deadline=None)
def test_from_low_precision_types_is_exact(data):
    src = data.draw(st.sampled_from(["bfloat16", "float8_e4m3fn", "float8_e5m2", "int4", "uint2"]))
    x = data.draw(arrays(data.draw(shapes(0, 3, 0, 4)), np.float32, elements=st.integers(0, 1).map(float)))
    x = x.astype(getattr(ml_dtypes, src))
    assert_reference_checks(_cast("float32"), [x], lambda x: x.astype(np.float64).astype(np.float32))
    assert_reference_checks(_cast("int8"), [x], lambda x: x.astype(np.float64).astype(np.int8))


def test_bad_type_name_and_string_input_raise_naming_the_op():
    with pytest.raises(ArgumentError, match="ONNXCast.*'to'"):
        run_op_on(_cast("float128x"), [np.ones(2, np.float32)])
    with pytest.raises(TypeMismatchError, match="ONNXCast.*'X'"):
        run_op_on(_cast("float32"), [np.array([b"1"], dtype=object)])


@given(data=st.data())
@settings(max_examples=15, deadline=None)
def test_bitcast_reinterprets_bits(data):
    src, to = data.draw(st.sampled_from([(np.float32, "int32"), (np.int16, "float16"), (np.uint8, "int8"),
                                         (np.float64, "uint64"), (np.int16, "bfloat16")]))  # fmt: skip
    x = data.draw(
        arrays(
            data.draw(shapes(0, 3, 0, 4)),
            src,
            elements=st.integers(-100, 100).map(lambda v: abs(v) if np.dtype(src).kind == "u" else v),
        )
    )

    def ref(x):  # the bytes, reread
        dt = np.dtype(getattr(ml_dtypes, to, None) or to)
        return np.frombuffer(x.tobytes(), dtype=dt).reshape(x.shape)

    (y,) = run_op_on(CreateOperator("ONNXBitCast", ["X"], ["Y"], to=to), [x])
    assert y.dtype.name == to and y.tobytes() == ref(x).tobytes()


def test_bitcast_needs_equal_widths():
    with pytest.raises(TypeMismatchError, match="ONNXBitCast.*'X'.*16-bit"):
        run_op_on(CreateOperator("ONNXBitCast", ["X"], ["Y"], to="float16"), [np.ones(2, np.float32)])
