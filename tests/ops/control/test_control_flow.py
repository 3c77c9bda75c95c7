"""If / While / Do / ONNXWhile against plain Python control flow; nested-net validation and gradients."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError, NetError, SchemaError, UnknownOperatorError
from framework.memory.workspace import Workspace
from framework.net.backward import add_gradient_operators
from framework.net.inference import infer_net
from framework.ops.schema import TensorSpec
from framework.ops.testing import assert_gradient_checks
from framework.proto.framework_pb2 import NetDef

F32 = np.float32


def net(name, ops, external_input=(), external_output=()):
    return NetDef(name=name, op=ops, external_input=list(external_input), external_output=list(external_output))


def if_op(then_ops, else_ops=None, inputs=("cond", "X"), outputs=("Y",)):
    kw = {"then_net": net("then", then_ops)}
    if else_ops is not None:
        kw["else_net"] = net("else", else_ops)
    return CreateOperator("If", list(inputs), list(outputs), **kw)


vec = st.lists(st.floats(-3, 3, width=32), min_size=1, max_size=6).map(lambda v: np.array(v, F32))


@settings(max_examples=25, deadline=None)
@given(st.booleans(), vec)
def test_if_matches_python(cond, x):
    op = if_op([CreateOperator("Relu", ["X"], ["Y"])], [CreateOperator("Negative", ["X"], ["Y"])])
    ws = Workspace()
    ws.feed_blob("cond", np.array(cond))
    ws.feed_blob("X", x)
    ws.create_net(net("main", [op, CreateOperator("Scale", ["Y"], ["Z"], scale=2.0)], ["cond", "X"]))
    ws.run_net("main")
    expected = np.maximum(x, 0) if cond else -x
    np.testing.assert_allclose(ws.fetch_blob("Z"), 2 * expected)


def test_if_without_else_leaves_blobs_and_doc_example_runs():
    ws = Workspace()
    ws.feed_blob("cond", np.array([False]))
    ws.feed_blob("X", np.array([-1.0, 2.0], F32))
    ws.feed_blob("Y", np.array([7.0], F32))
    ws.create_net(
        net(
            "nested", [CreateOperator("If", ["cond"], [], then_net=net("then", [CreateOperator("Relu", ["X"], ["Y"])]))]
        )
    )
    ws.run_net("nested")
    np.testing.assert_array_equal(ws.fetch_blob("Y"), [7.0])
    ws.feed_blob("cond", np.array([True]))
    ws.run_net("nested")
    np.testing.assert_array_equal(ws.fetch_blob("Y"), [0.0, 2.0])


def test_if_orders_outer_ops_by_nested_blobs():
    # Z reads Y, which only the nested net writes: declared first, it must still run after the If.
    ws = Workspace()
    ws.feed_blob("cond", np.array(True))
    ws.feed_blob("X", np.array([-1.0, 3.0], F32))
    reader = CreateOperator("Scale", ["Y"], ["Z"], scale=3.0)
    n = ws.create_net(
        net(
            "o",
            [reader, CreateOperator("If", ["cond"], [], then_net=net("t", [CreateOperator("Relu", ["X"], ["Y"])]))],
            ["cond", "X"],
        )
    )
    assert n.graph.order == [1, 0]
    n.run()
    np.testing.assert_array_equal(ws.fetch_blob("Z"), [0.0, 9.0])


@pytest.mark.parametrize(
    "inner, err, path",
    [
        ([CreateOperator("NoSuchOp", ["X"], ["Y"])], UnknownOperatorError, "op #0 If / then_net / op #1 NoSuchOp"),
        ([CreateOperator("Relu", ["X", "X2"], ["Y"])], SchemaError, "op #0 If / then_net / op #1 Relu"),
        ([CreateOperator("Relu", ["nowhere"], ["Y"])], NetError, "op #0 If / then_net / op #1 Relu reads 'nowhere'"),
    ],
)
def test_nested_nets_are_validated_with_a_path(inner, err, path):
    ws = Workspace()
    ws.feed_blob("cond", np.array(True))
    ws.feed_blob("X", np.ones(2, F32))
    op = if_op([CreateOperator("Copy", ["X"], ["X1"])] + inner)
    with pytest.raises(err) as e:
        ws.create_net(net("outer", [op], ["cond", "X"]))
    assert path in str(e.value) and 'net "outer"' in str(e.value)
    assert ws.blobs() == ["X", "cond"] or sorted(ws.blobs()) == ["X", "cond"]


def test_nested_validation_descends_two_levels():
    inner_if = CreateOperator("If", ["cond"], [], then_net=net("deep", [CreateOperator("Relu", ["X", "X"], ["Y"])]))
    with pytest.raises(SchemaError, match=r"op #0 If / then_net / op #0 If / then_net / op #0 Relu"):
        Workspace().create_net(
            net("outer", [CreateOperator("If", ["cond"], [], then_net=net("mid", [inner_if]))], ["cond", "X"])
        )


@pytest.mark.parametrize(
    "value, msg",
    [(np.array([1.0], F32), "bool"), (np.array([True, False]), "single value"), ("text", "Tensor"), (None, "empty")],
)
def test_if_condition_errors(value, msg):
    ws = Workspace()
    if value is None:
        ws.create_blob("cond")
    else:
        ws.feed_blob("cond", value)
    ws.feed_blob("X", np.ones(2, F32))
    op = if_op([CreateOperator("Relu", ["X"], ["Y"])])
    with pytest.raises(FrameworkError, match=msg) as e:
        ws.run_operator_once(op)
    assert "If" in str(e.value) and "cond" in str(e.value)
    assert not ws.has_blob("Y") or ws.get_blob("Y").is_empty


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 6), st.floats(-2, 2, width=32))
def test_while_matches_python(n, a):
    # acc = a; i = 0; while i < n: acc = acc * 2 + 1; i += 1
    acc, i = np.float32(a), 0
    while i < n:
        acc = acc * F32(2) + F32(1)
        i += 1
    ws = Workspace()
    for k, v in {
        "i": np.array(0, np.int64),
        "n": np.array(n, np.int64),
        "one": np.array(1, np.int64),
        "acc": np.array(a, F32),
        "onef": np.array(1.0, F32),
    }.items():
        ws.feed_blob(k, v)
    cond_net = net("c", [CreateOperator("LT", ["i", "n"], ["cond"])])
    loop_net = net(
        "l",
        [
            CreateOperator("Add", ["i", "one"], ["i"]),
            CreateOperator("Scale", ["acc"], ["acc"], scale=2.0),
            CreateOperator("Add", ["acc", "onef"], ["acc"]),
        ],
    )
    ws.feed_blob("cond", np.array(False))
    ws.run_operator_once(CreateOperator("While", ["cond"], [], loop_net=loop_net, cond_net=cond_net))
    assert int(ws.fetch_blob("i")) == i
    np.testing.assert_allclose(ws.fetch_blob("acc"), acc, rtol=1e-6)


def test_while_without_cond_net_reads_the_condition_the_loop_updates():
    ws = Workspace()
    ws.feed_blob("k", np.array(5, np.int32))
    ws.feed_blob("zero", np.array(0, np.int32))
    ws.feed_blob("m1", np.array(-1, np.int32))
    ws.feed_blob("cond", np.array(True))
    body = net("b", [CreateOperator("Add", ["k", "m1"], ["k"]), CreateOperator("GT", ["k", "zero"], ["cond"])])
    ws.run_operator_once(CreateOperator("While", ["cond"], [], loop_net=body))
    assert int(ws.fetch_blob("k")) == 0


def _do(inputs, outputs, inner_net, inner_blobs, **kw):
    idx = list(range(len(inner_blobs)))
    return CreateOperator(
        "Do",
        list(inputs) + ["scope"],
        list(outputs) + ["scope"],
        net=inner_net,
        inner_blobs=list(inner_blobs),
        outer_blobs_idx=idx,
        **kw,
    )


def test_do_runs_in_a_child_workspace_that_sees_only_bound_blobs():
    ws = Workspace()
    ws.feed_blob("X", np.array([-1.0, 2.0], F32))
    ws.feed_blob("secret", np.array([1.0], F32))
    inner = net("inner", [CreateOperator("Relu", ["x"], ["tmp"]), CreateOperator("Scale", ["tmp"], ["y"], scale=3.0)])
    ws.create_net(net("m", [CreateOperator("CreateScope", [], ["scope"]), _do(["X"], ["Y"], inner, ["x", "y"])], ["X"]))
    ws.run_net("m")
    np.testing.assert_array_equal(ws.fetch_blob("Y"), [0.0, 6.0])
    assert not ws.has_blob("tmp")  # inner locals stay in the scope
    stack = ws.get_blob("scope")._obj
    assert len(stack.workspaces) == 1 and stack.workspaces[0].has_blob("tmp")
    assert not stack.workspaces[0].has_blob("secret")
    ws.run_operator_once(CreateOperator("HasScope", ["scope"], ["has"]))
    assert ws.fetch_blob("has").tolist() == [True]
    ws.run_net("m")  # CreateScope clears the stack: the workspace is reused, not a new one
    assert len(ws.get_blob("scope")._obj.workspaces) == 1


def test_do_reading_an_unbound_outer_blob_fails_at_creation():
    inner = net("inner", [CreateOperator("Add", ["x", "secret"], ["y"])])
    with pytest.raises(NetError, match=r"op #1 Do / net / op #0 Add reads 'secret'"):
        Workspace().create_net(
            net(
                "m",
                [CreateOperator("CreateScope", [], ["scope"]), _do(["X"], ["Y"], inner, ["x", "y"])],
                ["X", "secret"],
            )
        )


@pytest.mark.parametrize(
    "kw, msg",
    [
        ({"inner_blobs": ["x"], "outer_blobs_idx": [0]}, "not all outer names"),
        ({"inner_blobs": ["x", "y"], "outer_blobs_idx": [0, 5]}, "out of bounds"),
        ({"inner_blobs": ["x", "y"], "outer_blobs_idx": [0, 0]}, "reusage"),
        ({"inner_blobs": ["x", "x"], "outer_blobs_idx": [0, 1]}, "redefinition"),
        ({"inner_blobs": ["x"], "outer_blobs_idx": [0, 1]}, "inner_blobs"),
    ],
)
def test_do_binding_errors(kw, msg):
    op = CreateOperator(
        "Do", ["X", "scope"], ["Y", "scope"], net=net("i", [CreateOperator("Relu", ["x"], ["y"])]), **kw
    )
    ws = Workspace()
    ws.feed_blob("X", np.ones(2, F32))
    ws.create_blob("scope")
    with pytest.raises(FrameworkError, match=msg):
        ws.run_operator_once(op)


def test_do_reuse_workspace_and_gradient_pop():
    ws = Workspace()
    ws.feed_blob("X", np.array([1.0, -2.0], F32))
    inner = net("inner", [CreateOperator("Relu", ["x"], ["y"])])
    ws.run_operator_once(CreateOperator("CreateScope", [], ["scope"]))
    for _ in range(3):
        ws.run_operator_once(_do(["X"], ["Y"], inner, ["x", "y"], reuse_workspace=True))
    assert ws.get_blob("scope")._obj.top == 0
    for _ in range(2):
        ws.run_operator_once(_do(["X"], ["Y"], inner, ["x", "y"]))
    assert ws.get_blob("scope")._obj.top == 2
    ws.feed_blob("X", F32(1) * np.ones(2, F32))
    with pytest.raises(FrameworkError, match="scope"):
        ws.feed_blob("T", np.ones(1, F32))
        ws.run_operator_once(
            CreateOperator("Do", ["X", "T"], ["Y", "T"], net=inner, inner_blobs=["x", "y"], outer_blobs_idx=[0, 1])
        )


def _sig(x):
    return 1 / (1 + np.exp(-x))


@settings(max_examples=15, deadline=None)
@given(vec)
def test_do_gradient_against_analytic(x):
    x = x.astype(np.float64)
    inner = net("inner", [CreateOperator("Sigmoid", ["x"], ["s"]), CreateOperator("Mul", ["s", "x"], ["y"])])
    fwd = net("m", [CreateOperator("CreateScope", [], ["scope"]), _do(["X"], ["Y"], inner, ["x", "y"])], ["X"])
    grads = add_gradient_operators(fwd, {"Y": "Y_grad"})
    assert grads["X"] == "X_grad"
    do_grad = [o for o in fwd.op if o.type == "Do" and o.is_gradient_op]
    assert len(do_grad) == 1
    ws = Workspace()
    ws.feed_blob("X", x)
    ws.feed_blob("Y_grad", np.ones_like(x))
    ws.create_net(fwd)
    ws.run_net("m")
    s = _sig(x)
    np.testing.assert_allclose(ws.fetch_blob("Y"), s * x, rtol=1e-10)
    np.testing.assert_allclose(ws.fetch_blob("X_grad"), s + x * s * (1 - s), rtol=1e-8)
    assert ws.get_blob("scope")._obj.empty()  # the gradient Do popped the forward workspace


@settings(max_examples=10, deadline=None)
@given(st.booleans(), vec)
def test_if_gradient_numeric(cond, x):
    x = np.where(np.abs(x) < 1e-2, 0.5, x)  # keep away from Relu's kink
    op = if_op([CreateOperator("Relu", ["X"], ["Y"])], [CreateOperator("Sigmoid", ["X"], ["Y"])])
    assert_gradient_checks(op, [np.array(cond), x], 1, check_inference=False)


def test_if_gradient_zero_fills_a_branch_that_does_not_touch_the_input():
    op = if_op(
        [CreateOperator("Scale", ["X"], ["Y"], scale=3.0)],
        [CreateOperator("ConstantFill", ["Y0"], ["Y"], value=1.0)],
        inputs=("cond", "X", "Y0"),
    )
    for cond in (True, False):
        ws = Workspace()
        fwd = net("m", [op], ["cond", "X", "Y0"])
        add_gradient_operators(fwd, {"Y": "Y_grad"})
        ws.feed_blob("cond", np.array(cond))
        ws.feed_blob("X", np.ones(3, F32))
        ws.feed_blob("Y0", np.ones(3, F32))
        ws.feed_blob("Y_grad", np.full(3, 2.0, F32))
        ws.create_net(fwd)
        ws.run_net("m")
        np.testing.assert_allclose(ws.fetch_blob("X_grad"), np.full(3, 6.0 if cond else 0.0))


def test_if_shape_inference_keeps_what_both_branches_agree_on():
    op = if_op(
        [CreateOperator("Relu", ["X"], ["Y"]), CreateOperator("Relu", ["X"], ["A"])],
        [CreateOperator("Sigmoid", ["X"], ["Y"]), CreateOperator("Sum", ["X", "X"], ["B"])],
    )
    specs = infer_net(net("m", [op]), {"X": TensorSpec((2, 3), np.dtype(F32)), "cond": TensorSpec((), np.dtype(bool))})
    assert specs["Y"] == TensorSpec((2, 3), np.dtype(F32))
    assert specs.get("A", TensorSpec(None, None)).shape is None


def _onnx_body():
    # inputs: it, cond_in, acc; outputs: cond_out (it < 2), acc * 2, scan = acc + it
    ops = [
        CreateOperator("Scale", ["acc"], ["acc_out"], scale=2.0),
        CreateOperator("Cast", ["it"], ["itf"], to=1),
        CreateOperator("Add", ["acc", "itf"], ["scan"], broadcast=1),
        CreateOperator("LT", ["it", "two"], ["cond_out"]),
    ]
    return net("body", ops, ["it", "cond_in", "acc", "two"][:3], ["cond_out", "acc_out", "scan"])


@pytest.mark.parametrize(
    "has_trip_count, has_cond, trip, save_scopes", [(1, 0, 4, 0), (0, 1, 100, 0), (1, 1, 2, 1), (1, 1, 0, 0)]
)
def test_onnx_while_matches_python(has_trip_count, has_cond, trip, save_scopes):
    body = _onnx_body()
    body.op[3].input[1] = "two"
    body.op.insert(0, CreateOperator("ConstantFill", [], ["two"], shape=[], value=2, dtype=10))
    acc = np.array([1.0, -1.0], F32)
    ref_acc, scans, it, cond = acc.copy(), [], 0, True
    while (not has_trip_count or it < trip) and (not has_cond or cond):
        scans.append(ref_acc + F32(it))
        ref_acc = ref_acc * F32(2)
        cond = it < 2
        it += 1
    ws = Workspace()
    ws.feed_blob("M", np.array(trip, np.int64))
    ws.feed_blob("C", np.array([True]))
    ws.feed_blob("A0", acc)
    op = CreateOperator(
        "ONNXWhile",
        ["M", "C", "A0"],
        ["A", "S"],
        body=body,
        has_trip_count=has_trip_count,
        has_cond=has_cond,
        save_scopes=save_scopes,
    )
    ws.run_operator_once(op)
    np.testing.assert_allclose(ws.fetch_blob("A"), ref_acc)
    got = ws.fetch_blob("S")
    if scans:  # Caffe2 copies iteration 0's value, then extends it by each later one along dim 0
        np.testing.assert_allclose(got, np.concatenate(scans))
    else:
        assert got.shape == (0,) and got.dtype == np.int32
    assert not ws.has_blob("acc_out")  # the body ran in its own scope


@pytest.mark.parametrize("trip", [0, 1, 5, 20])
def test_onnx_while_scan_outputs_concatenate_along_dim_0(trip):
    """Caffe2's Fibonacci example: one-element [1] values per iteration give a [iterations] scan output."""
    body = net(
        "fib",
        [
            CreateOperator("Add", ["first", "second"], ["third"]),
            CreateOperator("ConstantFill", [], ["limit"], shape=[1], value=100.0),
            CreateOperator("LT", ["third", "limit"], ["cond_new"]),
        ],
        ["i", "cond", "first", "second"],
        ["cond_new", "second", "third", "third"],
    )
    ws = Workspace()
    for name, v in (("M", np.array(trip, np.int64)), ("C", np.array(True)), ("F", np.ones(1, F32))):
        ws.feed_blob(name, v)
    ws.feed_blob("S", np.ones(1, F32))
    op = CreateOperator("ONNXWhile", ["M", "C", "F", "S"], ["a", "b", "seq"], body=body, has_cond=1, has_trip_count=1)
    ws.run_operator_once(op)
    first, second, seq = 1.0, 1.0, []
    for _ in range(trip):
        first, second = second, first + second
        seq.append(second)
        if second > 100:
            break
    if seq:
        np.testing.assert_array_equal(ws.fetch_blob("seq"), np.array(seq, F32))
    else:
        assert ws.fetch_blob("seq").shape == (0,)
    np.testing.assert_array_equal(ws.fetch_blob("b"), [second])


