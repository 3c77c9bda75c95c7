"""ONNXCumSum/CumProd, ONNXTrilu, ONNXEyeLike, ONNXPad against loop references."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.ops.testing import arrays, assert_reference_checks, run_op_on, shapes


@pytest.mark.parametrize("kind", ["ONNXCumSum", "ONNXCumProd"])
@given(data=st.data())
@settings(max_examples=15, deadline=None)
def test_cumulative(kind, data):
    shape = data.draw(shapes(1, 3, 0, 4))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    exclusive, reverse = data.draw(st.integers(0, 1)), data.draw(st.integers(0, 1))
    dt = data.draw(st.sampled_from([np.float64, np.int32]))
    x = data.draw(arrays(shape, dt, st.integers(-3, 3)))
    a = axis % len(shape)

    def ref(x):
        out = np.zeros_like(x)
        n = x.shape[a]
        for pos in itertools.product(*map(range, x.shape)):
            i = pos[a]
            js = range(i, n) if reverse else range(0, i + 1)
            acc = 0 if kind == "ONNXCumSum" else 1
            for j in js:
                if exclusive and j == i:
                    continue
                src = list(pos)
                src[a] = j
                acc = acc + x[tuple(src)] if kind == "ONNXCumSum" else acc * x[tuple(src)]
            out[pos] = acc
        return out

    op = CreateOperator(kind, ["x"], ["y"], axis=axis, exclusive=exclusive, reverse=reverse)
    assert_reference_checks(op, [x], ref)


@given(data=st.data())
@settings(max_examples=20, deadline=None)
def test_trilu(data):
    shape = data.draw(shapes(2, 4, 0, 4))
    k, upper = data.draw(st.integers(-5, 5)), data.draw(st.integers(0, 1))
    x = data.draw(arrays(shape, np.float32))
    x.reshape(-1)[:1] = np.inf  # zeroed cells are 0, not inf * 0

    def ref(x):
        out = np.zeros_like(x)
        for pos in itertools.product(*map(range, x.shape)):
            i, j = pos[-2:]
            if (j - i >= k) if upper else (j - i <= k):
                out[pos] = x[pos]
        return out

    assert_reference_checks(CreateOperator("ONNXTrilu", ["x"], ["y"], k=k, upper=upper), [x], ref)


@pytest.mark.parametrize("dtype_code, dtype", [(0, np.int32), (1, np.float32), (7, np.int64), (9, np.bool_)])
def test_eye_like(dtype_code, dtype):
    x = np.zeros((3, 5), np.int32)
    for k in (-4, -1, 0, 2, 6):
        op = CreateOperator("ONNXEyeLike", ["x"], ["y"], k=k, dtype=dtype_code)
        assert_reference_checks(
            op, [x], lambda x, k=k: np.array([[j - i == k for j in range(5)] for i in range(3)], dtype)
        )


def _pad_ref(x, pads, mode, value):
    r = x.ndim
    # crop the negative pads, then map each output coordinate to a source coordinate
    x = x[tuple(slice(max(-pads[i], 0), x.shape[i] - max(-pads[r + i], 0)) for i in range(r))]
    before = [max(p, 0) for p in pads[:r]]
    out_shape = [x.shape[i] + before[i] + max(pads[r + i], 0) for i in range(r)]
    out = np.zeros(out_shape, x.dtype)
    for pos in itertools.product(*map(range, out_shape)):
        src, inside = [], True
        for i, p in enumerate(pos):
            n, s = x.shape[i], p - before[i]
            if 0 <= s < n:
                src.append(s)
                continue
            inside = False
            if mode == "edge":
                src.append(min(max(s, 0), n - 1))
            elif mode == "wrap":
                src.append(s % n)
            elif mode == "reflect":
                period = 2 * (n - 1) if n > 1 else 1
                s = s % period
                src.append(s if s < n else period - s)
        out[pos] = value if (mode == "constant" and not inside) else x[tuple(src)]
    return out


@pytest.mark.parametrize("mode", ["constant", "reflect", "edge", "wrap"])
@given(data=st.data())
@settings(max_examples=12, deadline=None)
def test_pad(mode, data):
    shape = data.draw(shapes(1, 3, 2, 4))
    r = len(shape)
    lo = -1 if mode == "constant" else 0
    pads = [data.draw(st.integers(lo, 3)) for _ in range(2 * r)]
    x = data.draw(arrays(shape, np.float32))
    value = np.float32(data.draw(st.sampled_from([0.0, 1.5])))
    op = CreateOperator("ONNXPad", ["x", "v"], ["y"], pads=pads, mode=mode)
    assert_reference_checks(op, [x, value], lambda x, v: _pad_ref(x, pads, mode, v))


def test_pad_errors():
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(FrameworkError, match="ONNXPad.*'x'"):
        run_op_on(CreateOperator("ONNXPad", ["x"], ["y"], pads=[1, 1]), [x])
    with pytest.raises(FrameworkError, match="ONNXPad"):
        run_op_on(CreateOperator("ONNXPad", ["x"], ["y"], pads=[0, -4, 0, 0]), [x])
    with pytest.raises(FrameworkError, match="ONNXPad"):
        run_op_on(CreateOperator("ONNXPad", ["x"], ["y"], pads=[0, 0, 0, 1], mode="spiral"), [x])


def test_bfloat16_moves_like_any_element_type():
    ml_dtypes = pytest.importorskip("ml_dtypes")
    bf = ml_dtypes.bfloat16
    x = np.arange(6, dtype=np.float32).reshape(2, 3).astype(bf)
    pad = CreateOperator("ONNXPad", ["x"], ["y"], pads=[0, 1, 1, 0], mode="edge")
    (y,) = run_op_on(pad, [x])
    assert y.dtype == bf
    np.testing.assert_array_equal(y.astype(np.float32), _pad_ref(x.astype(np.float32), [0, 1, 1, 0], "edge", 0))
    (t,) = run_op_on(CreateOperator("ONNXTrilu", ["x"], ["y"], upper=0), [x])
    assert t.dtype == bf
    np.testing.assert_array_equal(t.astype(np.float32), [[0, 0, 0], [3, 4, 0]])
