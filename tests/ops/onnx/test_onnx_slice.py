"""ONNXSlice (run-time starts/ends/axes/steps) against an index-by-index reference of ONNX's rules."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.ops.testing import arrays, assert_inferred_shapes, assert_reference_checks, run_op_on, shapes


def _indices(d, start, end, step):
    """The indices ONNX's Slice visits along a dim of size d (walked one by one)."""
    start = start + d if start < 0 else start
    end = end + d if end < 0 else end
    lo, hi = (0, d) if step > 0 else (0, d - 1)
    start = min(max(start, lo), hi)
    end = min(max(end, 0 if step > 0 else -1), d if step > 0 else d - 1)
    out, i = [], start
    while (step > 0 and i < end) or (step < 0 and i > end):
        out.append(i)
        i += step
    return out


@given(data=st.data())
@settings(max_examples=40, deadline=None)
def test_slice(data):
    shape = data.draw(shapes(1, 3, 0, 5))
    r = len(shape)
    axes = data.draw(st.lists(st.integers(-r, r - 1), min_size=1, max_size=r, unique_by=lambda a: a % r))
    n = len(axes)
    big = st.sampled_from([-(2**40), 2**40])
    starts = [data.draw(st.one_of(st.integers(-7, 7), big)) for _ in range(n)]
    ends = [data.draw(st.one_of(st.integers(-7, 7), big)) for _ in range(n)]
    steps = [data.draw(st.sampled_from([-3, -2, -1, 1, 2, 3])) for _ in range(n)]
    x = data.draw(arrays(shape, np.float32))
    ins = [x] + [np.array(v, np.int64) for v in (starts, ends, axes, steps)]

    def ref(x, *_):
        y = x
        for a, s, e, k in zip(axes, starts, ends, steps):
            y = np.take(y, _indices(x.shape[a % r], s, e, k), axis=a % r)
        return y

    op = CreateOperator("ONNXSlice", ["x", "s", "e", "a", "k"], ["y"])
    outs = assert_reference_checks(op, ins, ref, check_inference=False)
    assert_inferred_shapes(op, ins, outs, require_known=False)


def test_slice_defaults_and_errors():
    x = np.arange(12, dtype=np.int32).reshape(3, 4)
    op = CreateOperator("ONNXSlice", ["x", "s", "e"], ["y"])
    assert_reference_checks(
        op, [x, np.array([1, -3]), np.array([3, 100])], lambda x, s, e: x[1:3, 1:], check_inference=False
    )
    with pytest.raises(FrameworkError, match="ONNXSlice.*'x'"):  # a zero step
        run_op_on(CreateOperator("ONNXSlice", ["x", "s", "e", "a", "k"], ["y"]),
                  [x, np.array([0]), np.array([2]), np.array([0]), np.array([0])])  # fmt: skip
    with pytest.raises(FrameworkError, match="ONNXSlice.*'e'"):
        run_op_on(op, [x, np.array([0, 1]), np.array([2])])
