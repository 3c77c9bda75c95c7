"""Concat, Split, Slice, Gather, Cast, Copy, Alias, EnsureDense, StopGradient, NegateGradient, Print."""

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import ArgumentError, FrameworkError, GradientError, ShapeError, TypeMismatchError
from framework.memory.workspace import Workspace
from framework.ops import GradientSlice, create_operator, get_gradient_for_op
from framework.ops.testing import arrays, assert_gradient_checks, assert_reference_checks, run_op_on, shapes
from framework.proto.framework_pb2 import TensorProto
from tests.ops.helpers import DTYPE_PAIRS, float_arrays, run_fed


# -- Concat / Split ----------------------------------------------------------------------------
@st.composite
def concat_case(draw):
    shape = list(draw(shapes(min_dims=1, max_dims=3, max_side=3)))
    axis = draw(st.integers(-len(shape), len(shape) - 1))
    n = draw(st.integers(1, 3))
    parts = []
    for _ in range(n):
        s = list(shape)
        s[axis] = draw(st.integers(0, 3))
        parts.append(draw(arrays(s, np.float32)))
    return parts, axis


@given(case=concat_case())
def test_concat_and_its_gradient(case):
    parts, axis = case
    names = [f"X{i}" for i in range(len(parts))]
    op = CreateOperator("Concat", names, ["Y", "info"], axis=axis)
    a = axis % parts[0].ndim
    ref = [np.concatenate(parts, axis=axis), np.array([p.shape[a] for p in parts], np.int32)]
    assert_reference_checks(op, parts, lambda *xs: ref)
    for i, p in enumerate(parts):
        if p.size:
            assert_gradient_checks(op, parts, i, check_inference=False)


@given(shape=shapes(min_dims=1, max_dims=3, max_side=3), n=st.integers(1, 3), data=st.data())
def test_concat_add_axis(shape, n, data):
    parts = [data.draw(arrays(shape, np.int32)) for _ in range(n)]
    axis = data.draw(st.integers(0, len(shape)))
    op = CreateOperator("Concat", [f"X{i}" for i in range(n)], ["Y", "info"], axis=axis, add_axis=1)
    assert_reference_checks(op, parts, lambda *xs: [np.stack(xs, axis=axis), np.ones(n, np.int32)])


def test_concat_order_and_single_output():
    a, b = np.ones((1, 2, 2, 3), np.float32), np.zeros((1, 2, 2, 1), np.float32)
    op = CreateOperator("Concat", ["A", "B"], ["Y", "i"], order="NHWC")
    assert_reference_checks(op, [a, b], lambda a, b: [np.concatenate([a, b], 3), np.array([3, 1], np.int32)])
    op = CreateOperator("Concat", ["A", "A2"], ["Y"])
    assert_reference_checks(op, [a, a], lambda a, a2: [np.concatenate([a, a2], 1)])
    with pytest.raises(GradientError, match="split_info"):
        get_gradient_for_op(op, ["Y_grad"])


@pytest.mark.parametrize("n", [1, 2])
def test_concat_into_part_of_a_larger_output(n):
    """out_channels / out_channel_offset (this framework's): the inputs fill channels 3:8 of a 10-channel
    Y, the other channels keep their values; shape inference gives the whole Y; no gradient."""
    from framework.ops.inference import infer_op
    from framework.ops.schema import TensorSpec

    rng = np.random.default_rng(n)
    a, b = rng.standard_normal((n, 2, 3, 4)).astype(np.float32), rng.standard_normal((n, 3, 3, 4)).astype(np.float32)
    before = rng.standard_normal((n, 10, 3, 4)).astype(np.float32)
    op = CreateOperator("Concat", ["A", "B"], ["Y", "i"], axis=1, out_channels=10, out_channel_offset=3)
    ws = Workspace()
    for k, v in (("A", a), ("B", b), ("Y", before)):
        ws.feed_blob(k, v)
    create_operator(op, ws).run()
    want = before.copy()
    want[:, 3:8] = np.concatenate([a, b], 1)
    np.testing.assert_array_equal(ws.fetch_blob("Y"), want)
    np.testing.assert_array_equal(ws.fetch_blob("i"), [2, 3])
    spec = infer_op(op, [TensorSpec(a.shape, np.float32), TensorSpec(b.shape, np.float32)])
    assert tuple(spec[0].shape) == want.shape
    with pytest.raises(GradientError, match="out_channels"):
        get_gradient_for_op(op, ["Y_grad", None])
    with pytest.raises(ShapeError, match="offset 3 \\+ the inputs' 5 exceed out_channels 7"):
        op = CreateOperator("Concat", ["A", "B"], ["Z"], axis=1, out_channels=7, out_channel_offset=3)
        run_fed(op, {"A": a, "B": b})
    with pytest.raises(ArgumentError, match="no add_axis"):
        create_operator(CreateOperator("Concat", ["A"], ["Z"], add_axis=1, out_channels=7), Workspace())


