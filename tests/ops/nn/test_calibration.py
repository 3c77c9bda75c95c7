"""PiecewiseLinearTransform, Percentile, BisectPercentile, Histogram and SelfBinningHistogram
against plain-Python references of Caffe2's loops."""

import bisect
import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.ops.testing import arrays, assert_reference_checks, run_op_on

S = settings(max_examples=20, deadline=None)
GRID = st.sampled_from([-1.0, -0.5, 0.0, 0.25, 0.5, 1.0, 2.0])


def pwl(x, b, s, c):
    n = len(s)
    if x <= b[0]:
        return s[0] * b[0] + c[0]
    if x >= b[n]:
        return s[n - 1] * b[n] + c[n - 1]
    k = bisect.bisect_left(b, x) - 1
    return s[k] * x + c[k]


@given(data=st.data(), as_inputs=st.booleans())
@S
def test_piecewise_linear_transform(data, as_inputs):
    n, m, pieces = data.draw(st.integers(0, 4)), data.draw(st.integers(1, 3)), data.draw(st.integers(1, 3))
    b = [sorted(data.draw(st.lists(GRID, min_size=pieces + 1, max_size=pieces + 1))) for _ in range(m)]
    s = [data.draw(st.lists(st.floats(-2, 2), min_size=pieces, max_size=pieces)) for _ in range(m)]
    c = [data.draw(st.lists(st.floats(-2, 2), min_size=pieces, max_size=pieces)) for _ in range(m)]
    x = data.draw(arrays((n, m), np.float64, elements=GRID | st.floats(-3, 3)))
    flat = [sum(v, []) for v in (b, s, c)]

    def ref(x, *_):
        return np.array([[pwl(x[i, j], b[j], s[j], c[j]) for j in range(m)] for i in range(n)]).reshape(n, m)

    if as_inputs:
        op = CreateOperator("PiecewiseLinearTransform", ["X", "B", "S", "C"], ["Y"])
        assert_reference_checks(op, [x] + [np.array(v) for v in flat], ref)
    else:
        op = CreateOperator(
            "PiecewiseLinearTransform", ["X"], ["Y"], bounds=flat[0], slopes=flat[1], intercepts=flat[2]
        )
        assert_reference_checks(op, [x], ref)


def test_piecewise_linear_transform_equal_bounds_take_the_lower_clamp():
    """Bounds all equal: x on them is both <= bounds[0] and >= bounds[-1]; Caffe2 tests the lower first."""
    op = CreateOperator(
        "PiecewiseLinearTransform", ["X"], ["Y"], bounds=[-1.0, -1.0, -1.0], slopes=[0.0, 0.0], intercepts=[0.0, 1.0]
    )
    x = np.array([[-1.0], [-2.0], [0.0]])
    assert_reference_checks(op, [x], lambda x: np.array([[0.0], [0.0], [1.0]]))


def test_piecewise_linear_transform_binary():
    x = np.array([[0.9, 0.1], [0.2, 0.8]], np.float32)
    op = CreateOperator(
        "PiecewiseLinearTransform",
        ["X"],
        ["Y"],
        bounds=[0.0, 0.5, 1.0],
        slopes=[1.0, 0.5],
        intercepts=[0.0, 0.25],
        binary=1,
    )
    ref = lambda x: np.array([[0.9, 0.1], [1 - 0.65, 0.65]], np.float32)  # noqa: E731
    assert_reference_checks(op, [x], ref)
    with pytest.raises(FrameworkError, match="all set"):
        run_op_on(CreateOperator("PiecewiseLinearTransform", ["X"], ["Y"], bounds=[0.0, 1.0]), [x])


@given(data=st.data())
@S
def test_percentile(data):
    f = data.draw(st.integers(1, 3))
    pairs, lengths = [], []
    for _ in range(f):
        vals = sorted(set(data.draw(st.lists(GRID, min_size=1, max_size=4))))
        pcts = sorted(data.draw(st.lists(st.floats(0, 1, width=32), min_size=len(vals), max_size=len(vals))))
        pairs += [[v, p] for v, p in zip(vals, pcts)]
        lengths.append(len(vals))
    x = data.draw(arrays((data.draw(st.integers(0, 3)), f), np.float32, elements=GRID | st.floats(-2, 3, width=32)))
    vp = np.array(pairs, np.float32)

    def ref(x, vp, ln):
        out = np.zeros(x.shape)
        start = 0
        for j, length in enumerate(lengths):
            vals, pcts = list(vp[start : start + length, 0]), list(vp[start : start + length, 1])
            for i in range(x.shape[0]):
                v = x[i, j]
                k = bisect.bisect_left(vals, v)
                if k == length:
                    out[i, j] = 1.0
                elif v == vals[k]:
                    out[i, j] = pcts[k]
                elif k == 0:
                    out[i, j] = 0.0
                else:
                    out[i, j] = pcts[k - 1] + (v - vals[k - 1]) / (vals[k] - vals[k - 1]) * (pcts[k] - pcts[k - 1])
            start += length
        return out.astype(np.float32)

    op = CreateOperator("Percentile", ["X", "VP", "L"], ["P"])
    assert_reference_checks(op, [x, vp, np.array(lengths, np.int32)], ref)


def cpp_bisect(data, lo, hi, val):
    while lo < hi:
        mid = lo + (hi - lo) // 2
        if data[mid] <= val < data[mid + 1]:
            return mid
        if not data[mid] <= val:
            hi = mid - 1
        else:
            lo = mid + 1
    return lo


