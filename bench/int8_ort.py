"""An int8 ResNet-style conv net run two ways on the same quantized weights: Caffe2's Int8 ops (ours, NHWC) against
onnxruntime's QLinearConv / QLinearAdd / QLinearGlobalAveragePool / QLinearMatMul (a QOperator ONNX model built
with onnx.helper, NCHW; onnxruntime moves QLinearConv to NHWC itself).

    OPENBLAS_NUM_THREADS=1 python -m bench.int8_ort [--rounds 20]

It also times an ai.onnx-only variant of the ONNX model (``qoperator_model(standard=True)``: the add and the
pooling as DequantizeLinear / Add or GlobalAveragePool / QuantizeLinear) through our ONNX backend and through
onnxruntime.

The net: a 3x3 stride-2 stem (3 -> 32) on 1x3x224x224, then stages of two basic residual blocks (3x3 conv +
Relu, 3x3 conv, add + Relu) at 32/64/128 channels with 3x3 stride-2 convs between them, global average pooling and
a 128 -> 1000 fully connected layer. Weights are seeded He-normal, quantized per tensor (uint8, zero point 128);
activation scales are calibrated on one float run of the same net (onnxruntime, fp32), so no layer saturates.
Relu convs use output zero point 0, where Int8ConvRelu's clamp and QLinearConv's uint8 clamp are the same Relu.

The two requantize differently (QNNPACK's Q31 fixed point here, onnxruntime's float multiply with round to
even), so codes may differ by one step where a value sits on a rounding boundary; the comparison printed before
timing gives the largest difference of the logits' codes and the share of codes that differ.
"""

from __future__ import annotations

import os

for _v in ("OPENBLAS_NUM_THREADS", "OMP_NUM_THREADS", "MKL_NUM_THREADS"):
    os.environ.setdefault(_v, "1")

import argparse  # noqa: E402
import time  # noqa: E402

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from bench.common import markdown_table, time_round_robin  # noqa: E402

STAGES = ((32, 2), (64, 2), (128, 2))  # (channels, blocks)
CLASSES = 1000


def layers(seed: int = 0):
    """The conv/FC layers in order: dicts with name, input, output, weight (float NCHW), bias, stride, relu, and
    'add' (the residual input) for a block's second conv."""
    rng = np.random.default_rng(seed)

    def conv(name, src, cin, cout, stride=1, relu=True, add=None, k=3):
        std = np.sqrt(2.0 / (cin * k * k)) * (0.5 if add else 1.0)
        w = rng.normal(0, std, (cout, cin, k, k)).astype(np.float32)
        b = rng.normal(0, 0.05, cout).astype(np.float32)
        return dict(name=name, input=src, output=name, w=w, b=b, stride=stride, relu=relu, add=add)

    out = [conv("stem", "x", 3, 32, stride=2)]
    src, cin = "stem", 32
    for si, (c, blocks) in enumerate(STAGES):
        if c != cin:
            out.append(conv(f"down{si}", src, cin, c, stride=2))
            src, cin = f"down{si}", c
        for bi in range(blocks):
            a = conv(f"s{si}b{bi}a", src, c, c)
            b = conv(f"s{si}b{bi}b", a["output"], c, c, relu=False, add=src)
            out += [a, b]
            src = f"s{si}b{bi}"  # the add's output
    fc_w = rng.normal(0, np.sqrt(1.0 / cin), (CLASSES, cin)).astype(np.float32)
    return out, src, fc_w


