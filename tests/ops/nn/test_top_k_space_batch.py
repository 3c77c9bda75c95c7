"""TopK, FlexibleTopK, SpaceToBatch, BatchToSpace, IntegralImage, StumpFunc, StumpFuncIndex,
MultiClassAccuracy and GivenTensorInt16Fill against loop references."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.ops import get_gradient_for_op
from framework.ops.testing import arrays, assert_gradient_checks, assert_reference_checks, run_op_on, shapes

S = settings(max_examples=20, deadline=None)
TIES = st.sampled_from([0.0, 1.0, 2.0, -1.5])  # few values: many ties


def ref_topk(x, k, axis):
    a = axis % x.ndim
    xm = np.moveaxis(x, a, -1)
    vals = np.zeros(xm.shape[:-1] + (k,), x.dtype)
    inds = np.full(xm.shape[:-1] + (k,), -1, np.int64)
    for pos in np.ndindex(*xm.shape[:-1]):
        row = list(xm[pos])
        order = sorted(range(len(row)), key=lambda i: (-row[i], i))[:k]
        vals[pos][: len(order)] = [row[i] for i in order]
        inds[pos][: len(order)] = order
    return np.moveaxis(vals, -1, a), np.moveaxis(inds, -1, a)


@given(data=st.data())
@S
def test_top_k(data):
    x = data.draw(arrays(data.draw(shapes(1, 3, 1, 4)), np.float32, elements=TIES))
    axis = data.draw(st.sampled_from([-1] + list(range(x.ndim))))
    k = data.draw(st.integers(1, 5))
    op = CreateOperator("TopK", ["X"], ["V", "I", "F"], k=k, axis=axis)

    def ref(x):
        v, i = ref_topk(x, k, axis)
        a = axis % x.ndim
        flat = np.full(i.shape, -1, np.int64)
        for pos in np.ndindex(*i.shape):
            if i[pos] >= 0:
                src = list(pos)
                src[a] = i[pos]
                flat[pos] = np.ravel_multi_index(src, x.shape)
        return [v, i, flat.reshape(-1)]

    assert_reference_checks(op, [x], ref)


@given(data=st.data())
@S
def test_top_k_gradient(data):
    x = data.draw(arrays(data.draw(shapes(1, 3, 1, 4)), np.float64, elements=st.floats(-2, 2)))
    if len(set(x.reshape(-1).tolist())) != x.size:
        return  # central differences need distinct values
    k = data.draw(st.integers(1, 4))
    op = CreateOperator("TopK", ["X"], ["V", "I"], k=k)
    assert_gradient_checks(op, [x], 0)
    ops, _ = get_gradient_for_op(op, ["V_grad", None])
    assert [(o.type, list(o.input)) for o in ops] == [("TopKGradient", ["V_grad", "I", "X"])]


def test_top_k_errors():
    with pytest.raises(FrameworkError, match="TopK.*'k'"):
        run_op_on(CreateOperator("TopK", ["X"], ["V", "I"], k=0), [np.ones(3, np.float32)])
    with pytest.raises(FrameworkError, match="TopK"):
        run_op_on(CreateOperator("TopK", ["X"], ["V", "I"], k=1, axis=3), [np.ones(3, np.float32)])


@given(data=st.data())
@S
def test_flexible_top_k(data):
    shape = data.draw(shapes(1, 3, 1, 4))
    x = data.draw(arrays(shape, np.float64, elements=st.floats(-2, 2, width=16)))
    rows = int(np.prod(shape[:-1]))
    k = np.array(data.draw(st.lists(st.integers(1, shape[-1]), min_size=rows, max_size=rows)), np.int64)
    k = k.reshape(shape[:-1] + (1,))

    def ref(x, k):
        vals, inds = [], []
        for r, kk in zip(x.reshape(rows, -1), k.reshape(-1)):
            order = sorted(range(len(r)), key=lambda i: (-r[i], i))[:kk]
            vals += [r[i] for i in order]
            inds += order
        return [np.array(vals), np.array(inds, np.int64)]

    op = CreateOperator("FlexibleTopK", ["X", "K"], ["V", "I"])
    assert_reference_checks(op, [x, k], ref, check_inference=False)
    if len(set(x.reshape(-1).tolist())) == x.size:
        assert_gradient_checks(op, [x, k], 0, check_inference=False)


@given(data=st.data(), bs=st.integers(1, 3), pad=st.integers(0, 2), pad_t=st.one_of(st.none(), st.integers(0, 2)))
@S
def test_space_to_batch_and_back(data, bs, pad, pad_t):
    top = pad if pad_t is None else pad_t
    h = bs * data.draw(st.integers(1, 3)) - top - pad
    w = bs * data.draw(st.integers(1, 3)) - 2 * pad
    if h < 1 or w < 1:
        return
    x = data.draw(arrays((data.draw(st.integers(1, 2)), 2, h, w), np.float64))
    kw = dict(block_size=bs, pad=pad) | ({} if pad_t is None else {"pad_t": pad_t})

    def ref(x):
        n, c = x.shape[:2]
        p = np.zeros((n, c, h + top + pad, w + 2 * pad))
        p[:, :, top : top + h, pad : pad + w] = x
        oh, ow = p.shape[2] // bs, p.shape[3] // bs
        out = np.zeros((n * bs * bs, c, oh, ow))
        for ob in range(out.shape[0]):
            b, off = ob % n, ob // n
            for i in range(oh):
                for j in range(ow):
                    out[ob, :, i, j] = p[b, :, i * bs + off // bs, j * bs + off % bs]
        return out

    op = CreateOperator("SpaceToBatch", ["X"], ["Y"], **kw)
    (y,) = assert_reference_checks(op, [x], ref)
    back = CreateOperator("BatchToSpace", ["Y"], ["Z"], **kw)
    assert_reference_checks(back, [y], lambda y: x)
    assert_gradient_checks(op, [x], 0)
    assert_gradient_checks(back, [y], 0)


@given(data=st.data())
@S
def test_integral_image(data):
    x = data.draw(arrays(tuple(data.draw(st.lists(st.integers(1, 3), min_size=4, max_size=4))), np.float64))

    def ref(x):
        n, c, h, w = x.shape
        y = np.zeros((n, c, h + 1, w + 1))
        for i in range(1, h + 1):
            for j in range(1, w + 1):
                y[:, :, i, j] = x[:, :, :i, :j].sum(axis=(2, 3))
        return y

    op = CreateOperator("IntegralImage", ["X"], ["Y"])
    assert_reference_checks(op, [x], ref)
    dy = data.draw(arrays(tuple(d + (k > 1) for k, d in enumerate(x.shape)), np.float64))

    def caffe2_gradient(x, dy):
        # Caffe2's kernel: prefix sums of dY over its first H rows and W columns (not the adjoint)
        n, c, h, w = x.shape
        dx = np.zeros_like(x)
        for i in range(h):
            for j in range(w):
                dx[:, :, i, j] = dy[:, :, : i + 1, : j + 1].sum(axis=(2, 3))
        return dx

    grad = CreateOperator("IntegralImageGradient", ["X", "dY"], ["dX"])
    assert_reference_checks(grad, [x, dy], caffe2_gradient)


def test_integral_image_gradient_matches_caffe2_golden_output():
    """Caffe2's recorded output for integral_image_ops_test.test_integral_image_gradient_ops (dY's first
    three rows and columns of its 8 x 8, and the matching corner of dX)."""
    dy = np.zeros((1, 1, 8, 8), np.float32)
    dy[0, 0, :3, :3] = [[0.80989707, 0.26542467, 0.111008406], [0.804593, 0.14665277, 0.6320716],
                        [0.021779148, 0.43815202, 0.44774765]]  # fmt: skip
    dx = run_op_on(
        CreateOperator("IntegralImageGradient", ["X", "dY"], ["dX"]), [np.zeros((1, 1, 7, 7), np.float32), dy]
    )[0]
    golden = [[0.80989707, 1.0753217, 1.1863301], [1.61449, 2.0265675, 2.7696476], [1.6362692, 2.4864986, 3.6773264]]
    np.testing.assert_allclose(dx[0, 0, :3, :3], golden, rtol=1e-6)


@given(data=st.data(), thr=st.sampled_from([0.0, 0.5]))
@S
def test_stump_func(data, thr):
    x = data.draw(arrays(data.draw(shapes(0, 3, 0, 4)), np.float32, elements=st.sampled_from([-1.0, 0.0, 0.5, 1.0])))
    op = CreateOperator("StumpFunc", ["X"], ["Y"], threshold=thr, low_value=-2.0, high_value=3.0)
    assert_reference_checks(op, [x], lambda x: np.where(x <= thr, -2.0, 3.0).astype(np.float32))
    idx = CreateOperator("StumpFuncIndex", ["X"], ["L", "H"], threshold=thr)
    flat = x.reshape(-1)
    assert_reference_checks(
        idx,
        [x],
        lambda x: [
            np.array([i for i, v in enumerate(flat) if v <= thr], np.int64),
            np.array([i for i, v in enumerate(flat) if v > thr], np.int64),
        ],
        check_inference=False,
    )


@given(data=st.data())
@S
def test_multi_class_accuracy(data):
    n, d = data.draw(st.integers(0, 6)), data.draw(st.integers(1, 4))
    x = data.draw(arrays((n, d), np.float32, elements=TIES))
    lab = data.draw(arrays((n,), np.int32, elements=st.integers(0, d - 1)))

    def ref(x, lab):
        acc, amt = np.zeros(d, np.float32), np.zeros(d, np.int32)
        for row, l in zip(x, lab):
            amt[l] += 1
            acc[l] += int(np.argmax(row)) == l
        return [np.where(amt > 0, acc / np.maximum(amt, 1), 0).astype(np.float32), amt]

    assert_reference_checks(CreateOperator("MultiClassAccuracy", ["X", "L"], ["A", "N"]), [x, lab], ref)


def test_given_tensor_int16_fill():
    (y,) = run_op_on(CreateOperator("GivenTensorInt16Fill", [], ["Y"], shape=[2, 2], values=[1, -2, 300, 4]), [])
    assert y.dtype == np.int16 and y.tolist() == [[1, -2], [300, 4]]


@given(data=st.data())
@S
def test_concat_batch_mat_mul_batch_gather(data):
    n, b = data.draw(st.integers(1, 4)), data.draw(st.integers(0, 3))
    shape = (b,) + tuple(data.draw(st.lists(st.integers(1, 3), min_size=1, max_size=2)))
    xs = [data.draw(arrays(shape, np.float32)) for _ in range(n)]
    idx = data.draw(arrays((data.draw(st.integers(0, 5)),), np.int32, elements=st.integers(0, n * n - 1)))

    def ref(idx, *xs):
        out = np.zeros((b, idx.size), np.float32)
        for e in range(b):
            rows = [x[e].reshape(-1).astype(np.float64) for x in xs]
            for k, flat in enumerate(idx):
                i, j = divmod(int(flat), n)
                out[e, k] = rows[i] @ rows[j]
        return out

    names = ["I"] + [f"X{i}" for i in range(n)]
    assert_reference_checks(CreateOperator("ConcatBatchMatMulBatchGatherOp", names, ["Y"]), [idx] + xs, ref)
