"""N-ary ops: Sum, Mean, Max, Min, WeightedSum and their gradients."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import SchemaError, ShapeError, TypeMismatchError
from framework.memory.workspace import Workspace
from framework.ops import create_operator, get_gradient_for_op
from framework.ops.testing import arrays, assert_gradient_checks, assert_reference_checks, run_op_on, shapes

REFS = {
    "Sum": lambda *xs: np.sum(np.stack(xs), axis=0),
    "Mean": lambda *xs: np.mean(np.stack(xs).astype(np.float64), axis=0),
    "Max": lambda *xs: np.max(np.stack(xs), axis=0),
    "Min": lambda *xs: np.min(np.stack(xs), axis=0),
}


def _names(n):
    return [f"X{i}" for i in range(n)]


@pytest.mark.parametrize("op_type", list(REFS))
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
@given(data=st.data())
@settings(max_examples=10)
def test_nary_forward(op_type, dtype, data):
    if op_type == "Mean" and np.dtype(dtype).kind != "f":
        return
    n = data.draw(st.integers(1, 4))
    shape = data.draw(shapes(0, 3, 0, 4))
    xs = [data.draw(arrays(shape, dtype)) for _ in range(n)]

    def ref(*xs):
        return REFS[op_type](*xs).astype(dtype)

    assert_reference_checks(CreateOperator(op_type, _names(n), ["Y"]), xs, ref)
    assert_reference_checks(CreateOperator(op_type, _names(n), ["X0"]), xs, ref)


@pytest.mark.parametrize("op_type", list(REFS))
def test_only_input_zero_may_be_in_place(op_type):
    with pytest.raises(SchemaError, match=rf"{op_type}.*does not allow"):
        create_operator(CreateOperator(op_type, ["A", "B"], ["B"]), Workspace())


@pytest.mark.parametrize("op_type", list(REFS))
def test_mismatched_inputs_name_the_blob(op_type):
    with pytest.raises(ShapeError, match=rf"{op_type}.*input 1 \('B'\).*\[3\].*\[2\]"):
        run_op_on(CreateOperator(op_type, ["A", "B"], ["Y"]), [np.ones(2, np.float32), np.ones(3, np.float32)])
    with pytest.raises(TypeMismatchError, match=rf"{op_type}.*input 1 \('B'\).*float64"):
        run_op_on(CreateOperator(op_type, ["A", "B"], ["Y"]), [np.ones(2, np.float32), np.ones(2, np.float64)])


def test_mean_refuses_integers():
    with pytest.raises(TypeMismatchError, match="Mean.*int32"):
        run_op_on(CreateOperator("Mean", ["A"], ["Y"]), [np.ones(2, np.int32)])


@pytest.mark.parametrize("op_type", ["Mean", "Max", "Min"])
@given(data=st.data())
@settings(max_examples=6)
def test_nary_gradients(op_type, data):
    n = data.draw(st.integers(1, 3))
    shape = data.draw(shapes(1, 2, 1, 3))
    # distinct values: the max/min gradient is ill-defined at ties
    base = np.random.RandomState(data.draw(st.integers(0, 100))).permutation(n * int(np.prod(shape)))
    xs = [(base[i::n][: int(np.prod(shape))].reshape(shape) * 0.1).astype(np.float64) for i in range(n)]
    op = CreateOperator(op_type, _names(n), ["Y"])
    for i in range(n):
        assert_gradient_checks(op, xs, i)


def test_sum_gradient_passes_through():
    op = CreateOperator("Sum", ["A", "B", "C"], ["Y"])
    ops, g = get_gradient_for_op(op, ["Y_grad"])
    assert ops == [] and g == ["Y_grad"] * 3
    xs = [np.random.RandomState(i).randn(2, 3) for i in range(3)]
    for i in range(3):
        assert_gradient_checks(op, xs, i)


def test_minmax_gradient_op_inputs_follow_caffe2():
    ops, g = get_gradient_for_op(CreateOperator("Max", ["A", "B"], ["Y"]), ["Y_grad"])
    assert ops[0].type == "MaxGradient" and list(ops[0].input) == ["Y", "Y_grad", "A", "B"]
    assert list(ops[0].output) == ["A_grad", "B_grad"] == g
    ops, _ = get_gradient_for_op(CreateOperator("Mean", ["A", "B"], ["Y"]), ["Y_grad"])
    assert ops[0].type == "MeanGradient" and list(ops[0].input) == ["Y_grad"]


# -- WeightedSum --------------------------------------------------------------------------------------


def _ws_ref(*args):
    out = np.zeros_like(args[0], dtype=np.float64)
    for x, w in zip(args[0::2], args[1::2]):
        out += x.astype(np.float64) * float(w.reshape(-1)[0])
    return out.astype(args[0].dtype)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@given(data=st.data())
@settings(max_examples=15)
def test_weighted_sum(dtype, data):
    n = data.draw(st.integers(1, 3))
    shape = data.draw(shapes(0, 3, 0, 4))
    inputs = []
    for _ in range(n):
        inputs += [
            data.draw(arrays(shape, dtype)),
            data.draw(arrays((1,), np.float32, elements=st.floats(-2, 2, width=32))),
        ]
    names = [f"{k}{i}" for i in range(n) for k in ("X", "w")]
    assert_reference_checks(CreateOperator("WeightedSum", names, ["Y"]), inputs, _ws_ref)
    assert_reference_checks(CreateOperator("WeightedSum", names, ["X0"]), inputs, _ws_ref)


def test_weighted_sum_is_the_sgd_update():
    rng = np.random.RandomState(0)
    param, grad = rng.randn(4, 3).astype(np.float32), rng.randn(4, 3).astype(np.float32)
    one, lr = np.ones(1, np.float32), np.array([-0.1], np.float32)
    op = CreateOperator("WeightedSum", ["param", "ONE", "grad", "lr"], ["param"])
    assert_reference_checks(op, [param, one, grad, lr], lambda p, o, g, lr: p - 0.1 * g, threshold=1e-6)


def test_weighted_sum_errors():
    x = np.ones(3, np.float32)
    with pytest.raises(ShapeError, match=r"WeightedSum.*weight input 1 \('w0'\).*1 element"):
        run_op_on(CreateOperator("WeightedSum", ["X0", "w0"], ["Y"]), [x, np.ones(2, np.float32)])
    with pytest.raises(ShapeError, match=r"WeightedSum.*input 2 \('X1'\)"):
        run_op_on(
            CreateOperator("WeightedSum", ["X0", "w0", "X1", "w1"], ["Y"]),
            [x, np.ones(1, np.float32), np.ones(4, np.float32), np.ones(1, np.float32)],
        )
    with pytest.raises(SchemaError, match="WeightedSum.*takes an even number"):
        create_operator(CreateOperator("WeightedSum", ["X0", "w0", "X1"], ["Y"]), Workspace())


@pytest.mark.parametrize("grad_on_w", [0, 1])
def test_weighted_sum_gradient(grad_on_w):
    rng = np.random.RandomState(1)
    inputs = [rng.randn(2, 3), np.array([0.5]), rng.randn(2, 3), np.array([-1.5])]
    op = CreateOperator("WeightedSum", ["X0", "w0", "X1", "w1"], ["Y"], grad_on_w=grad_on_w)
    ops, g = get_gradient_for_op(op, ["Y_grad"])
    assert ops[0].type == "WeightedSumGradient" and list(ops[0].input) == ["Y_grad", "X0", "w0", "X1", "w1"]
    for i in (0, 2) + ((1, 3) if grad_on_w else ()):
        assert_gradient_checks(op, inputs, i)
    if not grad_on_w:
        assert g[1] is None and g[3] is None


def test_compiled_net_fast_path_matches_reference():
    """Repeated net runs use the ops' compile() closures; results must equal the plain run()."""
    from framework.net.api import create_net
    from framework.proto.framework_pb2 import NetDef

    rng = np.random.RandomState(3)
    a, b = rng.randn(3, 4).astype(np.float32), rng.randn(4).astype(np.float32)
    param, grad = rng.randn(3, 4).astype(np.float32), rng.randn(3, 4).astype(np.float32)
    net = NetDef(name="fast")
    net.op.extend(
        [
            CreateOperator("Add", ["A", "B"], ["C"], broadcast=1),
            CreateOperator("Exp", ["C"], ["D"]),
            CreateOperator("Mul", ["D", "A"], ["D"]),
            CreateOperator("Sum", ["D", "C", "A"], ["S"]),
            CreateOperator("Max", ["S", "A"], ["M"]),
            CreateOperator("WeightedSum", ["param", "ONE", "grad", "lr"], ["param"]),
            CreateOperator("ReduceSum", ["M"], ["R"], axes=[0], keepdims=0),
        ]
    )
    ws = Workspace()
    feeds = {
        "A": a,
        "B": b,
        "param": param,
        "grad": grad,
        "ONE": np.ones(1, np.float32),
        "lr": np.full(1, -0.1, np.float32),
    }
    for k, v in feeds.items():
        ws.feed_blob(k, v)
    net.external_input.extend(feeds)
    compiled = create_net(ws, net)
    c = a + b
    s = np.exp(c) * a + c + a
    for step in range(1, 4):
        compiled.run()
        np.testing.assert_allclose(ws.fetch_blob("M"), np.maximum(s, a), rtol=1e-5)
        np.testing.assert_allclose(ws.fetch_blob("R"), np.maximum(s, a).sum(0), rtol=1e-5)
        np.testing.assert_allclose(ws.fetch_blob("param"), param - 0.1 * step * grad, rtol=1e-5, atol=1e-6)
    assert compiled.program.compiled_count >= 6
