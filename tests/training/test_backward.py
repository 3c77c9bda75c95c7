"""The backward pass: seeds, versions, accumulation, sparse gradients, errors.

Tiny test-only ops (``_TestSquare`` ...) are registered here so the pass is
tested independently of the op families.
"""

import numpy as np
import pytest

from framework.core import CreateOperator, DeviceOption
from framework.errors import GradientError
from framework.memory.workspace import Workspace
from framework.net.backward import GradientRegistry, add_gradient_operators, get_backward_pass
from framework.ops import create_operator, has_op, registry
from framework.ops.gradient import GradientSlice, gradient, no_gradient, should_not_do_gradient
from framework.ops.operator import Operator
from framework.ops.registry import register_op
from framework.ops.schema import same_as_input
from framework.ops.testing import assert_gradient_checks
from framework.proto.framework_pb2 import NetDef

TEST_OPS = [
    "_TestSquare",
    "_TestSquareGradient",
    "_TestAdd",
    "_TestGather",
    "_TestIdentity",
    "_TestStop",
    "_TestPyOnly",
]


def _register_test_ops():

    @register_op("_TestSquare", infer=same_as_input(0), private=True)
    class _TestSquare(Operator):
        """Y = X * X (test only)."""

        def run(self):
            x = self.input(0)
            np.multiply(x, x, out=self.output(0, x.shape, x.dtype))

    @register_op("_TestSquareGradient", inputs=2, infer=same_as_input(0), private=True)
    class _TestSquareGradient(Operator):
        """dX = 2 X dY (test only)."""

        def run(self):
            x, dy = self.input(0), self.input(1)
            out = self.output(0, x.shape, x.dtype)
            np.multiply(x, dy, out=out)
            out *= 2

    @gradient("_TestSquare")
    def _sq_grad(g):
        return [g.op("_TestSquareGradient", [g.I(0), g.GO(0)], [g.GI(0)])]

    @register_op("_TestAdd", inputs=2, infer=same_as_input(0), private=True)
    class _TestAdd(Operator):
        """Y = A + B; the gradient passes through (test only)."""

        def run(self):
            a, b = self.input(0), self.input(1)
            np.add(a, b, out=self.output(0, a.shape, a.dtype))

    @gradient("_TestAdd")
    def _add_grad(g):
        g.set_dense(0, g.GO(0))
        g.set_dense(1, g.GO(0))
        return []

    @register_op("_TestGather", inputs=2, infer=same_as_input(0), private=True)
    class _TestGather(Operator):
        """Y = DATA[IDX] (test only)."""

        def run(self):
            d, i = self.input(0), self.input(1)
            np.take(d, i, axis=0, out=self.output(0, i.shape + d.shape[1:], d.dtype))

    @gradient("_TestGather")
    def _gather_grad(g):
        g.set_sparse(0, g.I(1), g.GO(0))
        return []

    @register_op("_TestIdentity", infer=same_as_input(0), allow_inplace={(0, 0)}, private=True)
    class _TestIdentity(Operator):
        """Y = X, no gradient (test only)."""

        def run(self):
            x = self.input(0)
            np.copyto(self.output(0, x.shape, x.dtype), x)

    no_gradient("_TestIdentity")

    @register_op("_TestStop", infer=same_as_input(0), allow_inplace={(0, 0)}, private=True)
    class _TestStop(Operator):
        """Must not be differentiated (test only)."""

        def run(self):
            pass

    should_not_do_gradient("_TestStop")

    @register_op("_TestPyOnly", infer=same_as_input(0), private=True)
    class _TestPyOnly(Operator):
        """Gradient only from the Python registry (test only)."""

        def run(self):
            pass

    @GradientRegistry.RegisterGradient("_TestPyOnly")
    def _py_grad(op, g_output):
        return CreateOperator("_TestSquareGradient", [op.input[0], g_output[0]], [op.input[0] + "_grad"]), [
            op.input[0] + "_grad"
        ]


@pytest.fixture(autouse=True, scope="module")
def _test_ops():
    """Register the test-only ops for this module and remove them after (the catalogue must not see them)."""
    if not has_op("_TestSquare"):
        _register_test_ops()
    yield
    for name in TEST_OPS:
        registry._SCHEMAS.pop(name, None)
    GradientRegistry.gradient_registry_.pop("_TestPyOnly", None)


