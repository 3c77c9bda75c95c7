"""bench.model_load's report: one row per model, CPU seconds, ratios to protobuf's parse and to onnxruntime."""

from __future__ import annotations

from bench.model_load import report


def test_report_rows_and_ratios():
    rows = {
        "resnet50": {
            "pb_parse": 0.25, "load_net_def": 0.5, "init_run": 0.4, "start": 1.0, "build": 1.5, "first": 0.5,
            "second": 0.1, "to_first": 3.0, "cli_predict": 4.0, "ort_session": 0.1,
        },
        "resnet18_onnx": {
            "start": 1.0, "onnx_load": 0.05, "prepare": 0.3, "first": 0.6, "second": 0.04, "to_first": 2.0,
            "ort_session": 0.1,
        },
    }  # fmt: skip
    text = report(rows)
    r50 = next(line for line in text.splitlines() if line.startswith("| resnet50"))
    assert "| 0.50 s (2.0x) |" in r50 and "| 4.00 s |" in r50
    r18 = next(line for line in text.splitlines() if line.startswith("| resnet18"))
    assert "| 0.30 s (3.0x) |" in r18
    no_ort = report({"resnet18_onnx": {**rows["resnet18_onnx"], "ort_session": None}})
    assert no_ort.splitlines()[-1].endswith("| — |")
