"""ONNX quantization ops against element loops (round half to even, saturation, per-axis/blocked params)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.ops.testing import assert_reference_checks, run_op_on

RANGES = {np.uint8: (0, 255), np.int8: (-128, 127), np.uint16: (0, 65535), np.int16: (-32768, 32767)}


def _param_index(idx, shape, axis, block, pshape):
    """The index into scale/zero point of element ``idx`` of X."""
    if pshape == ():
        return ()
    if not block:
        return (idx[axis],)
    j = list(idx)
    j[axis] //= block
    return tuple(j)


def ref_quantize(x, s, z, dt, axis, block):
    lo, hi = RANGES[dt]
    out = np.zeros(x.shape, dt)
    for idx in np.ndindex(*x.shape):
        p = _param_index(idx, x.shape, axis, block, s.shape)
        v = x[idx] / s[p]
        q = round(float(v))  # Python rounds half to even
        q += int(z[p]) if z is not None else 0
        out[idx] = min(max(q, lo), hi)
    return out


def ref_dequantize(q, s, z, axis, block):
    out = np.zeros(q.shape, s.dtype)
    for idx in np.ndindex(*q.shape):
        p = _param_index(idx, q.shape, axis, block, s.shape)
        out[idx] = (float(q[idx]) - (float(z[p]) if z is not None else 0.0)) * float(s[p])
    return out


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 999),
    dt=st.sampled_from(list(RANGES)),
    mode=st.sampled_from(["tensor", "axis", "block"]),
    with_zp=st.booleans(),
)
def test_quantize_dequantize_match_loops(seed, dt, mode, with_zp):
    rng = np.random.default_rng(seed)
    shape, axis, block = (3, 5, 2), 1, (2 if mode == "block" else 0)
    x = (rng.standard_normal(shape) * 300).astype(np.float32)
    x.reshape(-1)[0] = 2.5  # a tie: rounds to 2
    pshape = {"tensor": (), "axis": (5,), "block": (3, 3, 2)}[mode]
    s = (rng.random(pshape) + 0.5).astype(np.float32) if pshape else np.float32(1.0)
    s = np.asarray(s)
    lo, hi = RANGES[dt]
    z = rng.integers(lo, min(hi, lo + 200), pshape).astype(dt) if with_zp else None
    names = ["x", "s"] + (["z"] if with_zp else [])
    args = {"axis": axis, "block_size": block}
    to = {np.uint8: 2, np.int8: 3, np.uint16: 4, np.int16: 5}[dt]
    q = assert_reference_checks(
        CreateOperator("ONNXQuantizeLinear", names, ["q"], to=to, **args),
        [x, s] + ([z] if with_zp else []),
        lambda *_: ref_quantize(x, s, z, dt, axis, block),
    )[0]
    assert_reference_checks(
        CreateOperator("ONNXDequantizeLinear", names, ["y"], **args),
        [q, s] + ([z] if with_zp else []),
        lambda *_: ref_dequantize(q, s, z, axis, block),
        threshold=1e-5,
    )


def test_dynamic_quantize_linear():
    x = np.array([[0.0, 2.0, -3.0, -2.5], [1.34, 0.5, 10.0, -1.0]], np.float32)
    lo, hi = -3.0, 10.0
    scale = np.float32((hi - lo) / 255)
    zp = round(float(-lo / scale))
    want = np.array([min(max(round(float(v / scale)) + zp, 0), 255) for v in x.reshape(-1)], np.uint8).reshape(x.shape)
    assert_reference_checks(
        CreateOperator("ONNXDynamicQuantizeLinear", ["x"], ["y", "s", "z"]),
        [x],
        lambda _: [want, np.float32(scale), np.uint8(zp)],
    )
    with pytest.raises(FrameworkError, match="NaN"):
        run_op_on(CreateOperator("ONNXDynamicQuantizeLinear", ["x"], ["y", "s", "z"]), [np.array([np.nan], np.float32)])


@settings(max_examples=20, deadline=None)
@given(seed=st.integers(0, 999), dt=st.sampled_from([np.uint8, np.int8]), batch=st.booleans())
def test_integer_matmuls_match_loops(seed, dt, batch):
    rng = np.random.default_rng(seed)
    lo, hi = RANGES[dt]
    a = rng.integers(lo, hi + 1, ((2,) if batch else ()) + (3, 4)).astype(dt)
    b = rng.integers(lo, hi + 1, (4, 5)).astype(dt)
    za, zb = np.array(rng.integers(lo, hi + 1), dt), np.array(rng.integers(lo, hi + 1), dt)

    def ref_int(a, b, za, zb):
        out = np.zeros(a.shape[:-1] + (5,), np.int64)
        for idx in np.ndindex(*out.shape):
            row = a[idx[:-1]].astype(np.int64) - int(za)
            out[idx] = int(np.sum(row * (b[:, idx[-1]].astype(np.int64) - int(zb))))
        return out.astype(np.int32)

    assert_reference_checks(CreateOperator("ONNXMatMulInteger", ["a", "b", "za", "zb"], ["y"]), [a, b, za, zb], ref_int)
    sa, sb, sy = np.float32(0.02), np.float32(0.03), np.float32(0.5)
    zy = np.array(7, dt)

    def ref_q(*_):
        c = ref_int(a, b, za, zb).astype(np.float64) * float(sa * sb / sy) + 7
        return np.clip(np.round(c), lo, hi).astype(dt)

    assert_reference_checks(
        CreateOperator("ONNXQLinearMatMul", ["a", "sa", "za", "b", "sb", "zb", "sy", "zy"], ["y"]),
        [a, sa, za, b, sb, zb, sy, zy],
        ref_q,
    )


def test_quantization_errors_name_the_blob():
    x = np.ones((2, 3), np.float32)
    with pytest.raises(FrameworkError, match="'s' has shape"):
        run_op_on(CreateOperator("ONNXQuantizeLinear", ["x", "s"], ["y"]), [x, np.ones(2, np.float32)])
    with pytest.raises(FrameworkError, match="cannot multiply 'a'"):
        run_op_on(CreateOperator("ONNXMatMulInteger", ["a", "b"], ["y"]), [np.ones((2, 3), np.int8)] * 2)


def test_quantize_to_ml_dtypes_small_ints_and_float8():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    x = np.array([[-20.0, -2.5, 0.4, 2.5, 3.5, 99.0]], np.float32)
    s = np.float32(0.5)
    for name, lo, hi in (("int4", -8, 7), ("uint4", 0, 15), ("int2", -2, 1), ("uint2", 0, 3)):
        dt = np.dtype(getattr(ml_dtypes, name))
        z = np.array(1, dt)
        want = np.array([[min(max(round(float(v / s)) + 1, lo), hi) for v in x[0]]]).astype(dt)
        (q,) = assert_reference_checks(
            CreateOperator("ONNXQuantizeLinear", ["x", "s", "z"], ["q"]),
            [x, s, z],
            lambda *_, want=want: want,
            check_inference=False,
        )
        assert q.dtype == dt
        (y,) = run_op_on(CreateOperator("ONNXDequantizeLinear", ["q", "s", "z"], ["y"]), [q, s, z])
        np.testing.assert_array_equal(y, (want.astype(np.float32) - 1) * 0.5)
    f8 = np.dtype(ml_dtypes.float8_e4m3fn)
    (q,) = run_op_on(CreateOperator("ONNXQuantizeLinear", ["x", "s", "z"], ["q"]), [x * 10, s, np.array(0, f8)])
    assert q.dtype == f8 and float(q.astype(np.float32).max()) == 448.0  # saturated, not NaN
    with pytest.raises(FrameworkError, match="must be 0"):
        run_op_on(CreateOperator("ONNXDequantizeLinear", ["q", "s", "z"], ["y"]), [q, s, np.array(1, f8)])