def test_concat_errors():
    with pytest.raises(ArgumentError, match=r'Concat "c".*not both'):
        create_operator(CreateOperator("Concat", ["A"], ["Y", "i"], name="c", axis=1, order="NCHW"), Workspace())
    with pytest.raises(ShapeError, match=r"input 1 'B' \(2, 4\) does not match input 0 'A' \(3, 4\)"):
        run_fed(CreateOperator("Concat", ["A", "B"], ["Y", "i"]), {"A": np.zeros((3, 4)), "B": np.zeros((2, 4))})
    with pytest.raises(TypeMismatchError, match="'B' is int32"):
        run_fed(
            CreateOperator("Concat", ["A", "B"], ["Y", "i"]), {"A": np.zeros((3, 4)), "B": np.zeros((3, 1), np.int32)}
        )
    with pytest.raises(ShapeError, match="axis 2 is out of range"):
        run_fed(CreateOperator("Concat", ["A"], ["Y", "i"], axis=2), {"A": np.zeros((3, 4))})


@st.composite
def split_case(draw):
    shape = list(draw(shapes(min_dims=1, max_dims=3, max_side=4)))
    axis = draw(st.integers(0, len(shape) - 1))
    n = draw(st.integers(1, 3))
    sizes = [draw(st.integers(0, 3)) for _ in range(n)]
    shape[axis] = sum(sizes)
    return draw(arrays(shape, np.float32)), axis, sizes


@given(case=split_case(), by_input=st.booleans())
def test_split_and_its_gradient(case, by_input):
    x, axis, sizes = case
    outs = [f"Y{i}" for i in range(len(sizes))]
    ref = np.split(x, np.cumsum(sizes)[:-1], axis=axis)
    if by_input:
        op = CreateOperator("Split", ["X", "S"], outs, axis=axis)
        inputs = [x, np.array(sizes, np.int32)]
    else:
        op = CreateOperator("Split", ["X"], outs, axis=axis, split=sizes)
        inputs = [x]
    assert_reference_checks(op, inputs, lambda *a: ref, check_inference=not by_input)
    if x.size:
        assert_gradient_checks(op, inputs, 0, outputs_with_grads=range(len(sizes)))


def test_split_equal_parts_add_axis_and_missing_gradients():
    x = np.arange(12, dtype=np.float32).reshape(2, 6) / 10
    op = CreateOperator("Split", ["X"], ["A", "B", "C"])
    assert_reference_checks(op, [x], lambda x: np.split(x, 3, axis=1))
    # A and C have no gradient: their parts of X_grad are (float32) zeros from ConstantFill
    ws, _ = run_fed(op, {"X": x})
    ops, g = get_gradient_for_op(op, [None, "B_grad", None])
    ws.feed_blob("B_grad", np.ones((2, 2), np.float32))
    for gop in ops:
        create_operator(gop, ws).run()
    np.testing.assert_array_equal(ws.fetch_blob(g[0]), [[0, 0, 1, 1, 0, 0]] * 2)
    op = CreateOperator("Split", ["X"], ["A", "B"], axis=0, add_axis=1)
    assert_reference_checks(op, [x], lambda x: [x[0], x[1]])
    ops, g = get_gradient_for_op(op, ["A_grad", "B_grad"])
    assert [o.type for o in ops] == ["Concat"] and g == ["X_grad"]


