"""The benchmark models in PyTorch eager, and in onnxruntime through our ONNX export (framework.onnx).

``TorchNet`` is a ``torch.nn.Module`` that runs a Caffe2 predict net's ops as the equivalent
``torch.nn.functional`` calls (the same calls a hand-written PyTorch model of the architecture makes:
conv2d, batch_norm, relu, max_pool2d/avg_pool2d, add, cat, split, a view-transpose channel shuffle,
linear, softmax), with the model's own weights as tensors sharing the numpy arrays' memory. It covers
the op types and arguments the six models use and raises on anything else.

Caffe2 details carried over: MaxPool ``legacy_pad=3`` (Caffe's ceil mode) is ``ceil_mode=True``;
ChannelShuffle(group=g) views C as (g, C/g) and swaps the two; FC flattens at axis 1; Dropout(is_test)
is the identity; SpatialBN(is_test) is batch_norm with the running statistics and ``epsilon``.
"""

from __future__ import annotations

import numpy as np


def _args(op) -> dict:
    """{name: value} of ``op``'s arguments (strings decoded), read by the framework's one argument reader."""
    from framework.ops.arg_reader import ArgReader

    reader = ArgReader(op)
    return {a.name: reader.value(a.name) for a in op.arg}


def _pair(a: dict, name: str, default: int) -> tuple[int, int]:
    if f"{name}_h" in a:
        return a[f"{name}_h"], a[f"{name}_w"]
    if f"{name}s" in a:
        return tuple(a[f"{name}s"][:2])
    v = a.get(name, default)
    return v, v


def _pads(a: dict) -> tuple[int, int]:
    if "pads" in a:
        p = a["pads"]
        if p[0] != p[2] or p[1] != p[3]:
            raise NotImplementedError(f"asymmetric pads {p}")
        return p[0], p[1]
    if "pad_t" in a:
        if a["pad_t"] != a["pad_b"] or a["pad_l"] != a["pad_r"]:
            raise NotImplementedError("asymmetric pads")
        return a["pad_t"], a["pad_l"]
    p = a.get("pad", 0)
    return p, p


def make_torch_net(predict_net, weights: dict[str, np.ndarray], fetch: str | None = None):
    """A torch.nn.Module computing ``predict_net`` (input: the net's first external input), returning
    blob ``fetch`` (default: the net's first external output)."""
    import torch
    import torch.nn.functional as F

    class TorchNet(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.ops = [(op.type, list(op.input), list(op.output), _args(op)) for op in predict_net.op]
            for k, v in weights.items():
                self.register_buffer(k.replace("/", "__").replace(".", "_"), torch.from_numpy(v))
            self.keys = {k: k.replace("/", "__").replace(".", "_") for k in weights}
            self.input_name = predict_net.external_input[0]
            self.output_name = fetch or predict_net.external_output[0]

        def forward(self, x):
            env = {self.input_name: x}
            for k, attr in self.keys.items():
                env[k] = getattr(self, attr)
            for t, ins, outs, a in self.ops:
                v = [env[i] for i in ins]
                if t == "Conv":
                    y = F.conv2d(
                        v[0],
                        v[1],
                        v[2] if len(v) > 2 else None,
                        stride=_pair(a, "stride", 1),
                        padding=_pads(a),
                        dilation=_pair(a, "dilation", 1),
                        groups=a.get("group", 1),
                    )
                elif t == "SpatialBN":
                    y = F.batch_norm(v[0], v[3], v[4], v[1], v[2], False, 0.0, a.get("epsilon", 1e-5))
                elif t == "Relu":
                    y = F.relu(v[0])
                elif t in ("MaxPool", "AveragePool"):
                    if a.get("global_pooling"):
                        y = F.adaptive_avg_pool2d(v[0], 1) if t == "AveragePool" else F.adaptive_max_pool2d(v[0], 1)
                    else:
                        kw = dict(kernel_size=_pair(a, "kernel", 1), stride=_pair(a, "stride", 1), padding=_pads(a))
                        kw["ceil_mode"] = a.get("legacy_pad", 0) == 3
                        if t == "MaxPool":
                            y = F.max_pool2d(v[0], **kw)
                        else:
                            y = F.avg_pool2d(v[0], count_include_pad=False, **kw)
                elif t == "Sum":
                    y = v[0]
                    for z in v[1:]:
                        y = y + z
                elif t == "Concat":
                    y = torch.cat(v, dim=1)
                elif t == "Split":
                    c = v[0].shape[1] // len(outs)
                    for o, part in zip(outs, torch.split(v[0], c, dim=1)):
                        env[o] = part
                    continue
                elif t == "ChannelShuffle":
                    g = a["group"]
                    n, c, h, w = v[0].shape
                    y = v[0].reshape(n, g, c // g, h, w).transpose(1, 2).reshape(n, c, h, w)
                elif t == "FC":
                    y = F.linear(v[0].flatten(1), v[1], v[2])
                elif t == "Softmax":
                    y = F.softmax(v[0], dim=1)
                elif t == "Dropout":
                    if not a.get("is_test"):
                        raise NotImplementedError("Dropout in training mode")
                    y = v[0]
                else:
                    raise NotImplementedError(f"op type {t} in the torch translation")
                env[outs[0]] = y
            return env[self.output_name]

    return TorchNet().eval()


def torch_runner(model, x: np.ndarray, threads: int = 1):
    """(run, get): run() does one inference (to the logits) under inference_mode; get() returns them."""
    import torch

    torch.set_num_threads(threads)
    net = make_torch_net(model.predict_net, model.weights, model.logits_name)
    xt = torch.from_numpy(x)
    res = {}

    def run():
        with torch.inference_mode():
            res["y"] = net(xt)

    return run, lambda: res["y"].numpy()


def onnx_model_bytes(model, x: np.ndarray) -> bytes:
    """The model exported by torch.onnx (TorchScript exporter, opset 17) as serialized ONNX."""
    import io

    import torch

    net = make_torch_net(model.predict_net, model.weights, model.logits_name)
    buf = io.BytesIO()
    with torch.no_grad():
        torch.onnx.export(
            net, (torch.from_numpy(x),), buf, input_names=["data"], output_names=["out"], opset_version=17, dynamo=False
        )
    return buf.getvalue()


def framework_onnx_model_bytes(model, x: np.ndarray) -> bytes:
    """The model exported by our own exporter (``framework.onnx.export``; logits output), serialized."""
    from framework.memory.workspace import Workspace
    from framework.onnx import export

    ws = Workspace()
    for k, v in model.weights.items():
        ws.feed_blob(k, v)
    onnx_model = export(
        model.predict_net, input_shapes={model.input_name: x.shape}, workspace=ws, outputs=[model.logits_name]
    )
    return onnx_model.SerializeToString()


def ort_runner(model, x: np.ndarray, threads: int = 1):
    """(run, get) over an onnxruntime session of the model exported by ``framework.onnx.export``,
    ``threads`` intra-op threads."""
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    sess = ort.InferenceSession(framework_onnx_model_bytes(model, x), so, providers=["CPUExecutionProvider"])
    feed = {model.input_name: x}
    res = {}

    def run():
        res["y"] = sess.run(None, feed)[0]

    return run, lambda: res["y"]
