"""Nets nested through If / Do / While, read from text as a user's file would be: up to the limit they
run and give the right answer; past it (at any depth) the error is a NetError (wrapped in an OperatorError
when the body is built while running) or a ProtoParseError
naming the nesting, never a RecursionError or a crash. A fixed sample runs always; every depth
from 1 to 160 for each op with FRAMEWORK_FUZZ_FULL=1."""

from __future__ import annotations

import os

import numpy as np
import pytest

import framework.net  # noqa: F401  (installs the net services control-flow ops use)
from framework.errors import FrameworkError, ProtoParseError
from framework.memory.workspace import Workspace
from framework.ops.subnet import MAX_NESTING
from framework.proto.framework_pb2 import NetDef
from framework.proto.io import parse_text

FULL = os.environ.get("FRAMEWORK_FUZZ_FULL") == "1"
DEPTHS = list(range(1, 161)) if FULL else [1, 5, MAX_NESTING - 1, MAX_NESTING, MAX_NESTING + 1, 100, 150]

WRAP = {
    "If": 'op {{ input: "c" output: "y" type: "If" arg {{ name: "then_net" n {{ name: "n{d}" {body} }} }} }}',
    "Do": (
        'op {{ output: "ws{d}" type: "CreateScope" }} '
        'op {{ input: "x" input: "y" input: "ws{d}" output: "x" output: "y" output: "ws{d}" type: "Do" '
        'arg {{ name: "net" n {{ name: "n{d}" {body} }} }} '
        'arg {{ name: "inner_blobs" strings: "x" strings: "y" }} arg {{ name: "outer_blobs_idx" ints: 0 ints: 1 }} '
        'arg {{ name: "reuse_workspace" i: 1 }} }}'
    ),
}


def _text(kind: str, depth: int) -> str:
    body = 'op { input: "x" output: "y" type: "Relu" }'
    for d in range(depth):
        body = WRAP[kind].format(d=d, body=body)
    return 'name: "top" ' + body


@pytest.mark.parametrize("kind", sorted(WRAP))
@pytest.mark.parametrize("depth", DEPTHS)
def test_nesting_depth(kind, depth):
    x = np.array([-1.0, 2.0, -3.0], np.float32)
    ws = Workspace()
    ws.feed_blob("x", x)
    ws.feed_blob("y", np.zeros(3, np.float32))
    ws.feed_blob("c", np.array(True))
    try:
        net = parse_text(_text(kind, depth), NetDef, "nested.pbtxt")
    except ProtoParseError as e:
        assert "nested" in str(e)
        return
    if depth <= MAX_NESTING:
        ws.run_net_once(net)
        np.testing.assert_array_equal(ws.fetch_blob("y"), np.maximum(x, 0))
    else:
        with pytest.raises(
            FrameworkError, match=f"NetError.*nested more than {MAX_NESTING} deep|^net .*nested more than {MAX_NESTING}"
        ):
            ws.run_net_once(net)
