"""ONNXPool against a per-output-position loop over the (unpadded) input."""

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.ops.testing import assert_reference_checks, run_op_on


def ref_pool(x, mode, k, s, d, pads, ceil, include, p=2.0):
    """Loop reference for one spatial dim set (1-D or 2-D), pads explicit."""
    r = x.ndim - 2
    out, limits = [], []
    for i in range(r):
        n, w = x.shape[2 + i], d[i] * (k[i] - 1) + 1
        size = (n + pads[i] + pads[r + i] - w) / s[i] + 1
        o = math.ceil(size) if ceil else math.floor(size)
        if ceil and (o - 1) * s[i] >= n + pads[i]:
            o -= 1
        out.append(o)
        extra = (o - 1) * s[i] + w - n - pads[i] - pads[r + i]
        heads_i = pads[i] + max(extra, 0) // 2  # the reference shifts the grid by half the extra pad
        limits.append((heads_i, n + pads[i] + pads[r + i]))
    y = np.zeros(x.shape[:2] + tuple(out))
    for idx in np.ndindex(*y.shape):
        vals, count = [], 0
        for taps in np.ndindex(*k):
            skip, src, pad_cell = False, [], False
            for i in range(r):
                pos = s[i] * idx[2 + i] + d[i] * taps[i]
                if pos >= limits[i][1]:
                    skip = True
                src.append(pos - limits[i][0])
                if not 0 <= src[-1] < x.shape[2 + i]:
                    pad_cell = True
            if skip:
                continue
            if pad_cell:
                if include and mode != "max":
                    vals.append(0.0)
                continue
            vals.append(float(x[idx[:2] + tuple(src)]))
        count = len(vals)
        if mode == "max":
            y[idx] = max(vals) if vals else np.nan
        elif mode == "avg":
            y[idx] = sum(vals) / count if count else np.nan
        else:
            y[idx] = sum(abs(v) ** p for v in vals) ** (1 / p)
    return y


@settings(max_examples=40, deadline=None)
@given(
    seed=st.integers(0, 999),
    r=st.sampled_from([1, 2]),
    mode=st.sampled_from(["avg", "lp", "max"]),
    k=st.integers(1, 3),
    s=st.integers(1, 3),
    d=st.integers(1, 2),
    pad=st.integers(0, 1),
    ceil=st.booleans(),
    include=st.booleans(),
)
def test_pool_matches_loop(seed, r, mode, k, s, d, pad, ceil, include):
    x = np.random.default_rng(seed).standard_normal((2, 2) + (6,) * r).astype(np.float32)
    pads = [pad] * r + [min(pad, k - 1)] * r
    args = dict(
        kernel_shape=[k] * r,
        strides=[s] * r,
        dilations=[d] * r,
        pads=pads,
        ceil_mode=int(ceil),
        count_include_pad=int(include),
        p=3.0,
    )
    op = CreateOperator("ONNXPool", ["x"], ["y"], mode=mode, **args)
    want = ref_pool(x, mode, [k] * r, [s] * r, [d] * r, pads, ceil, include, 3.0)
    assert_reference_checks(op, [x], lambda _: want, threshold=1e-4)


def test_pool_auto_pad_and_errors():
    x = np.arange(25, dtype=np.float32).reshape(1, 1, 5, 5)
    (y,) = run_op_on(CreateOperator("ONNXPool", ["x"], ["y"], kernel_shape=[2, 2], auto_pad="SAME_LOWER"), [x])
    want = ref_pool(x, "avg", [2, 2], [1, 1], [1, 1], [1, 1, 0, 0], False, False)
    np.testing.assert_allclose(y, want, rtol=1e-6)
    with pytest.raises(FrameworkError, match="no output"):
        run_op_on(CreateOperator("ONNXPool", ["x"], ["y"], kernel_shape=[9, 9]), [x])
    with pytest.raises(FrameworkError, match="spatial"):
        run_op_on(CreateOperator("ONNXPool", ["x"], ["y"], kernel_shape=[2]), [x])


@pytest.mark.parametrize("storage_order", [0, 1])
def test_max_pool_indices_and_unpool(storage_order):
    rng = np.random.default_rng(storage_order)
    x = rng.standard_normal((2, 3, 5, 4)).astype(np.float32)
    k, s, pads = [2, 3], [2, 1], [1, 1, 0, 1]
    op = CreateOperator(
        "ONNXPool", ["x"], ["y", "i"], mode="max", kernel_shape=k, strides=s, pads=pads, storage_order=storage_order
    )

    def ref(x):
        y = ref_pool(x, "max", k, s, [1, 1], pads, False, False)
        idx = np.zeros(y.shape, np.int64)
        for n, c, oh, ow in np.ndindex(*y.shape):
            best = None
            for i, j in np.ndindex(*k):
                h, w = s[0] * oh + i - pads[0], s[1] * ow + j - pads[1]
                if 0 <= h < 5 and 0 <= w < 4 and (best is None or x[n, c, h, w] > best[0]):
                    best = (x[n, c, h, w], h, w)
            spatial = best[1] * 4 + best[2] if storage_order == 0 else best[1] + best[2] * 5
            idx[n, c, oh, ow] = (n * 3 + c) * 20 + spatial
        return [y, idx]

    y, idx = assert_reference_checks(op, [x], ref, threshold=1e-6)
    if storage_order == 0:
        unpool = CreateOperator(
            "ONNXMaxUnpool", ["y", "i"], ["u"], kernel_shape=k, strides=s, pads=pads, output_shape=[2, 3, 6, 5]
        )

        def ref_unpool(y, idx):
            inferred = (2, 3, (y.shape[2] - 1) * 2 - 1 + 2, (y.shape[3] - 1) - 2 + 3)
            flat = np.zeros(int(np.prod(inferred)), np.float32)
            for v, j in zip(y.reshape(-1), idx.reshape(-1)):
                flat[j] = v
            out = np.zeros((2, 3, 6, 5), np.float32)
            out[:, :, : inferred[2], : inferred[3]] = flat.reshape(inferred)
            return out

        assert_reference_checks(unpool, [y, idx], ref_unpool)
        with pytest.raises(FrameworkError, match="'i'"):
            run_op_on(unpool, [y, idx + 1000])
