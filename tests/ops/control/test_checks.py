"""Conditional, Assert, EnforceFinite, Free, Crash (in a subprocess)."""

import subprocess
import sys

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.memory.workspace import Workspace
from framework.ops.testing import assert_reference_checks


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 5), st.integers(1, 4), st.sampled_from([np.float32, np.int64, np.float64]), st.data())
def test_conditional_selects_rows(n, m, dtype, data):
    cond = np.array(data.draw(st.lists(st.booleans(), min_size=n, max_size=n)), dtype=bool)
    t = (np.arange(n * m) + 1).reshape(n, m).astype(dtype)
    f = -t
    ref = np.array([t[i] if cond[i] else f[i] for i in range(n)], dtype=dtype).reshape(n, m)
    assert_reference_checks(CreateOperator("Conditional", ["c", "t", "f"], ["o"]), [cond, t, f], lambda *_: ref)


@pytest.mark.parametrize(
    "cond, t, f, msg",
    [
        (np.array([1, 0], np.int32), np.ones((2, 2)), np.ones((2, 2)), "bool"),
        (np.array([[True]]), np.ones((1, 2)), np.ones((1, 2)), "1-D"),
        (np.array([True, False]), np.ones((3, 2)), np.ones((3, 2)), "first dimension"),
        (np.array([True, False]), np.ones((2, 2)), np.ones((2, 3)), "same shape"),
        (np.array([True, False]), np.ones((2, 2)), np.ones((2, 2), np.float32), "same type"),
    ],
)
def test_conditional_errors(cond, t, f, msg):
    ws = Workspace()
    for k, v in zip("ctf", (cond, t, f)):
        ws.feed_blob(k, v)
    with pytest.raises(FrameworkError, match=msg):
        ws.run_operator_once(CreateOperator("Conditional", ["c", "t", "f"], ["o"]))
    assert not ws.has_blob("o")


@pytest.mark.parametrize("dtype", [np.bool_, np.int32, np.int64])
def test_assert(dtype):
    ws = Workspace()
    ws.feed_blob("ok", np.ones((2, 2), dtype))
    ws.run_operator_once(CreateOperator("Assert", ["ok"], []))
    ws.feed_blob("empty", np.zeros((0,), dtype))
    ws.run_operator_once(CreateOperator("Assert", ["empty"], []))
    bad = np.ones(5, dtype)
    bad[3] = 0
    ws.feed_blob("bad", bad)
    with pytest.raises(FrameworkError, match=r"element 3 in tensor 'bad'[\s\S]*Error message: custom"):
        ws.run_operator_once(CreateOperator("Assert", ["bad"], [], error_msg="custom"))
    ws.feed_blob("f", np.ones(2, np.float32))
    with pytest.raises(FrameworkError, match="bool, int32 or int64"):
        ws.run_operator_once(CreateOperator("Assert", ["f"], []))


def test_enforce_finite():
    ws = Workspace()
    ws.feed_blob("x", np.array([1.0, 2.0], np.float32))
    ws.run_operator_once(CreateOperator("EnforceFinite", ["x"], []))
    ws.feed_blob("x", np.array([1.0, np.nan, np.inf]))
    with pytest.raises(FrameworkError, match="NaN or inf: element 1"):
        ws.run_operator_once(CreateOperator("EnforceFinite", ["x"], []))
    ws.feed_blob("i", np.array([1]))
    with pytest.raises(FrameworkError, match="float"):
        ws.run_operator_once(CreateOperator("EnforceFinite", ["i"], []))


def test_free_resets_blobs():
    ws = Workspace()
    ws.feed_blob("a", np.ones(3, np.float32))
    ws.feed_blob("b", np.ones(3, np.float32))
    ws.run_operator_once(CreateOperator("Free", ["a", "b"], ["a", "b"]))
    assert ws.get_blob("a").is_empty and ws.get_blob("b").is_empty
    with pytest.raises(FrameworkError):
        ws.run_operator_once(CreateOperator("Free", ["a"], ["b"]))


def test_crash_aborts_the_process():
    code = (
        "from framework.core import CreateOperator\n"
        "from framework.memory.workspace import Workspace\n"
        "Workspace().run_operator_once(CreateOperator('Crash', [], []))\n"
        "print('survived')\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, timeout=120)
    assert proc.returncode != 0 and b"survived" not in proc.stdout
