"""Train a small CNN on scikit-learn's digits (1x8x8 images) to >= 98% test
accuracy, with the nets built two ways:

- ``brew``: ModelHelper + brew.conv/relu/max_pool/fc + SoftmaxWithLoss,
  AddGradientOperators, optimizer.build_sgd (momentum, step policy, weight decay);
- ``text``: the same init and forward nets as protobuf text; gradients by
  ``Net.AddGradientOperators``; the same update ops added by the optimizer builder
  over a ModelHelper that wraps the text nets.

conv 3x3 (1->16) -> relu -> max_pool 2 -> conv 3x3 (16->32) -> relu -> max_pool 2 -> fc (128->10)

Run: ``python examples/train_cnn_digits.py [--mode brew|text|both] [--epochs N]``
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from digits_common import load_digits_split, main, train_and_evaluate

from framework import core
from framework.caffe2.python import brew, optimizer
from framework.caffe2.python.model_helper import ModelHelper, ParameterTags
from framework.proto.framework_pb2 import NetDef
from framework.proto.io import parse_text

C1, C2 = 16, 32
BASE_LR, MOMENTUM, WEIGHT_DECAY = 0.05, 0.9, 1e-3


def _optimize(m: ModelHelper) -> None:
    optimizer.build_sgd(
        m, BASE_LR, policy="step", stepsize=600, gamma=0.5, momentum=MOMENTUM, weight_decay=WEIGHT_DECAY
    )


def build_brew(seed: int = 1) -> tuple[NetDef, NetDef]:
    """(init_net, train_net) of the CNN built with ModelHelper and brew."""
    m = ModelHelper("cnn_digits")
    h = brew.conv(m, "data", "conv1", dim_in=1, dim_out=C1, kernel=3, pad=1)
    h = brew.relu(m, h, h)
    h = brew.max_pool(m, h, "pool1", kernel=2, stride=2)
    h = brew.conv(m, h, "conv2", dim_in=C1, dim_out=C2, kernel=3, pad=1)
    h = brew.relu(m, h, h)
    h = brew.max_pool(m, h, "pool2", kernel=2, stride=2)
    logits = brew.fc(m, h, "pred", dim_in=C2 * 2 * 2, dim_out=10)
    m.net.SoftmaxWithLoss([logits, "label"], ["softmax", "loss"])
    m.AddGradientOperators(["loss"])
    _optimize(m)
    m.param_init_net.set_rand_seed(seed)
    return m.param_init_net.Proto(), m.net.Proto()


INIT_TEXT = """
name: "cnn_digits_text_init"
op { output: "conv1_w" type: "XavierFill" arg { name: "shape" ints: 16 ints: 1 ints: 3 ints: 3 }
     device_option { random_seed: 1 } }
op { output: "conv1_b" type: "ConstantFill" arg { name: "shape" ints: 16 } }
op { output: "conv2_w" type: "XavierFill" arg { name: "shape" ints: 32 ints: 16 ints: 3 ints: 3 }
     device_option { random_seed: 3 } }
op { output: "conv2_b" type: "ConstantFill" arg { name: "shape" ints: 32 } }
op { output: "pred_w" type: "XavierFill" arg { name: "shape" ints: 10 ints: 128 } device_option { random_seed: 5 } }
op { output: "pred_b" type: "ConstantFill" arg { name: "shape" ints: 10 } }
"""

FORWARD_TEXT = """
name: "cnn_digits_text"
external_input: "data"
external_input: "label"
op { input: "data" input: "conv1_w" input: "conv1_b" output: "conv1" type: "Conv"
     arg { name: "kernel" i: 3 } arg { name: "pad" i: 1 } arg { name: "order" s: "NCHW" } }
op { input: "conv1" output: "conv1" type: "Relu" }
op { input: "conv1" output: "pool1" type: "MaxPool" arg { name: "kernel" i: 2 } arg { name: "stride" i: 2 } }
op { input: "pool1" input: "conv2_w" input: "conv2_b" output: "conv2" type: "Conv"
     arg { name: "kernel" i: 3 } arg { name: "pad" i: 1 } arg { name: "order" s: "NCHW" } }
op { input: "conv2" output: "conv2" type: "Relu" }
op { input: "conv2" output: "pool2" type: "MaxPool" arg { name: "kernel" i: 2 } arg { name: "stride" i: 2 } }
op { input: "pool2" input: "pred_w" input: "pred_b" output: "pred" type: "FC" }
op { input: "pred" input: "label" output: "softmax" output: "loss" type: "SoftmaxWithLoss" }
"""


def build_text() -> tuple[NetDef, NetDef]:
    """(init_net, train_net) from the text above; update ops from the optimizer builder.

    Same model and seeds as ``build_brew``, so both reach the same numbers.
    """
    m = ModelHelper("cnn_digits_text")
    m.net = core.Net(parse_text(FORWARD_TEXT, NetDef))
    m.param_init_net = core.Net(parse_text(INIT_TEXT, NetDef))
    for name in ("conv1_w", "conv1_b", "conv2_w", "conv2_b", "pred_w", "pred_b"):
        m.AddParameter(core.BlobReference(name), ParameterTags.WEIGHT if name.endswith("_w") else ParameterTags.BIAS)
    m.AddGradientOperators(["loss"])
    _optimize(m)
    return m.param_init_net.Proto(), m.net.Proto()


def run(mode: str, epochs: float = 30, log_every: int = 0) -> tuple[float, float, list[float]]:
    """Train one way; returns (test accuracy, seconds, losses)."""
    data = load_digits_split(image=True)
    init, train_net = build_brew() if mode == "brew" else build_text()
    return train_and_evaluate(init, train_net, data, epochs, log_every)


if __name__ == "__main__":
    main(__doc__, "CNN", run)