def _net(*ops):
    net = NetDef(name="t")
    net.op.extend(ops)
    return net


def _types(ops):
    return [o.type for o in ops]


def test_list_seed_is_constant_fill_one():
    net = _net(CreateOperator("_TestSquare", ["X"], ["Y"]))
    grads = add_gradient_operators(net, ["Y"])
    seed = net.op[1]
    assert seed.type == "ConstantFill" and list(seed.input) == ["Y"] and list(seed.output) == ["Y_autogen_grad"]
    assert seed.arg[0].name == "value" and seed.arg[0].f == 1.0
    sq = net.op[2]
    assert sq.type == "_TestSquareGradient" and list(sq.input) == ["X", "Y_autogen_grad"]
    assert sq.is_gradient_op
    assert grads == {"Y": "Y_autogen_grad", "X": "X_grad"}


def test_dict_seed_uses_given_gradient():
    ops, grads = get_backward_pass([CreateOperator("_TestSquare", ["X"], ["Y"])], {"Y": "dY"})
    assert _types(ops) == ["_TestSquareGradient"]
    assert list(ops[0].input) == ["X", "dY"]
    assert grads == {"Y": "dY", "X": "X_grad"}


def test_chain_walks_in_reverse():
    ops, grads = get_backward_pass(
        [CreateOperator("Relu", ["X"], ["H"]), CreateOperator("_TestSquare", ["H"], ["Y"])], ["Y"]
    )
    assert _types(ops) == ["ConstantFill", "_TestSquareGradient", "ReluGradient"]
    assert list(ops[2].input) == ["H", "H_grad"] and list(ops[2].output) == ["X_grad"]
    assert grads["X"] == "X_grad"


def test_fan_out_is_summed_with_autosplit_names():
    fwd = [
        CreateOperator("Relu", ["X"], ["A"]),
        CreateOperator("_TestSquare", ["X"], ["B"]),
        CreateOperator("_TestAdd", ["A", "B"], ["L"]),
    ]
    ops, grads = get_backward_pass(fwd, ["L"])
    assert _types(ops) == ["ConstantFill", "_TestSquareGradient", "ReluGradient", "Sum"]
    assert list(ops[1].output) == ["X_grad"]
    assert list(ops[2].output) == ["_X_grad_autosplit_0"]
    assert list(ops[3].input) == ["X_grad", "_X_grad_autosplit_0"] and list(ops[3].output) == ["X_grad"]
    assert "is_auto_gen_sum_ops:1" in ops[3].device_option.extra_info
    assert grads["X"] == "X_grad"
    # The pass-through op forwarded the seed to both of its inputs.
    assert grads["A"] == grads["B"] == "L_autogen_grad"


def test_three_consumers_and_pass_through_generators():
    fwd = [
        CreateOperator("_TestSquare", ["X"], ["A"]),
        CreateOperator("_TestAdd", ["X", "A"], ["B"]),
        CreateOperator("_TestSquare", ["X"], ["C"]),
        CreateOperator("_TestAdd", ["B", "C"], ["L"]),
    ]
    ops, grads = get_backward_pass(fwd, {"L": "dL"})
    s = ops[-1]
    assert s.type == "Sum" and list(s.output) == ["X_grad"]
    # Generators: Square #2 (keeps X_grad), Add #1 (passes 'dL' through), Square #0 (renamed).
    assert list(s.input) == ["X_grad", "dL", "_X_grad_autosplit_0"]


def test_test_square_gradient_is_right():
    assert_gradient_checks(CreateOperator("_TestSquare", ["X"], ["Y"]), [np.array([0.5, -1.0, 2.0])], 0)


def test_fan_out_numbers_match_numpy():
    if not (has_op("Sum") and has_op("ConstantFill")):
        pytest.skip("Sum / ConstantFill not registered yet")
    fwd = [
        CreateOperator("Relu", ["X"], ["A"]),
        CreateOperator("_TestSquare", ["X"], ["B"]),
        CreateOperator("_TestAdd", ["A", "B"], ["L"]),
    ]
    ops, grads = get_backward_pass(fwd, ["L"])
    ws = Workspace()
    x = np.array([-1.5, -0.2, 0.3, 2.0], dtype=np.float32)
    ws.feed_blob("X", x)
    for op in fwd + ops:
        create_operator(op, ws).run()
    np.testing.assert_allclose(ws.fetch_blob("X_grad"), (x > 0) + 2 * x, rtol=1e-6)


