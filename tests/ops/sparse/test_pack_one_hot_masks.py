"""PackSegments/UnpackSegments, the one-hot family, boolean masks, Unique and LengthsTopK against loops."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.ops import get_gradient_for_op
from framework.ops.testing import assert_gradient_checks, assert_reference_checks, run_op_on

lengths_st = st.lists(st.integers(0, 4), max_size=5).map(lambda v: np.array(v, np.int32))


def ref_pack(lengths, data, width, pad):
    out = np.full((len(lengths), width, *data.shape[1:]), pad, data.dtype)
    mask = np.zeros((len(lengths), width), bool)
    start = 0
    for i, n in enumerate(lengths):
        for j in range(min(n, width)):
            out[i, j] = data[start + j]
            mask[i, j] = True
        start += n
    return out, mask


@settings(max_examples=40, deadline=None)
@given(lengths=lengths_st, minf=st.booleans(), cut=st.none() | st.integers(0, 3), dtype=st.sampled_from(["f", "i"]))
def test_pack_and_unpack(lengths, minf, cut, dtype):
    data = (np.arange(int(lengths.sum()) * 2) + 1).reshape(-1, 2).astype(np.float32 if dtype == "f" else np.int64)
    width = cut if cut is not None else (int(lengths.max()) if lengths.size else 0)
    pad = -np.inf if (minf and dtype == "f") else 0
    kw = {"pad_minf": minf, "return_presence_mask": True} | ({"max_length": cut} if cut is not None else {})
    op = CreateOperator("PackSegments", ["l", "d"], ["p", "m"], **kw)
    packed, _ = assert_reference_checks(
        op, [lengths, data], lambda l, d: ref_pack(l, d, width, pad), check_inference=cut is not None
    )
    unpacked = np.concatenate(
        [data[sum(lengths[:i]) : sum(lengths[:i]) + min(n, width)] for i, n in enumerate(lengths)]
        or [np.zeros((0, 2), data.dtype)]
    )
    kw = {"max_length": cut} if cut is not None else {}
    assert_reference_checks(
        CreateOperator("UnpackSegments", ["l", "p"], ["u"], **kw),
        [lengths, packed],
        lambda *_: unpacked,
        check_inference=False,
    )


@pytest.mark.parametrize("cut", [None, 2])
def test_pack_gradients(cut):
    lengths = np.array([3, 0, 1, 2], np.int32)
    data = np.random.default_rng(0).standard_normal((6, 2)).astype(np.float32)
    kw = {"max_length": cut} if cut else {}
    assert_gradient_checks(
        CreateOperator("PackSegments", ["l", "d"], ["p"], **kw), [lengths, data], 1, check_inference=False
    )
    packed = np.random.default_rng(1).standard_normal((4, 3, 2)).astype(np.float32)
    if not cut:
        assert_gradient_checks(
            CreateOperator("UnpackSegments", ["l", "p"], ["u"]), [lengths, packed], 1, check_inference=False
        )
    ops, _ = get_gradient_for_op(CreateOperator("PackSegments", ["l", "d"], ["p"]), ["p_grad"])
    assert [(o.type, list(o.input)) for o in ops] == [("UnpackSegments", ["l", "p_grad"])]
    ops, _ = get_gradient_for_op(CreateOperator("PackSegments", ["l", "d"], ["p"], max_length=2), ["p_grad"])
    assert [o.type for o in ops] == ["PackSegmentsGradientUnpack"]  # keeps the rows max_length cut


@settings(max_examples=30, deadline=None)
@given(st.lists(st.integers(0, 4), max_size=6), st.integers(5, 6))
def test_one_hot_and_segment_one_hot(idx, size):
    idx = np.array(idx, np.int64)
    ref = np.zeros((len(idx), size), np.float32)
    for i, k in enumerate(idx):
        ref[i, k] = 1.0
    out = assert_reference_checks(
        CreateOperator("OneHot", ["i", "n"], ["y"]),
        [idx, np.array([size], np.int64)],
        lambda *_: ref,
        check_inference=False,
    )
    assert out[0].shape == (len(idx), size)
    lengths = np.array([len(idx) // 2, len(idx) - len(idx) // 2, 0], np.int32)
    seg = np.zeros((3, size), np.float32)
    for s, k in zip(np.repeat(np.arange(3), lengths), idx):
        seg[s, k] = 1.0
    assert_reference_checks(
        CreateOperator("SegmentOneHot", ["l", "i", "n"], ["y"]),
        [lengths, idx, np.array(size, np.int64)],
        lambda *_: seg,
        check_inference=False,
    )


def test_batch_one_hot_and_bucket_one_hot_caffe2_examples():
    data = np.array([[2, 3], [4, 1], [2, 5]], np.int32)
    out = run_op_on(
        CreateOperator("BatchOneHot", ["x", "l", "v"], ["y"]),
        [data, np.array([2, 3], np.int32), np.array([2, 4, 1, 3, 5], np.int32)],
    )[0]
    np.testing.assert_array_equal(out, [[1, 0, 0, 1, 0], [0, 1, 1, 0, 0], [1, 0, 0, 0, 1]])
    out = run_op_on(
        CreateOperator("BatchBucketOneHot", ["x", "l", "b"], ["y"]),
        [data.astype(np.float32), np.array([2, 3], np.int32), np.array([0.1, 2.5, 1, 3.1, 4.5], np.float32)],
    )[0]
    np.testing.assert_array_equal(out, [[0, 1, 0, 0, 1, 0, 0], [0, 0, 1, 1, 0, 0, 0], [0, 1, 0, 0, 0, 0, 1]])


@settings(max_examples=30, deadline=None)
@given(st.data())
def test_batch_bucket_one_hot_random(data):
    n = data.draw(st.integers(0, 4))
    lengths = data.draw(st.lists(st.integers(1, 3), min_size=1, max_size=3))
    bounds = [sorted(data.draw(st.lists(st.integers(-3, 3), min_size=k, max_size=k))) for k in lengths]
    x = np.array(
        data.draw(st.lists(st.integers(-4, 4), min_size=n * len(lengths), max_size=n * len(lengths))), np.float32
    ).reshape(n, len(lengths))
    ref = np.zeros((n, sum(lengths) + len(lengths)), np.float32)
    for i in range(n):
        off = 0
        for j, b in enumerate(bounds):
            # (b_k-1, b_k]; a value equal to a boundary repeated r times lands in the middle of the r + 1
            # buckets it touches (Caffe2 2020: the mean of lower_bound and upper_bound, rounded down)
            below = sum(1 for v in b if v < x[i, j])
            at_most = sum(1 for v in b if v <= x[i, j])
            ref[i, off + (below + at_most) // 2] = 1
            off += len(b) + 1
    op = CreateOperator("BatchBucketOneHot", ["x", "l", "b"], ["y"])
    assert_reference_checks(op, [x, np.array(lengths, np.int32), np.array(sum(bounds, []), np.float32)], lambda *_: ref)
    vals = np.array(sum(bounds, []), np.float32)
    ref2 = np.concatenate([(x[:, [j]] == np.array(b, np.float32)[None, :]) for j, b in enumerate(bounds)], axis=1)
    assert_reference_checks(
        CreateOperator("BatchOneHot", ["x", "l", "v"], ["y"]),
        [x, np.array(lengths, np.int32), vals],
        lambda *_: ref2.astype(np.float32),
    )


@settings(max_examples=40, deadline=None)
@given(st.lists(st.booleans(), max_size=6))
def test_boolean_mask_and_lengths(mask):
    mask = np.array(mask, bool)
    x = np.arange(len(mask) * 2, dtype=np.float32).reshape(-1, 2)
    keep = [i for i, m in enumerate(mask) if m]
    assert_reference_checks(
        CreateOperator("BooleanMask", ["x", "m"], ["y", "i"]),
        [x, mask],
        lambda *_: [x[keep].reshape(-1, 2), np.array(keep, np.int64)],
        check_inference=False,
    )
    lengths = np.array([len(mask) // 3, len(mask) - len(mask) // 3], np.int32)
    ref = np.array([sum(mask[: lengths[0]]), sum(mask[lengths[0] :])], np.int32)
    assert_reference_checks(CreateOperator("BooleanMaskLengths", ["l", "m"], ["y"]), [lengths, mask], lambda *_: ref)


def test_boolean_mask_gradient():
    x = np.random.default_rng(0).standard_normal((4, 2)).astype(np.float32)
    assert_gradient_checks(CreateOperator("BooleanMask", ["x", "m"], ["y"]), [x, np.array([1, 0, 1, 1], bool)], 0)


def test_boolean_unmask_caffe2_example_and_errors():
    t, f = True, False
    ins = [
        np.array([t, f, t, f, f]),
        np.array([1.0, 3.0], np.float32),
        np.array([f, t, f, f, f]),
        np.array([2.0], np.float32),
        np.array([f, f, f, t, t]),
        np.array([4.0, 5.0], np.float32),
    ]
    op = CreateOperator("BooleanUnmask", [f"i{k}" for k in range(6)], ["y"])
    assert_reference_checks(op, ins, lambda *_: np.array([1, 2, 3, 4, 5], np.float32))
    with pytest.raises(FrameworkError, match="BooleanUnmask.*all masks are false at position 1"):
        run_op_on(CreateOperator("BooleanUnmask", ["a", "b"], ["y"]), [np.array([t, f]), np.array([1.0])])


@settings(max_examples=40, deadline=None)
@given(st.lists(st.integers(-3, 3), max_size=8), st.sampled_from([np.int32, np.int64]))
def test_unique(values, dtype):
    x = np.array(values, dtype)
    uniq = sorted(set(values))
    remap = np.array([uniq.index(v) for v in values], np.int32)
    assert_reference_checks(
        CreateOperator("Unique", ["x"], ["u", "r"]),
        [x],
        lambda _: [np.array(uniq, dtype), remap],
        check_inference=len(values) <= 1,
    )


@settings(max_examples=40, deadline=None)
@given(lengths_st, st.integers(1, 3), st.data())
def test_lengths_top_k(lengths, k, data):
    n = int(lengths.sum())
    x = np.array(data.draw(st.lists(st.integers(-2, 2), min_size=n, max_size=n)), np.float32)  # many ties

    def ref(x, lengths):
        vals = np.zeros((len(lengths), k), np.float32)
        idx = np.full((len(lengths), k), -1, np.int32)
        start = 0
        for i, m in enumerate(lengths):
            seg = sorted(range(m), key=lambda j: (-x[start + j], j))[:k]
            for c, j in enumerate(seg):
                vals[i, c], idx[i, c] = x[start + j], j
            start += m
        return vals, idx

    assert_reference_checks(CreateOperator("LengthsTopK", ["x", "l"], ["v", "i"], k=k), [x, lengths], ref)


def test_lengths_top_k_gradient():
    x = np.array([0.5, 2.0, -1.0, 3.0, 1.5, 0.1], np.float32)
    op = CreateOperator("LengthsTopK", ["x", "l"], ["v", "i"], k=2)
    assert_gradient_checks(op, [x, np.array([3, 0, 1, 2], np.int32)], 0, check_inference=False)


def _masked(mode, i, j, aux, radius):
    """Whether SequenceMask's ``mode`` masks row ``i``, column ``j`` (aux: the per-row lengths or centres)."""
    if mode == "sequence":
        return j >= aux[i]
    if mode == "window":
        return j > aux[i] + radius or j < aux[i] - radius
    return {"upper": j > i, "lower": j < i, "upperdiag": j >= i, "lowerdiag": j <= i}[mode]


