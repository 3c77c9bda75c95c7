"""Run a recurrent op through the compiled loop of framework/kernels/recurrent.py or through its numpy loop, and
check which one ran (shared by the compiled-vs-numpy tests of ONNX RNN/GRU/LSTM, InferenceLSTM and LSTMUnit)."""

from __future__ import annotations

import pytest

from framework.kernels import recurrent
from framework.ops.testing import run_op_on


def run_path(op_def, ins, compiled: bool, calls_kernel: bool = True):
    """The op's outputs on ``ins`` with the compiled kernels allowed (``compiled``) or not; asserts the kernel was
    called exactly when ``compiled and calls_kernel`` (a compiled run with no step to take calls none)."""
    calls = []
    real = recurrent._call

    def spy(fn, args):
        calls.append(fn)
        return real(fn, args)

    with pytest.MonkeyPatch.context() as m:
        m.setattr(recurrent, "_call", spy)
        if not compiled:
            m.setattr(recurrent, "available", lambda: False)
        out = run_op_on(op_def, ins)
    assert bool(calls) == (compiled and calls_kernel), f"compiled kernel {'did not run' if compiled else 'ran'}"
    return out
