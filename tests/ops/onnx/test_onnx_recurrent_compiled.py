"""ONNXRNN / ONNXGRU / ONNXLSTM: the compiled loop (framework/kernels/recurrent.py) against the numpy loop
the ops keep, on float32 across shapes and arguments; the numpy loop is checked against the ONNX spec in
test_onnx_recurrent.py. The compiled tanh/sigmoid against numpy's on a dense grid, and the fallback when a
kernel cannot compile."""

import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.kernels import kernel_support, recurrent
from framework.ops.testing import run_op_on
from tests.ops.rnn.compiled_path import run_path

pytestmark = pytest.mark.skipif(not recurrent.available(), reason="numba or scipy missing: no compiled loop")

GATES = {"RNN": 1, "GRU": 3, "LSTM": 4}
RTOL, ATOL = 2e-5, 2e-6  # the compiled tanh is within a few ulp of numpy's


def _case(kind, data):
    g = GATES[kind]
    direction = data.draw(st.sampled_from(["forward", "reverse", "bidirectional"]), label="direction")
    d = 2 if direction == "bidirectional" else 1
    seq = data.draw(st.integers(0, 7), label="seq")
    batch = data.draw(st.integers(1, 5), label="batch")
    isz = data.draw(st.integers(1, 9), label="input")
    hs = data.draw(st.sampled_from([1, 2, 3, 5, 7, 16, 17, 33]), label="hidden")
    layout = data.draw(st.integers(0, 1), label="layout")
    args = dict(direction=direction, layout=layout, hidden_size=hs)
    args["clip"] = data.draw(st.sampled_from([0.0, 0.5, 3.0]), label="clip")
    if kind == "GRU":
        args["linear_before_reset"] = data.draw(st.integers(0, 1), label="linear_before_reset")
    if kind == "LSTM":
        args["input_forget"] = data.draw(st.integers(0, 1), label="input_forget")
    if kind == "RNN":
        args["activations"] = [data.draw(st.sampled_from(["Tanh", "Relu", "Sigmoid"])) for _ in range(d)]
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31 - 1), label="seed"))
    f32 = np.float32
    x = rng.standard_normal((batch, seq, isz) if layout else (seq, batch, isz)).astype(f32)
    w = (rng.standard_normal((d, g * hs, isz)) / np.sqrt(isz)).astype(f32)
    r = (rng.standard_normal((d, g * hs, hs)) / np.sqrt(hs)).astype(f32)
    st_shape = (batch, d, hs) if layout else (d, batch, hs)
    empty = np.zeros(0, f32)
    b = rng.standard_normal((d, 2 * g * hs)).astype(f32) if data.draw(st.booleans(), label="bias") else empty
    h0 = rng.standard_normal(st_shape).astype(f32) if data.draw(st.booleans(), label="h0") else empty
    lens_kind = data.draw(st.sampled_from(["absent", "full", "ragged"]), label="sequence_lens")
    lens = {"absent": np.zeros(0, np.int32), "full": np.full(batch, seq, np.int32)}.get(lens_kind)
    if lens is None:
        lens = rng.integers(0, seq + 1, batch).astype(np.int32)
    ins = [x, w, r, b, lens, h0]
    if kind == "LSTM":
        c0 = rng.standard_normal(st_shape).astype(f32) if data.draw(st.booleans(), label="c0") else empty
        p = rng.standard_normal((d, 3 * hs)).astype(f32) if data.draw(st.booleans(), label="peepholes") else empty
        ins += [c0, p]
    names = ["X", "W", "R", "B", "L", "H0", "C0", "P"][: len(ins)]
    outs = ["Y", "Yh", "Yc"][: 3 if kind == "LSTM" else 2]
    return CreateOperator(f"ONNX{kind}", names, outs, **args), ins


