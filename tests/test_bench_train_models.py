"""bench/train_models.py: the framework's training step and torch eager's agree after one step (the check the
benchmark makes before timing), on CIFAR ResNet-20 at a tiny batch."""

from __future__ import annotations

import pytest

pytest.importorskip("torch")


def test_resnet20_one_step_agrees_with_torch():
    from bench import train_models

    d_loss, d_w = train_models.compare_one_step("resnet20", 2)
    assert d_loss < 1e-4 and d_w < 2e-2


def test_steady_state_step_allocates_nothing():
    from bench import train_models
    from bench.common import allocations_per_run

    step, _ = train_models.framework_step("resnet20", 2)
    step()
    assert allocations_per_run(step, n=2) == 0


def test_profile_step_names_the_ops_of_the_training_net():
    from bench import train_models

    prof = train_models.profile_step("resnet20", 2, rounds=1)
    types = {t for t, _, _ in prof}
    assert {"Conv", "ConvGradient", "SpatialBNGradient", "MomentumSGDUpdate", "SoftmaxWithLoss"} <= types
    counts = dict((t, n) for t, _, n in prof)
    assert counts["Conv"] == counts["ConvGradient"] == 21  # conv1, 18 in the blocks, 2 projections
    assert all(sec >= 0 for _, sec, _ in prof)


def test_profile_step_at_two_threads_puts_one_back():
    import framework
    from bench import train_models

    prof = train_models.profile_step("resnet20", 2, rounds=1, threads=2)
    assert {"Conv", "SpatialBN", "MomentumSGDUpdate"} <= {t for t, _, _ in prof}
    assert framework.get_num_threads() == 1


def test_lm_step_at_two_threads_equals_one_thread():
    """The LSTM LM's whole training step (its split FC, softmax, recurrent and update ops) at two intra-op
    threads: the parameters after two steps as one thread's, to float rounding."""
    import numpy as np

    from bench import train_models

    after = {}
    for threads in (1, 2):
        train_models.set_threads(threads)
        try:
            step, ws = train_models.framework_lm_step()
            step()
            step()
            after[threads] = {k: ws.fetch_blob(k).copy() for k in ("decoder_w", "emb", "lstm/layer_1/gates_t_w")}
        finally:
            train_models.set_threads(1)
    for k, v in after[1].items():
        np.testing.assert_allclose(after[2][k], v, rtol=1e-5, atol=1e-6, err_msg=k)


def test_profile_step_at_two_threads_lists_the_slowest_ops():
    from bench import train_models
    from framework.runtime.parallel import get_num_threads

    slowest = []
    prof = train_models.profile_step("resnet20", 2, rounds=1, threads=2, slowest=slowest)
    assert get_num_threads() == 1  # restored
    assert sum(n for _, _, n in prof) == len(slowest)
    assert [r[0] for r in slowest] == sorted((r[0] for r in slowest), reverse=True)
    convs = [r for r in slowest if r[1] == "ConvGradient"]
    assert len(convs) == 21 and all(len(shape) == 4 and shape[0] == 2 for _, _, _, shape in convs)
