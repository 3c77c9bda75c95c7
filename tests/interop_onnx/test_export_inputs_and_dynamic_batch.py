"""ONNX export of models as Caffe2 users have them: placeholder-filled inputs, unused training outputs,
a dynamic batch axis (torch's ``dynamic_axes``)."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from framework.core import CreateOperator  # noqa: E402
from framework.memory.workspace import Workspace  # noqa: E402
from framework.onnx import export  # noqa: E402
from framework.proto.framework_pb2 import NetDef  # noqa: E402
from tests.interop_onnx.helpers import run_onnx  # noqa: E402

RNG = np.random.default_rng(382)
W = RNG.standard_normal((3, 2, 3, 3)).astype(np.float32)


def _net(name, ops, inputs, outputs):
    net = NetDef(name=name)
    net.op.extend(ops)
    net.external_input.extend(inputs)
    net.external_output.extend(outputs)
    return net


def _conv_ref(x, w):
    """Plain NCHW valid cross-correlation, stride 1 (independent of the engine)."""
    n, c, h, wd = x.shape
    k = w.shape[2]
    out = np.zeros((n, w.shape[0], h - k + 1, wd - k + 1))
    for i in range(h - k + 1):
        for j in range(wd - k + 1):
            out[:, :, i, j] = np.einsum("nchw,ochw->no", x[:, :, i : i + k, j : j + k], w)
    return out


def test_an_input_the_init_net_fills_with_a_placeholder_is_an_input_when_declared():
    # BIGBALLON-style init net: `data` is a GivenTensorFill of shape (1, 1)
    init = _net(
        "init",
        [
            CreateOperator("GivenTensorFill", [], ["data"], shape=[1, 1], values=[0.0]),
            CreateOperator("GivenTensorFill", [], ["w"], shape=list(W.shape), values=W.reshape(-1).tolist()),
        ],
        [],
        [],
    )
    pred = _net("p", [CreateOperator("Conv", ["data", "w"], ["y"], kernel=3, no_bias=1)], ["data", "w"], ["y"])
    model = export(pred, init, input_shapes={"data": (2, 2, 5, 5)})
    assert [i.name for i in model.graph.input] == ["data"]
    assert [d.dim_value for d in model.graph.input[0].type.tensor_type.shape.dim] == [2, 2, 5, 5]
    x = RNG.standard_normal((2, 2, 5, 5)).astype(np.float32)
    got, _ = run_onnx(model, {"data": x})
    np.testing.assert_allclose(got[0], _conv_ref(x.astype(np.float64), W.astype(np.float64)), rtol=1e-4, atol=1e-5)


def test_outputs_nothing_reads_are_dropped_not_fatal():
    # AlexNet/GoogLeNet from the zoo: LRN with its training-form `scale` output, read by nothing
    pred = _net(
        "lrn",
        [CreateOperator("LRN", ["x"], ["y", "y_scale"], size=3, alpha=1e-4, beta=0.75, bias=1.0)],
        ["x"],
        ["y"],
    )
    x = RNG.standard_normal((2, 4, 3, 3)).astype(np.float32)
    model = export(pred, inputs={"x": x})
    got, _ = run_onnx(model, {"x": x})
    sq = np.pad(x.astype(np.float64) ** 2, ((0, 0), (1, 1), (0, 0), (0, 0)))
    window = sq[:, :-2] + sq[:, 1:-1] + sq[:, 2:]
    want = x / (1.0 + 1e-4 / 3 * window) ** 0.75
    np.testing.assert_allclose(got[0], want, rtol=1e-4, atol=1e-6)
    # an unused output that is a declared graph output still needs its expression
    pred.external_output.append("y_scale")
    with pytest.raises(Exception, match="scale"):
        export(pred, inputs={"x": x})


def test_a_dynamic_batch_axis_runs_any_batch():
    fc_w = RNG.standard_normal((5, 12)).astype(np.float32)
    ws = Workspace()
    ws.feed_blob("fc_w", fc_w)
    ws.feed_blob("fc_b", np.zeros(5, np.float32))
    pred = _net(
        "mlp",
        [
            CreateOperator("Reshape", ["data"], ["flat", "old"], shape=[1, 12]),
            CreateOperator("FC", ["flat", "fc_w", "fc_b"], ["y"]),
        ],
        ["data", "fc_w", "fc_b"],
        ["y"],
    )
    x1 = RNG.standard_normal((1, 3, 4)).astype(np.float32)
    fixed = export(pred, workspace=ws, inputs={"data": x1})
    model = export(pred, workspace=ws, inputs={"data": x1}, dynamic_axes={"data": {0: "batch"}})
    assert model.graph.input[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    assert model.graph.output[0].type.tensor_type.shape.dim[0].dim_param == "batch"
    x8 = RNG.standard_normal((8, 3, 4)).astype(np.float32)
    got, _ = run_onnx(model, {"data": x8})
    np.testing.assert_allclose(got[0], x8.reshape(8, 12).astype(np.float64) @ fc_w.T, rtol=1e-4, atol=1e-5)
    from onnxruntime.capi.onnxruntime_pybind11_state import InvalidArgument

    with pytest.raises(InvalidArgument, match="data"):  # the default export fixes the batch
        run_onnx(fixed, {"data": x8})
    with pytest.raises(Exception, match="only axis 0"):
        export(pred, workspace=ws, inputs={"data": x1}, dynamic_axes={"data": {1: "t"}})
