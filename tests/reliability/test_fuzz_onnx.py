"""ONNX model mutation fuzzer: a small model's bytes truncated or with bits flipped, then prepared and
run. Every outcome is a result, a FrameworkError (OnnxImportError, ResourceLimitError...) or the
backend's SkipTest for a node it cannot translate: never another exception, a hang or a crash.
A fixed sample of 60 mutations runs always; FRAMEWORK_FUZZ_FULL=1 tries every bit of the model."""

from __future__ import annotations

import os
import random
import unittest

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from framework.errors import FrameworkError  # noqa: E402
from framework.memory.allocator import set_allocation_limit  # noqa: E402
from framework.onnx.backend import prepare  # noqa: E402

FULL = os.environ.get("FRAMEWORK_FUZZ_FULL") == "1"


def _seed_model() -> bytes:
    w = numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3), "w")
    shape = numpy_helper.from_array(np.array([3, 2], np.int64), "s")
    nodes = [
        helper.make_node("Add", ["x", "w"], ["a"]),
        helper.make_node("Reshape", ["a", "s"], ["r"]),
        helper.make_node("Relu", ["r"], ["y"]),
    ]
    g = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [3, 2])],
        initializer=[w, shape],
    )
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)]).SerializeToString()


SEED = _seed_model()


def _mutations():
    n_bits = len(SEED) * 8
    if FULL:
        bits = range(n_bits)
        cuts = range(len(SEED))
    else:
        rng = random.Random(40)
        bits = rng.sample(range(n_bits), 50) + [454, 463, 551, 831]  # found by the full run: non-UTF-8 names
        cuts = rng.sample(range(len(SEED)), 10)
    for b in bits:
        data = bytearray(SEED)
        data[b // 8] ^= 1 << (b % 8)
        yield f"flip{b}", bytes(data)
    for c in cuts:
        yield f"cut{c}", SEED[:c]


@pytest.fixture(autouse=True)
def _limit():
    old = set_allocation_limit(256 << 20)
    yield
    set_allocation_limit(old)


def test_seed_runs():
    (y,) = prepare(SEED).run([np.ones((2, 3), np.float32)])
    np.testing.assert_array_equal(y, np.arange(1, 7, dtype=np.float32).reshape(3, 2))


@pytest.mark.parametrize("label,data", list(_mutations()), ids=lambda v: v if isinstance(v, str) else "")
def test_mutated_model(label, data):
    try:
        rep = prepare(data)
        rep.run([np.ones((2, 3), np.float32)])
    except (FrameworkError, unittest.SkipTest):
        pass