def float_model(convs, last, fc_w) -> onnx.ModelProto:
    """The float net, every intermediate an output (for calibration)."""
    nodes, inits, outs = [], [], []
    for L in convs:
        inits += [numpy_helper.from_array(L["w"], L["name"] + "_w"), numpy_helper.from_array(L["b"], L["name"] + "_b")]
        conv_out = L["name"] + ("_conv" if L["relu"] else "")
        nodes.append(
            helper.make_node(
                "Conv", [L["input"], L["name"] + "_w", L["name"] + "_b"], [conv_out], pads=[1, 1, 1, 1],
                strides=[L["stride"]] * 2,
            )
        )  # fmt: skip
        if L["relu"]:
            nodes.append(helper.make_node("Relu", [conv_out], [L["output"]]))
        outs.append(L["output"])
        if L["add"]:
            block = L["name"][:-1]
            nodes += [
                helper.make_node("Add", [L["output"], L["add"]], [block + "_sum"]),
                helper.make_node("Relu", [block + "_sum"], [block]),
            ]
            outs.append(block)
    nodes += [
        helper.make_node("GlobalAveragePool", [last], ["pool"]),
        helper.make_node("Flatten", ["pool"], ["flat"]),
        helper.make_node("MatMul", ["flat", "fc_wt"], ["logits"]),
    ]
    inits.append(numpy_helper.from_array(np.ascontiguousarray(fc_w.T), "fc_wt"))
    outs += ["pool", "logits"]
    graph = helper.make_graph(
        nodes, "float_net", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 224, 224])],
        [helper.make_tensor_value_info(o, TensorProto.FLOAT, None) for o in outs], inits,
    )  # fmt: skip
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])


def _session(model: onnx.ModelProto):
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    return ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])


def quantize_w(w: np.ndarray) -> tuple[np.ndarray, float]:
    scale = float(np.float32(np.abs(w).max() / 127.0))
    return np.clip(np.rint(w / np.float32(scale)) + 128, 0, 255).astype(np.uint8), scale


def calibrate(convs, last, fc_w, x: np.ndarray) -> dict[str, tuple[float, int]]:
    """(scale, zero point) of every activation: [0, max] -> zero point 0 after Relu, [min, max] otherwise."""
    sess = _session(float_model(convs, last, fc_w))
    names = [o.name for o in sess.get_outputs()]
    vals = dict(zip(names, sess.run(None, {"x": x})))
    q = {"x": (float(np.float32(255.0 / 255)), 0)}
    for name, v in vals.items():
        lo, hi = min(float(v.min()), 0.0), max(float(v.max()), 1e-3)
        scale = float(np.float32((hi - lo) / 255.0))
        q[name] = (scale, int(np.clip(np.rint(-lo / scale), 0, 255)))
    return q


def int8_netdef(convs, last, fc_w, qp):
    """Caffe2 NetDef (NHWC Int8 ops) and the int8 weight blobs it reads."""
    from framework.caffe2.python import core
    from framework.memory.int8_tensor import Int8Tensor

    net = core.Net("int8_resnet")
    blobs = {}
    net.NCHW2NHWC(["x"], ["x_nhwc"])
    net.Int8Quantize(["x_nhwc"], ["x_q"], Y_scale=qp["x"][0], Y_zero_point=qp["x"][1])
    names = {"x": "x_q"}
    for L in convs:
        wq, ws = quantize_w(L["w"].transpose(0, 2, 3, 1))
        xs = qp[L["input"]][0]
        bs = float(np.float32(np.float32(xs) * np.float32(ws)))
        blobs[L["name"] + "_w"] = Int8Tensor(wq, ws, 128)
        blobs[L["name"] + "_b"] = Int8Tensor(np.rint(L["b"] / bs).astype(np.int32), bs, 0)
        ys, yz = qp[L["output"]]
        op = net.Int8ConvRelu if L["relu"] else net.Int8Conv
        op(
            [names[L["input"]], L["name"] + "_w", L["name"] + "_b"], [L["name"] + "_q"], kernel=3, pad=1,
            stride=L["stride"], order="NHWC", Y_scale=ys, Y_zero_point=yz,
        )  # fmt: skip
        names[L["output"]] = L["name"] + "_q"
        if L["add"]:
            block = L["name"][:-1]
            s, z = qp[block]
            net.Int8AddRelu([L["name"] + "_q", names[L["add"]]], [block + "_q"], Y_scale=s, Y_zero_point=z)
            names[block] = block + "_q"
    s, z = qp["pool"]
    net.Int8AveragePool([names[last]], ["pool_q"], global_pooling=1, order="NHWC", Y_scale=s, Y_zero_point=z)
    fq, fs = quantize_w(fc_w)
    blobs["fc_w"] = Int8Tensor(fq, fs, 128)
    bs = float(np.float32(np.float32(s) * np.float32(fs)))
    blobs["fc_b"] = Int8Tensor(np.zeros(CLASSES, np.int32), bs, 0)
    ls, lz = qp["logits"]
    net.Int8FC(["pool_q", "fc_w", "fc_b"], ["logits_q"], Y_scale=ls, Y_zero_point=lz)
    return net, blobs


