"""ONNXGatherElements, ONNXScatterElements, ONNXGatherND, ONNXScatterND against loop references."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.ops.testing import arrays, assert_reference_checks, run_op_on, shapes

RED = {"add": lambda a, b: a + b, "mul": lambda a, b: a * b, "max": max, "min": min}


def _elements_case(data):
    shape = data.draw(shapes(1, 3, 1, 4))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    a = axis % len(shape)
    ishape = [data.draw(st.integers(1, d)) if k != a else data.draw(st.integers(0, 4)) for k, d in enumerate(shape)]
    idx = data.draw(arrays(ishape, np.int64, st.integers(-shape[a], shape[a] - 1)))
    x = data.draw(arrays(shape, np.float32))
    return x, idx, axis, a


@given(data=st.data())
@settings(max_examples=25, deadline=None)
def test_gather_elements(data):
    x, idx, axis, a = _elements_case(data)

    def ref(x, idx):
        out = np.zeros(idx.shape, x.dtype)
        for pos in itertools.product(*map(range, idx.shape)):
            src = list(pos)
            src[a] = idx[pos] % x.shape[a]
            out[pos] = x[tuple(src)]
        return out

    assert_reference_checks(CreateOperator("ONNXGatherElements", ["x", "i"], ["y"], axis=axis), [x, idx], ref)


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
@given(data=st.data())
@settings(max_examples=12, deadline=None)
def test_scatter_elements(reduction, data):
    x, idx, axis, a = _elements_case(data)
    if reduction == "none":  # distinct targets: ONNX leaves repeated writes undefined
        m = min(idx.shape[a], x.shape[a])
        idx = np.take(idx, np.arange(m), axis=a)
        idx[...] = np.arange(m).reshape([-1 if k == a else 1 for k in range(x.ndim)])
    upd = data.draw(arrays(idx.shape, np.float32))
    op = CreateOperator("ONNXScatterElements", ["x", "i", "u"], ["y"], axis=axis, reduction=reduction)

    def ref(x, idx, upd):
        out = x.copy()
        for pos in itertools.product(*map(range, idx.shape)):
            dst = list(pos)
            dst[a] = idx[pos] % x.shape[a]
            dst = tuple(dst)
            out[dst] = upd[pos] if reduction == "none" else RED[reduction](out[dst], upd[pos])
        return out

    assert_reference_checks(op, [x, idx, upd], ref)


@given(data=st.data())
@settings(max_examples=25, deadline=None)
def test_gather_nd(data):
    shape = data.draw(shapes(1, 4, 1, 3))
    b = data.draw(st.integers(0, len(shape) - 1))
    k = data.draw(st.integers(1, len(shape) - b))
    mid = data.draw(st.lists(st.integers(0, 3), max_size=2))
    cols = [data.draw(arrays(list(shape[:b]) + mid + [1], np.int64, st.integers(-shape[b + j], shape[b + j] - 1)))
            for j in range(k)]  # fmt: skip
    idx = np.concatenate(cols, axis=-1)
    x = data.draw(arrays(shape, np.float64))

    def ref(x, idx):
        out = np.zeros(tuple(idx.shape[:-1]) + tuple(x.shape[b + k :]), x.dtype)
        for pos in itertools.product(*map(range, idx.shape[:-1])):
            coords = tuple(int(c) % x.shape[b + j] for j, c in enumerate(idx[pos]))
            out[pos] = x[tuple(pos[:b]) + coords]
        return out

    assert_reference_checks(CreateOperator("ONNXGatherND", ["x", "i"], ["y"], batch_dims=b), [x, idx], ref)


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
def test_scatter_nd(reduction):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 3, 2)).astype(np.float32)
    idx = np.array([[1, 2], [3, 0], [1, 2] if reduction != "none" else [0, 0]], np.int64)
    upd = rng.standard_normal((3, 2)).astype(np.float32)

    def ref(x, idx, upd):
        out = x.copy()
        for n in range(idx.shape[0]):
            i, j = idx[n]
            for c in range(2):
                out[i, j, c] = upd[n, c] if reduction == "none" else RED[reduction](out[i, j, c], upd[n, c])
        return out

    op = CreateOperator("ONNXScatterND", ["x", "i", "u"], ["y"], reduction=reduction)
    assert_reference_checks(op, [x, idx, upd], ref)


def test_errors_name_op_and_blob():
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(FrameworkError, match="ONNXGatherElements.*'i'"):
        run_op_on(CreateOperator("ONNXGatherElements", ["x", "i"], ["y"]), [x, np.array([[2]], np.int64)])
    with pytest.raises(FrameworkError, match="ONNXScatterND.*'u'"):
        run_op_on(CreateOperator("ONNXScatterND", ["x", "i", "u"], ["y"]),
                  [x, np.array([[1]], np.int64), np.zeros((1, 2), np.float32)])  # fmt: skip
    with pytest.raises(FrameworkError, match="ONNXGatherND"):
        run_op_on(CreateOperator("ONNXGatherND", ["x", "i"], ["y"]), [x, np.zeros((1, 3), np.int64)])
