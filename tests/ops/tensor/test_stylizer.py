"""Stylizer pre/post-processing ops against loop references written from Caffe2's CPU kernels."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.memory.workspace import Workspace
from framework.ops.testing import assert_reference_checks

NOISE = "__CAFFE2_STYLIZER_NOISE__"


def _pre_ref(noise_size, noise):
    def ref(x, mean):
        n, h, w, _ = x.shape
        y = np.zeros((n, 3, h, w), np.float32)
        for b in range(n):
            k = 0
            for p in range(h * w):
                for c in range(3):
                    y[b, c, p // w, p % w] = np.float32(x[b, p // w, p % w, c]) - mean[c] + noise[k]
                    k = (k + 1) % noise_size
        return y

    return ref


def _de_ref(x, mean):
    n, _, h, w = x.shape
    y = np.zeros((n, h, w, 4), np.uint8)
    for b in range(n):
        for i in range(h):
            for j in range(w):
                for c in range(3):
                    f = float(np.float32(x[b, c, i, j] + mean[c]))
                    y[b, i, j, c] = 255 if f >= 255 else 0 if (f <= 0 or f != f) else int(f)
                y[b, i, j, 3] = 255
    return y


@settings(max_examples=20, deadline=None)
@given(n=st.integers(0, 2), h=st.integers(0, 4), w=st.integers(1, 4), size=st.integers(1, 9), seed=st.integers(0, 99))
def test_preprocess_matches_reference_with_given_noise(n, h, w, size, seed):
    rng = np.random.default_rng(seed)
    x = rng.integers(0, 256, (n, h, w, 4)).astype(np.uint8)
    mean = rng.uniform(0, 128, 3).astype(np.float32)
    noise = rng.normal(0, 10, size + 2).astype(np.float32)  # a longer cached blob: its first noise_size used
    ws = Workspace()
    ws.feed_blob(NOISE, noise)
    op = CreateOperator("PackedInt8BGRANHWCToNCHWCStylizerPreprocess", ["x", "mean"], ["y"], noise_size=size)
    assert_reference_checks(op, [x, mean], _pre_ref(size, noise), ws=ws)


def test_preprocess_draws_noise_once_and_keeps_it():
    ws = Workspace()
    x = np.full((1, 5, 7, 4), 100, np.uint8)
    op = CreateOperator(
        "PackedInt8BGRANHWCToNCHWCStylizerPreprocess", ["x", "mean"], ["y"], noise_size=1000, noise_std=2.0
    )
    ws.feed_blob("x", x)
    ws.feed_blob("mean", np.zeros(3, np.float32))
    ws.run_operator_once(op)
    noise = ws.fetch_blob(NOISE)
    assert noise.shape == (1000,) and noise.dtype == np.float32 and 1.5 < noise.std() < 2.5
    first = ws.fetch_blob("y")
    np.testing.assert_allclose(first - 100, _pre_ref(1000, noise)(x, np.zeros(3, np.float32)) - 100, atol=1e-4)
    ws.run_operator_once(op)
    np.testing.assert_array_equal(ws.fetch_blob("y"), first)  # same noise for the next frame


@settings(max_examples=20, deadline=None)
@given(n=st.integers(0, 2), h=st.integers(0, 4), w=st.integers(1, 4), seed=st.integers(0, 99))
def test_deprocess_matches_reference(n, h, w, seed):
    rng = np.random.default_rng(seed)
    x = rng.uniform(-300, 300, (n, 3, h, w)).astype(np.float32)
    if x.size:
        x.flat[0] = np.nan
    mean = rng.uniform(0, 128, 3).astype(np.float32)
    op = CreateOperator("BRGNCHWCToPackedInt8BGRAStylizerDeprocess", ["x", "mean"], ["y"])
    assert_reference_checks(op, [x, mean], _de_ref, threshold=0, atol=0)


def test_bad_inputs_name_the_op():
    ws = Workspace()
    ws.feed_blob("x", np.zeros((1, 2, 2, 3), np.uint8))
    ws.feed_blob("mean", np.zeros(3, np.float32))
    with pytest.raises(FrameworkError, match="Preprocess"):
        ws.run_operator_once(CreateOperator("PackedInt8BGRANHWCToNCHWCStylizerPreprocess", ["x", "mean"], ["y"]))
    assert not ws.has_blob(NOISE) and not ws.has_blob("y")
    ws.feed_blob("x", np.zeros((1, 3, 2, 2), np.float32))
    ws.feed_blob("mean", np.zeros(4, np.float32))
    with pytest.raises(FrameworkError, match="mean"):
        ws.run_operator_once(CreateOperator("BRGNCHWCToPackedInt8BGRAStylizerDeprocess", ["x", "mean"], ["y"]))
