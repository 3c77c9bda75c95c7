"""A same-shape Add becomes a Sum (framework/net/add_as_sum.py) and so fuses into the conv before it; broadcasting
Adds and Adds of unknown shapes stay; a residual operand that is a parameter or a fed input is never written over."""

from __future__ import annotations

import collections

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.memory.workspace import Workspace
from framework.net.optimize import optimize_inference
from framework.proto.framework_pb2 import NetDef


def _net(ops, inputs, outputs):
    net = NetDef(name="n")
    net.op.extend(ops)
    net.external_input.extend(inputs)
    net.external_output.extend(outputs)
    return net


def _ws(rng, n, c, m, h, w):
    ws = Workspace()
    ws.feed_blob("x", rng.standard_normal((n, c, h, w)).astype(np.float32))
    ws.feed_blob("w1", rng.standard_normal((m, c, 3, 3)).astype(np.float32))
    ws.feed_blob("b1", rng.standard_normal(m).astype(np.float32))
    ws.feed_blob("w2", rng.standard_normal((m, c, 1, 1)).astype(np.float32))
    ws.feed_blob("b2", rng.standard_normal(m).astype(np.float32))
    return ws


def _run_twice(net, ws, outputs):
    """The outputs of two runs of ``net`` in a copy of ``ws`` (a second run shows what the first overwrote)."""
    w2 = Workspace()
    for k in ws.blobs():
        w2.feed_blob(k, ws.fetch_blob(k))
    created = w2.create_net(net)
    created.run()
    first = [w2.fetch_blob(o).copy() for o in outputs]
    created.run()
    return first, [w2.fetch_blob(o) for o in outputs]


def _residual(add_args, in_place=False):
    """conv3x3(x) + conv1x1(x) through Add, then Relu: the residual block's tail (a Sigmoid reads it, as the
    next block would: a Relu writing a declared output stays a Relu). In place: over B (A with broadcast=1)."""
    out = ("y" if add_args.get("broadcast") else "r") if in_place else "s"
    return [
        CreateOperator("Conv", ["x", "w2", "b2"], ["r"], kernel=1),
        CreateOperator("Conv", ["x", "w1", "b1"], ["y"], kernel=3, pad=1),
        CreateOperator("Add", ["y", "r"], [out], **add_args),
        CreateOperator("Relu", [out], ["h"]),
        CreateOperator("Sigmoid", ["h"], ["z"]),
    ]


def _types(net):
    return collections.Counter(op.type for op in net.op)


def _fusion_types(net):
    return [a.i for op in net.op if op.type == "ConvFusion" for a in op.arg if a.name == "fusion_type"]


INPUTS = ["x", "w1", "b1", "w2", "b2"]


