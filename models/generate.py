"""Generate the model zoo's protobuf text from ModelHelper/brew definitions.

The .pbtxt files are the source of truth that `framework train` reads; this
script is how they were written, and tests/test_models.py checks that they
are current. Run from the repository root:

    python models/generate.py
"""

from __future__ import annotations

import os
import sys
from typing import Callable

from google.protobuf import text_format

from framework.caffe2.python import brew, optimizer
from framework.caffe2.python.model_helper import ModelHelper
from framework.proto.framework_pb2 import NetDef

HERE = os.path.dirname(os.path.abspath(__file__))
BATCH = 64
CLASSES = 10


def logreg_forward(model: ModelHelper, data: str) -> str:
    return brew.fc(model, data, "logits", dim_in=64, dim_out=CLASSES)


def mlp_forward(model: ModelHelper, data: str) -> str:
    h = brew.relu(model, brew.fc(model, data, "fc1", dim_in=64, dim_out=128), "fc1")
    h = brew.relu(model, brew.fc(model, h, "fc2", dim_in=128, dim_out=64), "fc2")
    return brew.fc(model, h, "logits", dim_in=64, dim_out=CLASSES)


def cnn_forward(model: ModelHelper, data: str) -> str:
    h = brew.conv(model, data, "conv1", dim_in=1, dim_out=16, kernel=3, pad=1)
    h = brew.max_pool(model, brew.relu(model, h, "conv1"), "pool1", kernel=2, stride=2)
    h = brew.conv(model, h, "conv2", dim_in=16, dim_out=32, kernel=3, pad=1)
    h = brew.max_pool(model, brew.relu(model, h, "conv2"), "pool2", kernel=2, stride=2)
    h = brew.relu(model, brew.fc(model, h, "fc3", dim_in=32 * 2 * 2, dim_out=64), "fc3")
    return brew.fc(model, h, "logits", dim_in=64, dim_out=CLASSES)


MODELS: dict[str, tuple[Callable[[ModelHelper, str], str], dict]] = {
    "logreg_digits": (logreg_forward, {"base_learning_rate": 0.5, "momentum": 0.9}),
    "mlp_digits": (mlp_forward, {"base_learning_rate": 0.1, "momentum": 0.9, "weight_decay": 1e-3}),
    "cnn_digits": (cnn_forward, {"base_learning_rate": 0.05, "momentum": 0.9}),
    "char_lstm": (None, {}),  # build_char_lstm
}


# Character-level LSTM language model (Caffe2's char_rnn tutorial shape, with an embedding).
CHAR_VOCAB, CHAR_EMBED, CHAR_HIDDEN, CHAR_BATCH = 128, 32, 128, 32


def char_forward(model: ModelHelper, data: str, forward_only: bool) -> str:
    """(N, T) int32 character ids -> (N * T, vocab) logits, through an LSTM over time."""
    from framework.caffe2.python import rnn_cell

    init = model.param_init_net
    if model.init_params:
        init.ConstantFill([], "lstm/h0", shape=[CHAR_HIDDEN], value=0.0)
        init.ConstantFill([], "lstm/c0", shape=[CHAR_HIDDEN], value=0.0)
    embed = model.create_param("embed", [CHAR_VOCAB, CHAR_EMBED], ("GaussianFill", {"std": 0.1}))
    ids_t = model.net.Transpose(data, "ids_t", axes=[1, 0])  # time-major (T, N)
    x = model.net.Gather([embed, ids_t], "embedded")  # (T, N, E)
    out, _, _, _ = rnn_cell.LSTM(
        model, x, None, ("lstm/h0", "lstm/c0"), CHAR_EMBED, CHAR_HIDDEN, scope="lstm", forward_only=forward_only
    )
    h = model.net.Transpose(out, "hidden_bt", axes=[1, 0, 2])  # (N, T, H)
    logits = brew.fc(model, h, "char_logits", dim_in=CHAR_HIDDEN, dim_out=CHAR_VOCAB, axis=2)
    flat, _ = model.net.Reshape(logits, ["logits", "logits_shape"], shape=[-1, CHAR_VOCAB])
    return flat