@given(data=st.data())
@S
def test_bisect_percentile(data):
    f = data.draw(st.integers(1, 3))
    raw, mp, lo, hi, lengths = [], [], [], [], []
    for _ in range(f):
        vals = sorted(set(data.draw(st.lists(GRID, min_size=1, max_size=5))))
        lengths.append(len(vals))
        raw += vals
        for _ in vals:
            a, b = sorted(data.draw(st.lists(st.floats(0, 1, width=32), min_size=2, max_size=2)))
            lo.append(a), hi.append(b), mp.append((a + b) / 2)
    x = data.draw(arrays((data.draw(st.integers(0, 3)), f), np.float32, elements=GRID | st.floats(-2, 3, width=32)))
    op = CreateOperator(
        "BisectPercentile",
        ["X"],
        ["P"],
        percentile_raw=raw,
        percentile_mapping=mp,
        percentile_lower=lo,
        percentile_upper=hi,
        lengths=lengths,
    )

    def ref(x):
        r32, m32, l32, h32 = (np.array(v, np.float32) for v in (raw, mp, lo, hi))
        out = np.zeros(x.shape, np.float32)
        start = 0
        for j, ln in enumerate(lengths):
            r = r32[start : start + ln]
            for i in range(x.shape[0]):
                v = np.float32(x[i, j])
                if v < r[0]:
                    out[i, j] = 0.0
                elif v > r[-1]:
                    out[i, j] = 1.0
                else:
                    k = cpp_bisect(r, 0, ln - 1, v)
                    if r[k] == v:
                        out[i, j] = m32[start + k]
                    else:
                        w = np.float32((v - r[k]) / (r[k + 1] - r[k] + np.float32(1e-10)))
                        out[i, j] = (1 - w) * h32[start + k] + w * l32[start + k + 1]
            start += ln
        return out

    assert_reference_checks(op, [x], ref)


@given(data=st.data())
@S
def test_histogram(data):
    edges = sorted(set(data.draw(st.lists(GRID, min_size=2, max_size=5))))
    if len(edges) < 2:
        return
    xs = [
        data.draw(arrays((data.draw(st.integers(0, 5)),), np.float32, elements=GRID | st.floats(-2, 3, width=32)))
        for _ in range(data.draw(st.integers(1, 3)))
    ]

    def ref(*xs):
        counts = np.zeros(len(edges) - 1, np.int64)
        for x in xs:
            for v in x:
                k = bisect.bisect_right(edges, v)
                if 0 < k < len(edges):
                    counts[k - 1] += 1
        return counts

    names = [f"X{i}" for i in range(len(xs))]
    assert_reference_checks(CreateOperator("Histogram", names, ["H"], bin_edges=edges), xs, ref)


@pytest.mark.parametrize(
    "edges,match",
    [
        ([1.0], "Number of bin edges must be greater than or equal to 2"),
        ([0.0, 2.0, 2.0], "bin_edges must be a strictly increasing sequence of values"),
    ],
)
def test_histogram_bad_edges_in_caffe2_words(edges, match):
    with pytest.raises(FrameworkError, match=match):
        run_op_on(CreateOperator("Histogram", ["X"], ["H"], bin_edges=edges), [np.zeros(3, np.float32)])


@pytest.mark.parametrize("spacing", ["linear", "logarithmic"])
@given(data=st.data(), bins=st.integers(1, 4))
@S
def test_self_binning_histogram(spacing, data, bins):
    xs = [
        data.draw(arrays((data.draw(st.integers(0, 5)),), np.float64, elements=st.floats(0.01, 5)))
        for _ in range(data.draw(st.integers(1, 2)))
    ]

    def ref(*xs):
        flat = [v for x in xs for v in x]
        edges, counts = np.zeros(bins + 1), np.zeros(bins + 1, np.int64)
        if not flat:
            return [edges, counts]
        lo, hi = min(flat), max(flat)
        if spacing == "logarithmic":
            lo, hi = max(lo, 1e-24), max(hi, 1e-24)
        smax = lo + (hi - lo) * 1.0001
        for i in range(bins + 1):
            r = i / bins
            edges[i] = (
                lo + r * (smax - lo) if spacing == "linear" else lo * math.exp((math.log(smax) - math.log(lo)) * r)
            )
        if edges[-1] <= hi:
            edges[-1] = smax
            counts[0] = len(flat)
            return [edges, counts]
        for v in flat:
            k = bisect.bisect_right(list(edges), v)
            if 0 < k < bins + 1:
                counts[k - 1] += 1
            if k == 0:
                counts[0] += 1
        return [edges, counts]

    names = [f"X{i}" for i in range(len(xs))]
    op = CreateOperator("SelfBinningHistogram", names, ["V", "C"], num_bins=bins, bin_spacing=spacing)
    assert_reference_checks(op, xs, ref, threshold=1e-9)


@pytest.mark.parametrize(
    "args, message",
    [
        ({"num_bins": 0}, "Number of bins must be greater than or equal to 1."),
        ({"num_bins": 2, "bin_spacing": "cubic"}, "bin_spacing must be linear or logarithmic"),
        ({"num_bins": 2, "logspace_start": 0.0}, "logspace_start must be > 0"),
    ],
)
def test_self_binning_histogram_bad_arguments_name_caffe2s_check(args, message):
    # Caffe2 enforces each argument with its own message; callers match the num_bins one.
    with pytest.raises(RuntimeError, match=message) as info:
        run_op_on(CreateOperator("SelfBinningHistogram", ["X"], ["V", "C"], **args), [np.ones(3)])
    assert isinstance(info.value, FrameworkError)