def test_onnx_while_0d_scan_output_cannot_be_extended():
    body = net("b", [CreateOperator("Cast", ["it"], ["v"], to=1)], ["it", "cond"], ["cond", "v"])
    ws = Workspace()
    ws.feed_blob("M", np.array(1, np.int64))
    ws.feed_blob("C", np.array(True))
    run = CreateOperator("ONNXWhile", ["M", "C"], ["seq"], body=body, has_trip_count=1)
    ws.run_operator_once(run)
    assert ws.fetch_blob("seq").shape == () and ws.fetch_blob("seq") == 0
    ws.feed_blob("M", np.array(2, np.int64))
    with pytest.raises(FrameworkError, match="ONNXWhile.*'v' is 0-d"):
        ws.run_operator_once(run)


def test_onnx_while_argument_errors():
    ws = Workspace()
    ws.feed_blob("M", np.array(1, np.int64))
    ws.feed_blob("C", np.array([True]))
    with pytest.raises(FrameworkError, match="Cannot save scopes"):
        ws.run_operator_once(
            CreateOperator("ONNXWhile", ["M", "C"], [], body=_onnx_body(), save_scopes=1, disable_scopes=1)
        )


def test_onnx_while_disable_scopes_runs_the_body_in_the_op_workspace():
    body = _onnx_body()
    body.op[3].input[1] = "two"
    body.op.insert(0, CreateOperator("ConstantFill", [], ["two"], shape=[], value=2, dtype=10))
    ws = Workspace()
    ws.feed_blob("M", np.array(3, np.int64))
    ws.feed_blob("C", np.array([True]))
    ws.feed_blob("A0", np.array([1.0, -1.0], F32))
    op = CreateOperator("ONNXWhile", ["M", "C", "A0"], ["A", "S"], body=body, has_trip_count=1, disable_scopes=1)
    ws.run_operator_once(op)
    np.testing.assert_allclose(ws.fetch_blob("A"), [8.0, -8.0])  # doubled three times, as with scopes
    np.testing.assert_allclose(ws.fetch_blob("acc_out"), [8.0, -8.0])  # the body's blobs stay visible
