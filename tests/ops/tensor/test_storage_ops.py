"""ExtendTensor and UnsafeCoalesce against references written from Caffe2's kernels."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from framework.core import CreateOperator
from framework.errors import FrameworkError, GradientError
from framework.memory.workspace import Workspace
from framework.ops import get_gradient_for_op
from framework.ops.testing import assert_reference_checks, shapes


def _extend_ref(x, idx):
    """Caffe2: grow the outer dim by max(idx) + 1 - size(x) when positive; new elements are zero."""
    grow = int(idx.max()) + 1 - x.size if idx.size else 0
    if grow <= 0:
        return x
    pad = np.zeros((grow, *x.shape[1:]), x.dtype)
    return np.concatenate([x, pad])


@given(
    x=st.sampled_from([np.float32, np.int32, np.int64]).flatmap(
        lambda t: hnp.arrays(t, st.integers(0, 6).map(lambda n: (n,)), elements=st.integers(-9, 9))
    ),
    idx=st.lists(st.integers(0, 12), max_size=6),
    growth=st.sampled_from([0, 40, 100]),
)
@settings(max_examples=30, deadline=None)
def test_extend_tensor_1d(x, idx, growth):
    idx = np.array(idx, np.int32)
    op = CreateOperator("ExtendTensor", ["T", "I"], ["T"], growthPct=growth)
    assert_reference_checks(op, [x, idx], _extend_ref, check_inference=False)


def test_extend_tensor_caffe2_example_and_repeated_growth():
    ws = Workspace()
    ws.feed_blob("T", np.array([1, 2, 3, 4, 5, 6], np.int32))
    ws.feed_blob("I", np.array([0, 5, 8, 2, 3, 7], np.int32))
    op = CreateOperator("ExtendTensor", ["T", "I"], ["T"])
    ws.run_operator_once(op)
    np.testing.assert_array_equal(ws.fetch_blob("T"), [1, 2, 3, 4, 5, 6, 0, 0, 0])
    ws.feed_blob("I", np.array([9], np.int32))
    ws.run_operator_once(op)
    np.testing.assert_array_equal(ws.fetch_blob("T"), [1, 2, 3, 4, 5, 6, 0, 0, 0, 0])


def test_extend_tensor_2d_counts_elements_as_caffe2():
    x = np.arange(6, dtype=np.float32).reshape(3, 2)
    idx = np.array([[7, 0]], np.int32)  # 8 elements needed, 6 held: the outer dim grows by 2
    (y,) = assert_reference_checks(
        CreateOperator("ExtendTensor", ["T", "I"], ["T"]), [x, idx], _extend_ref, check_inference=False
    )
    assert y.shape == (5, 2)


def test_extend_tensor_errors():
    ws = Workspace()
    ws.feed_blob("T", np.zeros(3, np.float32))
    ws.feed_blob("I", np.zeros((1, 1), np.int32))
    with pytest.raises(FrameworkError, match="ExtendTensor.*'I'.*as many"):
        ws.run_operator_once(CreateOperator("ExtendTensor", ["T", "I"], ["T"]))
    with pytest.raises(FrameworkError, match="ExtendTensor"):
        ws.run_operator_once(CreateOperator("ExtendTensor", ["T", "I"], ["U"]))
    with pytest.raises(GradientError):
        get_gradient_for_op(CreateOperator("ExtendTensor", ["T", "I"], ["T"]), ["T_grad"])


def _coalesce_ref(*xs):
    """Caffe2: each input's bytes at an offset padded to 64 bytes, zeros between; outputs equal the inputs."""
    parts = []
    for x in xs:
        raw = np.frombuffer(np.ascontiguousarray(x).tobytes(), np.uint8)
        pad = -len(raw) % 64
        parts.append(np.concatenate([raw, np.zeros(pad, np.uint8)]))
    return list(xs) + [np.concatenate(parts) if parts else np.zeros(0, np.uint8)]


@given(
    xs=st.lists(
        st.sampled_from([np.float32, np.float64, np.uint8, np.int64, np.bool_]).flatmap(
            lambda t: hnp.arrays(t, shapes(0, 3, 0, 5), elements=st.booleans() if t == np.bool_ else None)
        ),
        min_size=1,
        max_size=4,
    ),
    in_place=st.booleans(),
)
@settings(max_examples=30, deadline=None)
def test_unsafe_coalesce(xs, in_place):
    names = [f"X{i}" for i in range(len(xs))]
    outs = (names if in_place else [f"Y{i}" for i in range(len(xs))]) + ["coalesced"]
    op = CreateOperator("UnsafeCoalesce", names, outs)
    assert_reference_checks(op, xs, _coalesce_ref)


def test_unsafe_coalesce_outputs_alias_the_buffer():
    ws = Workspace()
    ws.feed_blob("A", np.arange(3, dtype=np.float32))
    ws.feed_blob("B", np.array([7], np.int64))
    ws.run_operator_once(CreateOperator("UnsafeCoalesce", ["A", "B"], ["A", "B", "buf"]))
    ws.get_blob("buf").get_tensor().mutable_data()[64:72] = np.frombuffer(np.array([42], np.int64).tobytes(), np.uint8)
    assert ws.fetch_blob("B").tolist() == [42]
    with pytest.raises(FrameworkError, match="UnsafeCoalesce.*strings"):
        ws.feed_blob("S", np.array([b"x"], object))
        ws.run_operator_once(CreateOperator("UnsafeCoalesce", ["S"], ["S", "buf2"]))
    with pytest.raises(GradientError):
        get_gradient_for_op(CreateOperator("UnsafeCoalesce", ["A"], ["A", "buf"]), ["A_grad", None])
