"""FC and FCTransposed (gradients, packed weights, compiled fast path) against numpy references written here."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import ShapeError, TypeMismatchError
from framework.memory.workspace import Workspace
from framework.ops import create_operator, get_gradient_for_op, get_schema
from framework.ops.inference import infer_op
from framework.ops.schema import TensorSpec
from framework.ops.testing import arrays, assert_gradient_checks, assert_reference_checks

small = st.integers(1, 4)


def _fc_ref(axis=1, axis_w=1, transposed=False):
    def reference(x, w, b):
        m, k = int(np.prod(x.shape[:axis])), int(np.prod(x.shape[axis:]))
        x2 = x.reshape(m, k).astype(np.float64)
        nw = int(np.prod(w.shape[:axis_w]))
        w2 = w.reshape(nw, -1).astype(np.float64)
        y = x2 @ (w2 if transposed else w2.T) + b.astype(np.float64)
        return y.reshape(x.shape[:axis] + (y.shape[1],)).astype(x.dtype)

    return reference


# -- FC ---------------------------------------------------------------------------------------


@settings(max_examples=30)
@given(m=st.integers(0, 5), k=small, n=small, dtype=st.sampled_from([np.float32, np.float64]), data=st.data())
def test_fc_2d(m, k, n, dtype, data):
    x = data.draw(arrays((m, k), dtype))
    w = data.draw(arrays((n, k), dtype))
    b = data.draw(arrays((n,), dtype))
    assert_reference_checks(CreateOperator("FC", ["X", "W", "b"], ["Y"]), [x, w, b], _fc_ref())
    assert_reference_checks(
        CreateOperator("FCTransposed", ["X", "W", "b"], ["Y"]), [x, w.T.copy(), b], _fc_ref(transposed=True)
    )


@settings(max_examples=20)
@given(dims=st.lists(small, min_size=2, max_size=4), data=st.data())
def test_fc_axis_flattening(dims, data):
    axis = data.draw(st.integers(1, len(dims) - 1))
    n = data.draw(small)
    k_dims = dims[axis:]
    axis_w = 1
    x = data.draw(arrays(tuple(dims), np.float32))
    w = data.draw(arrays((n,) + tuple(k_dims), np.float32))  # (N, K...) flattened at axis_w = 1
    b = data.draw(arrays((n,), np.float32))
    op = CreateOperator("FC", ["X", "W", "b"], ["Y"], axis=axis, axis_w=axis_w)
    out = assert_reference_checks(op, [x, w, b], _fc_ref(axis, axis_w))
    assert out[0].shape == tuple(dims[:axis]) + (n,)


def test_fc_axis_w_and_negative_axis():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 4)).astype(np.float32)
    w = rng.standard_normal((2, 3, 12)).astype(np.float32)  # N = 6 with axis_w = 2
    b = rng.standard_normal(6).astype(np.float32)
    op = CreateOperator("FC", ["X", "W", "b"], ["Y"], axis=-2, axis_w=2)
    out = assert_reference_checks(op, [x, w, b], _fc_ref(1, 2))
    assert out[0].shape == (2, 6)


@pytest.mark.parametrize("op_type", ["FC", "FCTransposed"])
@pytest.mark.parametrize("which", [0, 1, 2])
def test_fc_gradient(op_type, which):
    rng = np.random.default_rng(1)
    x = rng.standard_normal((3, 2, 2))
    w = rng.standard_normal((5, 4)) if op_type == "FC" else rng.standard_normal((4, 5))
    b = rng.standard_normal(5)
    assert_gradient_checks(CreateOperator(op_type, ["X", "W", "b"], ["Y"]), [x, w, b], which)


def test_fc_gradient_maker_is_caffe2s():
    ops, gi = get_gradient_for_op(CreateOperator("FC", ["X", "W", "b"], ["Y"], axis=2), ["Y_grad"])
    (g,) = ops
    assert g.type == "FCGradient"
    assert list(g.input) == ["X", "W", "Y_grad"]
    assert list(g.output) == ["W_grad", "b_grad", "X_grad"]
    assert gi == ["X_grad", "W_grad", "b_grad"]
    assert any(a.name == "axis" and a.i == 2 for a in g.arg)


def test_fc_gradient_without_dx_output():
    rng = np.random.default_rng(2)
    x, w, dy = rng.standard_normal((4, 3)), rng.standard_normal((2, 3)), rng.standard_normal((4, 2))
    ws = Workspace()
    for k, v in {"X": x, "W": w, "dY": dy}.items():
        ws.feed_blob(k, v)
    create_operator(CreateOperator("FCGradient", ["X", "W", "dY"], ["dW", "db"]), ws).run()
    np.testing.assert_allclose(ws.fetch_blob("dW"), dy.T @ x)
    np.testing.assert_allclose(ws.fetch_blob("db"), dy.sum(0))


def test_fc_integer_dtype():
    x = np.array([[1, 2], [3, 4]], np.int32)
    w = np.array([[1, 0], [0, 1], [1, 1]], np.int32)
    b = np.array([10, 20, 30], np.int32)
    out = assert_reference_checks(CreateOperator("FC", ["X", "W", "b"], ["Y"]), [x, w, b], _fc_ref())
    assert out[0].dtype == np.int32


def test_fc_packed_weight_stays_correct_when_w_changes():
    """The packed W^T copy is refreshed whenever W's tensor version changes (training writes W)."""
    rng = np.random.default_rng(3)
    ws = Workspace()
    x = rng.standard_normal((8, 5)).astype(np.float32)
    ws.feed_blob("X", x)
    ws.feed_blob("b", np.zeros(3, np.float32))
    op = create_operator(CreateOperator("FC", ["X", "W", "b"], ["Y"]), ws)
    for step in range(6):
        if step in (0, 3, 5):  # W stable for runs 1-2 and 3-4 (packed), changed at 3 and 5
            w = rng.standard_normal((3, 5)).astype(np.float32)
            ws.feed_blob("W", w)
        op.run()
        np.testing.assert_allclose(ws.fetch_blob("Y"), x @ w.T, rtol=1e-5, atol=1e-5)
    # A new Tensor object in the blob (reset) is also noticed, even at an equal version number.
    from framework.memory.tensor import Tensor

    w = rng.standard_normal((3, 5)).astype(np.float32)
    ws.get_blob("W").reset(Tensor.from_numpy(w))
    op.run()
    np.testing.assert_allclose(ws.fetch_blob("Y"), x @ w.T, rtol=1e-5, atol=1e-5)
    # An op writing W through output() (as optimizers do) bumps the version.
    ws.feed_blob("W2", np.ones((3, 5), np.float32))
    create_operator(CreateOperator("Relu", ["W2"], ["W"]), ws).run()
    op.run()
    np.testing.assert_allclose(ws.fetch_blob("Y"), x @ np.ones((5, 3)), rtol=1e-5, atol=1e-5)


