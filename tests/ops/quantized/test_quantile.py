"""Quantile: Caffe2's bisection replayed element by element (float32 or float64 scalars), Caffe2's own
property checks (enough values <= the result, the result within the tolerance), ties, empty inputs
among non-empty ones, and the errors."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import ArgumentError, FrameworkError, ShapeError, TypeMismatchError
from framework.ops.testing import assert_inferred_shapes, run_op_on


def ref_quantile(arrays, q, use_abs, tol):
    """QuantileOp::DoRunWithType with a Python loop per count; None where Caffe2 gives up (precision)."""
    t = arrays[0].dtype.type
    vals = [t(abs(v)) if use_abs else t(v) for a in arrays for v in a.reshape(-1).tolist()]
    n = len(vals)
    target = int(np.ceil(np.float32(n) * np.float32(q)))  # int64 * float: float arithmetic
    lo, hi = t(min(vals)), t(max(vals))

    def count(th):
        return sum(1 for v in vals if v <= th)

    if target == 0:
        return lo
    if target == n:
        return hi
    if count(lo) >= target:
        return lo
    tol_t = t(np.float32(tol))
    while abs(t(hi - lo)) > t(tol_t * t(abs(hi) + abs(lo))):
        mid = t(np.float64(lo) + np.float64(t(hi - lo)) / 2.0)
        c = count(mid)
        if c > target:
            if hi == mid:
                return None
            hi = mid
        elif c < target:
            if lo == mid:
                return None
            lo = mid
        else:
            return mid
    return hi


values = st.one_of(
    st.floats(-100, 100, width=32, allow_subnormal=False),
    st.sampled_from([0.0, 1.0, -2.0, 2.0, 0.5]),  # ties
)


@settings(max_examples=40, deadline=None)
@given(
    data=st.data(),
    dtype=st.sampled_from([np.float32, np.float64]),
    n_inputs=st.integers(1, 3),
    q=st.one_of(st.floats(0, 1), st.sampled_from([0.0, 1.0, 0.5, 1e-6, 1 - 1e-6])),
    use_abs=st.booleans(),
    tol=st.sampled_from([1e-1, 1e-3, 1e-4, 1e-5]),
)
def test_quantile_matches_caffe2_bisection(data, dtype, n_inputs, q, use_abs, tol):
    arrays = []
    for _ in range(n_inputs):
        shape = data.draw(st.lists(st.integers(0, 6), min_size=1, max_size=2))
        size = int(np.prod(shape))
        arrays.append(np.array(data.draw(st.lists(values, min_size=size, max_size=size)), dtype).reshape(shape))
    if sum(a.size for a in arrays) == 0:
        arrays[0] = np.array([data.draw(values)], dtype)
    names = [f"x{i}" for i in range(n_inputs)]
    op = CreateOperator("Quantile", names, ["q"], quantile=q, abs=use_abs, tol=tol)
    expected = ref_quantile(arrays, q, use_abs, tol)
    if expected is None:
        with pytest.raises(FrameworkError, match="precision"):
            run_op_on(op, arrays)
        return
    (got,) = run_op_on(op, arrays)
    assert got.shape == (1,) and got.dtype == np.dtype(dtype)
    assert got[0] == expected, (got, expected)
    assert_inferred_shapes(op, arrays, [got])
    # Caffe2's own property checks (quantile_test.py)
    cat = np.concatenate([a.reshape(-1) for a in arrays]).astype(np.float64)
    cat = np.abs(cat) if use_abs else cat
    target = np.ceil(np.float32(cat.size) * np.float32(q))
    assert np.sum(cat <= got[0]) >= target


@pytest.mark.parametrize("q,abs_,tol", [(0.2, 1, 1e-4), (1e-6, 0, 1e-3), (1 - 1e-6, 1, 1e-5), (0.168, 1, 1e-4)])
def test_caffe2_cases(q, abs_, tol):
    """quantile_test.py's four cases: several tensors of rand values."""
    rng = np.random.default_rng(7)
    inputs = [rng.random(rng.integers(5, 100)) for _ in range(3)] + [rng.random((rng.integers(5, 20), 7))]
    (got,) = run_op_on(
        CreateOperator("Quantile", [f"t{i}" for i in range(4)], ["q"], quantile=q, abs=abs_, tol=tol), inputs
    )
    cat = np.concatenate([x.reshape(-1) for x in inputs])
    target = np.ceil(cat.size * q)
    assert np.sum(cat <= got[0]) >= target
    assert np.sum(cat <= got[0] - 2.5 * tol * abs(got[0])) <= target
    assert got[0] == ref_quantile(inputs, q, bool(abs_), tol)


def test_endpoints_ties_and_abs():
    x = np.array([-5.0, 1.0, 1.0, 1.0, 3.0], np.float32)
    run = lambda **kw: run_op_on(CreateOperator("Quantile", ["x"], ["q"], **kw), [x])[0][0]  # noqa: E731
    assert run(quantile=0.0, abs=False) == -5.0  # target 0: the minimum
    assert run(quantile=1.0, abs=False) == 3.0  # target numel: the maximum
    assert run(quantile=0.5, abs=False) == 1.0  # target 3: no mid counts exactly 3, hi stays at 1
    assert run(quantile=1.0) == 5.0  # |x| by default
    assert run(quantile=0.55) == 1.0  # the three tied 1s are the lowest |x|: target 3 <= count(<= 1)


def test_empty_tensor_among_others_and_all_empty():
    e, x = np.zeros((0, 3), np.float32), np.array([4.0, 2.0], np.float32)
    assert run_op_on(CreateOperator("Quantile", ["e", "x"], ["q"], quantile=1.0), [e, x])[0][0] == 4.0
    with pytest.raises(ShapeError, match="Quantile.*no elements"):
        run_op_on(CreateOperator("Quantile", ["e"], ["q"], quantile=0.5), [e])


def test_errors_name_op_and_blob():
    x = np.ones(3, np.float32)
    with pytest.raises(ArgumentError, match="quantile"):
        run_op_on(CreateOperator("Quantile", ["x"], ["q"], quantile=1.5), [x])
    with pytest.raises(ArgumentError, match="quantile"):
        run_op_on(CreateOperator("Quantile", ["x"], ["q"]), [x])  # Caffe2's default -1 fails too
    with pytest.raises(ArgumentError, match="tol"):
        run_op_on(CreateOperator("Quantile", ["x"], ["q"], quantile=0.5, tol=0.0), [x])
    with pytest.raises(TypeMismatchError, match="'y'.*float64"):
        run_op_on(CreateOperator("Quantile", ["x", "y"], ["q"], quantile=0.5), [x, x.astype(np.float64)])
    with pytest.raises(TypeMismatchError, match="'xi'"):
        run_op_on(CreateOperator("Quantile", ["xi"], ["q"], quantile=0.5), [np.ones(3, np.int32)])
    with pytest.raises(ShapeError, match="Quantile.*NaN"):
        run_op_on(CreateOperator("Quantile", ["x"], ["q"], quantile=0.5), [np.array([1.0, np.nan], np.float32)])
    with pytest.raises(FrameworkError, match="precision"):
        vals = np.array([1.0, 1.0 + 2**-23, 1.0 + 2**-23], np.float32)  # no float32 between lo and hi
        run_op_on(CreateOperator("Quantile", ["x"], ["q"], quantile=0.5, tol=1e-12), [vals])


def test_infinity_gives_the_upper_end():
    x = np.array([1.0, 2.0, np.inf, 3.0], np.float32)
    assert run_op_on(CreateOperator("Quantile", ["x"], ["q"], quantile=0.5), [x])[0][0] == np.inf
