"""CosineSimilarity, DotProductWithPadding, Normalize, NormalizeL1, LpNorm, SquareRootDivide,
NormalizePlanarYUV and the ranking losses (PairWiseLoss, MarginRankingCriterion,
CosineEmbeddingCriterion, BernoulliJSD, MakeTwoClass, WeightedSigmoidCrossEntropyWithLogits)
against numpy references, with gradient checks and Caffe2's gradient wiring."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.ops import get_gradient_for_op
from framework.ops.testing import arrays, assert_gradient_checks, assert_reference_checks, run_op_on, shapes

S = settings(max_examples=15, deadline=None)
NZ = st.floats(-2, 2).filter(lambda v: abs(v) > 0.1)


def rows(data, d=None):
    n = data.draw(st.integers(1, 4))
    d = d or data.draw(st.integers(1, 4))
    return data.draw(arrays((n, d), np.float64, elements=NZ))


@given(data=st.data())
@S
def test_cosine_similarity(data):
    x = rows(data)
    y = data.draw(arrays(x.shape, np.float64, elements=NZ))
    op = CreateOperator("CosineSimilarity", ["X", "Y"], ["Z"])
    ref = lambda x, y: np.array([a @ b / np.linalg.norm(a) / np.linalg.norm(b) for a, b in zip(x, y)])  # noqa: E731
    assert_reference_checks(op, [x, y], ref)
    assert_gradient_checks(op, [x, y], 0)
    assert_gradient_checks(op, [x, y], 1)


@pytest.mark.parametrize("replicate", [False, True])
@given(data=st.data(), pad=st.sampled_from([0.0, 1.5]))
@S
def test_dot_product_with_padding(replicate, data, pad):
    x = rows(data)
    k = data.draw(st.integers(1, 3))
    y = data.draw(arrays((x.shape[0], x.shape[1] * k if replicate else data.draw(st.integers(1, 5))), np.float64))
    if data.draw(st.booleans()):
        x, y = y, x

    def ref(x, y):
        out = []
        for a, b in zip(x, y):
            if replicate:
                n = max(len(a), len(b))
                a, b = np.tile(a, n // len(a)), np.tile(b, n // len(b))
            else:
                n = max(len(a), len(b))
                a = np.concatenate([a, np.full(n - len(a), pad)])
                b = np.concatenate([b, np.full(n - len(b), pad)])
            out.append(a @ b)
        return np.array(out)

    op = CreateOperator("DotProductWithPadding", ["X", "Y"], ["Z"], pad_value=pad, replicate=replicate)
    assert_reference_checks(op, [x, y], ref)
    assert_gradient_checks(op, [x, y], 0)
    assert_gradient_checks(op, [x, y], 1)


@given(data=st.data())
@S
def test_normalize_and_l1(data):
    x = data.draw(arrays(data.draw(shapes(1, 3, 1, 4)), np.float64, elements=NZ))
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    op = CreateOperator("Normalize", ["X"], ["Y"], axis=axis)
    assert_reference_checks(op, [x], lambda x: x / np.sqrt((x * x).sum(axis=axis, keepdims=True)))
    assert_gradient_checks(op, [x], 0)
    l1 = CreateOperator("NormalizeL1", ["X"], ["Y"], axis=axis)
    assert_reference_checks(l1, [x], lambda x: x / np.abs(x).sum(axis=axis, keepdims=True))


def test_normalize_zero_rows():
    x = np.zeros((2, 3), np.float32)
    assert_reference_checks(CreateOperator("Normalize", ["X"], ["Y"]), [x], lambda x: x)
    assert_reference_checks(CreateOperator("NormalizeL1", ["X"], ["Y"]), [x], lambda x: x)


@pytest.mark.parametrize("p", [1, 2])
@given(data=st.data(), average=st.booleans())
@S
def test_lp_norm(p, data, average):
    x = data.draw(arrays(data.draw(shapes(1, 3, 1, 4)), np.float64, elements=NZ))
    op = CreateOperator("LpNorm", ["X"], ["Z"], p=p, average=average)

    def ref(x):
        v = np.abs(x).sum() if p == 1 else (x * x).sum()
        return np.array([v / x.size if average else v])

    assert_reference_checks(op, [x], ref)
    assert_gradient_checks(op, [x], 0)


@given(data=st.data(), dtype=st.sampled_from([np.int32, np.int64, np.float32]))
@S
def test_square_root_divide(data, dtype):
    x = data.draw(arrays(data.draw(shapes(1, 3, 1, 4)), np.float64))
    s = data.draw(arrays((x.shape[0],), dtype, elements=st.integers(0, 9)))
    op = CreateOperator("SquareRootDivide", ["X", "S"], ["Y"])

    def ref(x, s):
        root = np.array([math.sqrt(v) if v else 1.0 for v in s]).reshape((-1,) + (1,) * (x.ndim - 1))
        return x / root

    assert_reference_checks(op, [x, s], ref)
    assert_gradient_checks(op, [x, s], 0)
    with pytest.raises(FrameworkError, match="SquareRootDivide.*'S'"):
        run_op_on(op, [x, -np.ones(x.shape[0], np.int32)])


def test_normalize_planar_yuv():
    rng = np.random.default_rng(0)
    x = rng.standard_normal((2, 3, 2, 2)).astype(np.float32)
    m, s = rng.standard_normal((1, 3)).astype(np.float32), rng.uniform(1, 2, (1, 3)).astype(np.float32)
    ref = lambda x, m, s: (x - m.reshape(1, 3, 1, 1)) / s.reshape(1, 3, 1, 1)  # noqa: E731
    assert_reference_checks(CreateOperator("NormalizePlanarYUV", ["X", "m", "s"], ["Y"]), [x, m, s], ref)


# -- ranking losses -------------------------------------------------------------------------------------


def ref_pairwise(x, label, lengths):
    out, off = [], 0
    for ln in lengths:
        tot, cnt = 0.0, 0
        for i in range(off, off + ln):
            for j in range(off, i):
                if label[i] == label[j]:
                    continue
                s = 1 if label[i] > label[j] else -1
                tot += math.log1p(math.exp(s * (x[j] - x[i])))
                cnt += 1
        out.append(tot / cnt if cnt else 0.0)
        off += ln
    return np.array(out)


@given(data=st.data())
@S
def test_pair_wise_loss(data):
    lengths = data.draw(st.lists(st.integers(0, 4), min_size=1, max_size=3))
    n = sum(lengths)
    if n == 0:
        return
    x = data.draw(arrays((n, 1), np.float64))
    label = data.draw(arrays((n, 1), np.float64, elements=st.sampled_from([0.0, 1.0, 2.0])))
    ln = np.array(lengths, np.int32)
    op = CreateOperator("PairWiseLoss", ["X", "L", "len"], ["Y"])
    assert_reference_checks(op, [x, label, ln], lambda x, lb, l: ref_pairwise(x[:, 0], lb[:, 0], lengths))
    assert_gradient_checks(op, [x, label, ln], 0)
    op2 = CreateOperator("PairWiseLoss", ["X", "L"], ["Y"])
    assert_reference_checks(op2, [x, label], lambda x, lb: ref_pairwise(x[:, 0], lb[:, 0], [n]))
    assert_gradient_checks(op2, [x, label], 0)
    ops, _ = get_gradient_for_op(op, ["Y_grad"])
    assert list(ops[0].input) == ["X", "L", "Y_grad", "len"]


def test_pair_wise_loss_empty_and_errors():
    (y,) = run_op_on(CreateOperator("PairWiseLoss", ["X", "L"], ["Y"]), [np.zeros((0, 1), np.float32)] * 2)
    assert y.shape == (0,)
    with pytest.raises(FrameworkError, match="PairWiseLoss.*'len'"):
        run_op_on(
            CreateOperator("PairWiseLoss", ["X", "L", "len"], ["Y"]),
            [np.zeros((3, 1), np.float32), np.zeros((3, 1), np.float32), np.array([1, 1], np.int32)],
        )


@given(data=st.data(), margin=st.sampled_from([0.0, 1.0]))
@S
def test_margin_ranking_criterion(data, margin):
    shape = data.draw(shapes(1, 2, 1, 4))
    x1, x2 = data.draw(arrays(shape, np.float64)), data.draw(arrays(shape, np.float64))
    y = data.draw(arrays(shape, np.float64, elements=st.sampled_from([-1.0, 1.0])))
    x1 = np.where(np.abs(-y * (x1 - x2) + margin) < 0.05, x1 + 0.2 * y, x1)  # off the hinge
    op = CreateOperator("MarginRankingCriterion", ["A", "B", "Y"], ["L"], margin=margin)
    assert_reference_checks(op, [x1, x2, y], lambda a, b, y: np.maximum(0, -y * (a - b) + margin))
    assert_gradient_checks(op, [x1, x2, y], 0)
    assert_gradient_checks(op, [x1, x2, y], 1)


@given(data=st.data(), margin=st.sampled_from([0.0, 0.3]))
@S
def test_cosine_embedding_criterion(data, margin):
    shape = data.draw(shapes(1, 2, 1, 4))
    s = data.draw(
        arrays(shape, np.float64, elements=st.floats(-1, 1).filter(lambda v: abs(v - 0.3) > 0.02 and abs(v) > 0.02))
    )
    y = data.draw(arrays(shape, np.int32, elements=st.sampled_from([-1, 1])))
    op = CreateOperator("CosineEmbeddingCriterion", ["S", "Y"], ["L"], margin=margin)
    assert_reference_checks(op, [s, y], lambda s, y: np.where(y == 1, 1 - s, np.maximum(0, s - margin)))
    assert_gradient_checks(op, [s, y], 0)


@given(data=st.data())
@S
def test_bernoulli_jsd(data):
    shape = data.draw(shapes(1, 2, 1, 4))
    x = data.draw(arrays(shape, np.float64, elements=st.floats(0.05, 0.95)))
    t = data.draw(arrays(shape, np.float64, elements=st.floats(0.0, 1.0)))

    def h(p):
        return np.where(
            (p <= 0) | (p >= 1), 0.0, -p * np.log(np.clip(p, 1e-300, 1)) - (1 - p) * np.log(np.clip(1 - p, 1e-300, 1))
        )

    op = CreateOperator("BernoulliJSD", ["X", "T"], ["L"])
    assert_reference_checks(op, [x, t], lambda x, t: (h((x + t) / 2) - (h(x) + h(t)) / 2).reshape(-1))
    assert_gradient_checks(op, [x, t], 0)


@given(data=st.data())
@S
def test_make_two_class(data):
    x = data.draw(arrays(data.draw(shapes(0, 3, 0, 3)), np.float64, elements=st.floats(0, 1)))
    op = CreateOperator("MakeTwoClass", ["X"], ["Y"])
    assert_reference_checks(op, [x], lambda x: np.stack([1 - x, x], axis=-1))
    if x.size:
        assert_gradient_checks(op, [x], 0)


@given(data=st.data())
@S
def test_weighted_sigmoid_cross_entropy_with_logits(data):
    shape = data.draw(shapes(1, 3, 1, 4))
    lg = data.draw(arrays(shape, np.float64, elements=st.floats(-5, 5)))
    t = data.draw(arrays(shape, np.float64, elements=st.floats(0, 1)))
    w = data.draw(arrays(shape, np.float64, elements=st.floats(0, 2)))

    def ref(lg, t, w):
        p = 1 / (1 + np.exp(-lg))
        return -(w * (t * np.log(p) + (1 - t) * np.log(1 - p))).mean(axis=-1)

    op = CreateOperator("WeightedSigmoidCrossEntropyWithLogits", ["X", "T", "W"], ["L"])
    assert_reference_checks(op, [lg, t, w], ref)
    assert_gradient_checks(op, [lg, t, w], 0)


def test_pair_wise_loss_scalars_are_refused():
    with pytest.raises(FrameworkError, match="PairWiseLoss.*'X'"):
        run_op_on(CreateOperator("PairWiseLoss", ["X", "L"], ["Y"]), [np.array(1.0), np.array(1.0)])
    with pytest.raises(FrameworkError, match="PairWiseLossGradient.*'L'"):
        run_op_on(
            CreateOperator("PairWiseLossGradient", ["X", "L", "d"], ["dX"]),
            [np.ones((1, 1)), np.array(1.0), np.ones(1)],
        )