def test_in_place_that_destroys_a_needed_value_is_an_error():
    fwd = [
        CreateOperator("_TestSquare", ["X"], ["Y"]),
        CreateOperator("Relu", ["X"], ["X"]),
        CreateOperator("_TestAdd", ["Y", "X"], ["L"]),
    ]
    with pytest.raises(GradientError) as e:
        get_backward_pass(fwd, ["L"])
    msg = str(e.value)
    assert "_TestSquare" in msg and "'X'" in msg and "version 0" in msg
    assert "version history of blob 'X'" in msg and "op #1 Relu" in msg


def test_in_place_after_use_is_fine():
    fwd = [CreateOperator("Relu", ["X"], ["X"]), CreateOperator("_TestSquare", ["X"], ["Y"])]
    ops, grads = get_backward_pass(fwd, ["Y"])
    assert _types(ops) == ["ConstantFill", "_TestSquareGradient", "ReluGradient"]
    assert list(ops[2].input) == ["X", "X_grad"] and list(ops[2].output) == ["X_grad"]
    assert grads["X"] == "X_grad"


def test_sparse_gradients_are_concatenated():
    fwd = [
        CreateOperator("_TestGather", ["D", "I1"], ["G1"]),
        CreateOperator("_TestGather", ["D", "I2"], ["G2"]),
        CreateOperator("_TestAdd", ["G1", "G2"], ["L"]),
    ]
    ops, grads = get_backward_pass(fwd, {"L": "dL"})
    assert _types(ops) == ["Concat", "Concat"]
    assert list(ops[0].input) == ["I2", "I1"]
    assert list(ops[0].output) == ["D_grad_indices_concat", "D_grad_indices_concat_split"]
    assert list(ops[1].input) == ["dL", "dL"]
    assert list(ops[1].output) == ["D_grad_values_concat", "D_grad_values_concat_split"]
    assert ops[0].arg[0].name == "axis" and ops[0].arg[0].i == 0
    assert grads["D"] == GradientSlice("D_grad_indices_concat", "D_grad_values_concat")


def test_single_sparse_gradient_passes_through():
    ops, grads = get_backward_pass([CreateOperator("_TestGather", ["D", "I"], ["G"])], {"G": "dG"})
    assert ops == [] and grads["D"] == GradientSlice("I", "dG")


def test_mix_of_sparse_and_dense_is_an_error():
    fwd = [
        CreateOperator("_TestGather", ["D", "I"], ["G"]),
        CreateOperator("_TestSquare", ["D"], ["S"]),
        CreateOperator("_TestAdd", ["G", "S"], ["L"]),
    ]
    with pytest.raises(GradientError, match="'D'.*mix of sparse and dense gradients"):
        get_backward_pass(fwd, {"L": "dL"})


def test_no_gradient_op_blocks_the_walk():
    fwd = [CreateOperator("_TestSquare", ["X"], ["H"]), CreateOperator("_TestIdentity", ["H"], ["Y"])]
    ops, grads = get_backward_pass(fwd, ["Y"])
    assert _types(ops) == ["ConstantFill"]
    assert "X" not in grads and "H" not in grads


def test_should_not_do_gradient_is_an_error_naming_the_op():
    fwd = [CreateOperator("_TestStop", ["X"], ["Y"], name="stopper")]
    with pytest.raises(GradientError, match='_TestStop "stopper"'):
        get_backward_pass(fwd, ["Y"])


def test_orphan_stop_gradient_is_an_error():
    fwd = [CreateOperator("StopGradient", ["X"], ["Z"]), CreateOperator("_TestSquare", ["X"], ["Y"])]
    with pytest.raises(GradientError, match="StopGradient's output 'Z' is orphan"):
        get_backward_pass(fwd, ["Y"])


def test_stop_gradient_blocks():
    if not has_op("StopGradient"):
        pytest.skip("StopGradient not registered yet")
    fwd = [
        CreateOperator("_TestSquare", ["X"], ["H"]),
        CreateOperator("StopGradient", ["H"], ["H"]),
        CreateOperator("_TestSquare", ["H"], ["Y"]),
    ]
    ops, grads = get_backward_pass(fwd, ["Y"])
    # The gradient of H would only flow into StopGradient: it is dead, so its op is dropped.
    assert _types(ops) == ["ConstantFill"]
    assert "X" not in grads and "H" not in grads


