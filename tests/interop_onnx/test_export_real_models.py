"""The real-model benchmark architectures (bench/real_models: ResNet-50, SqueezeNet 1.1, CIFAR
ResNet-20, ShuffleNet v2, DenseNet-121, AlexNet) export and give our engine's outputs in
onnxruntime and in onnx's ReferenceEvaluator (batch 1, random weights)."""

from __future__ import annotations

import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from bench.real_models import BUILDERS, build
from framework.memory.workspace import Workspace
from tests.interop_onnx.helpers import check_export


@pytest.mark.slow
@pytest.mark.parametrize("name", sorted(BUILDERS))
def test_real_model_exports_and_agrees(name):
    m = build(name, batch=1)
    ws = Workspace()
    for k, v in m.weights.items():
        ws.feed_blob(k, v)
    # Up to 120 layers of float32 with random weights (logits in the thousands): rounding differs by
    # summation order, so the tolerance is 1e-4 of each output's largest magnitude.
    outs = [m.logits_name, m.output_name]
    feeds = {m.input_name: m.input_data()}
    model = check_export(m.predict_net, ws, feeds, rtol=1e-3, atol=1e-5, scale_tol=1e-4, outputs=outs)
    assert m.output_name in [o.name for o in model.graph.output]
    kinds = {n.op_type for n in model.graph.node}
    assert "Transpose" not in kinds or name == "shufflenet_v2"  # NCHW nets: no layout changes
