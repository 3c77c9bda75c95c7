"""The "Python" op (core.CreatePythonOperator): functions registered in this process only."""

import numpy as np
import pytest

from framework import core
from framework.errors import ArgumentError, OperatorError
from framework.memory.workspace import Workspace
from framework.net.backward import get_backward_pass
from framework.ops.testing import run_op_on
from framework.proto.framework_pb2 import OperatorDef


def _double(inputs, outputs):
    outputs[0].reshape(inputs[0].shape)
    outputs[0].data[...] = inputs[0].data * 2


def _double_grad(inputs, outputs):  # inputs: X, Y, dY
    outputs[0].feed(inputs[2].data * 2)


def test_python_op_calls_the_registered_function():
    op = core.CreatePythonOperator(_double, ["X"], ["Y"], grad_f=_double_grad)
    assert op.type == "Python"
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(run_op_on(op, [x])[0], x * 2)


def test_python_op_gradient_is_caffe2s_python_gradient():
    op = core.CreatePythonOperator(_double, ["X"], ["Y"], grad_f=_double_grad)
    ops, grads = get_backward_pass([op], {"Y": "dY"})
    assert [o.type for o in ops] == ["PythonGradient"]
    assert list(ops[0].input) == ["X", "Y", "dY"] and list(ops[0].output) == ["X_grad"]
    ws = Workspace()
    x, dy = np.ones((2, 2), np.float32), np.full((2, 2), 3.0, np.float32)
    ws.feed_blob("X", x)
    ws.feed_blob("dY", dy)
    ws.run_operator_once(op)
    ws.run_operator_once(ops[0])
    np.testing.assert_array_equal(ws.fetch_blob("X_grad"), dy * 2)


def test_python_op_may_run_in_place():
    # Caffe2's schema allows any output to be any input (python_op_test's in_place case)
    op = core.CreatePythonOperator(_double, ["X"], ["X"], grad_f=_double_grad)
    ws = Workspace()
    ws.feed_blob("X", np.array([1.0, -2.0], np.float32))
    ws.run_operator_once(op)
    ws.run_operator_once(op)
    np.testing.assert_array_equal(ws.fetch_blob("X"), [4.0, -8.0])


class _MyError(Exception):
    def __init__(self, code, text):  # a signature of its own
        super().__init__(f"{code}: {text}")


def test_the_functions_own_exception_type_reaches_the_caller():
    # Caffe2 (2020) re-raises the Python op's exception type; 2018 code catches RuntimeError: both work
    def boom(inputs, outputs):
        raise _MyError(7, "intentional")

    def os_boom(inputs, outputs):
        raise FileNotFoundError("no such thing")

    op = core.CreatePythonOperator(boom, [], [])
    ws = Workspace()
    with pytest.raises(_MyError, match="7: intentional") as info:
        ws.run_operator_once(op)
    assert isinstance(info.value, OperatorError) and isinstance(info.value, RuntimeError)
    net = core.Net("h36b_boom")
    net.Python(boom)([], [])
    with pytest.raises(_MyError, match="intentional"):
        ws.run_net_once(net)
    with pytest.raises(OperatorError, match="FileNotFoundError: no such thing"):
        ws.run_operator_once(core.CreatePythonOperator(os_boom, [], []))


def test_feed_writes_any_dtype_and_pass_workspace():
    seen = {}

    def f(inputs, outputs, workspace):
        # the op's own workspace, seen as Caffe2's C.Workspace (its blobs a mapping)
        workspace.create_blob("probe").feed(np.zeros(1))
        seen["probe"] = "probe" in workspace.blobs
        outputs[0].feed(np.array([1, 2, 3], np.int64))

    ws = Workspace()
    ws.run_operator_once(core.CreatePythonOperator(f, [], ["out"], pass_workspace=True))
    assert seen["probe"] and ws.has_blob("probe") and ws.fetch_blob("out").dtype == np.int64


def test_a_loaded_token_names_no_code():
    """A net from a file can only name functions this process registered."""
    op = OperatorDef(type="Python", input=["X"], output=["Y"])
    op.arg.add(name="token", s=b"os.system:0")
    with pytest.raises(ArgumentError, match="no Python function is registered under token 'os.system:0'"):
        run_op_on(op, [np.zeros(1, np.float32)])


def test_errors_of_the_function_name_the_op():
    def bad(inputs, outputs):
        raise ValueError("boom")

    with pytest.raises(OperatorError, match="Python.*raised ValueError: boom"):
        run_op_on(core.CreatePythonOperator(bad, ["X"], ["Y"]), [np.zeros(1, np.float32)])
    with pytest.raises(OperatorError, match="read before reshape"):
        run_op_on(core.CreatePythonOperator(lambda i, o: o[0].data, ["X"], ["Y"]), [np.zeros(1, np.float32)])


def test_no_grad_f_is_a_gradient_error():
    from framework.errors import GradientError

    op = core.CreatePythonOperator(_double, ["X"], ["Y"])
    with pytest.raises(GradientError, match="without grad_f"):
        get_backward_pass([op], {"Y": "dY"})


def test_python_op_numerical_gradient():
    def square(inputs, outputs):
        outputs[0].feed(inputs[0].data ** 2)

    def square_grad(inputs, outputs):  # X, Y, dY -> dX
        outputs[0].feed(2 * inputs[0].data * inputs[2].data)

    from framework.ops.testing import assert_gradient_checks

    op = core.CreatePythonOperator(square, ["X"], ["Y"], grad_f=square_grad)
    assert_gradient_checks(op, [np.random.default_rng(0).standard_normal((3, 2))], 0, check_inference=False)


def _scaler_builder(scale):
    def scaled(inputs, outputs):
        outputs[0].feed(inputs[0].data * scale)

    return scaled


def test_net_python_with_a_function_or_a_builder_tuple():
    net = core.Net("py_net")
    net.Python(_double)(["X"], ["Y"])
    net.Python((_scaler_builder, [3.0], {}))(["X"], ["Z"])
    ws = Workspace()
    x = np.arange(4, dtype=np.float32)
    ws.feed_blob("X", x)
    ws.run_net_once(net.Proto())
    np.testing.assert_array_equal(ws.fetch_blob("Y"), x * 2)
    np.testing.assert_array_equal(ws.fetch_blob("Z"), x * 3)
    with pytest.raises(TypeError, match="both f and grad_f"):
        net.Python((_scaler_builder, [1.0], {}), grad_f=_double_grad)
    bad = core.Net("py_bad")
    bad.Python((lambda: 5, [], {}))(["X"], ["W"])  # the builder returns a non-callable
    with pytest.raises(OperatorError, match="builder"):
        ws.run_net_once(bad.Proto())
