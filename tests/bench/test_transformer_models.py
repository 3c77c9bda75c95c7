"""bench/transformer_models.py runs end to end on its small encoder (export cached in a temporary folder),
outputs agreeing with onnxruntime's."""

from __future__ import annotations

import pytest


def test_small_encoder_row(tmp_path, monkeypatch):
    pytest.importorskip("torch")
    pytest.importorskip("onnxruntime")
    bench = pytest.importorskip("bench.transformer_models")
    monkeypatch.setenv("FRAMEWORK_BENCH_CACHE", str(tmp_path))
    (row,) = bench.run(("encoder",), rounds=1, inner=1, log=lambda s: None)
    assert row[0].startswith("TransformerEncoder (2 layers") and float(row[-1]) < 1e-4
    assert list(tmp_path.glob("encoder-torch*.onnx"))  # the export is cached for the next run
