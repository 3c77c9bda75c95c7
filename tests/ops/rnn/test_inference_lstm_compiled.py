"""InferenceLSTM: the compiled loop (framework/kernels/recurrent.py, PyTorch's gate order as column offsets)
against the numpy loop the op keeps, on float32 across layers, directions, layouts and shapes; the numpy loop
is checked against PyTorch's nn.LSTM in test_inference_lstm.py."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.kernels import recurrent
from tests.ops.rnn.compiled_path import run_path

pytestmark = pytest.mark.skipif(not recurrent.available(), reason="numba or scipy missing: no compiled loop")


@given(data=st.data())
@settings(max_examples=30, deadline=None)
def test_compiled_loop_matches_numpy_loop(data):
    layers = data.draw(st.integers(1, 3), label="layers")
    bidirectional = data.draw(st.booleans(), label="bidirectional")
    batch_first = data.draw(st.booleans(), label="batch_first")
    has_biases = data.draw(st.booleans(), label="has_biases")
    t_len, n, d_in = data.draw(st.integers(0, 6)), data.draw(st.integers(1, 4)), data.draw(st.integers(1, 7))
    hsz = data.draw(st.sampled_from([1, 3, 5, 16, 19]), label="hidden")
    rng = np.random.default_rng(data.draw(st.integers(0, 2**31 - 1), label="seed"))
    dirs = 2 if bidirectional else 1
    x = rng.standard_normal((n, t_len, d_in) if batch_first else (t_len, n, d_in)).astype(np.float32)
    h0, c0 = rng.standard_normal((2, layers * dirs, n, hsz)).astype(np.float32)
    weights = []
    for layer in range(layers):
        din = d_in if layer == 0 else hsz * dirs
        for _ in range(dirs):
            weights += [(rng.standard_normal((4 * hsz, din)) / np.sqrt(din)).astype(np.float32),
                        (rng.standard_normal((4 * hsz, hsz)) / np.sqrt(hsz)).astype(np.float32)]  # fmt: skip
            if has_biases:
                weights += list(rng.standard_normal((2, 4 * hsz)).astype(np.float32))
    names = [f"w{i}" for i in range(len(weights))]
    op_def = CreateOperator(
        "InferenceLSTM", ["x", "h0", "c0"] + names, ["y", "h", "c"], num_layers=layers,
        bidirectional=bidirectional, batch_first=batch_first, has_biases=has_biases,
    )  # fmt: skip
    ins = [x, h0, c0] + weights
    fast, slow = run_path(op_def, ins, True), run_path(op_def, ins, False)
    for a, b in zip(fast, slow):
        assert a.shape == b.shape and a.dtype == b.dtype
        np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6)