def test_split_errors():
    x = {"X": np.zeros((2, 5)), "S": np.array([1, 1], np.int32)}
    with pytest.raises(ShapeError, match=r'Split "s".*not divisible into 2'):
        run_fed(CreateOperator("Split", ["X"], ["A", "B"], name="s"), x)
    with pytest.raises(ShapeError, match="do not add up"):
        run_fed(CreateOperator("Split", ["X", "S"], ["A", "B"]), x)
    with pytest.raises(ArgumentError, match="do not pass the argument 'split'"):
        run_fed(CreateOperator("Split", ["X", "S"], ["A", "B"], split=[1, 4]), x)
    with pytest.raises(ArgumentError, match="2 sizes for 3 outputs"):
        run_fed(CreateOperator("Split", ["X"], ["A", "B", "C"], split=[1, 4]), x)


# -- Slice -----------------------------------------------------------------------------------------
def _slice_ref(x, starts, ends):
    idx = []
    for k in range(x.ndim):
        if k >= len(starts):
            idx.append(slice(None))
            continue
        d = x.shape[k]
        s = starts[k] if starts[k] >= 0 else d + 1 + starts[k]
        e = ends[k] if ends[k] >= 0 else d + 1 + ends[k]
        idx.append(slice(min(s, d), min(e, d)))
    return x[tuple(idx)]


@st.composite
def slice_case(draw):
    x = draw(float_arrays)
    k = draw(st.integers(1, x.ndim))
    starts, ends = [], []
    for d in x.shape[:k]:
        s = draw(st.integers(0, d))
        e = draw(st.integers(s, d))
        if draw(st.booleans()):  # the negative spelling of the same position
            s = s - d - 1
        if draw(st.booleans()):
            e = e - d - 1
        starts.append(s)
        ends.append(e)
    return x, starts, ends


@given(case=slice_case(), by_input=st.booleans())
def test_slice_and_gradient(case, by_input):
    x, starts, ends = case
    ref = _slice_ref(x, starts, ends)
    if by_input:
        op = CreateOperator("Slice", ["X", "s", "e"], ["Y"])
        inputs = [x, np.array(starts, np.int64), np.array(ends, np.int64)]
    else:
        op = CreateOperator("Slice", ["X"], ["Y"], starts=starts, ends=ends)
        inputs = [x]
    assert_reference_checks(op, inputs, lambda *a: [ref], check_inference=not by_input)
    assert_gradient_checks(op, inputs, 0)


def test_slice_minus_one_means_end_and_errors():
    x = np.arange(10, dtype=np.int32)
    assert_reference_checks(CreateOperator("Slice", ["X"], ["Y"], starts=[2], ends=[-1]), [x], lambda x: [x[2:]])
    with pytest.raises(ShapeError, match=r"Slice.*'X' \(10,\).*reversed"):
        run_fed(CreateOperator("Slice", ["X"], ["Y"], starts=[5], ends=[2]), {"X": x})
    with pytest.raises(ShapeError, match="more entries"):
        run_fed(CreateOperator("Slice", ["X"], ["Y"], starts=[0, 0], ends=[1, 1]), {"X": x})


# -- Gather -------------------------------------------------------------------------------------------
@given(x=float_arrays, data=st.data())
def test_gather_and_sparse_gradient(x, data):
    idx_shape = data.draw(shapes(min_dims=1, max_dims=2, max_side=3))
    idx = data.draw(arrays(idx_shape, np.int64, elements=st.integers(0, x.shape[0] - 1)))
    op = CreateOperator("Gather", ["D", "I"], ["Y"])
    assert_reference_checks(op, [x, idx], lambda d, i: [d[i]])
    ops, g = get_gradient_for_op(op, ["Y_grad"])
    assert ops == [] and g == [GradientSlice("I", "Y_grad"), None]
    assert_gradient_checks(op, [x, idx], 0)


