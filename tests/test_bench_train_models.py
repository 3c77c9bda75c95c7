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

    step, _ = train_models.framework_step("resnet20", 2)
    step()
    assert train_models.allocations_per_step(step, n=2) == 0
