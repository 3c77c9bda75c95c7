"""Once warm, a run of each benchmarked model family allocates nothing (small shapes of the models
``bench/`` times): torchvision CNNs exported by torch through ``framework.onnx.backend``, ONNX LSTM/GRU and
Caffe2's InferenceLSTM, an int8 net in Caffe2's quantized layout, and training steps (a CIFAR ResNet and the
LSTM language model). The transformer encoder's case is in ``tests/net/test_warm_run_allocations.py``."""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest

from bench.common import allocations_per_run


def _onnx_runner(mod, x, **kw):
    torch = pytest.importorskip("torch")
    onnx = pytest.importorskip("onnx")
    from framework.onnx import backend

    buf = io.BytesIO()
    with torch.no_grad(), warnings.catch_warnings():
        warnings.simplefilter("ignore")  # the legacy exporter's deprecation notes
        torch.onnx.export(mod, (x,), buf, opset_version=17, input_names=["x"], output_names=["y"], dynamo=False)
    rep = backend.prepare(onnx.load_from_string(buf.getvalue()))
    feeds = {"x": x.numpy()}
    return lambda: rep.run(feeds), lambda: np.asarray(rep.run(feeds)[0])


@pytest.mark.slow
@pytest.mark.parametrize("name", ["mobilenet_v2", "shufflenet_v2_x0_5", "mobilenet_v3_small"])
def test_torchvision_cnn_onnx(name):
    torch = pytest.importorskip("torch")
    from bench import torchvision_onnx

    try:
        torchvision_onnx.torchvision_models()
    except Exception as e:  # pragma: no cover - no torchvision, or one that cannot load its models at all
        pytest.skip(f"torchvision models unavailable: {e}")
    model = torchvision_onnx.build(name)
    x = torch.randn(1, 3, 32, 32, generator=torch.Generator().manual_seed(0))
    run, out = _onnx_runner(model, x)
    assert allocations_per_run(run, n=3, warm=2) == 0
    with torch.no_grad():
        want = model(x).numpy()
    np.testing.assert_allclose(out(), want, rtol=1e-3, atol=1e-4)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
def test_onnx_recurrent(kind):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    mod = getattr(torch.nn, kind)(6, 8, num_layers=2).eval()
    x = torch.randn(5, 3, 6)
    run, out = _onnx_runner(mod, x)
    assert allocations_per_run(run, n=3, warm=2) == 0
    with torch.no_grad():
        want = mod(x)[0].numpy()
    np.testing.assert_allclose(out(), want, rtol=1e-4, atol=1e-5)


def test_inference_lstm():
    torch = pytest.importorskip("torch")
    from bench.sequence_models import inference_lstm

    torch.manual_seed(0)
    mod = torch.nn.LSTM(6, 8, num_layers=2).eval()
    x = torch.randn(5, 3, 6)
    run, get = inference_lstm(mod, x.numpy())
    assert allocations_per_run(run, n=3, warm=2) == 0
    with torch.no_grad():
        np.testing.assert_allclose(get(), mod(x)[0].numpy(), rtol=1e-4, atol=1e-5)


def test_int8_net():
    from framework.core import Net
    from framework.memory.workspace import Workspace

    rng = np.random.default_rng(0)
    init = Net("int8_init")
    init.Int8GivenTensorFill(
        [], "w1", values=rng.integers(100, 156, (4, 3, 3, 3)).astype(np.uint8).tobytes(), shape=[4, 3, 3, 3],
        Y_scale=0.01, Y_zero_point=128,
    )  # fmt: skip
    init.Int8GivenTensorFill(
        [], "w2", values=rng.integers(100, 156, (4, 1, 1, 4)).astype(np.uint8).tobytes(), shape=[4, 1, 1, 4],
        Y_scale=0.01, Y_zero_point=128,
    )  # fmt: skip
    init.Int8GivenIntTensorFill([], "b", values=[5, -3, 0, 7], shape=[4], Y_scale=0.0002)
    init.Int8GivenTensorFill(
        [], "wf", values=rng.integers(100, 156, (5, 16)).astype(np.uint8).tobytes(), shape=[5, 16],
        Y_scale=0.01, Y_zero_point=128,
    )  # fmt: skip
    init.Int8GivenIntTensorFill([], "bf", values=[1, 2, 3, 4, 5], shape=[5], Y_scale=0.0005)
    net = Net("int8_predict")
    q = dict(Y_scale=0.05, Y_zero_point=0, order="NHWC")
    net.Int8Quantize("x", "xq", Y_scale=0.02, Y_zero_point=128)
    net.Int8ConvRelu(["xq", "w1", "b"], "c1", kernel=3, pad=1, **q)
    net.Int8Conv(["c1", "w2", "b"], "c2", kernel=1, **q)
    net.Int8Sum(["c1", "c2"], "s", Y_scale=0.05, Y_zero_point=0)
    net.Int8MaxPool("s", "p", kernel=2, stride=2, **q)
    net.Int8AveragePool("p", "a", kernel=2, stride=2, **q)
    net.Int8FC(["a", "wf", "bf"], "fq", Y_scale=0.1, Y_zero_point=100)
    net.Int8Dequantize("fq", "y")
    ws = Workspace()
    ws.run_net_once(init.Proto())
    ws.feed_blob("x", rng.uniform(-1, 1, (2, 8, 8, 3)).astype(np.float32))
    created = ws.create_net(net.Proto())
    assert allocations_per_run(created.run, n=3, warm=2) == 0
    assert ws.fetch_blob("y").shape == (2, 5)


@pytest.mark.parametrize("case", ["resnet20", "lstm_lm"])
def test_training_step(case, monkeypatch):
    from bench import train_models

    if case == "lstm_lm":
        monkeypatch.setattr(train_models, "LM", dict(vocab=50, emb=8, hidden=8, layers=2, seq=4, batch=3))
        step, ws = train_models.framework_lm_step()
    else:
        step, ws = train_models.framework_step("resnet20", 2)
    assert allocations_per_run(step, n=3, warm=2) == 0
    assert np.isfinite(ws.fetch_blob("loss")).all()
