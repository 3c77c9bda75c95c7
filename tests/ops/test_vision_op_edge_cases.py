"""Operator edge cases: ConvTranspose under every legacy_pad mode,
one test per class of error for the conv/pool/normalization/image ops, and empty batches."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import ArgumentError, FrameworkError, ShapeError, TypeMismatchError
from framework.ops.testing import assert_gradient_checks, assert_reference_checks
from tests.ops.helpers import run_once

NOTSET, VALID, SAME, CAFFE_LEGACY_POOLING = 0, 1, 2, 3


def convt_loop(x, w, b, stride, adj, pads, order):
    """2-D transposed convolution, one input pixel and kernel tap at a time (NCHW filter (C, M, kh, kw))."""
    if order == "NHWC":
        x, w = np.moveaxis(x, -1, 1), np.moveaxis(w, -1, 1)
    n, c, h, wd = x.shape
    m, kh, kw = w.shape[1:]
    full = ((h - 1) * stride[0] + kh + adj[0], (wd - 1) * stride[1] + kw + adj[1])
    y = np.zeros((n, m) + full)
    for i, j, a, bb in itertools.product(range(h), range(wd), range(kh), range(kw)):
        y[:, :, i * stride[0] + a, j * stride[1] + bb] += x[:, :, i, j].astype(np.float64) @ w[:, :, a, bb]
    t, l, bo, r = pads
    y = y[:, :, t : full[0] - bo, l : full[1] - r]
    if b is not None:
        y = y + b.reshape(1, m, 1, 1)
    y = y if order == "NCHW" else np.moveaxis(y, 1, -1)
    return y.astype(x.dtype)


@settings(max_examples=30)
@given(
    legacy=st.sampled_from([VALID, SAME]),
    order=st.sampled_from(["NCHW", "NHWC"]),
    k=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    stride=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    hw=st.tuples(st.integers(1, 3), st.integers(1, 3)),
    n=st.integers(1, 2),
    c=st.integers(1, 3),
    m=st.integers(1, 3),
    bias=st.booleans(),
    data=st.data(),
)
def test_conv_transpose_valid_and_same_ignore_padding(legacy, order, k, stride, hw, n, c, m, bias, data):
    """Caffe2's ConvTransposeUnpoolBase: VALID and SAME both mean pads 0, out = (in-1)*stride + kernel + adj."""
    adj = tuple(data.draw(st.integers(0, s - 1)) for s in stride)
    rng = np.random.default_rng(data.draw(st.integers(0, 99)))
    x = rng.standard_normal((n, c) + hw)
    w = rng.standard_normal((c, m) + k)
    b = rng.standard_normal(m)
    if order == "NHWC":
        x, w = np.moveaxis(x, 1, -1).copy(), np.moveaxis(w, 1, -1).copy()
    ins = [x, w, b] if bias else [x, w]
    op = CreateOperator(
        "ConvTranspose",
        ["X", "W", "b"][: len(ins)],
        ["Y"],
        kernels=list(k),
        strides=list(stride),
        adjs=list(adj),
        legacy_pad=legacy,
        order=order,
    )
    (y,) = assert_reference_checks(op, ins, lambda x, w, b=None: convt_loop(x, w, b, stride, adj, (0, 0, 0, 0), order))
    sp = tuple((hw[i] - 1) * stride[i] + k[i] + adj[i] for i in range(2))
    assert y.shape == ((n, m) + sp if order == "NCHW" else (n,) + sp + (m,))
    if x.size * m <= 24:
        for i in range(len(ins)):
            assert_gradient_checks(op, ins, i, stepsize=1e-3, threshold=1e-3)


X4 = np.zeros((1, 2, 3, 3), np.float32)
C2 = np.ones(2, np.float32)

