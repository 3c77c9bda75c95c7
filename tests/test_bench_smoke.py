"""The benchmark runner stays runnable: every benchmark for one tiny round (no timing assertions:
speed is measured by ``python -m bench``, never asserted in tests)."""

from __future__ import annotations

import pytest

run = pytest.importorskip("bench.run")


@pytest.mark.parametrize("name", list(run.BENCHMARKS))
def test_benchmark_runs_one_tiny_round(name):
    rows = run.BENCHMARKS[name](run.TINY)
    assert rows
    for row in rows:
        assert row.times["ours"] > 0 and row.times["numpy"] > 0
        assert row.ratio("ours") is not None
    assert run.results_table(rows).count("\n") == len(rows) + 1


def test_memory_table_and_report(tmp_path):
    report = run.run_all(run.TINY, only=["memory"], log=lambda s: None)
    assert report.rows == []
    from bench.memory import BY_DESIGN

    assert report.memory and all(v["allocs_per_iter"] == 0 for k, v in report.memory.items() if k not in BY_DESIGN)
    text = report.markdown()
    assert "## Machine" in text and "## Memory per run" in text and "zero allocations" in text


def test_main_writes_the_report(tmp_path, capsys):
    out = tmp_path / "performance.md"
    run.main(["--quick", "--rounds", "1", "--only", "op_overhead", "--out", str(out)])
    text = out.read_text()
    assert "| benchmark |" in text and "per-op overhead" in text
    assert "per-op overhead" in capsys.readouterr().out


def test_main_keeps_the_hand_written_sections(tmp_path):
    """Sections the report does not generate (real-model tables...) survive a rewrite; generated ones
    are replaced, not duplicated."""
    out = tmp_path / "performance.md"
    out.write_text(
        "# Performance\n\nold intro\n\n## Machine\n\n- old machine\n\n"
        "## Real CNNs (`python -m bench.real_models`)\n\n| by hand |\n\n### 1 thread\n\nrows\n\n"
        "## Targets\n\n- old target\n\n## ONNX backend\n\nby hand too\n"
    )
    run.main(["--quick", "--rounds", "1", "--only", "op_overhead", "--out", str(out)])
    text = out.read_text()
    assert "old machine" not in text and "old target" not in text and "old intro" not in text
    assert text.count("## Machine") == 1 and text.count("## Targets") == 1
    assert "| by hand |\n\n### 1 thread\n\nrows" in text and "## ONNX backend\n\nby hand too" in text
    assert text.index("## Targets") < text.index("## Real CNNs") < text.index("## ONNX backend")


def test_lstm_benchmark_runs_tiny():
    lstm = pytest.importorskip("bench.lstm")
    results, table = lstm.run(T=3, N=2, D=4, H=5, rounds=1, inner=1, log=lambda s: None)
    assert set(results) == {"forward", "forward+backward"} and "per-step overhead" in table


def test_split_cost_benchmark_runs_tiny(capsys):
    pytest.importorskip("numba")
    split_cost = pytest.importorskip("bench.split_cost")
    rows = split_cost.main(["--rounds", "1", "--inner", "4", "--tasks-us", "5"])
    assert len(rows) == 1 and len(rows[0]) == 6 and "native job of 2" in capsys.readouterr().out


def test_split_products_benchmark_runs_tiny(monkeypatch, capsys):
    pytest.importorskip("torch")
    split_products = pytest.importorskip("bench.split_products")
    monkeypatch.setattr(split_products, "PRODUCTS", [("tiny", "FC", 3, 8, 64), ("tiny grad", "FCGradient", 3, 8, 64)])
    monkeypatch.setattr(split_products, "LOSS", (4, 16))
    rows = split_products.main(["--rounds", "1"])
    assert len(rows) == 3 and all(len(r) == 7 for r in rows) and "ours / torch, 2 threads" in capsys.readouterr().out


def test_sequence_models_benchmark_runs_tiny():
    pytest.importorskip("torch")
    pytest.importorskip("onnxruntime")
    seq = pytest.importorskip("bench.sequence_models")
    shapes = {"seq": 3, "batch": 2, "input": 4, "hidden": 5, "layers": 2}
    rows = seq.run(rounds=1, inner=1, log=lambda s: None, shapes=shapes, bidirectional=True)
    assert [r[0].split(" (")[0] for r in rows] == ["ONNX LSTM", "ONNX GRU", "Caffe2 InferenceLSTM"]
    assert all(float(r[-1]) < 1e-4 for r in rows)  # outputs agree with onnxruntime's


def test_round_robin_settles_each_block_with_an_untimed_call():
    from bench.common import time_round_robin

    calls = {"a": 0, "b": 0, "before_b": 0}

    def before_b():
        calls["before_b"] += 1

    fns = {"a": lambda: calls.__setitem__("a", calls["a"] + 1), "b": lambda: calls.__setitem__("b", calls["b"] + 1)}
    out = time_round_robin(fns, rounds=3, inner=2, warmup=1, before={"b": before_b}, settle=0.001)
    assert set(out) == {"a", "b"}
    # a: 1 warm-up + per round (1 untimed after the pause + 2 timed); b: its `before` replaces the untimed call
    assert calls == {"a": 1 + 3 * 3, "b": 1 + 3 * 2, "before_b": 1 + 3}
    calls.update(a=0, b=0, before_b=0)
    time_round_robin(fns, rounds=3, inner=2, warmup=1, before={"b": before_b})
    assert calls == {"a": 1 + 3 * 2, "b": 1 + 3 * 2, "before_b": 1 + 3}
