"""Train a multilayer perceptron on scikit-learn's digits (8x8 images) to >= 97%
test accuracy, with the nets built two ways:

- ``brew``: ModelHelper + brew.fc/relu + SoftmaxWithLoss, AddGradientOperators,
  optimizer.build_sgd (momentum, step policy);
- ``text``: init and forward nets written as protobuf text below; gradients added
  by ``Net.AddGradientOperators``; the update ops written as text too.

Run: ``python examples/train_mlp_digits.py [--mode brew|text|both] [--epochs N]``
"""

from __future__ import annotations

import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from digits_common import load_digits_split, main, train_and_evaluate

from framework import core
from framework.caffe2.python import brew, optimizer
from framework.caffe2.python.model_helper import ModelHelper
from framework.proto.framework_pb2 import NetDef
from framework.proto.io import parse_text

HIDDEN = (128, 64)
BASE_LR, MOMENTUM, WEIGHT_DECAY = 0.1, 0.9, 1e-3


def build_brew(seed: int = 1) -> tuple[NetDef, NetDef]:
    """(init_net, train_net) of the MLP built with ModelHelper and brew."""
    m = ModelHelper("mlp_digits")
    h, dim = "data", 64
    for k, width in enumerate(HIDDEN, 1):
        h = brew.fc(m, h, f"fc{k}", dim_in=dim, dim_out=width)
        h = brew.relu(m, h, h)
        dim = width
    logits = brew.fc(m, h, "pred", dim_in=dim, dim_out=10)
    m.net.SoftmaxWithLoss([logits, "label"], ["softmax", "loss"])
    m.AddGradientOperators(["loss"])
    optimizer.build_sgd(
        m, BASE_LR, policy="step", stepsize=400, gamma=0.5, momentum=MOMENTUM, weight_decay=WEIGHT_DECAY
    )
    m.param_init_net.set_rand_seed(seed)
    return m.param_init_net.Proto(), m.net.Proto()


INIT_TEXT = """
name: "mlp_digits_text_init"
op { output: "fc1_w" type: "XavierFill" arg { name: "shape" ints: 128 ints: 64 } device_option { random_seed: 1 } }
op { output: "fc1_b" type: "ConstantFill" arg { name: "shape" ints: 128 } }
op { output: "fc2_w" type: "XavierFill" arg { name: "shape" ints: 64 ints: 128 } device_option { random_seed: 3 } }
op { output: "fc2_b" type: "ConstantFill" arg { name: "shape" ints: 64 } }
op { output: "pred_w" type: "XavierFill" arg { name: "shape" ints: 10 ints: 64 } device_option { random_seed: 5 } }
op { output: "pred_b" type: "ConstantFill" arg { name: "shape" ints: 10 } }
op { input: "fc1_w" output: "fc1_w_m" type: "ConstantFill" arg { name: "value" f: 0.0 } }
op { input: "fc1_b" output: "fc1_b_m" type: "ConstantFill" arg { name: "value" f: 0.0 } }
op { input: "fc2_w" output: "fc2_w_m" type: "ConstantFill" arg { name: "value" f: 0.0 } }
op { input: "fc2_b" output: "fc2_b_m" type: "ConstantFill" arg { name: "value" f: 0.0 } }
op { input: "pred_w" output: "pred_w_m" type: "ConstantFill" arg { name: "value" f: 0.0 } }
op { input: "pred_b" output: "pred_b_m" type: "ConstantFill" arg { name: "value" f: 0.0 } }
op { output: "ONE" type: "ConstantFill" arg { name: "shape" ints: 1 } arg { name: "value" f: 1.0 } }
op { output: "wd" type: "ConstantFill" arg { name: "shape" ints: 1 } arg { name: "value" f: 0.001 } }
op {
  output: "optimizer_iteration" type: "ConstantFill"
  arg { name: "shape" ints: 1 } arg { name: "value" i: 0 } arg { name: "dtype" i: 10 }
}
"""

