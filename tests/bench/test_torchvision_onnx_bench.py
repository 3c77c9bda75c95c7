"""bench/torchvision_onnx stays runnable: one small model, one round, its export cached in a temporary folder
(no timing assertions: speed is measured by the benchmark, never asserted in tests)."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")
pytest.importorskip("onnxruntime")
tv = pytest.importorskip("bench.torchvision_onnx")


@pytest.mark.slow
def test_squeezenet_runs_one_round_and_agrees_with_onnxruntime(tmp_path, capsys):
    try:
        tv.torchvision_models()
    except Exception as e:  # pragma: no cover - a torchvision that cannot load its models at all
        pytest.skip(f"torchvision models unavailable: {e}")
    assert tv.main(["--models", "squeezenet1_1", "--rounds", "1", "--inner", "1", "--cache", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    row = next(line for line in out.splitlines() if line.startswith("| squeezenet1_1 |"))
    assert float(row.split("|")[-2]) < 1e-4  # largest absolute difference to onnxruntime
    assert list(tmp_path.glob("squeezenet1_1_opset17_seed0.onnx"))  # the export is cached


def test_unknown_models_are_refused():
    with pytest.raises(SystemExit):
        tv.main(["--models", "resnet1000"])
