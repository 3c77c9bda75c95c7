"""ONNXTopK, ONNXUnique, ONNXOneHot, ONNXCompress, ONNXNonZero, ONNXEinsum against plain-Python references."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.ops.testing import arrays, assert_inferred_shapes, assert_reference_checks, run_op_on, shapes


def _value_shaped(op, inputs, ref):
    """Outputs whose size depends on the values: inference may leave them unknown, never wrong."""
    outs = assert_reference_checks(op, inputs, ref, check_inference=False)
    assert_inferred_shapes(op, inputs, outs, require_known=False)


@given(data=st.data())
@settings(max_examples=25, deadline=None)
def test_topk(data):
    shape = data.draw(shapes(1, 3, 1, 5))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    a = axis % len(shape)
    k = data.draw(st.integers(0, shape[a]))
    largest = data.draw(st.integers(0, 1))
    x = data.draw(arrays(shape, np.int32, st.integers(-2, 2)))  # many ties

    def ref(x):
        xm = np.moveaxis(x, a, -1)
        vals, inds = np.zeros(xm.shape[:-1] + (k,), x.dtype), np.zeros(xm.shape[:-1] + (k,), np.int64)
        for pos in itertools.product(*map(range, xm.shape[:-1])):
            row = list(xm[pos])
            order = sorted(range(len(row)), key=lambda i: (-row[i] if largest else row[i], i))[:k]
            vals[pos], inds[pos] = [row[i] for i in order], order
        return [np.moveaxis(vals, -1, a), np.moveaxis(inds, -1, a)]

    op = CreateOperator("ONNXTopK", ["x"], ["v", "i"], k=k, axis=axis, largest=largest)
    assert_reference_checks(op, [x], ref)


@pytest.mark.parametrize("sorted_", [0, 1])
@pytest.mark.parametrize("axis", [None, 0, 1])
def test_unique(sorted_, axis):
    x = np.array([[2, 1, 1], [0, 3, 3], [2, 1, 1], [0, 3, 3]], np.int64)
    if axis == 1:
        x = x.T.copy()
    items = (
        [x.reshape(-1)[i] for i in range(x.size)]
        if axis is None
        else [tuple(np.take(x, i, axis)) for i in range(x.shape[axis])]
    )

    def ref(x):
        seen = []
        for it in items:
            if it not in seen:
                seen.append(it)
        if sorted_:
            seen = sorted(seen)
        first = [items.index(s) for s in seen]
        inv = [seen.index(it) for it in items]
        counts = [items.count(s) for s in seen]
        y = np.array(seen, x.dtype) if axis is None else np.stack([np.array(s) for s in seen], axis=axis)
        return [y, np.array(first, np.int64), np.array(inv, np.int64), np.array(counts, np.int64)]

    args = {} if axis is None else {"has_axis": 1, "axis": axis}
    op = CreateOperator("ONNXUnique", ["x"], ["y", "f", "inv", "c"], sorted=sorted_, **args)
    _value_shaped(op, [x], ref)


@pytest.mark.parametrize("axis", [-1, 0, 1])
def test_one_hot(axis):
    idx = np.array([[0, -1, 5], [2, -4, 1]], np.float32)  # 5 and -4 are out of range: all off
    values = np.array([-2, 7], np.int64)

    def ref(idx, values):
        out = np.full((2, 3, 3), values[0], np.int64)
        for i, j in itertools.product(range(2), range(3)):
            v = int(idx[i, j])
            v = v + 3 if v < 0 else v
            if 0 <= v < 3:
                out[i, j, v] = values[1]
        return np.moveaxis(out, -1, axis)

    op = CreateOperator("ONNXOneHot", ["i", "v"], ["y"], depth=3, axis=axis)
    assert_reference_checks(op, [idx, values], ref)


@given(data=st.data())
@settings(max_examples=20, deadline=None)
def test_compress_and_nonzero(data):
    shape = data.draw(shapes(1, 3, 0, 4))
    x = data.draw(arrays(shape, np.float32, st.sampled_from([0.0, 1.0, -2.5])))
    has_axis = data.draw(st.integers(0, 1))
    axis = data.draw(st.integers(0, len(shape) - 1))
    n = shape[axis] if has_axis else x.size
    cond = np.array(data.draw(st.lists(st.booleans(), min_size=0, max_size=n)), bool)

    def ref(x, cond):
        if not has_axis:
            return np.array([v for v, c in zip(x.reshape(-1), cond) if c], x.dtype)
        keep = [i for i, c in enumerate(cond) if c]
        return np.take(x, keep, axis=axis)

    op = CreateOperator("ONNXCompress", ["x", "c"], ["y"], has_axis=has_axis, axis=axis)
    _value_shaped(op, [x, cond], ref)
    coords = [pos for pos in itertools.product(*map(range, shape)) if x[pos] != 0]
    nz = np.array(coords, np.int64).reshape(-1, len(shape)).T
    _value_shaped(CreateOperator("ONNXNonZero", ["x"], ["y"]), [x], lambda x: nz)


def test_einsum():
    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((2, 3, 4)), rng.standard_normal((2, 4, 5))
    bmm = CreateOperator("ONNXEinsum", ["a", "b"], ["y"], equation="bij, bjk -> bik")
    _value_shaped(bmm, [a, b], lambda a, b: np.stack([a[i] @ b[i] for i in range(2)]))
    m = rng.standard_normal((3, 3))
    diag = CreateOperator("ONNXEinsum", ["m"], ["y"], equation="ii")  # implicit mode: the trace
    _value_shaped(diag, [m], lambda m: np.array(sum(m[i, i] for i in range(3))))
    with pytest.raises(FrameworkError, match="ONNXEinsum"):
        run_op_on(CreateOperator("ONNXEinsum", ["a", "b"], ["y"], equation="ij->i"), [a, b])
    with pytest.raises(FrameworkError, match="ONNXEinsum"):
        run_op_on(CreateOperator("ONNXEinsum", ["a", "b"], ["y"], equation="ij,jk->ik"), [a, b])
