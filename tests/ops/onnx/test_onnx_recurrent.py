"""ONNXRNN / ONNXGRU / ONNXLSTM against a per-row, per-step numpy reference written from the ONNX
operator spec (directions, layout, sequence_lens, initial states, peepholes, clip, activations)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import ArgumentError, FrameworkError, ShapeError
from framework.ops.testing import assert_reference_checks, run_op_on

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}


def sigmoid(v):
    return 1 / (1 + np.exp(-v))


ACTS = {"Tanh": np.tanh, "Sigmoid": sigmoid, "Relu": lambda v: np.maximum(v, 0)}


def cell(kind, x, h, c, w, r, b, p, acts, clip, lbr):
    """One step for one batch row (1-D vectors), straight from the spec's equations."""
    hs = r.shape[1]
    cl = (lambda v: np.clip(v, -clip, clip)) if clip else (lambda v: v)
    wb, rb = b[: len(b) // 2], b[len(b) // 2 :]
    if kind == "RNN":
        return ACTS[acts[0]](cl(w @ x + r @ h + wb + rb)), c
    if kind == "GRU":
        f, g = ACTS[acts[0]], ACTS[acts[1]]
        z = f(cl(w[:hs] @ x + r[:hs] @ h + wb[:hs] + rb[:hs]))
        rr = f(cl(w[hs : 2 * hs] @ x + r[hs : 2 * hs] @ h + wb[hs : 2 * hs] + rb[hs : 2 * hs]))
        if lbr:
            hh = g(cl(w[2 * hs :] @ x + rr * (r[2 * hs :] @ h + rb[2 * hs :]) + wb[2 * hs :]))
        else:
            hh = g(cl(w[2 * hs :] @ x + r[2 * hs :] @ (rr * h) + rb[2 * hs :] + wb[2 * hs :]))
        return (1 - z) * hh + z * h, c
    f, g, hf = (ACTS[a] for a in acts)
    gate = [w[k * hs : (k + 1) * hs] @ x + r[k * hs : (k + 1) * hs] @ h + wb[k * hs : (k + 1) * hs]
            + rb[k * hs : (k + 1) * hs] for k in range(4)]  # fmt: skip
    pi, po, pf = p[:hs], p[hs : 2 * hs], p[2 * hs :]
    i = f(cl(gate[0] + pi * c))
    ft = f(cl(gate[2] + pf * c))
    nc = ft * c + i * g(cl(gate[3]))
    o = f(cl(gate[1] + po * nc))
    return o * hf(nc), nc


def reference(kind, direction, layout, clip, lbr, acts, x, w, r, b, lens, h0, c0, p):
    if layout:
        x, h0, c0 = x.transpose(1, 0, 2), h0.transpose(1, 0, 2), c0.transpose(1, 0, 2)
    seq, batch, _ = x.shape
    d, hs = w.shape[0], r.shape[2]
    y = np.zeros((seq, d, batch, hs))
    yh, yc = np.zeros((d, batch, hs)), np.zeros((d, batch, hs))
    per = len(acts) // d
    for k in range(d):
        rev = direction == "reverse" or k == 1
        for n in range(batch):
            h, c = h0[k, n].astype(np.float64), c0[k, n].astype(np.float64)
            steps = range(lens[n] - 1, -1, -1) if rev else range(lens[n])
            for t in steps:
                h, c = cell(kind, x[t, n], h, c, w[k], r[k], b[k], p[k], acts[k * per : (k + 1) * per], clip, lbr)
                y[t, k, n] = h
            yh[k, n], yc[k, n] = h, c
    if layout:
        y, yh, yc = y.transpose(2, 0, 1, 3), yh.transpose(1, 0, 2), yc.transpose(1, 0, 2)
    return y, yh, yc


@pytest.mark.parametrize("kind", ["RNN", "GRU", "LSTM"])
@given(data=st.data())
@settings(max_examples=25, deadline=None)
def test_matches_spec_reference(kind, data):
    g = GATES[kind]
    direction = data.draw(st.sampled_from(["forward", "reverse", "bidirectional"]))
    d = 2 if direction == "bidirectional" else 1
    seq, batch, isz, hs = (data.draw(st.integers(1, 4)) for _ in range(4))
    layout = data.draw(st.integers(0, 1))
    clip = data.draw(st.sampled_from([0.0, 0.7]))
    lbr = data.draw(st.integers(0, 1)) if kind == "GRU" else 0
    default = {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"], "LSTM": ["Sigmoid", "Tanh", "Tanh"]}[kind]
    acts = [data.draw(st.sampled_from(list(ACTS))) for _ in default * d] if data.draw(st.booleans()) else None
    seed = data.draw(st.integers(0, 2**31 - 1))
    rng = np.random.default_rng(seed)
    dt = np.float64
    x = rng.standard_normal((batch, seq, isz) if layout else (seq, batch, isz)).astype(dt)
    w = rng.standard_normal((d, g * hs, isz)).astype(dt)
    r = rng.standard_normal((d, g * hs, hs)).astype(dt)
    b = rng.standard_normal((d, 2 * g * hs)).astype(dt)
    lens = rng.integers(0, seq + 1, batch).astype(np.int32)
    st_shape = (batch, d, hs) if layout else (d, batch, hs)
    h0 = rng.standard_normal(st_shape).astype(dt)
    c0 = rng.standard_normal(st_shape).astype(dt)
    p = rng.standard_normal((d, 3 * hs)).astype(dt)
    args = dict(direction=direction, layout=layout, clip=clip, hidden_size=hs)
    if acts:
        args["activations"] = acts
    if kind == "GRU":
        args["linear_before_reset"] = lbr
    # absent optional inputs (empty tensors) take the unmasked loop, the bias-free projection, the peephole-free gates
    empty = np.zeros(0, dt)
    if data.draw(st.booleans()):
        lens = np.full(batch, seq, np.int32)
    feed_lens = np.zeros(0, np.int32) if data.draw(st.booleans()) and np.all(lens == seq) else lens
    feed_b = b if data.draw(st.booleans()) else empty
    b = b if feed_b.size else np.zeros_like(b)
    feed_p = p if data.draw(st.booleans()) else empty
    p = p if feed_p.size else np.zeros_like(p)
    ins = [x, w, r, feed_b, feed_lens, h0] + ([c0, feed_p] if kind == "LSTM" else [])
    names = ["X", "W", "R", "B", "L", "H0", "C0", "P"][: len(ins)]
    outs = ["Y", "Yh", "Yc"][: 3 if kind == "LSTM" else 2]
    op = CreateOperator(f"ONNX{kind}", names, outs, **args)
    zeros_c = c0 if kind == "LSTM" else np.zeros(st_shape)
    zeros_p = p if kind == "LSTM" else np.zeros((d, 3 * hs))

    def ref(*_):
        res = reference(kind, direction, layout, clip, lbr, acts or default * d, x, w, r, b, lens, h0, zeros_c, zeros_p)
        return list(res[: len(outs)])

    assert_reference_checks(op, ins, ref, threshold=1e-7)


@pytest.mark.parametrize("kind", ["RNN", "GRU", "LSTM"])
def test_absent_inputs_are_empty_tensors(kind):
    rng = np.random.default_rng(0)
    g, hs = GATES[kind], 3
    x = rng.standard_normal((4, 2, 5)).astype(np.float32)
    w = rng.standard_normal((1, g * hs, 5)).astype(np.float32)
    r = rng.standard_normal((1, g * hs, hs)).astype(np.float32)
    empty_f, empty_i = np.zeros(0, np.float32), np.zeros(0, np.int32)
    full = run_op_on(CreateOperator(f"ONNX{kind}", ["X", "W", "R"], ["Y", "Yh"]), [x, w, r])
    explicit = [np.zeros((1, 2 * g * hs), np.float32), np.full(2, 4, np.int32), np.zeros((1, 2, hs), np.float32)]
    same = run_op_on(CreateOperator(f"ONNX{kind}", ["X", "W", "R", "B", "L", "H"], ["Y", "Yh"]), [x, w, r] + explicit)
    empties = run_op_on(CreateOperator(f"ONNX{kind}", ["X", "W", "R", "B", "L", "H"], ["Y", "Yh"]),
                        [x, w, r, empty_f, empty_i, empty_f])  # fmt: skip
    for a, b_, c in zip(full, same, empties):
        np.testing.assert_allclose(a, b_, rtol=1e-6)
        np.testing.assert_allclose(a, c, rtol=1e-6)
    ref = reference(kind, "forward", 0, 0.0, 0, {"RNN": ["Tanh"], "GRU": ["Sigmoid", "Tanh"],
                    "LSTM": ["Sigmoid", "Tanh", "Tanh"]}[kind], x, w, r, np.zeros((1, 2 * g * hs)),
                    [4, 4], np.zeros((1, 2, hs)), np.zeros((1, 2, hs)), np.zeros((1, 3 * hs)))  # fmt: skip
    np.testing.assert_allclose(full[0], ref[0], rtol=1e-4, atol=1e-5)


def test_lstm_input_forget_couples_gates():
    rng = np.random.default_rng(1)
    hs = 2
    x, w, r = rng.standard_normal((3, 1, 2)), rng.standard_normal((1, 4 * hs, 2)), rng.standard_normal((1, 4 * hs, hs))
    (y,) = run_op_on(CreateOperator("ONNXLSTM", ["X", "W", "R"], ["Y"], input_forget=1), [x, w, r])
    h, c = np.zeros(hs), np.zeros(hs)
    for t in range(3):
        gate = w[0] @ x[t, 0] + r[0] @ h
        i = sigmoid(gate[:hs])
        c = (1 - i) * c + i * np.tanh(gate[3 * hs :])
        h = sigmoid(gate[hs : 2 * hs]) * np.tanh(c)
        np.testing.assert_allclose(y[t, 0, 0], h, rtol=1e-7)


def test_empty_sequence_gives_empty_y_and_initial_state():
    w, r = np.ones((1, 2, 3)), np.ones((1, 2, 2))
    h0 = np.full((1, 4, 2), 0.5)
    y, yh = run_op_on(CreateOperator("ONNXRNN", ["X", "W", "R", "B", "L", "H"], ["Y", "Yh"]),
                      [np.zeros((0, 4, 3)), w, r, np.zeros(0), np.zeros(0, np.int32), h0])  # fmt: skip
    assert y.shape == (0, 1, 4, 2)
    np.testing.assert_array_equal(yh, h0)


def test_errors_name_op_and_blob():
    x, w, r = np.ones((2, 1, 3)), np.ones((1, 4, 3)), np.ones((1, 4, 4))
    with pytest.raises(ShapeError, match="ONNXRNN.*'W'"):
        run_op_on(CreateOperator("ONNXRNN", ["X", "W", "R"], ["Y"], direction="bidirectional"), [x, w, r])
    with pytest.raises(ShapeError, match="'B'"):
        run_op_on(CreateOperator("ONNXRNN", ["X", "W", "R", "B"], ["Y"]), [x, w, r, np.ones((1, 3))])
    with pytest.raises(ShapeError, match="sequence_lens"):
        run_op_on(CreateOperator("ONNXRNN", ["X", "W", "R", "B", "L"], ["Y"]), [x, w, r, np.zeros(0), np.array([5])])
    with pytest.raises(ArgumentError, match="activation"):
        run_op_on(CreateOperator("ONNXRNN", ["X", "W", "R"], ["Y"], activations=["Nope"]), [x, w, r])
    with pytest.raises(FrameworkError):
        run_op_on(CreateOperator("ONNXGRU", ["X", "W", "R"], ["Y"]), [x, w.astype(np.int32), r])