def test_gather_axis_wrap_and_errors():
    d = np.arange(12, dtype=np.int32).reshape(3, 4)
    op = CreateOperator("Gather", ["D", "I"], ["Y"], axis=1)
    assert_reference_checks(op, [d, np.array([3, 0], np.int32)], lambda d, i: [d[:, [3, 0]]])
    op = CreateOperator("Gather", ["D", "I"], ["Y"], wrap_indices=1)
    assert_reference_checks(op, [d, np.array([-1], np.int32)], lambda d, i: [d[[2]]])
    with pytest.raises(ShapeError, match=r"Gather.*'I' hold values in \[0, 3\].*size 3"):
        run_fed(CreateOperator("Gather", ["D", "I"], ["Y"]), {"D": d, "I": np.array([0, 3])})
    with pytest.raises(TypeMismatchError, match="must be integers"):
        run_fed(CreateOperator("Gather", ["D", "I"], ["Y"]), {"D": d, "I": np.array([0.0])})
    assert_reference_checks(
        CreateOperator("Gather", ["D", "I"], ["Y"]), [d, np.zeros(0, np.int64)], lambda d, i: [d[i]]
    )


# -- Cast -------------------------------------------------------------------------------------------------
CASTS = DTYPE_PAIRS


@pytest.mark.parametrize("to,np_type", CASTS)
@given(x=shapes(max_dims=3).flatmap(lambda s: arrays(s, np.float32, elements=st.floats(0, 100, width=32))))
def test_cast(to, np_type, x):
    op = CreateOperator("Cast", ["X"], ["Y"], to=to)
    assert_reference_checks(op, [x], lambda x: [x.astype(np_type)], threshold=1e-3)


def test_cast_by_name_in_place_and_gradient():
    x = np.array([1.5, -2.0], np.float64)
    op = CreateOperator("Cast", ["X"], ["Y"], to="int32")
    (y,) = run_op_on(op, [x])
    assert y.dtype == np.int32 and y.tolist() == [1, -2]
    ws, _ = run_fed(CreateOperator("Cast", ["X"], ["X"], to=TensorProto.FLOAT), {"X": x})
    assert ws.fetch_blob("X").dtype == np.float32
    op = CreateOperator("Cast", ["X"], ["Y"], to=TensorProto.FLOAT, from_type=TensorProto.DOUBLE)
    ops, _ = get_gradient_for_op(op, ["Y_grad"])
    args = {a.name: a.i for a in ops[0].arg}
    assert args == {"to": TensorProto.DOUBLE, "from_type": TensorProto.FLOAT}
    assert_gradient_checks(op, [x], 0, stepsize=1e-2, threshold=1e-3)
    with pytest.raises(GradientError, match="from_type"):
        get_gradient_for_op(CreateOperator("Cast", ["X"], ["Y"], to=1), ["Y_grad"])


def test_cast_to_defaults_to_float_as_caffe2():
    x = np.array([[1, -2], [3, 4]], np.int64)
    (y,) = assert_reference_checks(CreateOperator("Cast", ["X"], ["Y"]), [x], lambda x: [x.astype(np.float32)])
    assert y.dtype == np.float32


def test_cast_errors():
    with pytest.raises(ArgumentError, match="'to' 99"):
        create_operator(CreateOperator("Cast", ["X"], ["Y"], to=99), Workspace())


# -- Copy, Alias, EnsureDense, StopGradient ------------------------------------------------------------------
@pytest.mark.parametrize(
    "op_type",
    [
        "Copy",
        "CopyCPUToGPU",
        "CopyGPUToCPU",
        "CopyFromCPUInput",
        "EnsureCPUOutput",
        "EnsureDense",
        "StopGradient",
        "NegateGradient",
    ],
)
@given(x=float_arrays)
def test_identity_copies(op_type, x):
    op = CreateOperator(op_type, ["X"], ["Y"])
    (y,) = assert_reference_checks(op, [x], lambda x: [x])
    if op_type in ("Copy", "EnsureDense"):
        assert_gradient_checks(op, [x], 0)


