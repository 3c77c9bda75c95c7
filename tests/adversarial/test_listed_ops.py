"""Hostile inputs and geometry for the op types the second hostile-input round listed (LRNGradient,
Im2Col, LengthsPad, LengthsTopK, the Merge*FeatureTensors gradients, Adam, Adadelta, pools, fills,
NumpyTile, MinGradient, MarginRankingCriterionGradient, BatchOneHot/BatchBucketOneHot,
AveragedLossGradient, Int8FCRelu): each case is refused with a FrameworkError (never a raw numpy or
Python error, never an allocation of the asked size) and leaves its outputs as they were, or runs
(the few cases Caffe2 also accepts: pads wider than the kernel, a stride past the input)."""

from __future__ import annotations

import warnings

import numpy as np
import pytest

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.memory.workspace import Workspace
from framework.net.api import run_operator_once


def f(*s):
    return np.random.default_rng(0).random(s).astype(np.float32)


def i32(*v):
    return np.array(v, np.int32)


CASES = [
    (
        "LRNGradient",
        {"X": f(1, 3, 4, 4), "Y": f(1, 3, 4, 4), "dY": f(1, 3, 4, 4)},
        ["X", "Y", "dY"],
        ["dX"],
        dict(size=0, alpha=1e-4, beta=0.75, bias=1.0),
    ),
    (
        "LRNGradient",
        {"X": f(1, 3, 4, 4), "Y": f(1, 3, 4, 4), "dY": f(1, 3, 4, 4)},
        ["X", "Y", "dY"],
        ["dX"],
        dict(size=-3),
    ),
    ("LRNGradient", {"X": f(1, 3, 4, 4), "Y": f(1, 3, 4, 4), "dY": f(2, 3)}, ["X", "Y", "dY"], ["dX"], dict(size=3)),
    ("LRNGradient", {"X": f(3, 4), "Y": f(3, 4), "dY": f(3, 4)}, ["X", "Y", "dY"], ["dX"], dict(size=3)),
    ("Im2Col", {"X": f(1, 3, 4, 4)}, ["X"], ["Y"], dict(kernel=0)),
    ("Im2Col", {"X": f(1, 3, 4, 4)}, ["X"], ["Y"], dict(kernel=9)),
    ("Im2Col", {"X": f(1, 3, 4, 4)}, ["X"], ["Y"], dict(kernel=2, stride=0)),
    ("Im2Col", {"X": f(1, 3, 4, 4)}, ["X"], ["Y"], dict(kernel=2, dilation=-1)),
    ("Im2Col", {"X": f(3, 4)}, ["X"], ["Y"], dict(kernel=2)),
    ("LengthsPad", {"D": f(4, 2), "L": i32(1, 5)}, ["D", "L"], ["Y"], dict(target_length=3)),
    ("LengthsPad", {"D": f(4, 2), "L": i32(-1, 5)}, ["D", "L"], ["Y"], dict(target_length=3)),
    ("LengthsPad", {"D": f(4, 2), "L": i32(2, 2)}, ["D", "L"], ["Y"], dict(target_length=-1)),
    ("LengthsPad", {"D": f(4, 2), "L": i32(2, 2)}, ["D", "L"], ["Y"], dict(target_length=1)),
    ("LengthsTopK", {"X": f(4), "L": i32(2, 3)}, ["X", "L"], ["V", "I"], dict(k=2)),
    ("LengthsTopK", {"X": f(4), "L": i32(2, 2)}, ["X", "L"], ["V", "I"], dict(k=0)),
    ("LengthsTopK", {"X": f(4), "L": i32(-2, 6)}, ["X", "L"], ["V", "I"], dict(k=1)),
    ("LengthsTopK", {"X": f(2, 2), "L": i32(2, 2)}, ["X", "L"], ["V", "I"], dict(k=1)),
    ("NumpyTile", {"X": f(2, 3), "R": i32(2, -1)}, ["X", "R"], ["Y"], {}),
    ("NumpyTile", {"X": f(2, 3), "R": i32(2)}, ["X", "R"], ["Y"], {}),
    ("NumpyTile", {"X": f(2, 3), "R": i32(1 << 30, 1 << 30)}, ["X", "R"], ["Y"], {}),
    ("NumpyTile", {"X": f(2, 3), "R": np.array([1.5, 2.0], np.float32)}, ["X", "R"], ["Y"], {}),
    ("MinGradient", {"X": f(3), "Y": f(3), "dY": f(3), "A": f(4)}, ["dY", "Y", "X", "A"], ["dX", "dA"], {}),
    ("MinGradient", {"X": f(3), "Y": f(2), "dY": f(3)}, ["dY", "Y", "X"], ["dX"], {}),
    (
        "MarginRankingCriterionGradient",
        {"a": f(3), "b": f(4), "y": f(3), "d": f(3)},
        ["a", "b", "y", "d"],
        ["da", "db"],
        {},
    ),
    (
        "MarginRankingCriterionGradient",
        {"a": f(3), "b": f(3), "y": f(3), "d": f(2)},
        ["a", "b", "y", "d"],
        ["da", "db"],
        {},
    ),
    ("BatchOneHot", {"X": f(2, 2), "L": i32(2, 2), "V": f(3)}, ["X", "L", "V"], ["Y"], {}),
    ("BatchOneHot", {"X": f(2, 2), "L": i32(-1, 3), "V": f(2)}, ["X", "L", "V"], ["Y"], {}),
    ("BatchOneHot", {"X": f(2), "L": i32(1), "V": f(1)}, ["X", "L", "V"], ["Y"], {}),
    ("BatchBucketOneHot", {"X": f(2, 2), "L": i32(2, 2), "B": f(3)}, ["X", "L", "B"], ["Y"], {}),
    ("BatchBucketOneHot", {"X": f(2, 2), "L": i32(1, -1), "B": f(2)}, ["X", "L", "B"], ["Y"], {}),
    ("AveragedLossGradient", {"X": f(3), "dY": f(2)}, ["X", "dY"], ["dX"], {}),
    ("AveragedLossGradient", {"X": f(0), "dY": f(1)}, ["X", "dY"], ["dX"], {}),
    ("ConstantFill", {}, [], ["Y"], dict(shape=[-1, 2])),
    ("ConstantFill", {}, [], ["Y"], dict(shape=[1 << 40, 1 << 40])),
    ("ConstantFill", {"S": np.array([2, -3], np.int64)}, ["S"], ["Y"], dict(input_as_shape=1)),
    ("ConstantFill", {"S": np.array([2.5], np.float32)}, ["S"], ["Y"], dict(input_as_shape=1)),
    ("GaussianFill", {}, [], ["Y"], dict(shape=[-1, 2])),
    ("GaussianFill", {}, [], ["Y"], dict(shape=[2], std=-1.0)),
    ("GaussianFill", {"S": np.array([[2]], np.int64)}, ["S"], ["Y"], dict(input_as_shape=1)),
    (
        "Adam",
        {"p": f(3), "g": f(3), "m1": f(3), "m2": f(3), "lr": f(1), "it": np.array([-1], np.int64)},
        ["p", "g", "m1", "m2", "lr", "it"],
        ["p", "m1", "m2"],
        {},
    ),
    (
        "Adam",
        {"p": f(3), "g": f(4), "m1": f(3), "m2": f(3), "lr": f(1), "it": np.array([1], np.int64)},
        ["p", "g", "m1", "m2", "lr", "it"],
        ["p", "m1", "m2"],
        {},
    ),
    (
        "Adam",
        {"p": f(3), "g": f(3), "m1": f(3), "m2": f(3), "lr": f(2), "it": np.array([1], np.int64)},
        ["p", "g", "m1", "m2", "lr", "it"],
        ["p", "m1", "m2"],
        {},
    ),
    (
        "Adadelta",
        {"p": f(3), "m": f(3), "md": f(3), "g": f(4), "lr": f(1)},
        ["p", "m", "md", "g", "lr"],
        ["p", "m", "md"],
        {},
    ),
    (
        "Adadelta",
        {"p": f(3), "m": f(3), "md": f(3), "g": f(3), "lr": f(2)},
        ["p", "m", "md", "g", "lr"],
        ["p", "m", "md"],
        {},
    ),
    ("MaxPool", {"X": f(1, 1, 4, 4)}, ["X"], ["Y"], dict(kernel=5)),
    ("MaxPool", {"X": f(1, 1, 4, 4)}, ["X"], ["Y"], dict(kernel=2, stride=0)),
    ("MaxPool", {"X": f(1, 1, 4, 4)}, ["X"], ["Y"], dict(kernel=2, pad=-1)),
    ("MaxPool", {"X": f(1, 1, 4, 4)}, ["X"], ["Y"], dict(kernel=2, pad=5)),
    ("MaxPool", {"X": f(1, 1, 4, 4)}, ["X"], ["Y"], dict(kernel=1 << 31)),
    ("AveragePool", {"X": f(1, 1, 4, 4)}, ["X"], ["Y"], dict(kernel=2, stride=1 << 40)),
    ("AveragePool", {"X": f(1, 1, 4, 4)}, ["X"], ["Y"], dict(kernel=2, dilation=0)),
    ("AveragePool", {"X": f(1, 1, 4, 4)}, ["X"], ["Y"], dict(kernel=0)),
    ("LpPool", {"X": f(1, 1, 4, 4)}, ["X"], ["Y"], dict(kernel=2, p=0.0)),
    (
        "MaxPoolGradient",
        {"X": f(1, 1, 4, 4), "Y": f(1, 1, 2, 2), "dY": f(1, 1, 3, 3)},
        ["X", "Y", "dY"],
        ["dX"],
        dict(kernel=2, stride=2),
    ),
    (
        "AveragePoolGradient",
        {"X": f(1, 1, 4, 4), "Y": f(1, 1, 2, 2), "dY": f(1, 1, 3, 3)},
        ["X", "Y", "dY"],
        ["dX"],
        dict(kernel=2, stride=2),
    ),
    ("MergeSingleScalarFeatureTensorsGradient", {"p": np.array([True]), "g": f(5)}, ["p", "g"], ["o"], {}),
    (
        "MergeDenseFeatureTensors",
        {"a": f(2, 3), "b": np.array([[True, False, True]])},
        ["a", "b"],
        ["l", "k", "v"],
        dict(feature_ids=[1, 2, 3]),
    ),
    (
        "MergeSingleListFeatureTensorsGradient",
        {"l": i32(2), "p": np.array([True]), "g": f(5)},
        ["l", "p", "g"],
        ["o"],
        {},
    ),
    ("MergeMultiScalarFeatureTensorsGradient", {"l": i32(1), "g": f(5)}, ["l", "g"], ["o"], {}),
    ("Int8FCRelu", {"X": f(2, 3), "W": f(4, 3), "b": f(4)}, ["X", "W", "b"], ["Y"], dict(Y_scale=1.0, Y_zero_point=0)),
]

