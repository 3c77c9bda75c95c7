"""ONNX string ops (ONNXStringConcat, ONNXStringSplit, ONNXStringNormalizer, ONNXRegexFullMatch)
against references written here with Python's str methods; UTF-8 text in and out."""

import re

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import ArgumentError, ShapeError, TypeMismatchError
from framework.ops.testing import assert_reference_checks, run_op_on

WORDS = st.text(alphabet="ab ,é", max_size=6)


def _enc(values, shape):
    return np.array([v.encode() for v in values], dtype=object).reshape(shape)


@given(data=st.data())
@settings(max_examples=20, deadline=None)
def test_concat_broadcasts(data):
    x = _enc(data.draw(st.lists(WORDS, min_size=6, max_size=6)), (2, 3))
    y = _enc(data.draw(st.lists(WORDS, min_size=3, max_size=3)), (3,))

    def ref(x, y):
        return np.array([[x[i, j] + y[j] for j in range(3)] for i in range(2)], dtype=object)

    assert_reference_checks(CreateOperator("ONNXStringConcat", ["X", "Y"], ["Z"]), [x, y], ref)


@given(data=st.data())
@settings(max_examples=25, deadline=None)
def test_split_pads_to_the_longest(data):
    texts = data.draw(st.lists(WORDS, min_size=0, max_size=4))
    delimiter = data.draw(st.sampled_from(["", ",", " ", "ab"]))
    maxsplit = data.draw(st.sampled_from([-1, 0, 1, 2]))
    x = _enc(texts, (len(texts),))
    (y, z) = run_op_on(
        CreateOperator("ONNXStringSplit", ["X"], ["Y", "Z"], delimiter=delimiter, maxsplit=maxsplit), [x]
    )
    pieces = [t.split(delimiter or None, maxsplit) for t in texts]
    width = max((len(p) for p in pieces), default=0)
    assert y.shape == (len(texts), width) and z.tolist() == [len(p) for p in pieces]
    for row, p in zip(y, pieces):
        assert [v.decode() for v in row] == p + [""] * (width - len(p))


@pytest.mark.parametrize("shape", [(4,), (1, 4)])
def test_normalizer_removes_stopwords_then_changes_case(shape):
    x = _enc(["Monday", "tuesday", "MONDAY", "wednesday"], shape)
    op = CreateOperator("ONNXStringNormalizer", ["X"], ["Y"], case_change_action="UPPER", stopwords=["monday"])
    (y,) = run_op_on(op, [x])
    assert y.shape == ((2,) if len(shape) == 1 else (1, 2))
    assert [v.decode() for v in y.reshape(-1)] == ["TUESDAY", "WEDNESDAY"]
    op = CreateOperator("ONNXStringNormalizer", ["X"], ["Y"], is_case_sensitive=1, stopwords=["monday"])
    (y,) = run_op_on(op, [x])
    assert [v.decode() for v in y.reshape(-1)] == ["Monday", "tuesday", "MONDAY", "wednesday"]
    op = CreateOperator("ONNXStringNormalizer", ["X"], ["Y"], stopwords=["monday", "tuesday", "wednesday"])
    (y,) = run_op_on(op, [x])
    assert y.reshape(-1).tolist() == [b""]  # nothing kept: one empty string


@given(data=st.data())
@settings(max_examples=20, deadline=None)
def test_regex_full_match(data):
    pattern = data.draw(st.sampled_from([r"a+b?", r"[a-z]+@\w+\.com", r"(ab|é)*", r""]))
    texts = data.draw(st.lists(st.sampled_from(["a", "ab", "abb", "x@y.com", "é", "", "abé"]), min_size=1, max_size=5))
    x = _enc(texts, (len(texts),))
    op = CreateOperator("ONNXRegexFullMatch", ["X"], ["Y"], pattern=pattern)
    assert_reference_checks(op, [x], lambda x: np.array([re.fullmatch(pattern, t) is not None for t in texts]))


def test_errors_name_the_op_and_blob():
    with pytest.raises(TypeMismatchError, match="ONNXStringConcat.*'X'.*UTF-8"):
        run_op_on(
            CreateOperator("ONNXStringConcat", ["X", "Y"], ["Z"]), [np.array([b"\xff"], object), _enc(["a"], (1,))]
        )
    with pytest.raises(ShapeError, match="ONNXStringConcat.*do not broadcast"):
        run_op_on(
            CreateOperator("ONNXStringConcat", ["X", "Y"], ["Z"]), [_enc(["a", "b"], (2,)), _enc(["a"] * 3, (3,))]
        )
    with pytest.raises(ArgumentError, match="ONNXRegexFullMatch.*pattern"):
        run_op_on(CreateOperator("ONNXRegexFullMatch", ["X"], ["Y"], pattern="(unclosed"), [_enc(["a"], (1,))])
    with pytest.raises(ShapeError, match="ONNXStringNormalizer.*'X'"):
        run_op_on(CreateOperator("ONNXStringNormalizer", ["X"], ["Y"]), [_enc(["a"] * 4, (2, 2))])