def test_copy_makes_a_separate_buffer_and_alias_shares():
    x = np.arange(4, dtype=np.float32)
    ws, _ = run_fed(CreateOperator("Copy", ["X"], ["Y"]), {"X": x})
    assert ws.get_blob("Y")._obj.storage is not ws.get_blob("X")._obj.storage
    ws, op = run_fed(CreateOperator("Alias", ["X"], ["Y"]), {"X": x})
    assert ws.get_blob("Y")._obj.storage is ws.get_blob("X")._obj.storage
    ws.get_blob("X")._obj.mutable_data()[0] = 42
    assert ws.fetch_blob("Y")[0] == 42
    assert_reference_checks(CreateOperator("Alias", ["X"], ["Y"]), [x.reshape(2, 2)], lambda x: [x])
    ops, g = get_gradient_for_op(CreateOperator("Alias", ["X"], ["Y"]), ["Y_grad"])
    assert ops == [] and g == ["Y_grad"]


def test_stop_gradient_blocks_and_ensure_dense_passes_sparse():
    assert get_gradient_for_op(CreateOperator("StopGradient", ["X"], ["Y"]), ["Y_grad"]) == ([], [None])
    ops, g = get_gradient_for_op(CreateOperator("EnsureDense", ["X"], ["Y"]), [GradientSlice("i", "v")])
    assert ops == [] and g == [GradientSlice("i", "v")]
    ws, _ = run_fed(CreateOperator("StopGradient", ["X"], ["X"]), {"X": np.ones(2)})
    assert ws.fetch_blob("X").tolist() == [1.0, 1.0]


@given(x=float_arrays, inplace=st.booleans())
def test_negate_gradient_is_identity_forward_and_negates_backward(x, inplace):
    op = CreateOperator("NegateGradient", ["X"], ["X" if inplace else "Y"])
    assert_reference_checks(op, [x], lambda x: [x])
    ops, g = get_gradient_for_op(CreateOperator("NegateGradient", ["X"], ["Y"]), ["Y_grad"])
    assert [(o.type, list(o.input), list(o.output)) for o in ops] == [("Negative", ["Y_grad"], ["X_grad"])]
    dy = np.arange(x.size, dtype=x.dtype).reshape(x.shape) - 1
    ws, _ = run_fed(ops[0], {"Y_grad": dy})
    dx = ws.fetch_blob(g[0])
    assert dx.shape == dy.shape
    np.testing.assert_array_equal(dx.reshape(-1), [-v for v in dy.reshape(-1)])


# -- Print ------------------------------------------------------------------------------------------------------
def test_print_to_stdout_every_n_and_limit(capsys):
    ws = Workspace()
    ws.feed_blob("X", np.arange(6, dtype=np.float32).reshape(2, 3))
    op = create_operator(CreateOperator("Print", ["X"], [], limit=4, every_n=2), ws)
    for _ in range(3):
        op.run()
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 2
    assert lines[0] == "Tensor X of type float. Dims: (2,3,): 0.0,1.0,2.0,3.0"


def test_print_to_file(tmp_path):
    ws = Workspace(root_folder=str(tmp_path))
    ws.feed_blob("names", np.array([b"a", b"b"], dtype=object))
    op = create_operator(CreateOperator("Print", ["names"], [], to_file=1), ws)
    op.run()
    op.run()
    text = (tmp_path / "names.log").read_text().splitlines()
    assert text == ["Tensor names of type std::string. Dims: (2,): a,b"] * 2
    with pytest.raises((GradientError, FrameworkError), match="should not"):
        get_gradient_for_op(CreateOperator("Print", ["X"], []), [])