def test_fc_batch_one_and_empty_batch():
    rng = np.random.default_rng(4)
    w, b = rng.standard_normal((3, 4)).astype(np.float32), rng.standard_normal(3).astype(np.float32)
    for m in (0, 1):
        x = rng.standard_normal((m, 4)).astype(np.float32)
        assert_reference_checks(CreateOperator("FC", ["X", "W", "b"], ["Y"]), [x, w, b], _fc_ref())


def test_fc_errors_name_op_and_blobs():
    ws = Workspace()
    ws.feed_blob("X", np.ones((2, 3), np.float32))
    ws.feed_blob("W", np.ones((4, 5), np.float32))
    ws.feed_blob("b", np.ones(4, np.float32))
    with pytest.raises(ShapeError, match=r'FC "fc1".*X \[2, 3\].*W \[4, 5\]'):
        create_operator(CreateOperator("FC", ["X", "W", "b"], ["Y"], name="fc1"), ws).run()
    ws.feed_blob("W", np.ones((4, 3), np.float32))
    ws.feed_blob("b", np.ones(5, np.float32))
    with pytest.raises(ShapeError, match=r"FC.*bias 'b'.*expected 4"):
        create_operator(CreateOperator("FC", ["X", "W", "b"], ["Y"]), ws).run()
    ws.feed_blob("b", np.ones(4, np.float64))
    with pytest.raises(TypeMismatchError, match=r"FC.*'b' \(float64\)"):
        create_operator(CreateOperator("FC", ["X", "W", "b"], ["Y"]), ws).run()
    with pytest.raises(ShapeError, match="axis 3 is out of range"):
        ws.feed_blob("b", np.ones(4, np.float32))
        create_operator(CreateOperator("FC", ["X", "W", "b"], ["Y"], axis=3), ws).run()


