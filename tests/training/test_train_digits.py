"""Real training on scikit-learn's digits, short: the loss must fall well below its start.

The full runs (MLP >= 97%, CNN >= 98% test accuracy) are examples/train_*_digits.py.
"""

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from framework.ops import has_op

pytest.importorskip("sklearn")
EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def _load(name):
    import sys

    if str(EXAMPLES) not in sys.path:
        sys.path.insert(0, str(EXAMPLES))
    spec = importlib.util.spec_from_file_location(f"_example_{name}", EXAMPLES / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _need(*ops):
    missing = [o for o in ops if not has_op(o)]
    if missing:
        pytest.skip(f"ops not registered yet: {missing}")


def _falls(losses):
    start, end = np.mean(losses[:5]), np.mean(losses[-5:])
    assert end < 0.35 * start, f"loss fell only from {start:.3f} to {end:.3f}"


@pytest.mark.parametrize("mode", ["brew", "text"])
def test_mlp_loss_falls(mode):
    _need("SoftmaxWithLoss", "FC")
    mlp = _load("train_mlp_digits")
    acc, _, losses = mlp.run(mode, epochs=2)
    _falls(losses)
    assert acc > 0.8


@pytest.mark.parametrize("mode", ["brew", "text"])
def test_cnn_loss_falls(mode):
    _need("SoftmaxWithLoss", "Conv", "MaxPool")
    cnn = _load("train_cnn_digits")
    acc, _, losses = cnn.run(mode, epochs=2)
    _falls(losses)
    assert acc > 0.7


def test_brew_and_text_nets_train_identically():
    _need("SoftmaxWithLoss", "FC")
    mlp = _load("train_mlp_digits")
    a = mlp.run("brew", epochs=0.5)[2]
    b = mlp.run("text", epochs=0.5)[2]
    np.testing.assert_allclose(a, b, rtol=1e-4)
