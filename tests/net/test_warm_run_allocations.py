"""A warm run of a memory-planned net allocates nothing, also where a shared buffer's occupants change
element type (Reshape's int64 old-shape output between float32 activations, as in every attention head
split an ONNX exporter emits), and on a small torch-exported transformer encoder end to end."""

from __future__ import annotations

import numpy as np
import pytest

from bench.common import allocations_per_run
from framework.core import CreateOperator
from framework.memory.workspace import Workspace
from framework.net.memory_planner import optimize_inference_net
from framework.proto.framework_pb2 import NetDef


def _typed_sharing_net() -> NetDef:
    net = NetDef(name="typed_sharing")
    net.op.extend(
        [
            CreateOperator("Transpose", ["data"], ["a"], axes=[0, 2, 1]),
            CreateOperator("Transpose", ["data"], ["a2"], axes=[0, 2, 1]),
            CreateOperator("Add", ["a", "a2"], ["b"]),
            CreateOperator("Reshape", ["b"], ["c", "c_old"], shape=[0, 0, 0]),
            CreateOperator("Transpose", ["c"], ["d"], axes=[0, 2, 1]),
            CreateOperator("Relu", ["d"], ["y"]),
        ]
    )
    net.external_input.append("data")
    net.external_output.append("y")
    return net


def test_shared_buffer_switching_between_int64_and_float32_is_reused():
    x = np.random.RandomState(0).randn(2, 6, 5).astype(np.float32)
    planned, report = optimize_inference_net(_typed_sharing_net(), shapes={"data": x.shape})
    # the premise: the int64 shape and a float32 activation of the buffer's full size take turns in one blob
    assert report.renamed["c_old"] == report.renamed["d"] == report.renamed["a2"], report.renamed
    ws = Workspace()
    ws.feed_blob("data", x)
    net = ws.create_net(planned)
    assert allocations_per_run(net.run, n=3, warm=2) == 0
    want = np.maximum(2 * x, 0)
    np.testing.assert_array_equal(ws.fetch_blob("y"), want)


def test_small_transformer_encoder_onnx_warm_run_allocates_nothing():
    torch = pytest.importorskip("torch")
    pytest.importorskip("onnx")
    import onnx

    from bench.transformer_models import onnx_bytes
    from framework.onnx import backend

    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, activation="gelu", batch_first=True)
    mod = torch.nn.TransformerEncoder(layer, 1, enable_nested_tensor=False).eval()
    x = torch.randn(2, 5, 16)
    model = onnx_bytes(mod, x)
    with torch.no_grad():
        want = mod(x).numpy()
    rep = backend.prepare(onnx.load_from_string(model))
    feeds = {"x": x.numpy()}
    assert allocations_per_run(lambda: rep.run(feeds), n=3, warm=2) == 0
    np.testing.assert_allclose(np.asarray(rep.run(feeds)[0]), want, rtol=1e-4, atol=1e-5)
