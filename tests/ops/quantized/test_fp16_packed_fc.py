"""FbGemmPack / FbGemmPackTranspose / FbFCPacked: the float16 rounding (fbgemm's clamp, NaN, ties),
Y against a float64 element-sum reference on float16-rounded weights, both packings, the axis
arguments, empty batches and K = 0, the init-net / predict-net split of Caffe2's doc, the packed
blob not serializable (as in Caffe2), and the errors."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import (
    ArgumentError,
    FrameworkError,
    GradientError,
    SerializationError,
    ShapeError,
    TypeMismatchError,
)
from framework.memory.allocator import memory_reporter
from framework.memory.serialize import serialize_blob_to_string
from framework.memory.workspace import Workspace
from framework.ops import create_operator, get_gradient_for_op
from framework.ops.quantized.fp16_packed_fc import PackedFP16Weights
from framework.ops.testing import assert_inferred_shapes

F16_MAX = 65504.0


def ref_fp16(w):
    """Saturate to the float16 range, NaN to -65504 (std::max(-MAX, std::min(NaN, MAX))), round half to even."""
    w = np.asarray(w, np.float64)
    out = np.empty(w.shape, np.float16)
    for idx, v in np.ndenumerate(w):
        v = -F16_MAX if np.isnan(v) else min(max(v, -F16_MAX), F16_MAX)
        out[idx] = np.float16(v)  # numpy's float64 -> float16 rounds to nearest even
    return out


def ref_fc(x2, w_nk, b):
    """Y[i, j] = sum_k x[i, k] * fp16(w[j, k]) + b[j], in float64."""
    wh = ref_fp16(w_nk).astype(np.float64)
    m, n = x2.shape[0], wh.shape[0]
    y = np.zeros((m, n))
    for i in range(m):
        for j in range(n):
            y[i, j] = sum(float(x2[i, k]) * wh[j, k] for k in range(x2.shape[1])) + float(b[j])
    return y


def _pack(ws, w, transposed=False, name="w", out="w_packed", **kw):
    op_type = "FbGemmPackTranspose" if transposed else "FbGemmPack"
    ws.feed_blob(name, w)
    ws.run_operator_once(CreateOperator(op_type, [name], [out], **kw))
    return ws.get_blob(out)._obj


@settings(max_examples=30, deadline=None)
@given(
    m_dims=st.lists(st.integers(0, 3), min_size=1, max_size=2),
    k_dims=st.lists(st.integers(1, 4), min_size=1, max_size=2),
    n=st.integers(1, 5),
    transposed=st.booleans(),
    scale=st.sampled_from([1.0, 1e5]),
    seed=st.integers(0, 999),
)
def test_fc_packed_matches_reference(m_dims, k_dims, n, transposed, scale, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(m_dims + k_dims).astype(np.float32)
    k = int(np.prod(k_dims))
    w = (rng.standard_normal((n, k)) * scale).astype(np.float32)
    b = rng.standard_normal(n).astype(np.float32)
    ws = Workspace()
    if transposed:  # FbGemmPackTranspose takes B = W^T (K, N); flattened at axis_w = 1 (default)
        packed = _pack(ws, np.ascontiguousarray(w.T), transposed=True)
    else:  # W (N, K) given with K split over its dims, flattened at axis_w = 1
        packed = _pack(ws, w.reshape((n, *k_dims)))
    assert isinstance(packed, PackedFP16Weights)
    assert (packed.num_rows, packed.num_cols) == (k, n) and packed.dims == (n, k)
    np.testing.assert_array_equal(packed.weights().view(np.uint16), ref_fp16(w).view(np.uint16))

    axis = len(m_dims)
    op = CreateOperator("FbFCPacked", ["x", "w_packed", "b"], ["y"], axis=axis)
    ws.feed_blob("x", x)
    ws.feed_blob("b", b)
    fc = create_operator(op, ws)
    fc.run()
    y = ws.fetch_blob("y")
    m = int(np.prod(m_dims))
    expected = ref_fc(x.reshape(m, k), w, b).reshape(tuple(m_dims) + (n,))
    assert y.dtype == np.float32 and y.shape == expected.shape
    tol = 1e-5 * max(1.0, float(np.abs(ref_fp16(w)).astype(np.float64).max()) * k)
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=tol)
    assert_inferred_shapes(op, [x, np.zeros(1, np.float32), b], [y])
    before = memory_reporter().allocations
    fc.run()
    assert memory_reporter().allocations == before, "a second run with unchanged shapes allocated"


def test_fp16_rounding_is_fbgemms():
    w = np.array([[65520.0, -1e6, np.nan, np.inf], [1 + 2**-11, 1 + 3 * 2**-11, 2**-25, -0.0]], np.float32)
    half = _pack(Workspace(), w).weights()
    assert half.dtype == np.float16
    np.testing.assert_array_equal(half[0], [65504.0, -65504.0, -65504.0, 65504.0])  # clamped, NaN -> -MAX
    np.testing.assert_array_equal(half[1], [1.0, 1 + 2**-9, 0.0, 0.0])  # ties to even, underflow to 0
    assert np.signbit(half[1, 3])


def test_init_net_packs_predict_net_runs():
    """Caffe2's doc: FbGemmPack in the init net, FbFCPacked in place of FC in the predict net; compared
    with FC on the float16-rounded weights widened to float32."""
    rng = np.random.default_rng(3)
    x, w, b = (rng.standard_normal(s).astype(np.float32) for s in [(4, 6), (5, 6), (5,)])
    ws = Workspace()
    ws.feed_blob("w", w)
    ws.run_operator_once(CreateOperator("FbGemmPack", ["w"], ["w"]))  # in place: w becomes the packed blob
    assert isinstance(ws.get_blob("w")._obj, PackedFP16Weights)
    ws.feed_blob("x", x)
    ws.feed_blob("b", b)
    ws.run_operator_once(CreateOperator("FbFCPacked", ["x", "w", "b"], ["y"]))
    ws.feed_blob("w32", ref_fp16(w).astype(np.float32))
    ws.run_operator_once(CreateOperator("FC", ["x", "w32", "b"], ["y_fc"]))
    np.testing.assert_allclose(ws.fetch_blob("y"), ws.fetch_blob("y_fc"), rtol=1e-6, atol=1e-6)


def test_axis_w_and_pack_transpose_agree():
    rng = np.random.default_rng(5)
    w = rng.standard_normal((2, 3, 4)).astype(np.float32)  # axis_w=2: N = 6, K = 4
    ws = Workspace()
    a = _pack(ws, w, axis_w=2, out="a")
    t = _pack(ws, np.ascontiguousarray(w.reshape(6, 4).T), transposed=True, name="wt", out="t")
    np.testing.assert_array_equal(a.half, t.half)
    assert a.dims == (6, 4)


def test_empty_batch_and_zero_k():
    ws = Workspace()
    _pack(ws, np.zeros((3, 4), np.float32))
    ws.feed_blob("x", np.zeros((0, 4), np.float32))
    ws.feed_blob("b", np.ones(3, np.float32))
    ws.run_operator_once(CreateOperator("FbFCPacked", ["x", "w_packed", "b"], ["y"]))
    assert ws.fetch_blob("y").shape == (0, 3)
    _pack(ws, np.zeros((3, 0), np.float32), name="w0", out="p0")
    ws.feed_blob("x0", np.zeros((2, 0), np.float32))
    ws.feed_blob("b", np.array([1.0, 2.0, 3.0], np.float32))
    ws.run_operator_once(CreateOperator("FbFCPacked", ["x0", "p0", "b"], ["y0"]))
    np.testing.assert_array_equal(ws.fetch_blob("y0"), [[1, 2, 3], [1, 2, 3]])  # departure: Caffe2 divides by 0


def test_packed_blob_is_not_serializable():
    ws = Workspace()
    _pack(ws, np.ones((2, 2), np.float32))
    with pytest.raises(SerializationError, match="w_packed.*PackedFP16Weights.*no serializer"):
        serialize_blob_to_string(ws.get_blob("w_packed"), "w_packed")


def test_no_gradient():
    for op in [
        CreateOperator("FbGemmPack", ["w"], ["p"]),
        CreateOperator("FbGemmPackTranspose", ["w"], ["p"]),
        CreateOperator("FbFCPacked", ["x", "p", "b"], ["y"]),
    ]:
        with pytest.raises(GradientError):
            get_gradient_for_op(op, ["g"])


def test_errors_name_op_and_blob_and_change_nothing():
    ws = Workspace()
    _pack(ws, np.ones((3, 4), np.float32))
    ws.feed_blob("x", np.ones((2, 4), np.float32))
    ws.feed_blob("b", np.ones(3, np.float32))
    ws.feed_blob("w", np.ones((3, 4), np.float32))
    cases = [
        (["x", "w", "b"], {}, TypeMismatchError, r"FbFCPacked.*'w'.*PackedFP16Weights.*FbGemmPack"),
        (["w", "w_packed", "b"], {"axis": 1}, None, None),  # (3, 4) @ B(4, 3): valid
        (["x", "w_packed", "x"], {}, ShapeError, r"'x'.*rank|'x'.*dim"),
        (["x", "w_packed", "b"], {"axis": 2}, ArgumentError, r"axis"),
    ]
    for ins, kw, err, pattern in cases:
        op = CreateOperator("FbFCPacked", ins, ["y"], **kw)
        if err is None:
            create_operator(op, ws).run()
            ws.get_blob("y").reset(None)
            continue
        with pytest.raises(err, match=pattern):
            create_operator(op, ws).run()
        assert ws.get_blob("y")._obj is None
    ws.feed_blob("x5", np.ones((2, 5), np.float32))
    with pytest.raises(ShapeError, match=r"'x5'.*\(2, 5\).*'w_packed'.*K=4"):
        create_operator(CreateOperator("FbFCPacked", ["x5", "w_packed", "b"], ["y"]), ws).run()
    ws.feed_blob("b4", np.ones(4, np.float32))
    with pytest.raises(ShapeError, match=r"'b4' has 4 values"):
        create_operator(CreateOperator("FbFCPacked", ["x", "w_packed", "b4"], ["y"]), ws).run()
    ws.feed_blob("x64", np.ones((2, 4), np.float64))
    with pytest.raises(TypeMismatchError, match="'x64'.*float64"):
        create_operator(CreateOperator("FbFCPacked", ["x64", "w_packed", "b"], ["y"]), ws).run()
    with pytest.raises(TypeMismatchError, match="FbGemmPack.*'x64'.*float64"):
        create_operator(CreateOperator("FbGemmPack", ["x64"], ["p"]), ws).run()
    ws.feed_blob("v", np.ones(3, np.float32))
    with pytest.raises(FrameworkError, match="axis_w"):
        create_operator(CreateOperator("FbGemmPackTranspose", ["v"], ["v"]), ws).run()
    assert ws.fetch_blob("v").shape == (3,)  # in place, failed: the tensor is still there
