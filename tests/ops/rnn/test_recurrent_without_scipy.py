"""Without scipy (the compiled recurrent loops' np.dot needs its BLAS; the ``jit`` extra installs it) the
recurrent ops run their numpy loops: no warning, the numpy loops' values, and those agree with the compiled
loops' where numba and scipy are present."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from framework.core import CreateOperator
from framework.kernels import recurrent
from framework.ops.testing import run_op_on

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))

# Run in a fresh process where importing scipy fails as if it were not installed.
_CHILD = """
import sys, warnings
import numpy as np

sys.modules["scipy"] = None  # "import scipy" raises ImportError, find_spec finds nothing
warnings.simplefilter("error")
from framework.kernels import recurrent
from framework.ops.testing import run_op_on
from framework.core import CreateOperator


data = np.load(sys.argv[1])
ins = [data[f"i{k}"] for k in range(8)]
op = CreateOperator("ONNXLSTM", ["X", "W", "R", "B", "L", "H0", "C0", "P"], ["Y", "Yh", "Yc"], hidden_size=5,
                    direction="bidirectional")
outs = run_op_on(op, ins)
unit = CreateOperator("LSTMUnit", ["h", "c", "g", "t"], ["ho", "co"], sequence_lengths=0)
outs += run_op_on(unit, [data["h"], data["c"], data["g"], np.array([0], np.int32)])
assert sys.modules["scipy"] is None and not recurrent.available()
np.savez(sys.argv[2], *outs)
"""


def _inputs():
    rng = np.random.default_rng(5)
    f = np.float32
    d, g, hs, isz, seq, batch = 2, 4, 5, 3, 4, 2
    ins = [
        rng.standard_normal((seq, batch, isz)).astype(f),
        (rng.standard_normal((d, g * hs, isz)) / 2).astype(f),
        (rng.standard_normal((d, g * hs, hs)) / 2).astype(f),
        rng.standard_normal((d, 2 * g * hs)).astype(f),
        np.array([4, 2], np.int32),
        rng.standard_normal((d, batch, hs)).astype(f),
        rng.standard_normal((d, batch, hs)).astype(f),
        rng.standard_normal((d, 3 * hs)).astype(f),
    ]
    unit = {"h": rng.standard_normal((1, 3, 5)).astype(f), "c": rng.standard_normal((1, 3, 5)).astype(f)}
    unit["g"] = (3 * rng.standard_normal((1, 3, 20))).astype(f)
    return ins, unit


def _here(compiled: bool):
    ins, unit = _inputs()
    with pytest.MonkeyPatch.context() as m:
        if not compiled:
            m.setattr(recurrent, "available", lambda: False)
        names = ["X", "W", "R", "B", "L", "H0", "C0", "P"]
        op = CreateOperator("ONNXLSTM", names, ["Y", "Yh", "Yc"], hidden_size=5, direction="bidirectional")
        outs = run_op_on(op, ins)
        op = CreateOperator("LSTMUnit", ["h", "c", "g", "t"], ["ho", "co"], sequence_lengths=0)
        outs += run_op_on(op, [unit["h"], unit["c"], unit["g"], np.array([0], np.int32)])
    return outs


def test_without_scipy_the_numpy_loops_run_with_the_same_values(tmp_path):
    ins, unit = _inputs()
    np.savez(tmp_path / "in.npz", **{f"i{k}": a for k, a in enumerate(ins)}, **unit)
    env = dict(os.environ, PYTHONPATH=ROOT)
    proc = subprocess.run(
        [sys.executable, "-c", _CHILD, str(tmp_path / "in.npz"), str(tmp_path / "out.npz")],
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    got = np.load(tmp_path / "out.npz")
    got = [got[f"arr_{k}"] for k in range(len(got.files))]
    want = _here(compiled=False)
    assert len(got) == len(want) == 5
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b)
    if recurrent.available():  # and the compiled loops agree with them (their tanh is within a few ulp)
        for a, b in zip(_here(compiled=True), want):
            np.testing.assert_allclose(a, b, rtol=2e-5, atol=2e-6)
