"""The real-model benchmark suite (bench/real_models) stays runnable and its models stay right:
every model builds and infers shapes, ours and the PyTorch translation agree on the logits, and the
runner produces its table for a tiny configuration (no timing assertions)."""

from __future__ import annotations

import numpy as np
import pytest

nets = pytest.importorskip("bench.real_models.nets")

# Published sizes: ResNet-50 ~4.1 GMACs, DenseNet-121 ~2.9, AlexNet (this variant) ~0.7, SqueezeNet 1.1
# ~0.35, ShuffleNet V2 1.0x ~0.15, CIFAR ResNet-20 ~0.04 (~0.035 on 30x30 after the unpadded conv1).
GFLOP = {
    "resnet50": (7.5, 8.5),
    "densenet121": (5.4, 6.0),
    "alexnet": (1.3, 1.5),
    "squeezenet1_1": (0.6, 0.8),
    "shufflenet_v2": (0.25, 0.32),
    "resnet20_cifar": (0.06, 0.09),
}


@pytest.mark.parametrize("name", sorted(nets.BUILDERS))
def test_model_builds_with_the_published_size(name):
    m = nets.build(name, batch=1)
    lo, hi = GFLOP[name]
    assert lo <= nets.model_flops(m) / 1e9 <= hi
    params = {op.input[1] for op in m.predict_net.op if op.type in ("Conv", "FC")}
    assert params <= set(m.weights)
    assert m.predict_net.op[-1].type == "Softmax" and m.predict_net.op[-1].input[0] == m.logits_name


def _ours(m, x):
    from bench.real_models.runner import ours_runner

    run, get = ours_runner(m, x, optimize=False)
    run()
    return get()


@pytest.mark.torch
@pytest.mark.parametrize("name", ["resnet20_cifar", "shufflenet_v2"])
def test_ours_and_torch_agree(name):
    pytest.importorskip("torch")
    from bench.real_models.torch_impl import torch_runner

    m = nets.build(name, batch=2)
    x = m.input_data()
    run, get = torch_runner(m, x)
    run()
    want = get()
    got = _ours(m, x).reshape(want.shape)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())


def test_runner_tiny_table():
    from bench.real_models.runner import bench_model, table

    rows = bench_model("resnet20_cifar", 1, [1], 1, ["ours", "ours-raw"], log=lambda s: None)
    assert rows[0]["times"]["ours"] > 0 and rows[0]["diffs"]["ours-raw"] < 1e-4
    assert "| resnet20_cifar | 1 | 1 |" in table(rows)


def test_ort_shapes_compares_convolutions_by_output_shape():
    pytest.importorskip("onnxruntime")
    from bench.real_models.ort_shapes import compare, report

    m = nets.build("resnet20_cifar", batch=1)
    ours, theirs = compare(m, m.input_data(), runs=1)
    convs = {k for k in ours if k[0] == "Conv"}
    assert (("Conv", (16, 30, 30)) in convs) and convs <= {k for k in theirs if k[0] == "Conv"}
    assert all(v > 0 for v in ours.values()) and sum(theirs.values()) > 0
    assert "conv out (16, 30, 30)" in report(ours, theirs)


def test_scaling_rounds_pair_the_gemm_scaling_with_our_speedup():
    from bench.real_models.scaling import gemm_scaling, rounds

    assert gemm_scaling(calls=2, n=32) > 0
    r = rounds("resnet20_cifar", 2, 2, 1)
    assert r.shape == (2, 2) and np.all(r > 0)