# (op type, inputs, outputs, kwargs, values, exception, message pattern); every message must name the op.
ERRORS = [
    # ConvTranspose
    (
        "ConvTranspose",
        2,
        1,
        dict(kernel=2, legacy_pad=CAFFE_LEGACY_POOLING),
        [X4, np.zeros((2, 2, 2, 2), np.float32)],
        FrameworkError,
        "CAFFE_LEGACY_POOLING is not supported",
    ),
    (
        "ConvTranspose",
        2,
        1,
        dict(kernel=2, legacy_pad=VALID, pad=1),
        [X4, np.zeros((2, 2, 2, 2), np.float32)],
        ArgumentError,
        "legacy_pad VALID computes the padding itself",
    ),
    (
        "ConvTranspose",
        2,
        1,
        dict(kernel=2, group=2),
        [X4, np.zeros((3, 1, 2, 2), np.float32)],
        ShapeError,
        "3 input channels, not a multiple of group 2",
    ),
    (
        "ConvTranspose",
        2,
        1,
        dict(kernel=2),
        [X4, np.zeros((3, 2, 2, 2), np.float32)],
        ShapeError,
        r"filter 'I1' has 3 input channels, input 'I0' has 2",
    ),
    (
        "ConvTranspose",
        2,
        1,
        dict(kernel=2, adj=3, stride=2),
        [X4, np.zeros((2, 2, 2, 2), np.float32)],
        ShapeError,
        r"adj 3 must be in \[0, stride 2\]",
    ),
    # layout and image ops
    ("NCHW2NHWC", 1, 1, {}, [np.zeros((2, 3), np.float32)], ShapeError, r"'I0' needs >= 3 dims, got \(2, 3\)"),
    ("NHWC2NCHW", 1, 1, {}, [np.zeros((2, 3), np.float32)], ShapeError, r"'I0' needs >= 3 dims, got \(2, 3\)"),
    ("PadImage", 1, 1, dict(pad=3, mode="reflect"), [X4], ShapeError, r"reflect padding.*\(3, 3\)"),
    ("PadImage", 1, 1, dict(pads=[1, 1, 1]), [X4], ArgumentError, "even length"),
    # Caffe2 crops with negative pads; cropping more than the input is refused
    ("PadImage", 1, 1, dict(pad=-2), [X4], ShapeError, r"crop more than.*\(3, 3\)"),
    ("PadImage", 1, 1, dict(pad=1, legacy_pad=VALID), [X4], ArgumentError, "legacy_pad VALID"),
    ("ResizeNearest", 1, 1, dict(width_scale=0.0), [X4], ArgumentError, "must be > 0"),
    ("ResizeNearest", 1, 1, {}, [X4[0]], ShapeError, r"4-d, got \(2, 3, 3\)"),
    ("Im2Col", 1, 1, {}, [X4], ArgumentError, "kernel size"),
    ("Im2Col", 1, 1, dict(kernel=5), [X4], ShapeError, "smaller than the kernel"),
    ("ChannelShuffle", 1, 1, dict(group=2), [np.zeros((1, 3, 2), np.float32)], ShapeError, "not divisible by group 2"),
    # normalization
    ("SpatialBN", 5, 1, dict(is_test=1, epsilon=0.0), [X4] + [C2] * 4, ArgumentError, r"epsilon must be > 0"),
    ("SpatialBN", 5, 1, dict(is_test=1, momentum=1.5), [X4] + [C2] * 4, ArgumentError, r"momentum must be in \[0, 1\]"),
    ("SpatialBN", 5, 1, dict(is_test=1, order="NCWH"), [X4] + [C2] * 4, ArgumentError, "order"),
    ("SpatialBN", 5, 1, dict(is_test=1), [X4.astype(np.int32)] + [C2] * 4, TypeMismatchError, r"'I0' must be float"),
    ("InstanceNorm", 3, 1, {}, [X4, np.ones(3, np.float32), C2], ShapeError, r"'I1' must have shape \(2,\)"),
    ("LayerNorm", 1, 3, dict(axis=5), [X4], ShapeError, "axis 5 out of range"),
    ("LRN", 1, 1, dict(size=3, order="CHWN"), [X4], ArgumentError, "order"),
    ("Dropout", 1, 1, dict(ratio=-0.1), [X4], ArgumentError, r"ratio must be in \[0, 1\]"),
    # pools
    ("MaxPool", 1, 1, dict(kernel=2, order="NCWH"), [X4], ArgumentError, "order"),
    ("MaxPool", 1, 1, dict(kernel=2), [np.zeros((2, 3), np.float32)], ShapeError, r"'I0'.*\(2, 3\)"),
    (
        "AveragePool",
        1,
        1,
        dict(kernel=2),
        [X4.astype(np.int32)],
        TypeMismatchError,
        r"'I0' has unsupported dtype int32",
    ),
    ("LpPool", 1, 1, dict(kernel=2, p=0.0), [X4], ArgumentError, "p must be > 0"),
]