@settings(max_examples=12, deadline=None)
@given(
    n=st.integers(1, 2),
    c=st.integers(1, 4),
    m=st.integers(1, 5),
    h=st.integers(3, 7),
    w=st.integers(3, 7),
    broadcast=st.sampled_from([{}, {"broadcast": 1}]),
    in_place=st.booleans(),
    seed=st.integers(0, 2**16),
)
def test_same_shape_add_fuses_into_the_conv_with_the_unoptimized_values(n, c, m, h, w, broadcast, in_place, seed):
    ws = _ws(np.random.default_rng(seed), n, c, m, h, w)
    net = _net(_residual(broadcast, in_place), INPUTS, ["z"])
    (want,), _ = _run_twice(net, ws, ["z"])
    opt = optimize_inference(net, ws, outputs=["z"])
    first, second = _run_twice(opt, ws, ["z"])
    np.testing.assert_allclose(first[0], want, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(second[0], first[0])
    assert "Add" not in _types(opt)
    assert 3 in _fusion_types(opt)  # Conv + Sum + Relu in one op


def test_add_writing_over_b_becomes_a_sum_over_its_first_input():
    ws = _ws(np.random.default_rng(1), 1, 2, 3, 4, 4)
    ops = [
        CreateOperator("Conv", ["x", "w2", "b2"], ["r"], kernel=1),
        CreateOperator("Conv", ["x", "w1", "b1"], ["y"], kernel=3, pad=1),
        CreateOperator("Add", ["y", "r"], ["r"]),
    ]
    net = _net(ops, INPUTS, ["r", "y"])  # both observable: nothing fuses, the Add alone is rewritten
    (want_r, want_y), _ = _run_twice(net, ws, ["r", "y"])
    opt = optimize_inference(net, ws, outputs=["r", "y"], share_buffers=False)
    (got_r, got_y), _ = _run_twice(opt, ws, ["r", "y"])
    (s,) = [op for op in opt.op if op.type == "Sum"]
    assert list(s.input) == ["r", "y"] and list(s.output) == ["r"]
    np.testing.assert_array_equal(got_r, want_r)
    np.testing.assert_array_equal(got_y, want_y)


def test_broadcasting_adds_and_adds_of_unknown_shapes_stay_adds():
    rng = np.random.default_rng(2)
    ws = _ws(rng, 2, 3, 4, 5, 5)
    ws.feed_blob("bias", rng.standard_normal((1, 4, 1, 1)).astype(np.float32))
    ws.feed_blob("row", rng.standard_normal((5,)).astype(np.float32))
    ops = [
        CreateOperator("Conv", ["x", "w1", "b1"], ["y"], kernel=3, pad=1),
        CreateOperator("Relu", ["y"], ["y2"]),
        CreateOperator("Add", ["y2", "bias"], ["s"]),  # numpy broadcasting
        CreateOperator("Add", ["s", "row"], ["t"], broadcast=1),  # Caffe2's suffix broadcasting
        CreateOperator("Relu", ["t"], ["z"]),
    ]
    net = _net(ops, [*INPUTS, "bias", "row"], ["z"])
    (want,), _ = _run_twice(net, ws, ["z"])
    opt = optimize_inference(net, ws, outputs=["z"])
    (got,), _ = _run_twice(opt, ws, ["z"])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    assert _types(opt)["Add"] == 2 and "Sum" not in _types(opt)
    # the input's shape unknown (no tensor fed, no shapes given): the residual Add stays
    empty = Workspace()
    for k in INPUTS[1:]:
        empty.feed_blob(k, ws.fetch_blob(k))
    opt = optimize_inference(_net(_residual({}), INPUTS, ["z"]), empty, outputs=["z"])
    assert _types(opt)["Add"] == 1
    # ... unless the pass is told the input shapes (as the ONNX backend tells it the first feeds')
    opt = optimize_inference(_net(_residual({}), INPUTS, ["z"]), empty, outputs=["z"], shapes={"x": (2, 3, 5, 5)})
    assert "Add" not in _types(opt) and 3 in _fusion_types(opt)


def test_a_residual_parameter_or_fed_input_is_never_summed_over():
    rng = np.random.default_rng(3)
    ws = _ws(rng, 1, 3, 4, 5, 5)
    ws.feed_blob("c", rng.standard_normal((1, 4, 5, 5)).astype(np.float32))
    for kind in ("Sum", "Add"):
        ops = [
            CreateOperator("Conv", ["x", "w1", "b1"], ["y"], kernel=3, pad=1),
            CreateOperator(kind, ["y", "c"], ["s"]),
            CreateOperator("Relu", ["s"], ["z"]),
        ]
        net = _net(ops, [*INPUTS, "c"], ["z"])
        (want,), _ = _run_twice(net, ws, ["z"])
        opt = optimize_inference(net, ws, outputs=["z"])
        first, second = _run_twice(opt, ws, ["z"])
        np.testing.assert_allclose(first[0], want, rtol=1e-5, atol=1e-5)
        np.testing.assert_array_equal(second[0], first[0])
        assert not any("c" in op.output for op in opt.op)
