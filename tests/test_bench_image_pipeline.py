"""A tiny run of bench/image_pipeline.py (decode rows only): it runs and reports both contenders."""

import pytest

pytest.importorskip("PIL")


@pytest.mark.torch
@pytest.mark.slow
def test_image_pipeline_bench_runs_tiny(tmp_path):
    pytest.importorskip("torch")
    from bench.image_pipeline import decode_rows

    rows = decode_rows(str(tmp_path), [0], rounds=1, n_images=40)
    assert len(rows) == 1 and rows[0][1].endswith("img/s") and rows[0][2].endswith("img/s")