def test_stop_gradient_on_data_trims_fc_gradient_dx():
    if not (has_op("StopGradient") and has_op("FC")):
        pytest.skip("StopGradient / FC not registered yet")
    fwd = [
        CreateOperator("StopGradient", ["data"], ["data"]),
        CreateOperator("FC", ["data", "w", "b"], ["h"]),
        CreateOperator("Relu", ["h"], ["y"]),
    ]
    ops, grads = get_backward_pass(fwd, ["y"])
    fcg = ops[-1]
    assert fcg.type == "FCGradient" and list(fcg.output) == ["w_grad", "b_grad"]
    assert "data" not in grads and grads["w"] == "w_grad"
    # Without StopGradient, Caffe2's three outputs stay.
    ops, grads = get_backward_pass(fwd[1:], ["y"])
    assert list(ops[-1].output) == ["w_grad", "b_grad", "data_grad"] and grads["data"] == "data_grad"


def test_python_registry_fallback_and_get_gradient_for_op():
    ops, g_in = GradientRegistry.GetGradientForOp(CreateOperator("_TestPyOnly", ["X"], ["Y"]), ["dY"])
    assert (
        _types(ops) == ["_TestSquareGradient"] and g_in == ["X_grad"] and not ops[0].is_gradient_op
    )  # as Caffe2 returns a Python maker's ops
    ops, g_in = GradientRegistry.GetGradientForOp(CreateOperator("_TestSquare", ["X"], ["Y"]), ["dY"])
    assert _types(ops) == ["_TestSquareGradient"] and g_in == ["X_grad"]


def test_unknown_gradient_is_an_error():
    with pytest.raises(GradientError, match="NoSuchOp"):
        GradientRegistry.GetGradientForOp(CreateOperator("NoSuchOp", ["X"], ["Y"]), ["dY"])


def test_skip_leaves_the_first_ops_alone():
    net = _net(CreateOperator("_TestSquare", ["A"], ["X"]), CreateOperator("_TestSquare", ["X"], ["Y"]))
    grads = add_gradient_operators(net, ["Y"], skip=1)
    assert _types(net.op) == ["_TestSquare", "_TestSquare", "ConstantFill", "_TestSquareGradient"]
    assert "A" not in grads and grads["X"] == "X_grad"


def test_gradient_ops_inherit_device_and_arguments():
    dev = DeviceOption(1, 0)
    fwd = [CreateOperator("_TestSquare", ["X"], ["Y"], device_option=dev, engine="E", foo=3)]
    ops, _ = get_backward_pass(fwd, {"Y": "dY"})
    assert ops[0].device_option.device_type == 1 and ops[0].engine == "E"
    assert [a.name for a in ops[0].arg] == ["foo"]


def test_unknown_target_is_an_error():
    with pytest.raises(GradientError, match="'Q'"):
        get_backward_pass([CreateOperator("_TestSquare", ["X"], ["Y"])], ["Q"])


def test_ys_type_is_checked():
    with pytest.raises(TypeError):
        get_backward_pass([CreateOperator("_TestSquare", ["X"], ["Y"])], 3)


def test_gradient_into_a_fill_output_is_kept_as_caffe2_does():
    # Caffe2 trims nothing: a blob written by a no-gradient op other than StopGradient still gets its gradient.
    if not (has_op("GivenTensorFill") and has_op("PrependDim")):
        pytest.skip("GivenTensorFill / PrependDim not registered yet")
    fwd = [
        CreateOperator("GivenTensorFill", [], ["X"], shape=[4, 2], values=[0.0] * 8),
        CreateOperator("PrependDim", ["X"], ["Xp"], dim_size=2),
        CreateOperator("_TestSquare", ["Xp"], ["Y"]),
    ]
    ops, grads = get_backward_pass(fwd, ["Y"])
    assert _types(ops) == ["ConstantFill", "_TestSquareGradient", "MergeDim"]
    assert grads["X"] == "X_grad" and ops[-1].output[0] == "X_grad"
