"""ONNXCol2Im and ONNXTensorScatter against loop references."""

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.ops.testing import arrays, assert_reference_checks, run_op_on


@given(data=st.data())
@settings(max_examples=20, deadline=None)
def test_col2im(data):
    d = data.draw(st.integers(1, 2))
    image = [data.draw(st.integers(1, 5)) for _ in range(d)]
    block = [data.draw(st.integers(1, 3)) for _ in range(d)]
    dil = [data.draw(st.integers(1, 2)) for _ in range(d)]
    strides = [data.draw(st.integers(1, 2)) for _ in range(d)]
    pads = [data.draw(st.integers(0, 1)) for _ in range(2 * d)]
    blocks = [(image[i] + pads[i] + pads[d + i] - dil[i] * (block[i] - 1) - 1) // strides[i] + 1 for i in range(d)]
    if min(blocks) < 1:
        return
    n, c = data.draw(st.integers(1, 2)), data.draw(st.integers(1, 2))
    k = int(np.prod(block))
    x = data.draw(arrays([n, c * k, int(np.prod(blocks))], np.float64))

    def ref(x):
        out = np.zeros([n, c] + image)
        for b, ch in itertools.product(range(n), range(c)):
            for kk, off in enumerate(itertools.product(*map(range, block))):
                for ll, pos in enumerate(itertools.product(*map(range, blocks))):
                    idx = [pos[i] * strides[i] - pads[i] + off[i] * dil[i] for i in range(d)]
                    if all(0 <= idx[i] < image[i] for i in range(d)):
                        out[(b, ch, *idx)] += x[b, ch * k + kk, ll]
        return out

    op = CreateOperator(
        "ONNXCol2Im", ["x"], ["y"], image_shape=image, block_shape=block, dilations=dil, strides=strides, pads=pads
    )
    assert_reference_checks(op, [x], ref)


@pytest.mark.parametrize("mode", ["linear", "circular"])
def test_tensor_scatter(mode):
    rng = np.random.default_rng(0)
    cache = rng.standard_normal((2, 3, 5, 2)).astype(np.float32)
    upd = rng.standard_normal((2, 3, 2, 2)).astype(np.float32)
    starts = np.array([1, 4 if mode == "circular" else 3], np.int64)

    def ref(cache, upd, starts):
        out = cache.copy()
        for b, h, j in itertools.product(range(2), range(3), range(2)):
            out[b, h, (starts[b] + j) % 5] = upd[b, h, j]
        return out

    op = CreateOperator("ONNXTensorScatter", ["c", "u", "w"], ["y"], mode=mode, axis=2)
    assert_reference_checks(op, [cache, upd, starts], ref)
    if mode == "linear":
        with pytest.raises(FrameworkError, match="ONNXTensorScatter"):
            run_op_on(op, [cache, upd, np.array([0, 4], np.int64)])
    with pytest.raises(FrameworkError, match="ONNXTensorScatter.*'u'"):
        run_op_on(op, [cache, upd[:, :2], starts])


def test_col2im_errors():
    op = CreateOperator("ONNXCol2Im", ["x"], ["y"], image_shape=[3, 3], block_shape=[2, 2])
    with pytest.raises(FrameworkError, match="ONNXCol2Im.*'x'"):
        run_op_on(op, [np.zeros((1, 4, 5), np.float32)])  # 4 windows fit, not 5