ACCEPTED = {  # (type, repr(args)) that run: Caffe2 accepts them too
    ("LRNGradient", "{'size': 3}"),
    ("BatchOneHot", "{}"),
    ("AveragedLossGradient", "{}"),
    ("MaxPool", "{'kernel': 2, 'pad': 5}"),
    ("AveragePool", "{'kernel': 2, 'stride': 1099511627776}"),
    ("Int8FCRelu", "{'Y_scale': 1.0, 'Y_zero_point': 0}"),
}


@pytest.mark.parametrize("k", range(len(CASES)), ids=[f"{c[0]}-{i}" for i, c in enumerate(CASES)])
def test_listed_op_case(k):
    op_type, feeds, ins, outs, args = CASES[k]
    ws = Workspace()
    for name, v in feeds.items():
        ws.feed_blob(name, v)
    for name in outs:
        if name not in feeds:
            ws.feed_blob(name, np.full(2, 7.0, np.float32))
    before = {n: ws.fetch_blob(n).copy() for n in set(outs) | set(feeds)}
    op = CreateOperator(op_type, ins, outs, **args)
    with warnings.catch_warnings(), np.errstate(all="ignore"):
        warnings.simplefilter("ignore")
        try:
            run_operator_once(ws, op)
        except FrameworkError:
            for n, v in before.items():
                np.testing.assert_array_equal(ws.fetch_blob(n), v, err_msg=f"failed {op_type} changed '{n}'")
            return
    assert (op_type, repr(args)) in ACCEPTED, f"{op_type} {args} ran: expected a FrameworkError"