def ref_sequence_mask(x, mode, aux=None, radius=10, fill=-np.inf, axis=1, batch=None, repeat_from=None):
    shape = x.shape
    b = int(np.prod(shape[: batch + 1])) if batch is not None else 1
    rows = int(np.prod(shape[batch + 1 : axis] if batch is not None else shape[:axis]))
    cols = int(np.prod(shape[axis:]))
    rep = int(np.prod(shape[repeat_from:])) if repeat_from is not None else 1
    v = x.reshape(b, rows, cols).copy()
    for bi in range(b):
        for i in range(rows):
            for jj in range(cols):
                j = jj // rep
                masked = _masked(mode, i, j, aux, radius)
                if masked:
                    v[bi, i, jj] = fill
    return v.reshape(shape)


@pytest.mark.parametrize("mode", ["sequence", "window", "upper", "lower", "upperdiag", "lowerdiag"])
def test_sequence_mask_modes(mode):
    rng = np.random.default_rng(0)
    x = rng.standard_normal((4, 5)).astype(np.float32)
    aux = np.array([0, 2, 5, 3], np.int32)
    kw = {"mode": mode} | ({"radius": 1} if mode == "window" else {})
    ins = ["x", "s"] if mode in ("sequence", "window") else ["x"]
    vals = [x, aux] if len(ins) == 2 else [x]
    ref = ref_sequence_mask(x, mode, aux, radius=1)
    assert_reference_checks(CreateOperator("SequenceMask", ins, ["y"], **kw), vals, lambda *_: ref)
    # batched: the mask of axes (1, 2) repeats over axis 0
    xb = rng.standard_normal((2, 4, 5)).astype(np.float32)
    refb = ref_sequence_mask(xb, mode, aux, radius=1, axis=2, batch=0)
    op = CreateOperator("SequenceMask", ins, ["y"], axis=2, batch=0, **kw)
    assert_reference_checks(op, [xb] + vals[1:], lambda *_: refb)
    # gradient: the unmasked entries pass dY, masked ones get 0 (fill_val finite for the loss)
    op = CreateOperator("SequenceMask", ins, ["y"], fill_val=-5.0, **kw)
    assert_gradient_checks(op, vals, 0)


def test_sequence_mask_repeat_from_axis():
    x = np.random.default_rng(1).standard_normal((3, 4, 2)).astype(np.float32)
    lengths = np.array([1, 4, 0], np.int32)
    ref = ref_sequence_mask(x, "sequence", lengths, repeat_from=2)
    op = CreateOperator("SequenceMask", ["x", "l"], ["y"], mode="sequence", repeat_from_axis=2)
    assert_reference_checks(op, [x, lengths], lambda *_: ref)
