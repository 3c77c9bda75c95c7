"""LSTMUnit: the compiled step (framework/kernels/recurrent.py) against the numpy ufuncs the op keeps, on
float32 across batch sizes, odd hidden sizes, forget_bias, sequence lengths and drop_states; the numpy step
is checked against Caffe2's equations in test_units.py."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.kernels import recurrent
from tests.ops.rnn.compiled_path import run_path

pytestmark = pytest.mark.skipif(not recurrent.available(), reason="numba or scipy missing: no compiled kernel")


def _case(data):
    """(batch, hidden, with sequence lengths, the op's arguments, a seeded generator) drawn for one example."""
    n = data.draw(st.integers(1, 6), label="batch")
    d = data.draw(st.sampled_from([1, 2, 3, 7, 16, 33]), label="hidden")
    with_lengths = data.draw(st.booleans(), label="sequence_lengths")
    args = dict(
        forget_bias=data.draw(st.sampled_from([0.0, 1.0, -0.5]), label="forget_bias"),
        drop_states=data.draw(st.booleans(), label="drop_states"),
        sequence_lengths=with_lengths,
    )
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31 - 1), label="seed"))
    return n, d, with_lengths, args, rng


@given(data=st.data())
@settings(max_examples=40, deadline=None)
def test_compiled_step_matches_numpy_step(data):
    n, d, with_lengths, args, rng = _case(data)
    h, c = rng.standard_normal((2, 1, n, d)).astype(np.float32)
    gates = (3 * rng.standard_normal((1, n, 4 * d))).astype(np.float32)
    t = data.draw(st.integers(0, 4), label="timestep")
    ins = [h, c, gates]
    names = ["h", "c", "gates"]
    if with_lengths:
        ins.append(rng.integers(0, 6, n).astype(np.int32))
        names.append("lengths")
    ins.append(np.array([t], np.int32))
    names.append("t")
    op_def = CreateOperator("LSTMUnit", names, ["h_out", "c_out"], **args)
    fast, slow = run_path(op_def, ins, True), run_path(op_def, ins, False)
    for a, b in zip(fast, slow):
        assert a.shape == b.shape == (1, n, d) and a.dtype == np.float32
        np.testing.assert_allclose(a, b, rtol=2e-6, atol=5e-7)


@given(data=st.data())
@settings(max_examples=40, deadline=None)
def test_compiled_gradient_matches_numpy_gradient(data):
    n, d, with_lengths, args, rng = _case(data)
    h_prev, c_prev, h, c, dh, dc = rng.standard_normal((6, 1, n, d)).astype(np.float32)
    gates = (3 * rng.standard_normal((1, n, 4 * d))).astype(np.float32)
    ins = [h_prev, c_prev, gates]
    names = ["h_prev", "c_prev", "gates"]
    if with_lengths:
        ins.append(rng.integers(0, 6, n).astype(np.int32))
        names.append("lengths")
    ins += [np.array([data.draw(st.integers(0, 4), label="timestep")], np.int32), h, c, dh, dc]
    names += ["t", "h", "c", "dh", "dc"]
    op_def = CreateOperator("LSTMUnitGradient", names, ["dh_prev", "dc_prev", "dgates"], **args)
    fast, slow = run_path(op_def, ins, True), run_path(op_def, ins, False)
    for a, b in zip(fast, slow):
        assert a.shape == b.shape and a.dtype == np.float32
        np.testing.assert_allclose(a, b, rtol=2e-6, atol=2e-6)