def build_char_lstm() -> dict[str, NetDef]:
    optimizer.reset_optimizer_instance_count()
    train = ModelHelper(name="char_lstm_train")
    reader = train.param_init_net.CreateDB([], "train_reader", db="train.minidb", db_type="minidb")
    data, label = train.net.TensorProtosDBInput([reader], ["data", "label"], batch_size=CHAR_BATCH)
    logits = char_forward(train, data, forward_only=False)
    flat_label, _ = train.net.Reshape(label, ["label_flat", "label_shape"], shape=[-1])
    softmax, loss = train.net.SoftmaxWithLoss([logits, flat_label], ["softmax", "loss"])
    brew.accuracy(train, [softmax, flat_label], "accuracy")
    train.AddGradientOperators([loss])
    optimizer.build_adam(train, base_learning_rate=0.005)

    predict = ModelHelper(name="char_lstm_predict", init_params=False)
    probs = brew.softmax(predict, char_forward(predict, "data", forward_only=True), "softmax")
    predict_def = predict.net.Proto()
    del predict_def.external_input[:]
    predict_def.external_input.extend(["data"] + [str(p) for p in predict.params] + ["lstm/h0", "lstm/c0"])
    del predict_def.external_output[:]
    predict_def.external_output.append(str(probs))
    nets = {
        "init_net.pbtxt": train.param_init_net.Proto(),
        "train_net.pbtxt": train.net.Proto(),
        "predict_net.pbtxt": predict_def,
    }

    # Names that do not depend on what this process built before (Caffe2 makes net names unique).
    def strip(net: NetDef) -> None:
        for op in net.op:
            op.ClearField("debug_info")  # creation sites would make the files machine-specific
            for a in op.arg:
                if a.HasField("n"):
                    a.n.name = f"{net.name}/{op.type}/{a.name}"
                    strip(a.n)

    for fname, net in nets.items():
        net.name = "char_lstm_" + fname.split("_net")[0]
        strip(net)
    return nets


def build(name: str) -> dict[str, NetDef]:
    """The init, train and predict NetDefs of model ``name``."""
    if name == "char_lstm":
        return build_char_lstm()
    forward, opt = MODELS[name]
    optimizer.reset_optimizer_instance_count()  # blob names must not depend on what was built before
    train = ModelHelper(name=f"{name}_train")
    reader = train.param_init_net.CreateDB([], "train_reader", db="train.minidb", db_type="minidb")
    data, label = train.net.TensorProtosDBInput([reader], ["data", "label"], batch_size=BATCH)
    logits = forward(train, data)
    softmax, loss = train.net.SoftmaxWithLoss([logits, label], ["softmax", "loss"])
    brew.accuracy(train, [softmax, label], "accuracy")
    train.AddGradientOperators([loss])
    optimizer.build_sgd(train, policy="step", stepsize=500, gamma=0.5, **opt)

    predict = ModelHelper(name=f"{name}_predict", init_params=False)
    probs = brew.softmax(predict, forward(predict, "data"), "softmax")
    predict_def = predict.net.Proto()
    del predict_def.external_input[:]
    predict_def.external_input.extend(["data"] + [str(p) for p in predict.params])
    del predict_def.external_output[:]
    predict_def.external_output.append(str(probs))

    init_def = train.param_init_net.Proto()
    train_def = train.net.Proto()
    for net in (init_def, train_def, predict_def):
        for op in net.op:
            op.ClearField("debug_info")  # creation sites would make the files machine-specific
    return {"init_net.pbtxt": init_def, "train_net.pbtxt": train_def, "predict_net.pbtxt": predict_def}


# -- DLRM-style click model (framework make-db clicks) -------------------------------------------------
# A record is ``data`` float32 [DENSE + SPARSE] (dense features, then one categorical id per feature, ids
# stored exactly as floats) and ``label`` float32 [1] (click or not): the one-data-blob convention of the
# CLI's train/predict. Each categorical feature has its own embedding table looked up by SparseLengthsSum.
DENSE, SPARSE, VOCAB, EMBED, CLICK_BATCH = 4, 3, 1000, 8, 128


def _filler(model: ModelHelper, name: str, shape: list[int], std: float) -> str:
    return model.create_param(name, shape, ("GaussianFill", {"std": std}), tags="WEIGHT")


