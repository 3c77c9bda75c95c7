"""bench/embedding_bag.py on a tiny table: the contenders agree (checked inside) and the framework's steady
state allocates nothing."""

from bench.embedding_bag import main


def test_embedding_bag_bench_tiny(capsys):
    res = main(rows=2000, dim=8, bags=16, bag=4, rounds=1, inner=1, use_torch=False)  # torch: the real run
    assert res["allocations"] == {"forward": 0, "train step": 0}
    assert {"framework", "numpy"} <= set(res["forward"]) and {"framework", "numpy"} <= set(res["train step"])
    assert "SparseLengthsSum" in capsys.readouterr().out