def qoperator_model(convs, last, fc_w, qp, standard: bool = False) -> onnx.ModelProto:
    """The same quantized net as an ONNX QOperator model (NCHW). ``standard``: only ai.onnx ops (what our ONNX
    backend runs): the residual add and the pooling as DequantizeLinear, Add / GlobalAveragePool, QuantizeLinear
    (the add's Relu is the uint8 saturation at zero point 0, as in QLinearAdd) instead of com.microsoft's
    QLinearAdd / QLinearGlobalAveragePool."""
    nodes, inits = [], []

    made = set()

    def const(name, value):
        if name not in made:
            made.add(name)
            inits.append(numpy_helper.from_array(np.asarray(value), name))
        return name

    def qparams(name):
        s, z = qp[name]
        return [const(name + "_s", np.float32(s)), const(name + "_z", np.uint8(z))]

    nodes.append(helper.make_node("QuantizeLinear", ["x", *qparams("x")], ["x_q"]))
    names = {"x": "x_q"}
    for L in convs:
        wq, ws = quantize_w(L["w"].transpose(0, 2, 3, 1))
        wq = np.ascontiguousarray(wq.transpose(0, 3, 1, 2))  # the same codes, NCHW
        xs = qp[L["input"]][0]
        bs = np.float32(np.float32(xs) * np.float32(ws))
        w_in = [
            const(L["name"] + "_w", wq),
            const(L["name"] + "_ws", np.float32(ws)),
            const(L["name"] + "_wz", np.uint8(128)),
        ]
        b = const(L["name"] + "_b", np.rint(L["b"] / bs).astype(np.int32))
        nodes.append(
            helper.make_node(
                "QLinearConv", [names[L["input"]], *qparams(L["input"]), *w_in, *qparams(L["output"]), b],
                [L["name"] + "_q"], pads=[1, 1, 1, 1], strides=[L["stride"]] * 2, kernel_shape=[3, 3],
            )
        )  # fmt: skip
        names[L["output"]] = L["name"] + "_q"
        if L["add"] and standard:
            block = L["name"][:-1]
            a, b = L["name"] + "_q", names[L["add"]]
            nodes += [
                helper.make_node("DequantizeLinear", [a, *qparams(L["output"])], [a + "_f"]),
                helper.make_node("DequantizeLinear", [b, *qparams(L["add"])], [block + "_res_f"]),
                helper.make_node("Add", [a + "_f", block + "_res_f"], [block + "_f"]),
                helper.make_node("QuantizeLinear", [block + "_f", *qparams(block)], [block + "_q"]),
            ]
            names[block] = block + "_q"
        elif L["add"]:
            block = L["name"][:-1]
            nodes.append(
                helper.make_node(
                    "QLinearAdd", [L["name"] + "_q", *qparams(L["output"]), names[L["add"]], *qparams(L["add"]),
                                   *qparams(block)], [block + "_q"], domain="com.microsoft",
                )
            )  # fmt: skip
            names[block] = block + "_q"
    if standard:
        nodes += [
            helper.make_node("DequantizeLinear", [names[last], *qparams(last)], ["last_f"]),
            helper.make_node("GlobalAveragePool", ["last_f"], ["pool_f"]),
            helper.make_node("QuantizeLinear", ["pool_f", *qparams("pool")], ["pool_q"]),
        ]
    else:
        nodes.append(
            helper.make_node(
                "QLinearGlobalAveragePool", [names[last], *qparams(last), *qparams("pool")], ["pool_q"],
                domain="com.microsoft", channels_last=0,
            )
        )  # fmt: skip
    nodes.append(helper.make_node("Flatten", ["pool_q"], ["flat_q"]))
    fq, fs = quantize_w(fc_w)
    fc_in = [const("fc_wt", np.ascontiguousarray(fq.T)), const("fc_ws", np.float32(fs)), const("fc_wz", np.uint8(128))]
    nodes.append(
        helper.make_node("QLinearMatMul", ["flat_q", *qparams("pool"), *fc_in, *qparams("logits")], ["logits_q"])
    )
    graph = helper.make_graph(
        nodes, "int8_net", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 3, 224, 224])],
        [helper.make_tensor_value_info("logits_q", TensorProto.UINT8, None)], inits,
    )  # fmt: skip
    return helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    )


