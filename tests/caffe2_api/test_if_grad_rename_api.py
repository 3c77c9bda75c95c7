"""control_ops_grad.disambiguate_grad_if_op_output and the IR's split of an If gradient's output."""

from framework import core
from framework.caffe2.python.control_ops_grad import disambiguate_grad_if_op_output
from framework.net.accumulation import rename_grad_output


def _if_grad_op():
    then_net = core.Net("then_branch")
    then_net.Copy("g_then", "x_grad")
    else_net = core.Net("else_branch")
    else_net.Copy("g_else", "tmp_grad")
    else_net.Scale("tmp", "x_grad", scale=2.0)
    return core.CreateOperator(
        "If", ["cond", "g_then", "g_else"], ["x_grad", "tmp_grad"],
        then_net=then_net.Proto(), else_net=else_net.Proto(),
    )  # fmt: skip


def _inner_outputs(op):
    return {a.name: [list(o.output) for o in a.n.op] for a in op.arg if a.HasField("n")}


def test_renaming_an_if_gradient_output_renames_its_branches_writers():
    op = _if_grad_op()
    disambiguate_grad_if_op_output(op, 0, "_x_grad_autosplit_0")
    assert list(op.output) == ["_x_grad_autosplit_0", "tmp_grad"]
    assert _inner_outputs(op) == {
        "then_net": [["_x_grad_autosplit_0"]],
        "else_net": [["tmp_grad"], ["_x_grad_autosplit_0"]],
    }


def test_other_ops_rename_only_their_output():
    op = core.CreateOperator("Copy", ["a"], ["x_grad"], device_option=None)
    rename_grad_output(op, 0, "renamed")
    assert list(op.output) == ["renamed"]
