"""caffe2.python.functional: ops called as functions on numpy arrays (references written in numpy)."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra.numpy import arrays

from framework.caffe2.python.functional import Functional, namedtupledict
from framework.errors import FrameworkError


@settings(max_examples=10, deadline=None)
@given(arrays(np.float32, st.tuples(st.integers(1, 4), st.integers(1, 5)), elements=st.floats(-5, 5, width=32)))
def test_relu_matches_numpy(x):
    out = Functional.Relu(x)
    np.testing.assert_array_equal(out.output_0, np.maximum(x, 0))
    np.testing.assert_array_equal(out["output_0"], out[0])


def test_concat_gives_both_outputs_and_split_needs_a_count():
    a, b = np.ones((2, 3), np.float32), np.zeros((2, 2), np.float32)
    res, info = Functional.Concat(a, b, axis=1)
    np.testing.assert_array_equal(res, np.concatenate([a, b], axis=1))
    np.testing.assert_array_equal(info, [3, 2])
    parts = Functional.Split(res, axis=1, split=[3, 2], num_output=2)
    np.testing.assert_array_equal(parts.output_0, a)
    np.testing.assert_array_equal(parts.output_1, b)
    with pytest.raises(ValueError, match="pass num_output"):
        Functional.Split(res, axis=1)


def test_bad_counts_and_unknown_ops():
    with pytest.raises(ValueError, match="takes 3 inputs, got 1"):
        Functional.FC(np.ones((1, 2), np.float32))
    with pytest.raises(ValueError, match="num_output=3"):
        Functional.Relu(np.ones(2, np.float32), num_output=3)
    with pytest.raises(FrameworkError, match="Relu"):
        Functional.Reluu


def test_namedtupledict_renames_invalid_fields():
    t = namedtupledict("t", ["0", "x"])(5, 6)
    assert t["0"] == 5 and t["x"] == 6 and t.x == 6 and t[0] == 5
