"""ONNXNegativeLogLikelihoodLoss / ONNXSoftmaxCrossEntropyLoss against element loops."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.ops.testing import assert_reference_checks, run_op_on


def ref_nll(logp, t, w, reduction, ii):
    n, c = logp.shape[:2]
    lp = logp.reshape(n, c, -1)
    tt = t.reshape(n, -1)
    loss = np.zeros(tt.shape)
    wsum = 0.0
    for i in range(n):
        for d in range(tt.shape[1]):
            cls = tt[i, d]
            if ii is not None and cls == ii:
                continue
            wt = 1.0 if w is None else float(w[cls])
            loss[i, d] = -wt * lp[i, cls, d]
            wsum += wt
    if reduction == "none":
        return loss.reshape(t.shape)
    return np.array(loss.sum() if reduction == "sum" else loss.sum() / wsum)


def ref_log_softmax(x):
    out = np.zeros(x.shape)
    n, c = x.shape[:2]
    flat, fo = x.reshape(n, c, -1).astype(np.float64), out.reshape(n, c, -1)
    for i in range(n):
        for d in range(flat.shape[2]):
            col = flat[i, :, d]
            fo[i, :, d] = col - np.log(np.sum(np.exp(col)))
    return out


@settings(max_examples=30, deadline=None)
@given(
    seed=st.integers(0, 999),
    spatial=st.sampled_from([(), (3,), (2, 2)]),
    weighted=st.booleans(),
    reduction=st.sampled_from(["none", "sum", "mean"]),
    ii=st.sampled_from([None, 0, -1, 2]),
    sce=st.booleans(),
)
def test_losses_match_loops(seed, spatial, weighted, reduction, ii, sce):
    rng = np.random.default_rng(seed)
    n, c = 3, 4
    x = rng.standard_normal((n, c) + spatial).astype(np.float32)
    t = rng.integers(0, c, (n,) + spatial).astype(np.int64)
    if ii is not None:
        t.reshape(-1)[0] = ii
    t.reshape(-1)[-1] = 1  # at least one element counts
    w = rng.random(c).astype(np.float32) + 0.5 if weighted else None
    ins, names = [x, t] + ([w] if weighted else []), ["x", "t"] + (["w"] if weighted else [])
    args = {"reduction": reduction} | ({"ignore_index": ii} if ii is not None else {})
    if sce:
        op = CreateOperator("ONNXSoftmaxCrossEntropyLoss", names, ["loss", "logp"], **args)
        ref = lambda *_: [ref_nll(ref_log_softmax(x), t, w, reduction, ii), ref_log_softmax(x)]  # noqa: E731
    else:
        op = CreateOperator("ONNXNegativeLogLikelihoodLoss", names, ["loss"], **args)
        ref = lambda *_: ref_nll(x, t, w, reduction, ii)  # noqa: E731
    assert_reference_checks(op, ins, ref, threshold=1e-5)


def test_losses_reject_bad_targets_naming_the_blob():
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(FrameworkError, match="target 't' holds 3"):
        run_op_on(CreateOperator("ONNXNegativeLogLikelihoodLoss", ["x", "t"], ["y"]), [x, np.array([0, 3])])
    with pytest.raises(FrameworkError, match="target 't' shape"):
        run_op_on(CreateOperator("ONNXSoftmaxCrossEntropyLoss", ["x", "t"], ["y"]), [x, np.array([0, 1, 2])])
    with pytest.raises(FrameworkError, match="weight 'w'"):
        run_op_on(
            CreateOperator("ONNXSoftmaxCrossEntropyLoss", ["x", "t", "w"], ["y"]),
            [x, np.array([0, 1]), np.ones(2, np.float32)],
        )
    (y,) = run_op_on(
        CreateOperator("ONNXNegativeLogLikelihoodLoss", ["x", "t"], ["y"], reduction="sum"),
        [np.zeros((0, 3), np.float32), np.zeros(0, np.int64)],
    )
    assert y.shape == () and y == 0
