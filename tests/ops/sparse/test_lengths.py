"""Lengths / segment-id conversions against plain-Python references; LengthsTile's gradient."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError
from framework.ops.testing import assert_gradient_checks, assert_reference_checks

lengths_st = st.lists(st.integers(0, 4), min_size=0, max_size=6).map(lambda v: np.array(v, np.int32))


def ranges(lengths):
    out, offset = [], 0
    for n in lengths:
        out.append([offset, n])
        offset += n
    return np.array(out, np.int32).reshape(-1, 2)


@given(lengths_st)
def test_lengths_to_segment_ids_ranges_and_weights(lengths):
    ids = np.array([i for i, n in enumerate(lengths) for _ in range(n)], np.int32)
    assert_reference_checks(
        CreateOperator("LengthsToSegmentIds", ["l"], ["s"]), [lengths], lambda _: ids, check_inference=False
    )
    assert_reference_checks(CreateOperator("LengthsToRanges", ["l"], ["r"]), [lengths], lambda _: ranges(lengths))
    w = np.array([1 / np.sqrt(n) for n in lengths for _ in range(n)], np.float32)
    assert_reference_checks(
        CreateOperator("LengthsToWeights", ["l"], ["w"]), [lengths], lambda _: w, check_inference=False
    )
    w2 = np.array([1 / n**2 for n in lengths for _ in range(n)], np.float32)
    assert_reference_checks(
        CreateOperator("LengthsToWeights", ["l"], ["w"], power=2.0), [lengths], lambda _: w2, check_inference=False
    )


@given(lengths_st)
def test_segment_ids_back_to_lengths_and_ranges(lengths):
    ids = np.array([i for i, n in enumerate(lengths) for _ in range(n)], np.int32)
    k = int(ids[-1]) + 1 if ids.size else 0  # trailing empty segments cannot be seen in ids
    assert_reference_checks(
        CreateOperator("SegmentIdsToLengths", ["s"], ["l"]),
        [ids],
        lambda _: lengths[:k].astype(np.int32),
        check_inference=False,
    )
    assert_reference_checks(
        CreateOperator("SegmentIdsToRanges", ["s"], ["r"]), [ids], lambda _: ranges(lengths[:k]), check_inference=False
    )
    data = np.zeros((len(lengths), 2), np.float32)  # with DATA, its first dimension is the segment count
    assert_reference_checks(
        CreateOperator("SegmentIdsToLengths", ["s", "d"], ["l"]), [ids, data], lambda *_: lengths, check_inference=False
    )


def test_lengths_to_shape():
    assert_reference_checks(
        CreateOperator("LengthsToShape", ["l"], ["s"]),
        [np.array([3, 3], np.int32)],
        lambda _: np.array([2, 3], np.int32),
    )
    from framework.memory.workspace import Workspace
    from framework.net.api import run_operator_once

    ws = Workspace()
    ws.feed_blob("l", np.array([3, 2], np.int32))
    with pytest.raises(FrameworkError, match="must be equal"):
        run_operator_once(ws, CreateOperator("LengthsToShape", ["l"], ["s"]))


@given(lengths_st)
def test_lengths_tile_and_its_gradient(lengths):
    data = np.arange(len(lengths) * 3, dtype=np.float32).reshape(len(lengths), 3)
    expected = np.array([data[i] for i, n in enumerate(lengths) for _ in range(n)], np.float32).reshape(-1, 3)
    assert_reference_checks(
        CreateOperator("LengthsTile", ["d", "l"], ["o"]), [data, lengths], lambda *_: expected, check_inference=False
    )


def test_lengths_tile_gradient_sums_the_copies():
    data = np.random.default_rng(0).standard_normal((3, 2)).astype(np.float32)
    assert_gradient_checks(CreateOperator("LengthsTile", ["d", "l"], ["o"]), [data, np.array([2, 0, 3], np.int32)], 0)