FORWARD_TEXT = """
name: "mlp_digits_text"
external_input: "data"
external_input: "label"
op { input: "data" input: "fc1_w" input: "fc1_b" output: "fc1" type: "FC" }
op { input: "fc1" output: "fc1" type: "Relu" }
op { input: "fc1" input: "fc2_w" input: "fc2_b" output: "fc2" type: "FC" }
op { input: "fc2" output: "fc2" type: "Relu" }
op { input: "fc2" input: "pred_w" input: "pred_b" output: "pred" type: "FC" }
op { input: "pred" input: "label" output: "softmax" output: "loss" type: "SoftmaxWithLoss" }
"""

UPDATE_TEXT = """
name: "mlp_digits_update"
op { input: "fc1_w_grad" input: "ONE" input: "fc1_w" input: "wd" output: "fc1_w_grad" type: "WeightedSum" }
op { input: "fc2_w_grad" input: "ONE" input: "fc2_w" input: "wd" output: "fc2_w_grad" type: "WeightedSum" }
op { input: "pred_w_grad" input: "ONE" input: "pred_w" input: "wd" output: "pred_w_grad" type: "WeightedSum" }
op { input: "optimizer_iteration" output: "optimizer_iteration" type: "Iter" }
op {
  input: "optimizer_iteration" output: "lr" type: "LearningRate"
  arg { name: "base_lr" f: 0.1 } arg { name: "policy" s: "step" }
  arg { name: "stepsize" i: 400 } arg { name: "gamma" f: 0.5 }
}
op { input: "fc1_w_grad" input: "fc1_w_m" input: "lr" input: "fc1_w" output: "fc1_w_grad" output: "fc1_w_m"
     output: "fc1_w" type: "MomentumSGDUpdate" arg { name: "momentum" f: 0.9 } arg { name: "nesterov" i: 1 } }
op { input: "fc1_b_grad" input: "fc1_b_m" input: "lr" input: "fc1_b" output: "fc1_b_grad" output: "fc1_b_m"
     output: "fc1_b" type: "MomentumSGDUpdate" arg { name: "momentum" f: 0.9 } arg { name: "nesterov" i: 1 } }
op { input: "fc2_w_grad" input: "fc2_w_m" input: "lr" input: "fc2_w" output: "fc2_w_grad" output: "fc2_w_m"
     output: "fc2_w" type: "MomentumSGDUpdate" arg { name: "momentum" f: 0.9 } arg { name: "nesterov" i: 1 } }
op { input: "fc2_b_grad" input: "fc2_b_m" input: "lr" input: "fc2_b" output: "fc2_b_grad" output: "fc2_b_m"
     output: "fc2_b" type: "MomentumSGDUpdate" arg { name: "momentum" f: 0.9 } arg { name: "nesterov" i: 1 } }
op { input: "pred_w_grad" input: "pred_w_m" input: "lr" input: "pred_w" output: "pred_w_grad" output: "pred_w_m"
     output: "pred_w" type: "MomentumSGDUpdate" arg { name: "momentum" f: 0.9 } arg { name: "nesterov" i: 1 } }
op { input: "pred_b_grad" input: "pred_b_m" input: "lr" input: "pred_b" output: "pred_b_grad" output: "pred_b_m"
     output: "pred_b" type: "MomentumSGDUpdate" arg { name: "momentum" f: 0.9 } arg { name: "nesterov" i: 1 } }
"""


def build_text() -> tuple[NetDef, NetDef]:
    """(init_net, train_net) from the protobuf text above (+ gradient ops).

    Same model, seeds and optimizer as ``build_brew``, so both reach the same numbers.
    """
    init = parse_text(INIT_TEXT, NetDef)
    net = core.Net(parse_text(FORWARD_TEXT, NetDef))
    net.AddGradientOperators(["loss"])
    net.Proto().op.extend(parse_text(UPDATE_TEXT, NetDef).op)
    return init, net.Proto()


def run(mode: str, epochs: float = 30, log_every: int = 0) -> tuple[float, float, list[float]]:
    """Train one way; returns (test accuracy, seconds, losses)."""
    data = load_digits_split()
    init, train_net = build_brew() if mode == "brew" else build_text()
    return train_and_evaluate(init, train_net, data, epochs, log_every)


if __name__ == "__main__":
    main(__doc__, "MLP", run)