@pytest.mark.parametrize("kind", ["RNN", "GRU", "LSTM"])
@given(data=st.data())
@settings(max_examples=40, deadline=None)
def test_compiled_loop_matches_numpy_loop(kind, data):
    op_def, ins = _case(kind, data)
    lens = ins[4]
    fast = run_path(op_def, ins, True, calls_kernel=lens.size == 0 or bool(lens.any()) or ins[0].size == 0)
    slow = run_path(op_def, ins, False)
    for a, b in zip(fast, slow):
        assert a.shape == b.shape and a.dtype == b.dtype == np.float32
        np.testing.assert_allclose(a, b, rtol=RTOL, atol=ATOL)


def test_torch_sized_lstm_and_gru_match():
    """The shapes torch's exporter gives (hidden 128, 50 steps, batch 8, both directions) over many steps:
    the approximation's error does not grow along the sequence."""
    rng = np.random.default_rng(3)
    x = rng.standard_normal((50, 8, 64)).astype(np.float32)
    for kind, extra in (("LSTM", {}), ("GRU", {"linear_before_reset": 1})):
        g = GATES[kind]
        w = (rng.standard_normal((2, g * 128, 64)) * 0.1).astype(np.float32)
        r = (rng.standard_normal((2, g * 128, 128)) * 0.1).astype(np.float32)
        b = (rng.standard_normal((2, 2 * g * 128)) * 0.1).astype(np.float32)
        op_def = CreateOperator(f"ONNX{kind}", ["X", "W", "R", "B"], ["Y", "Yh"], direction="bidirectional", **extra)
        fast = run_path(op_def, [x, w, r, b], True)
        slow = run_path(op_def, [x, w, r, b], False)
        for a, b_ in zip(fast, slow):
            np.testing.assert_allclose(a, b_, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("act, fn, rel", [("Tanh", np.tanh, 4e-7), ("Sigmoid", lambda v: 1 / (1 + np.exp(-v)), 2e-6)])
def test_compiled_activation_against_numpy_on_a_grid(act, fn, rel):
    """An RNN with W = 1, R = 0 and no bias gives f(x) for every x: the compiled activation over a dense
    float32 grid (both signs, tanh's clamp at |x| = 7.9 and beyond, tiny values, sigmoid's tail down to
    1e-30) within a few ulp of float64's, relative to the value (a sigmoid near 0 keeps its precision)."""
    grid = np.concatenate([np.linspace(-12, 12, 48001), np.geomspace(1e-8, 9, 4000), -np.geomspace(1e-8, 69, 4000)])
    x = grid.astype(np.float32)
    w, r = np.ones((1, 1, 1), np.float32), np.zeros((1, 1, 1), np.float32)
    (y,) = run_path(
        CreateOperator("ONNXRNN", ["X", "W", "R"], ["Y"], activations=[act]), [x.reshape(-1, 1, 1), w, r], True
    )
    want = fn(x.astype(np.float64))
    err = np.abs(y.ravel() - want)
    assert np.max(err / np.maximum(np.abs(want), 1e-30)) < rel


def test_failed_compile_falls_back_to_numpy_with_one_warning(monkeypatch):
    """A kernel whose first call fails disables the family (one RuntimeWarning); the op runs its numpy loop
    and gives the same values, and later runs say nothing."""
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 2, 3)).astype(np.float32)
    w = rng.standard_normal((1, 4 * 5, 3)).astype(np.float32)
    r = rng.standard_normal((1, 4 * 5, 5)).astype(np.float32)
    op_def = CreateOperator("ONNXLSTM", ["X", "W", "R"], ["Y", "Yh", "Yc"])
    want = run_path(op_def, [x, w, r], False)

    class Broken:
        overloads: dict = {}

        def __call__(self, *args):
            raise TypeError("no lowering for this signature")

    monkeypatch.setattr(recurrent._cells, "lstm_seq", Broken())
    monkeypatch.setattr(kernel_support, "_DISABLED", {})
    with pytest.warns(RuntimeWarning, match="recurrent"):
        got = run_op_on(op_def, [x, w, r])
    assert "recurrent" in kernel_support.disabled()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = run_op_on(op_def, [x, w, r])
    for a, b, c in zip(got, again, want):
        np.testing.assert_allclose(a, c, rtol=1e-6, atol=1e-7)
        np.testing.assert_array_equal(a, b)
