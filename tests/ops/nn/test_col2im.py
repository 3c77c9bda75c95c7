"""Col2Im is the adjoint of Im2Col: <Im2Col(x), c> == <x, Col2Im(c)>."""

import numpy as np
from hypothesis import given
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.ops.testing import assert_reference_checks, run_op_on


@given(
    n=st.integers(1, 2),
    c=st.integers(1, 3),
    h=st.integers(3, 6),
    w=st.integers(3, 6),
    k=st.integers(1, 3),
    stride=st.integers(1, 2),
    pad=st.integers(0, 1),
    order=st.sampled_from(["NCHW", "NHWC"]),
    seed=st.integers(0, 1000),
)
def test_col2im_is_the_adjoint_of_im2col(n, c, h, w, k, stride, pad, order, seed):
    rng = np.random.default_rng(seed)
    shape = (n, c, h, w) if order == "NCHW" else (n, h, w, c)
    x = rng.standard_normal(shape)
    args = dict(kernel=k, stride=stride, pad=pad, order=order)
    (cols,) = run_op_on(CreateOperator("Im2Col", ["X"], ["Y"], **args), [x])
    probe = rng.standard_normal(cols.shape)

    def adjoint(dy, img):
        # Col2Im(probe) is the gradient of <Im2Col(x), probe> w.r.t. x: one-hot columns reproduce it.
        out = np.zeros_like(img)
        flat = out.reshape(-1)
        for i in range(img.size):
            e = np.zeros(img.size)
            e[i] = 1.0
            (ci,) = run_op_on(CreateOperator("Im2Col", ["X"], ["Y"], **args), [e.reshape(img.shape)])
            flat[i] = float(np.sum(ci * dy))
        return out

    op = CreateOperator("Col2Im", ["dY", "X"], ["dX"], **args)
    (back,) = assert_reference_checks(op, [probe, x], adjoint)
    np.testing.assert_allclose(np.sum(cols * probe), np.sum(x * back), rtol=1e-9, atol=1e-9)