@pytest.mark.parametrize(
    "op_type,n_in,n_out,kwargs,values,exc,pattern", ERRORS, ids=[f"{e[0]}-{i}" for i, e in enumerate(ERRORS)]
)
def test_errors_name_the_op_and_blob(op_type, n_in, n_out, kwargs, values, exc, pattern):
    op = CreateOperator(
        op_type, [f"I{i}" for i in range(n_in)], [f"O{i}" for i in range(n_out)], name="audited", **kwargs
    )
    with pytest.raises(exc, match=pattern) as e:
        run_once(op, values)
    assert f'{op_type} "audited"' in str(e.value)


# -- empty batches: N = 0 gives an empty output of the formula's shape ---------------------------------
E = np.zeros((0, 3, 4, 4), np.float32)
C3 = np.ones(3, np.float32)
EMPTY = [
    ("Conv", [E, np.ones((2, 3, 3, 3), np.float32)], 1, dict(kernel=3, pad=1), (0, 2, 4, 4)),
    ("ConvTranspose", [E, np.ones((3, 2, 2, 2), np.float32)], 1, dict(kernel=2, stride=2), (0, 2, 8, 8)),
    ("MaxPool", [E], 1, dict(kernel=2, stride=2), (0, 3, 2, 2)),
    ("AveragePool", [E], 1, dict(kernel=3, legacy_pad=SAME), (0, 3, 4, 4)),
    ("LpPool", [E], 1, dict(global_pooling=1), (0, 3, 1, 1)),
    ("SpatialBN", [E, C3, C3, C3, C3], 1, dict(is_test=1), (0, 3, 4, 4)),
    ("LRN", [E], 1, dict(size=3, alpha=0.1, beta=0.75), (0, 3, 4, 4)),
    ("InstanceNorm", [E, C3, C3], 1, {}, (0, 3, 4, 4)),
    ("ChannelShuffle", [E], 1, dict(group=3), (0, 3, 4, 4)),
    ("PadImage", [E], 1, dict(pad=1), (0, 3, 6, 6)),
    ("Im2Col", [E], 1, dict(kernel=2), (0, 12, 3, 3)),
    ("ResizeNearest", [E], 1, dict(width_scale=2.0), (0, 3, 4, 8)),
    ("UpsampleBilinear", [E], 1, dict(height_scale=2.0), (0, 3, 8, 4)),
    ("NCHW2NHWC", [E], 1, {}, (0, 4, 4, 3)),
    ("Dropout", [E], 2, dict(ratio=0.5), (0, 3, 4, 4)),
]


@pytest.mark.parametrize("op_type,values,n_out,kwargs,shape", EMPTY, ids=[e[0] for e in EMPTY])
def test_empty_batch(op_type, values, n_out, kwargs, shape):
    op = CreateOperator(op_type, [f"I{i}" for i in range(len(values))], [f"O{i}" for i in range(n_out)], **kwargs)
    expect = [np.zeros(shape, np.float32)] + ([np.zeros(shape, bool)] if n_out == 2 else [])
    outs = assert_reference_checks(op, values, lambda *_: expect)
    assert outs[0].shape == shape
