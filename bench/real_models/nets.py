"""The six real CNNs as Caffe2 inference nets, built with ``brew`` the way Caffe2 built them.

- ``resnet50``: caffe2/python/models/resnet.py ``create_resnet50`` (bottlenecks, convs with bias,
  SpatialBN is_test, in-place Relu, Sum shortcut, MaxPool 3/2 pad 1, global AveragePool, FC, Softmax).
- ``resnet20_cifar``: the blocks of ``create_resnet_32x32`` (conv1 unpadded, as there), 3 per stage: the
  paper's ResNet-20 on 3x32x32 (Caffe2's builder makes 2*num_groups blocks per stage, 12n+2 layers, so
  it cannot make 20).
- ``squeezenet1_1``: the model zoo's SqueezeNet 1.1 (Caffe-converted: fire modules of 1x1 squeeze and
  1x1/3x3 expand convs with Relu, Concat; MaxPool with legacy_pad 3 = Caffe's ceil mode; Dropout
  is_test; conv10, global AveragePool, Softmax).
- ``shufflenet_v2``: caffe2/python/models/shufflenet.py 1.0x (Split, 1x1 convs, 3x3 depthwise convs
  ``group = channels``, SpatialBN, Concat, ``ChannelShuffle group=2``; conv_5, AveragePool 7, FC), with
  Softmax appended and the one SpatialBN that file leaves in training mode set to is_test.
- ``densenet121``: the zoo's DenseNet-121 (Caffe-converted: BN-Relu-Conv1x1(128)-BN-Relu-Conv3x3(32)
  layers, each concatenated onto the running block output; transitions BN-Relu-Conv1x1-AveragePool 2/2;
  final BN-Relu, global AveragePool, FC, Softmax).
- ``alexnet``: caffe2/python/convnet_benchmarks.py AlexNet (11x11/4 conv, 5x5, three 3x3, MaxPool 3/2,
  three FCs) with the zoo's Dropout(is_test) after fc6/fc7, and Softmax.

Weights are random but seeded and plausible (He-scaled filters, BN statistics and scales spread
around 1) so that folding BN into convs is exercised with non-trivial values.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from framework.caffe2.python import brew
from framework.caffe2.python.model_helper import ModelHelper
from framework.core import CreateOperator
from framework.proto.framework_pb2 import NetDef


@dataclass
class RealModel:
    """One benchmark model: the Caffe2 predict net, an init net holding the weights, the weights as
    numpy arrays (the same the init net fills), and the input blob/shape and output blob."""

    name: str
    predict_net: NetDef
    weights: dict
    input_name: str
    input_shape: tuple
    output_name: str
    logits_name: str  # the input of the final Softmax: outputs are compared here (softmax saturates)

    def init_net(self) -> NetDef:
        """An init net of GivenTensorFill ops filling ``weights`` (built on demand: ResNet-50's is 100 MB)."""
        init = NetDef(name=f"{self.name}_init")
        for k, v in self.weights.items():
            op = CreateOperator("GivenTensorFill", [], [k], shape=list(v.shape))
            arg = op.arg.add()
            arg.name = "values"
            arg.floats.extend(v.ravel())
            init.op.append(op)
        return init

    def input_data(self, seed: int = 1) -> np.ndarray:
        """A seeded random input batch."""
        return np.random.default_rng(seed).standard_normal(self.input_shape).astype(np.float32)


def _bn(m, x, out, c, eps=1e-5):
    return brew.spatial_bn(m, x, out, c, epsilon=eps, momentum=0.9, is_test=1)


def _conv(m, x, out, cin, cout, k, stride=1, pad=0, group=1, no_bias=0):
    return brew.conv(m, x, out, cin, cout, kernel=k, stride=stride, pad=pad, group=group, no_bias=no_bias)


# -- ResNets (caffe2/python/models/resnet.py) ----------------------------------------------------------


def _bottleneck(m, x, name, cin, base, cout, stride):
    h = _conv(m, x, f"{name}_conv_1", cin, base, 1)
    h = _bn(m, h, f"{name}_spatbn_1", base)
    h = brew.relu(m, h, h)
    h = _conv(m, h, f"{name}_conv_2", base, base, 3, stride=stride, pad=1)
    h = _bn(m, h, f"{name}_spatbn_2", base)
    h = brew.relu(m, h, h)
    h = _conv(m, h, f"{name}_conv_3", base, cout, 1)
    h = _bn(m, h, f"{name}_spatbn_3", cout)
    sc = x
    if cout != cin:
        sc = _conv(m, x, f"{name}_shortcut", cin, cout, 1, stride=stride)
        sc = _bn(m, sc, f"{name}_shortcut_spatbn", cout)
    s = brew.sum(m, [sc, h], f"{name}_sum")
    return brew.relu(m, s, s)


def resnet50(m, data):
    h = _conv(m, data, "conv1", 3, 64, 7, stride=2, pad=3)
    h = _bn(m, h, "conv1_spatbn_relu", 64)
    h = brew.relu(m, h, h)
    h = brew.max_pool(m, h, "pool1", kernel=3, stride=2, pad=1)
    filters, cin, base, k = [256, 512, 1024, 2048], 64, 64, 0
    for stage, blocks in enumerate((3, 4, 6, 3)):
        for b in range(blocks):
            stride = 2 if stage > 0 and b == 0 else 1
            h = _bottleneck(m, h, f"comp_{k}", cin, base, filters[stage], stride)
            cin, k = filters[stage], k + 1
        base *= 2
    h = brew.average_pool(m, h, "final_avg", kernel=7, stride=1, global_pooling=True)
    h = brew.fc(m, h, "last_out_L1000", 2048, 1000)
    return brew.softmax(m, h, "softmax"), (3, 224, 224)


def _simple_block(m, x, name, cin, cout, down):
    stride = 2 if down else 1
    h = _conv(m, x, f"{name}_conv_1", cin, cout, 3, stride=stride, pad=1)
    h = _bn(m, h, f"{name}_spatbn_1", cout)
    h = brew.relu(m, h, h)
    h = _conv(m, h, f"{name}_conv_2", cout, cout, 3, pad=1)
    h = _bn(m, h, f"{name}_spatbn_2", cout)
    sc = x
    if cout != cin:
        sc = _conv(m, x, f"{name}_shortcut", cin, cout, 1, stride=stride)
        sc = _bn(m, sc, f"{name}_shortcut_spatbn", cout, eps=1e-3)
    s = brew.sum(m, [sc, h], f"{name}_sum")
    return brew.relu(m, s, s)


def resnet20_cifar(m, data):
    h = _conv(m, data, "conv1", 3, 16, 3)
    h = _bn(m, h, "conv1_spatbn", 16, eps=1e-3)
    h = brew.relu(m, h, "relu1")
    cin, k = 16, 0
    for g, f in enumerate((16, 32, 64)):
        for b in range(3):
            h = _simple_block(m, h, f"comp_{k}", cin, f, down=(b == 0 and g > 0))
            cin, k = f, k + 1
    h = brew.average_pool(m, h, "final_avg", kernel=8, stride=1)
    h = brew.fc(m, h, "last_out", 64, 10)
    return brew.softmax(m, h, "softmax"), (3, 32, 32)


# -- SqueezeNet 1.1 -----------------------------------------------------------------------------------------


def _fire(m, x, name, cin, squeeze, expand):
    s = _conv(m, x, f"{name}/squeeze1x1", cin, squeeze, 1)
    s = brew.relu(m, s, s)
    e1 = _conv(m, s, f"{name}/expand1x1", squeeze, expand, 1)
    e1 = brew.relu(m, e1, e1)
    e3 = _conv(m, s, f"{name}/expand3x3", squeeze, expand, 3, pad=1)
    e3 = brew.relu(m, e3, e3)
    return brew.concat(m, [e1, e3], f"{name}/concat")


def squeezenet1_1(m, data):
    h = _conv(m, data, "conv1", 3, 64, 3, stride=2)
    h = brew.relu(m, h, h)
    h = brew.max_pool(m, h, "pool1", kernel=3, stride=2, legacy_pad=3)
    cin = 64
    fires = ((16, 64), (16, 64), (32, 128), (32, 128), (48, 192), (48, 192), (64, 256), (64, 256))
    for i, (sq, ex) in enumerate(fires):
        h = _fire(m, h, f"fire{i + 2}", cin, sq, ex)
        cin = 2 * ex
        if i in (1, 3):
            h = brew.max_pool(m, h, f"pool{i + 2}", kernel=3, stride=2, legacy_pad=3)
    h = brew.dropout(m, h, "drop9", ratio=0.5, is_test=1)
    h = _conv(m, h, "conv10", 512, 1000, 1)
    h = brew.relu(m, h, h)
    h = brew.average_pool(m, h, "pool10", global_pooling=True)
    return brew.softmax(m, h, "softmax"), (3, 224, 224)


# -- ShuffleNet V2 1.0x (caffe2/python/models/shufflenet.py) ----------------------------------------------


def _shuffle_s2(m, x, p, cin, cout):
    half = cout // 2
    r = _conv(m, x, f"{p}_right_conv_1", cin, cin, 1)
    r = _bn(m, r, r + "_bn", cin, eps=1e-3)
    r = brew.relu(m, r, r)
    r = _conv(m, r, f"{p}_right_dwconv", cin, cin, 3, stride=2, pad=1, group=cin)
    r = _bn(m, r, r + "_bn", cin, eps=1e-3)
    r = _conv(m, r, f"{p}_right_conv_3", cin, half, 1)
    r = _bn(m, r, r + "_bn", half, eps=1e-3)
    r = brew.relu(m, r, r)
    left = _conv(m, x, f"{p}_left_dwconv", cin, cin, 3, stride=2, pad=1, group=cin)
    left = _bn(m, left, left + "_bn", cin, eps=1e-3)
    left = _conv(m, left, f"{p}_left_conv_1", cin, half, 1)
    left = _bn(m, left, left + "_bn", half, eps=1e-3)
    left = brew.relu(m, left, left)
    c = brew.concat(m, [r, left], f"{p}_concated")
    return m.net.ChannelShuffle(c, f"{p}_shuffled", group=2)


def _shuffle_s1(m, x, p, c):
    half = c // 2
    m.net.Split(x, [f"{p}_left", f"{p}_right"])
    r = _conv(m, f"{p}_right", f"{p}_right_conv_1", half, half, 1)
    r = _bn(m, r, r + "_bn", half, eps=1e-3)
    r = brew.relu(m, r, r)
    r = _conv(m, r, f"{p}_right_dwcon", half, half, 3, pad=1, group=half)
    r = _bn(m, r, r + "_bn", half, eps=1e-3)
    r = _conv(m, r, f"{p}_right_conv_3", half, half, 1)
    r = _bn(m, r, r + "_bn", half, eps=1e-3)
    r = brew.relu(m, r, r)
    cc = brew.concat(m, [r, f"{p}_left"], f"{p}_concated")
    return m.net.ChannelShuffle(cc, f"{p}_shuffled", group=2)


def shufflenet_v2(m, data):
    chans = [24, 116, 232, 464, 1024]
    h = _conv(m, data, "conv_1", 3, chans[0], 3, stride=2)
    h = brew.max_pool(m, h, "pool_1", kernel=3, stride=2)
    cin = chans[0]
    for idx, (cout, n1) in enumerate(zip(chans[1:4], (3, 7, 3))):
        h = _shuffle_s2(m, h, f"stage_{idx + 2}_stride2_1", cin, cout)
        cin = cout
        for i in range(n1):
            h = _shuffle_s1(m, h, f"stage_{idx + 2}_stride1_{i + 1}", cin)
    h = _conv(m, h, "conv_5", cin, chans[4], 1)
    h = brew.average_pool(m, h, "avg_pooled", kernel=7)
    h = brew.fc(m, h, "last_out_L1000", chans[4], 1000)
    return brew.softmax(m, h, "softmax"), (3, 224, 224)


# -- DenseNet-121 -------------------------------------------------------------------------------------------


def densenet121(m, data, growth=32, blocks=(6, 12, 24, 16)):
    h = _conv(m, data, "conv1", 3, 64, 7, stride=2, pad=3, no_bias=1)
    h = _bn(m, h, "conv1/bn", 64)
    h = brew.relu(m, h, h)
    h = brew.max_pool(m, h, "pool1", kernel=3, stride=2, pad=1)
    c = 64
    for b, n in enumerate(blocks):
        for i in range(n):
            p = f"conv{b + 2}_{i + 1}"
            t = _bn(m, h, f"{p}/x1/bn", c)
            t = brew.relu(m, t, t)
            t = _conv(m, t, f"{p}/x1", c, 4 * growth, 1, no_bias=1)
            t = _bn(m, t, f"{p}/x2/bn", 4 * growth)
            t = brew.relu(m, t, t)
            t = _conv(m, t, f"{p}/x2", 4 * growth, growth, 3, pad=1, no_bias=1)
            h = brew.concat(m, [h, t], f"concat_{b + 2}_{i + 1}")
            c += growth
        if b < len(blocks) - 1:
            p = f"conv{b + 2}_blk"
            t = _bn(m, h, f"{p}/bn", c)
            t = brew.relu(m, t, t)
            h = _conv(m, t, p, c, c // 2, 1, no_bias=1)
            h = brew.average_pool(m, h, f"pool{b + 2}", kernel=2, stride=2)
            c //= 2
    h = _bn(m, h, "conv5_blk/bn", c)
    h = brew.relu(m, h, h)
    h = brew.average_pool(m, h, "pool5", global_pooling=True)
    h = brew.fc(m, h, "fc6", c, 1000)
    return brew.softmax(m, h, "softmax"), (3, 224, 224)


# -- AlexNet (caffe2/python/convnet_benchmarks.py) ---------------------------------------------------------


def alexnet(m, data):
    h = _conv(m, data, "conv1", 3, 64, 11, stride=4, pad=2)
    h = brew.relu(m, h, h)
    h = brew.max_pool(m, h, "pool1", kernel=3, stride=2)
    h = _conv(m, h, "conv2", 64, 192, 5, pad=2)
    h = brew.relu(m, h, h)
    h = brew.max_pool(m, h, "pool2", kernel=3, stride=2)
    h = _conv(m, h, "conv3", 192, 384, 3, pad=1)
    h = brew.relu(m, h, h)
    h = _conv(m, h, "conv4", 384, 256, 3, pad=1)
    h = brew.relu(m, h, h)
    h = _conv(m, h, "conv5", 256, 256, 3, pad=1)
    h = brew.relu(m, h, h)
    h = brew.max_pool(m, h, "pool5", kernel=3, stride=2)
    h = brew.fc(m, h, "fc6", 256 * 6 * 6, 4096)
    h = brew.relu(m, h, h)
    h = brew.dropout(m, h, "drop6", ratio=0.5, is_test=1)
    h = brew.fc(m, h, "fc7", 4096, 4096)
    h = brew.relu(m, h, h)
    h = brew.dropout(m, h, "drop7", ratio=0.5, is_test=1)
    h = brew.fc(m, h, "fc8", 4096, 1000)
    return brew.softmax(m, h, "softmax"), (3, 224, 224)


BUILDERS = {
    "resnet50": resnet50,
    "squeezenet1_1": squeezenet1_1,
    "resnet20_cifar": resnet20_cifar,
    "shufflenet_v2": shufflenet_v2,
    "densenet121": densenet121,
    "alexnet": alexnet,
}


def _random_weight(name: str, shape: tuple, rng: np.random.Generator) -> np.ndarray:
    """Plausible random values by parameter role (from brew's naming: _w, _b, _s, _rm, _riv)."""
    f32 = np.float32
    if name.endswith(("_riv", "_s")):
        return rng.random(shape, dtype=f32) + f32(0.5)
    if name.endswith("_rm"):
        return rng.standard_normal(shape, dtype=f32) * f32(0.1)
    if name.endswith("_b"):
        return rng.standard_normal(shape, dtype=f32) * f32(0.05)
    fan_in = int(np.prod(shape[1:])) or 1  # a filter or FC weight: He scaling over the fan-in
    return rng.standard_normal(shape, dtype=f32) * f32(np.sqrt(2.0 / fan_in))


def build(name: str, batch: int = 1, seed: int = 0) -> RealModel:
    """The model ``name`` (a key of BUILDERS) for ``batch`` images, with seeded random weights."""
    if name not in BUILDERS:
        raise KeyError(f"unknown model {name!r}; known: {sorted(BUILDERS)}")
    m = ModelHelper(name, arg_scope={"order": "NCHW"})
    out, chw = BUILDERS[name](m, "data")
    rng = np.random.default_rng(seed)
    weights = {p: _random_weight(p, tuple(info.shape), rng) for p, info in m._parameters_info.items()}
    predict = NetDef()
    predict.CopyFrom(m.net.Proto())
    predict.name = name
    del predict.external_input[:]
    predict.external_input.extend(["data", *weights])
    del predict.external_output[:]
    predict.external_output.append(str(out))
    logits = next(op.input[0] for op in predict.op if op.type == "Softmax" and op.output[0] == str(out))
    return RealModel(name, predict, weights, "data", (batch, *chw), str(out), logits)


def model_flops(model: RealModel) -> float:
    """FLOPs of one inference from the op schemas' cost functions over inferred shapes."""
    from framework.net.inference import infer_net
    from framework.ops.arguments import parse_args
    from framework.ops.registry import get_schema
    from framework.ops.schema import TensorSpec

    f32 = np.dtype("float32")
    known = {model.input_name: TensorSpec(model.input_shape, f32)}
    known.update({k: TensorSpec(v.shape, f32) for k, v in model.weights.items()})
    specs = infer_net(model.predict_net, known)
    total = 0.0
    for op in model.predict_net.op:
        schema = get_schema(op.type)
        if schema.cost is None or op.type not in ("Conv", "FC"):
            continue
        args = parse_args(schema, op.arg, op.type, len(op.input), len(op.output))
        total += float(schema.cost(args, [specs[b] for b in op.input], [specs[b] for b in op.output]).flops)
    return total
