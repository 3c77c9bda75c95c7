"""One SGD step of the same MLP and CNN in the framework and in PyTorch, from the
same weights and batch: same loss, gradients and updated weights (float32 tolerance)."""

import numpy as np
import pytest

torch = pytest.importorskip("torch")

from framework.caffe2.python import brew, optimizer  # noqa: E402
from framework.caffe2.python.model_helper import ModelHelper  # noqa: E402
from framework.memory.workspace import Workspace  # noqa: E402
from framework.ops import has_op  # noqa: E402

pytestmark = pytest.mark.torch
LR = 0.1


def _need(*ops):
    missing = [o for o in ops if not has_op(o)]
    if missing:
        pytest.skip(f"ops not registered yet: {missing}")


def _step(m, logits, feeds, params):
    m.net.SoftmaxWithLoss([logits, "label"], ["softmax", "loss"])
    m.AddGradientOperators(["loss"])
    optimizer.build_sgd(m, LR)
    ws = Workspace()
    ws.run_net_once(m.param_init_net)
    for name, v in {**params, **feeds}.items():
        ws.feed_blob(name, v)
    ws.create_net(m.net).run()
    grads = {p: np.asarray(ws.fetch_blob(str(m.param_to_grad[p]))) for p in params}
    new = {p: np.asarray(ws.fetch_blob(p)) for p in params}
    return float(np.asarray(ws.fetch_blob("loss")).reshape(-1)[0]), grads, new


def _torch_step(forward, feeds, params):
    tp = {k: torch.tensor(v, requires_grad=True) for k, v in params.items()}
    logits = forward(torch.from_numpy(feeds["data"]), tp)
    loss = torch.nn.functional.cross_entropy(logits, torch.from_numpy(feeds["label"].astype(np.int64)))
    loss.backward()
    grads = {k: t.grad.numpy() for k, t in tp.items()}
    new = {k: params[k] - LR * grads[k] for k in params}
    return float(loss.detach()), grads, new


def _compare(ours, theirs):
    loss_a, g_a, p_a = ours
    loss_b, g_b, p_b = theirs
    assert loss_a == pytest.approx(loss_b, rel=1e-5)
    for k in g_b:
        np.testing.assert_allclose(g_a[k], g_b[k], rtol=1e-4, atol=1e-6, err_msg=f"gradient of {k}")
        np.testing.assert_allclose(p_a[k], p_b[k], rtol=1e-5, atol=1e-6, err_msg=f"updated {k}")


def test_mlp_sgd_step_matches_torch():
    _need("SoftmaxWithLoss")
    rng = np.random.default_rng(0)
    dims = (64, 32, 16, 10)
    params = {}
    m = ModelHelper("mlp", init_params=False)
    h = "data"
    for k, (din, dout) in enumerate(zip(dims[:-1], dims[1:]), 1):
        params[f"fc{k}_w"] = (rng.standard_normal((dout, din)) / np.sqrt(din)).astype(np.float32)
        params[f"fc{k}_b"] = (0.1 * rng.standard_normal(dout)).astype(np.float32)
        h = brew.fc(m, h, f"fc{k}", din, dout)
        if k < len(dims) - 1:
            h = brew.relu(m, h, h)
    feeds = {
        "data": rng.standard_normal((16, 64)).astype(np.float32),
        "label": rng.integers(0, 10, 16).astype(np.int32),
    }

    def forward(x, p):
        for k in range(1, len(dims)):
            x = torch.nn.functional.linear(x, p[f"fc{k}_w"], p[f"fc{k}_b"])
            if k < len(dims) - 1:
                x = torch.relu(x)
        return x

    _compare(_step(m, h, feeds, params), _torch_step(forward, feeds, params))


def test_cnn_sgd_step_matches_torch():
    _need("SoftmaxWithLoss", "Conv", "MaxPool")
    rng = np.random.default_rng(1)
    params = {
        "conv1_w": (0.3 * rng.standard_normal((4, 1, 3, 3))).astype(np.float32),
        "conv1_b": (0.1 * rng.standard_normal(4)).astype(np.float32),
        "conv2_w": (0.2 * rng.standard_normal((8, 4, 3, 3))).astype(np.float32),
        "conv2_b": (0.1 * rng.standard_normal(8)).astype(np.float32),
        "pred_w": (0.2 * rng.standard_normal((10, 32))).astype(np.float32),
        "pred_b": (0.1 * rng.standard_normal(10)).astype(np.float32),
    }
    m = ModelHelper("cnn", init_params=False)
    h = brew.conv(m, "data", "conv1", 1, 4, kernel=3, pad=1)
    h = brew.relu(m, h, h)
    h = brew.max_pool(m, h, "pool1", kernel=2, stride=2)
    h = brew.conv(m, h, "conv2", 4, 8, kernel=3, pad=1)
    h = brew.relu(m, h, h)
    h = brew.max_pool(m, h, "pool2", kernel=2, stride=2)
    h = brew.fc(m, h, "pred", 32, 10)
    feeds = {
        "data": rng.standard_normal((8, 1, 8, 8)).astype(np.float32),
        "label": rng.integers(0, 10, 8).astype(np.int32),
    }
    F = torch.nn.functional

    def forward(x, p):
        x = F.max_pool2d(torch.relu(F.conv2d(x, p["conv1_w"], p["conv1_b"], padding=1)), 2)
        x = F.max_pool2d(torch.relu(F.conv2d(x, p["conv2_w"], p["conv2_b"], padding=1)), 2)
        return F.linear(x.reshape(x.shape[0], -1), p["pred_w"], p["pred_b"])

    _compare(_step(m, h, feeds, params), _torch_step(forward, feeds, params))