def dlrm_forward(model: ModelHelper, data: str) -> str:
    """Bottom MLP on the dense features; embeddings of the categorical ids; pairwise dot products of the
    F + 1 vectors (strict upper triangle, BatchGather); top MLP; one logit per example."""
    net = model.net
    dense = net.Slice([data], "dense", starts=[0, 0], ends=[-1, DENSE])
    cat = net.Slice([data], "cat", starts=[0, DENSE], ends=[-1, DENSE + SPARSE])
    ids = net.Cast([cat], "ids", to=10)  # INT64
    h = brew.relu(model, brew.fc(model, dense, "bot1", dim_in=DENSE, dim_out=16), "bot1")
    x0 = brew.relu(model, brew.fc(model, h, "bot2", dim_in=16, dim_out=EMBED), "bot2")
    vectors, lengths = [x0], None
    for f in range(SPARSE):
        col = net.FlattenToVec([net.Slice([ids], f"ids_{f}_col", starts=[0, f], ends=[-1, f + 1])], f"ids_{f}")
        if lengths is None:  # one id per example and feature: LENGTHS of ones, shaped by the batch
            lengths = net.ConstantFill([col], "lengths", value=1, dtype=2)  # INT32
        table = _filler(model, f"emb_{f}", [VOCAB, EMBED], 0.1)
        vectors.append(net.SparseLengthsSum([table, col, lengths], f"pooled_{f}"))
    n = SPARSE + 1
    flat, _ = net.Concat(vectors, ["vectors", "vectors_split_info"], axis=1)
    z, _ = net.Reshape([flat], ["z", "z_old_shape"], shape=[-1, n, EMBED])
    pairs = net.BatchMatMul([z, z], "pairs", trans_b=1)
    pairs_flat, _ = net.Reshape([pairs], ["pairs_flat", "pairs_old_shape"], shape=[-1, n * n])
    upper = [i * n + j for i in range(n) for j in range(i + 1, n)]
    if not _defined(model.param_init_net, "upper_idx"):
        model.param_init_net.GivenTensorIntFill([], "upper_idx", shape=[len(upper)], values=upper)
    inter = net.BatchGather([pairs_flat, "upper_idx"], "interactions")
    top_in, _ = net.Concat([x0, inter], ["top_in", "top_in_split_info"], axis=1)
    h = brew.relu(model, brew.fc(model, top_in, "top1", dim_in=EMBED + len(upper), dim_out=16), "top1")
    return brew.fc(model, h, "logit", dim_in=16, dim_out=1)


def _defined(net, blob: str) -> bool:
    return any(blob in op.output for op in net.Proto().op)


def build_dlrm(name: str) -> dict[str, NetDef]:
    """Train: SigmoidCrossEntropyWithLogits + row-wise sparse Adagrad on the tables (Adagrad elsewhere).
    Predict: ``softmax`` = Softmax([0, logit]) = [P(no click), P(click)]."""
    optimizer.reset_optimizer_instance_count()
    train = ModelHelper(name=f"{name}_train")
    reader = train.param_init_net.CreateDB([], "train_reader", db="train.minidb", db_type="minidb")
    data, label = train.net.TensorProtosDBInput([reader], ["data", "label"], batch_size=CLICK_BATCH)
    logit = dlrm_forward(train, data)
    xent = train.net.SigmoidCrossEntropyWithLogits([logit, label], "xent")
    loss = train.net.AveragedLoss([xent], "loss")
    train.AddGradientOperators([loss])
    optimizer.build_adagrad(train, base_learning_rate=0.1, rowWise=True, epsilon=1e-6)

    predict = ModelHelper(name=f"{name}_predict", init_params=False)
    logit = dlrm_forward(predict, "data")
    zeros = predict.net.ConstantFill([logit], "zeros", value=0.0)
    two, _ = predict.net.Concat([zeros, logit], ["two_logits", "two_logits_split_info"], axis=1)
    probs = predict.net.Softmax([two], "softmax")
    predict_def = predict.net.Proto()
    del predict_def.external_input[:]
    predict_def.external_input.extend(["data", "upper_idx"] + [str(p) for p in predict.params])
    del predict_def.external_output[:]
    predict_def.external_output.append(str(probs))
    init_def = train.param_init_net.Proto()
    train_def = train.net.Proto()
    for net in (init_def, train_def, predict_def):
        for op in net.op:
            op.ClearField("debug_info")
    return {"init_net.pbtxt": init_def, "train_net.pbtxt": train_def, "predict_net.pbtxt": predict_def}


BUILDERS: dict[str, Callable[[str], dict[str, NetDef]]] = {"dlrm_clicks": build_dlrm}
ALL = [*MODELS, *BUILDERS]


def render(name: str) -> dict[str, str]:
    header = f"# Generated by models/generate.py ({name}); edit the generator, not this file.\n"
    nets = BUILDERS[name](name) if name in BUILDERS else build(name)
    return {f: header + text_format.MessageToString(net) for f, net in nets.items()}


def main() -> int:
    for name in ALL:
        folder = os.path.join(HERE, name)
        os.makedirs(folder, exist_ok=True)
        for fname, text in render(name).items():
            with open(os.path.join(folder, fname), "w") as f:
                f.write(text)
        print(f"wrote {folder}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