def main(argv=None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--rounds", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    a = p.parse_args(argv)
    from framework.caffe2.python import workspace

    convs, last, fc_w = layers(a.seed)
    x = np.random.default_rng(a.seed + 1).normal(0, 1, (1, 3, 224, 224)).astype(np.float32)
    qp = calibrate(convs, last, fc_w, x)
    net, blobs = int8_netdef(convs, last, fc_w, qp)
    prev = workspace.CurrentWorkspace()
    workspace.SwitchWorkspace("int8_ort", True)
    for k, v in blobs.items():
        workspace.FeedBlob(k, v)
    workspace.FeedBlob("x", x)
    workspace.CreateNet(net, True)
    name = net.Proto().name

    def ours():
        workspace.RunNet(name)

    from framework.onnx import backend

    sess = _session(qoperator_model(convs, last, fc_w, qp))
    standard = qoperator_model(convs, last, fc_w, qp, standard=True)
    sess_std, rep = _session(standard), backend.prepare(standard)
    feed = {"x": x}

    def ort():
        return sess.run(None, feed)

    def ours_onnx():
        return rep.run(feed)

    def ort_std():
        return sess_std.run(None, feed)

    ours()
    got = workspace.FetchInt8Blob("logits_q").data.astype(np.int32).reshape(-1)
    want = ort()[0].astype(np.int32).reshape(-1)
    diff = np.abs(got - want)
    print(f"logits codes: max difference {diff.max()}, {np.mean(diff > 0):.1%} differ (Q31 vs float requantization)")
    got, want = (f()[0].astype(np.int32).reshape(-1) for f in (ours_onnx, ort_std))
    diff = np.abs(got - want)
    print(f"ai.onnx model, our backend vs onnxruntime: max difference {diff.max()}, {np.mean(diff > 0):.1%} differ")
    runs = {"ours": ours, "onnxruntime": ort, "ours_onnx": ours_onnx, "onnxruntime_std": ort_std}
    times = time_round_robin(runs, rounds=a.rounds, inner=2, clock=time.process_time)
    workspace.SwitchWorkspace(prev)
    print()
    rows = [
        ["int8 ResNet-style (1x3x224x224)", "ours", "onnxruntime"],
        ["the same, ai.onnx model through our ONNX backend", "ours_onnx", "onnxruntime_std"],
    ]
    print(
        markdown_table(
            [[r, f"{times[o] * 1e3:.1f}", f"{times[t] * 1e3:.1f}", f"{times[o] / times[t]:.2f}"] for r, o, t in rows],
            ["net (1 thread)", "ours CPU ms", "onnxruntime CPU ms", "ours / ort"],
        )
    )


if __name__ == "__main__":
    main()
