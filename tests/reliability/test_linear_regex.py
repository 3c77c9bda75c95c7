"""The linear-time regex engine of ONNX RegexFullMatch: the same answers as a backtracking engine on
ordinary patterns (Python's ``re`` in ASCII mode as the independent reference), no hang on the
catastrophic ones, and the constructs that need backtracking refused."""

from __future__ import annotations

import re
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.errors import ArgumentError
from framework.memory.workspace import Workspace
from framework.ops.onnx.linear_regex import LinearRegex
from framework.proto.args import make_argument
from framework.proto.framework_pb2 import OperatorDef

PATTERNS = [
    r"a+b*",
    r"(ab|a)*c?",
    r"[a-c]{2,4}",
    r"x?(a|b|)+",
    r"\d+\.\d*",
    r"[^ab]*a.",
    r"(?i)AB+c",
    r"\w+\s\w+",
    r"^a(b{0,2})c$",
    r"a\b.*",
    r"(a*)*b",
    r"[\d\s]+|z",
    r".*",
    r"a{3}",
    r"(?s)a.b",
]
TEXT = st.text(alphabet="abcxzAB 19.\n_", max_size=12)


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(PATTERNS), TEXT)
def test_same_answers_as_backtracking(pattern, text):
    want = re.fullmatch(pattern, text, re.ASCII) is not None
    assert LinearRegex(pattern).fullmatch(text) == want


@pytest.mark.parametrize("pattern", [r"(a+)+$", r"(a|a)*$", r"(a|aa)+$", r"(a*)*b", r"(.*a){12}"])
def test_catastrophic_patterns_are_linear(pattern):
    text = "a" * 2000 + "!"
    t = time.perf_counter()
    assert LinearRegex(pattern).fullmatch(text) is False
    assert time.perf_counter() - t < 20.0  # backtracking would take longer than the age of the universe


@pytest.mark.parametrize("pattern", [r"(a)\1", r"a(?=b)b", r"(?<!x)a", r"(?m)^a$", r"(a{1000}){1000}"])
def test_refused_constructs(pattern):
    with pytest.raises(ValueError):
        LinearRegex(pattern)


def _op(pattern):
    op = OperatorDef(type="ONNXRegexFullMatch", input=["x"], output=["y"])
    op.arg.append(make_argument("pattern", pattern))
    return op


def test_op_hostile_pattern_from_model_finishes():
    ws = Workspace()
    ws.feed_blob("x", np.array([b"a" * 28 + b"b", b"aaa"], object))
    t = time.perf_counter()
    ws.run_operator_once(_op("(a+)+$"))
    assert time.perf_counter() - t < 2.0  # Python's re: 2^28 backtracking steps
    np.testing.assert_array_equal(ws.fetch_blob("y"), [False, True])


def test_op_refuses_backreference():
    ws = Workspace()
    ws.feed_blob("x", np.array([b"aa"], object))
    with pytest.raises(ArgumentError, match="pattern"):
        ws.run_operator_once(_op(r"(a)\1"))
