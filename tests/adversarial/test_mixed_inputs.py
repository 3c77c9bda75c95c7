"""Bad inputs of mixed kinds (the matrix varies one input at a time; these mix them), found by a random
sweep over the registry: each is rejected on purpose, before computing, by a declared check naming the
op and the blob (never a raw numpy error), or is valid input with Caffe2's result."""

import numpy as np
import pytest

from framework.core import CreateOperator
from framework.errors import ShapeError, TypeMismatchError
from framework.memory.workspace import Workspace
from framework.ops import create_operator

F32, I32, I64 = np.float32, np.int32, np.int64
S = np.array([b"x"], object)


def _ws(inputs):
    ws = Workspace()
    for name, value in inputs:
        ws.feed_blob(name, value)
    return ws


CASES = [
    (
        "MomentumSGD",
        [("g", np.ones(3, bool)), ("m", np.ones(3, bool)), ("lr", np.ones(1, F32))],
        ["g2", "m2"],
        {},
        TypeMismatchError,
        r"input 0 \('g'\) must hold floats, got bool",
    ),
    (
        "MomentumSGDUpdate",
        [("g", np.ones(3, F32)), ("m", np.ones(3, np.float64)), ("lr", np.ones(1, F32)), ("p", np.ones(3, F32))],
        ["g2", "m2", "p2"],
        {},
        TypeMismatchError,
        r"input 1 \('m'\) holds float64 but input 0 \('g'\) holds float32",
    ),
    (
        "Adagrad",
        [("p", np.ones(3, I64)), ("h", np.ones(3, F32)), ("g", np.ones(3, F32)), ("lr", np.ones(1, F32))],
        ["p2", "h2"],
        {},
        TypeMismatchError,
        r"input 0 \('p'\) must hold floats, got int64",
    ),
    (
        "RmsProp",
        [("g", np.ones(3, np.uint8)), ("ms", np.ones(3, F32)), ("mom", np.ones(3, F32)), ("lr", np.ones(1, F32))],
        ["g2", "ms2", "mom2"],
        {},
        TypeMismatchError,
        r"input 0 \('g'\) must hold floats, got uint8",
    ),
    (
        "Ftrl",
        [("var", S), ("nz", np.ones((1, 2), F32)), ("g", np.ones(1, F32))],
        ["v2", "nz2"],
        {},
        TypeMismatchError,
        r"input 0 \('var'\) must hold floats, got strings",
    ),
    (
        "LearningRateAdaption",
        [("lr", np.ones((), F32)), ("g", np.array([1], I32)), ("e", S)],
        ["lr2"],
        {},
        TypeMismatchError,
        r"input 1 \('g'\) must hold floats, got int32",
    ),
    (
        "Wngrad",
        [("w", np.ones(1, F32)), ("b", np.array([1], I32)), ("g", S), ("lr", np.ones(1, F32))],
        ["w2", "b2"],
        {},
        TypeMismatchError,
        r"input 1 \('b'\) must hold floats, got int32",
    ),
    (
        "Adam",
        [
            ("p", np.ones((3, 2), I64)),
            ("m1", np.ones((3, 2), F32)),
            ("m2", np.ones((3, 2), F32)),
            ("g", np.ones((3, 2), F32)),
            ("lr", np.ones(1, F32)),
            ("it", np.zeros(1, I64)),
        ],
        ["p_out", "m1_out", "m2_out"],
        {},
        TypeMismatchError,
        r"input 0 \('p'\) must hold floats, got int64",
    ),
    (
        "L1DistanceGradient",
        [("x", np.ones((), F32)), ("y", np.ones((), F32)), ("dz", S)],
        ["dx", "dy"],
        {},
        TypeMismatchError,
        r"input 2 \('dz'\) must hold numbers, got strings",
    ),
    (
        "AveragedLossGradient",
        [("x", np.ones(3, F32)), ("dY", S)],
        ["dx"],
        {},
        TypeMismatchError,
        r"input 1 \('dY'\) must hold numbers, got strings",
    ),
    (
        "SigmoidCrossEntropyWithLogits",
        [("logits", np.ones(1, F32)), ("t", S)],
        ["y"],
        {},
        TypeMismatchError,
        r"input 1 \('t'\) must hold numbers, got strings",
    ),
    (
        "LengthsSplit",
        [("len", np.array([3], I32)), ("n", S)],
        ["y"],
        {},
        TypeMismatchError,
        r"input 1 \('n'\) must hold integers, got strings",
    ),
    (
        "RowMul",
        [("mat", np.zeros((0,), I64)), ("w", np.zeros((0,), F32))],
        ["y"],
        {},
        TypeMismatchError,
        r"input 1 \('w'\) holds float32 but input 0 \('mat'\) holds int64",
    ),
    (
        "UniformFill",
        [("shape", np.array([2], I64)), ("lo", S), ("hi", np.ones(1, F32))],
        ["y"],
        {"input_as_shape": 1},
        TypeMismatchError,
        r"input 1 \('lo'\) must hold numbers, got strings",
    ),
    (
        "UniformIntFill",
        [("like", np.ones((), F32)), ("lo", np.array([3], I32)), ("hi", np.array([1], I64))],
        ["y"],
        {},
        ShapeError,
        r"min 3 > max 1, and a 0-d output cannot be emptied",
    ),
]


@pytest.mark.parametrize("op_type, inputs, outputs, args, err, message", CASES, ids=[c[0] for c in CASES])
def test_mixed_bad_inputs_are_named_errors(op_type, inputs, outputs, args, err, message):
    ws = _ws(inputs)
    op = CreateOperator(op_type, [n for n, _ in inputs], outputs, **args)
    with pytest.raises(err, match=message) as info:
        create_operator(op, ws).run()
    assert op_type in str(info.value) and info.value.__cause__ is None
    for o in outputs:  # created by the op's construction at most, never filled
        assert not ws.has_blob(o) or not ws.get_blob(o)._obj or not ws.get_blob(o)._obj.is_allocated


def test_uniform_int_fill_with_min_above_max_is_empty_as_caffe2():
    ws = _ws([("s", np.ones((3, 2), F32)), ("lo", np.array([3], I32)), ("hi", np.array([1], I32))])
    create_operator(CreateOperator("UniformIntFill", ["s", "lo", "hi"], ["y"]), ws).run()
    assert ws.fetch_blob("y").shape == (0, 2)


@pytest.mark.parametrize("x_shape, dims", [((0,), [1]), ((0, 1), [1, 3]), ((2, 0), [2, 1]), ((1,), [4])])
def test_expand_keeps_an_empty_dim_empty(x_shape, dims):
    ws = _ws([("x", np.zeros(x_shape, F32)), ("shape", np.array(dims, I64))])
    create_operator(CreateOperator("Expand", ["x", "shape"], ["y"]), ws).run()
    assert ws.fetch_blob("y").shape == np.broadcast_shapes(x_shape, tuple(dims))