def test_fc_inference_and_cost():
    op = CreateOperator("FC", ["X", "W", "b"], ["Y"])
    f32 = np.dtype(np.float32)
    (spec,) = infer_op(op, [TensorSpec((64, 784), f32), TensorSpec((512, 784), f32), TensorSpec((512,), f32)])
    assert spec == TensorSpec((64, 512), f32)
    (unknown,) = infer_op(op, [TensorSpec(None, None), TensorSpec((512, 784), f32), TensorSpec((512,), f32)])
    assert unknown.shape is None
    schema = get_schema("FC")
    from framework.ops.arguments import parse_args

    args = parse_args(schema, op.arg, "FC", 3, 1)
    cost = schema.cost(args, [TensorSpec((64, 784), f32), TensorSpec((512, 784), f32), TensorSpec((512,), f32)], [])
    assert cost.flops >= 2 * 64 * 784 * 512
    assert cost.params_bytes == (784 * 512 + 512) * 4


@pytest.mark.parametrize("batch", [1, 6])
def test_fc_and_gradient_compile_fast_path(batch):
    """compile() closures compute what run() does on the bound arrays, following in-place data changes."""
    rng = np.random.default_rng(10)
    ws = Workspace()
    x, w, b = rng.standard_normal((batch, 5)), rng.standard_normal((3, 5)), rng.standard_normal(3)
    for k, v in {"X": x, "W": w, "b": b, "dY": np.ones((batch, 3))}.items():
        ws.feed_blob(k, v)
    fc = create_operator(CreateOperator("FC", ["X", "W", "b"], ["Y"]), ws)
    grad = create_operator(CreateOperator("FCGradient", ["X", "W", "dY"], ["dW", "db", "dX"]), ws)
    fc.run()
    grad.run()
    fast_fc, fast_grad = fc.compile(), grad.compile()
    for step in range(3):
        x2, w2, dy = rng.standard_normal((batch, 5)), rng.standard_normal((3, 5)), rng.standard_normal((batch, 3))
        ws.feed_blob("X", x2)  # same shape: same arrays, new data
        ws.feed_blob("dY", dy)
        if step != 1:
            ws.feed_blob("W", w2)
        else:
            w2 = ws.fetch_blob("W")
        fast_fc()
        fast_grad()
        np.testing.assert_allclose(ws.fetch_blob("Y"), x2 @ w2.T + b, rtol=1e-10)
        np.testing.assert_allclose(ws.fetch_blob("dW"), dy.T @ x2, rtol=1e-10)
        np.testing.assert_allclose(ws.fetch_blob("db"), dy.sum(0), rtol=1e-10)
        np.testing.assert_allclose(ws.fetch_blob("dX"), dy @ w2, rtol=1e-10)


@pytest.mark.parametrize("m, wide", [(1, False), (6, False), (6, True)])
def test_fc_split_over_threads_by_output_features(monkeypatch, m, wide):
    """With two intra-op threads a weight of at least fc.SPLIT_MIN_BYTES (lowered here) is split by its
    rows (output features, at multiples of 16) between the workers: the GEMV (batch 1), the packed
    copy's GEMM and the wide form (Y^T = W X^T, weights over _PACK_MAX_BYTES, lowered too), in run()
    and in the compiled closure; results equal the float64 reference."""
    import framework
    from framework.ops.nn import fc

    monkeypatch.setattr(fc, "SPLIT_MIN_BYTES", 1024)
    if wide:
        monkeypatch.setattr(fc, "_PACK_MAX_BYTES", 1024)
    rng = np.random.default_rng(m)
    x = rng.standard_normal((m, 40)).astype(np.float32)
    w = rng.standard_normal((100, 40)).astype(np.float32)
    b = rng.standard_normal(100).astype(np.float32)
    want = x.astype(np.float64) @ w.T.astype(np.float64) + b
    old = framework.get_num_threads()
    framework.set_num_threads(2)
    try:
        ws = Workspace()
        for k, v in (("X", x), ("W", w), ("B", b)):
            ws.feed_blob(k, v)
        op = create_operator(CreateOperator("FC", ["X", "W", "B"], ["Y"]), ws)
        for _ in range(3):  # the packed copy is made on the second run with W unchanged
            op.run()
            np.testing.assert_allclose(ws.fetch_blob("Y"), want, rtol=1e-5, atol=1e-5)
        assert op._parts() == [(0, 48), (48, 100)] and op._wide == wide
        ws.get_blob("Y")._obj.mutable_data(np.float32).fill(0)
        closure = op.compile()  # the packed form's closure re-checks W's version each run
        closure()
        np.testing.assert_allclose(ws.fetch_blob("Y"), want, rtol=1e-5, atol=1e-5)
    finally:
        framework.set_num_threads(old)
