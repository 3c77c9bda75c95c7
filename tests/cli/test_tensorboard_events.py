"""TensorBoard event files written by framework/cli/tensorboard.py, read back by TensorBoard's own reader."""

from __future__ import annotations

import os
import shutil

import numpy as np
import pytest

from framework.cli.tensorboard import SummaryWriter, crc32c, read_events
from tests.cli.inprocess import run_cli

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_crc32c_matches_the_published_check_value():
    assert crc32c(b"123456789") == 0xE3069283  # the CRC-32C check value (RFC 3720)
    assert crc32c(b"") == 0


def _accumulator(logdir):
    ea = pytest.importorskip("tensorboard.backend.event_processing.event_accumulator")
    acc = ea.EventAccumulator(str(logdir), size_guidance={ea.SCALARS: 0, ea.HISTOGRAMS: 0})
    acc.Reload()
    return acc


def test_scalars_histograms_and_graph_read_back(tmp_path):
    from framework.proto.framework_pb2 import NetDef

    net = NetDef(name="n")
    net.op.add(type="FC", input=["x", "w", "b"], output=["y"])
    net.op.add(type="Relu", input=["y"], output=["y"])
    net.external_input.extend(["x", "w", "b"])
    values = np.random.default_rng(8).standard_normal(1000)
    with SummaryWriter(str(tmp_path)) as w:
        for step, loss in ((10, 0.5), (20, 0.25)):
            w.add_scalar("loss", loss, step)
        w.add_histogram("w", values, 20)
        w.add_graph(net)
    (path,) = [os.path.join(tmp_path, f) for f in os.listdir(tmp_path)]
    assert len(read_events(path)) == 5  # file_version + 2 scalars + histogram + graph, every CRC checked
    acc = _accumulator(tmp_path)
    assert [(e.step, e.value) for e in acc.Scalars("loss")] == [(10, 0.5), (20, 0.25)]
    (h,) = acc.Histograms("w")
    assert h.histogram_value.num == 1000 and h.histogram_value.min == values.min()
    assert h.histogram_value.sum == pytest.approx(values.sum())
    graph = acc.Graph()
    assert [n.op for n in graph.node] == ["ExternalInput"] * 3 + ["FC", "Relu"]
    assert list(graph.node[4].input) == [graph.node[3].name]


def test_train_writes_tensorboard_events(tmp_path):
    run = lambda *a: run_cli(*a, cwd=tmp_path)  # noqa: E731  (in-process: tests/cli/inprocess.py)
    assert run("make-db", "digits", "--out", "data/digits").returncode == 0
    model = os.path.join(ROOT, "models", "mlp_digits")
    p = run("train", model, "--iters", "20", "--val-every", "10", "--tensorboard", "tb", "--no-progress")
    assert p.returncode == 0 and "tensorboard --logdir tb" in p.stdout, p.stderr
    acc = _accumulator(tmp_path / "tb")
    tags = acc.Tags()
    assert {"loss", "accuracy", "lr", "val_accuracy"} <= set(tags["scalars"])
    assert [e.step for e in acc.Scalars("loss")] == [10, 20]
    assert acc.Scalars("lr")[0].value == pytest.approx(0.1)
    assert "fc1_w" in tags["histograms"] and tags["graph"]
    shutil.rmtree(tmp_path / "data")
