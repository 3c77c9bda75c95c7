"""net_builder's control-operator builders: ``ops.IfNet`` / ``ops.Else`` / ``ops.WhileNet`` /
``ops.Condition`` (Caffe2's ``_RunIfNet``, ``_RunElseNet``, ``_RunWhileNet``,
``_RunWhileCondition``). Each turns its children into one net holding an If or While operator
whose branches run in Do scopes (``control_ops_util``). ``net_builder``'s
``Operations`` creates them.
"""

from __future__ import annotations

from typing import Any

from framework import core
from framework.caffe2.python.control_ops_util import add_if_op, add_while_op
from framework.caffe2.python.net_builder import NetBuilder

__all__ = ["RunElseNet", "RunIfNet", "RunWhileCondition", "RunWhileNet"]


class RunIfNet(NetBuilder):
    """A single net with an If operator."""

    def __init__(self, cond_blob: Any, name: str | None = None) -> None:
        NetBuilder.__init__(self, name=name, _use_control_ops=True)
        if not cond_blob:
            raise ValueError("Conditional blob is not specified for an If net")
        self._cond_blob = cond_blob
        self._then_net = None
        self._else_net = None

    def __exit__(self, etype: Any, *args: Any) -> None:
        if etype is None:
            then_nets = self._children
            self._reset_children()
            self._then_net = NetBuilder.merge_nets(then_nets, self._lexical_scope) or core.Net("empty_then_net")
            if_net = core.Net(self.name + "/if_net")
            add_if_op(if_net, self._cond_blob, self._lexical_scope, self._then_net, self._else_net)
            self._current_net = if_net
            self._children = [if_net]
        NetBuilder.__exit__(self, etype, *args)


class RunElseNet(NetBuilder):
    """Else branch of the IfNet just before it."""

    def __init__(self, name: str | None = None) -> None:
        NetBuilder.__init__(self, name=name, _use_control_ops=True)
        parent = NetBuilder.current(required=False)
        if not (parent and parent._children and isinstance(parent._children[-1], RunIfNet)):
            raise RuntimeError("Invalid use of Else builder: it must follow an IfNet")
        self._if_builder = parent._children[-1]

    def __exit__(self, etype: Any, *args: Any) -> None:
        if etype is None:
            else_nets = self._children
            self._reset_children()
            ifb = self._if_builder
            ifb._else_net = NetBuilder.merge_nets(else_nets, self._lexical_scope)
            if ifb._else_net:
                net = core.Net(self.name + "/if_else_net")
                add_if_op(net, ifb._cond_blob, self._lexical_scope, ifb._then_net, ifb._else_net)
                ifb._current_net = net
                ifb._children = [net]
        NetBuilder.__exit__(self, etype, *args)


class RunWhileNet(NetBuilder):
    """A single net with a While operator (its condition from ops.Condition)."""

    def __init__(self, name: str | None = None) -> None:
        NetBuilder.__init__(self, name=name, _use_control_ops=True)
        self._cond_builder = None

    def __exit__(self, etype: Any, *args: Any) -> None:
        if etype is None:
            if not self._cond_builder:
                raise RuntimeError("Condition builder must be specified in While op")
            body = self._children
            self._reset_children()
            body_net = NetBuilder.merge_nets(body, self._lexical_scope) or core.Net("empty_loop_body_net")
            while_net = core.Net(self.name + "/while_net")
            add_while_op(
                while_net, self._cond_builder._cond_blob, self._lexical_scope, body_net, self._cond_builder._cond_net
            )
            self._current_net = while_net
            self._children = [while_net]
        NetBuilder.__exit__(self, etype, *args)


class RunWhileCondition(NetBuilder):
    """The loop condition: its last op's single output is the condition blob."""

    def __init__(self, name: str | None = None) -> None:
        NetBuilder.__init__(self, name=name, _use_control_ops=True)
        parent = NetBuilder.current(required=False)
        if not isinstance(parent, RunWhileNet) or parent._cond_builder or parent._children:
            raise RuntimeError("Condition must come first, once, inside WhileNet")
        parent._cond_builder = self
        self._cond_blob = None
        self._cond_net = None

    def __exit__(self, etype: Any, *args: Any) -> None:
        if etype is None:
            body = self._children
            self._reset_children()
            self._cond_net = NetBuilder.merge_nets(body, self._lexical_scope)
            if not self._cond_net or not self._cond_net.Proto().op or len(self._cond_net.Proto().op[-1].output) != 1:
                raise RuntimeError("Invalid loop condition specified")
            self._cond_blob = core.BlobReference(self._cond_net.Proto().op[-1].output[0])
            self._current_net = self._cond_net
            self._children = [self._cond_net]
        NetBuilder.__exit__(self, etype, *args)
