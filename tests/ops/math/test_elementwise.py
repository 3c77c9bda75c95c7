"""Elementwise binary ops, comparisons, logic, Where, Pow, SumReduceLike and their gradients."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from framework.core import CreateOperator
from framework.errors import ArgumentError, GradientError, SchemaError, ShapeError, TypeMismatchError
from framework.memory.workspace import Workspace
from framework.ops import create_operator, get_gradient_for_op
from framework.ops.testing import arrays, assert_gradient_checks, assert_reference_checks, run_op_on, shapes

ARITH = {
    "Add": lambda a, b: a + b,
    "Sub": lambda a, b: a - b,
    "Mul": lambda a, b: a * b,
    "Div": lambda a, b: a / b,
}
CMP = {
    "EQ": np.equal,
    "NE": np.not_equal,
    "LT": np.less,
    "LE": np.less_equal,
    "GT": np.greater,
    "GE": np.greater_equal,
}
LOGIC = {"And": np.logical_and, "Or": np.logical_or, "Xor": np.logical_xor}


def _int_div(a, b):
    # C++ semantics, written independently: divide magnitudes, then restore the sign.
    q = np.abs(a) // np.abs(b)
    return np.where((a < 0) != (b < 0), -q, q).astype(a.dtype)


def _ref(op_type, a, b):
    if op_type == "Div" and a.dtype.kind in "iu":
        return _int_div(a, np.broadcast_to(b, np.broadcast_shapes(a.shape, b.shape)))
    return ARITH[op_type](a, b).astype(a.dtype)


def _nonzero(x):
    return np.where(np.abs(x) < 0.1, x + np.where(x < 0, -0.5, 0.5), x).astype(x.dtype)


@st.composite
def legacy_pair(draw, dtype=np.float32, scalar_ok=True):
    """(A, B, axis) where B is a contiguous sub-shape of A starting at axis (None: suffix)."""
    a_shape = draw(shapes(1, 4, 1, 4))
    nb = draw(st.integers(0 if scalar_ok else 1, len(a_shape)))
    use_axis = draw(st.booleans())
    if use_axis:
        axis = draw(st.integers(0, len(a_shape) - nb))
    else:
        axis = len(a_shape) - nb
    b_shape = a_shape[axis : axis + nb]
    a = draw(arrays(a_shape, dtype))
    b = draw(arrays(b_shape, dtype)) if nb else draw(arrays((1,), dtype))
    return a, b, (axis if use_axis else None)


def _legacy_ref_b(a, b, axis):
    if b.size == 1:
        return b.reshape(())
    if axis is None:
        axis = a.ndim - b.ndim
    return b.reshape(b.shape + (1,) * (a.ndim - axis - b.ndim))


def _numpy_case(data, op_type, dtype, max_side):
    """(op, A, B) with numpy-broadcastable operands (B kept away from 0 for Div)."""
    (sa, sb), _ = data.draw(
        hnp.mutually_broadcastable_shapes(num_shapes=2, min_side=1, max_side=max_side, max_dims=max_side)
    )
    a = data.draw(arrays(sa, dtype))
    b = data.draw(arrays(sb, dtype))
    return CreateOperator(op_type, ["A", "B"], ["C"]), a, _nonzero(b) if op_type == "Div" else b


def _legacy_case(data, op_type, dtype):
    """(op, A, B, axis) with broadcast=1 operands (B kept away from 0 for Div)."""
    a, b, axis = data.draw(legacy_pair(dtype))
    kwargs = {"broadcast": 1} if axis is None else {"broadcast": 1, "axis": axis}
    op = CreateOperator(op_type, ["A", "B"], ["C"], **kwargs)
    return op, a, _nonzero(b) if op_type == "Div" else b, axis


# -- arithmetic -------------------------------------------------------------------------------------


@pytest.mark.parametrize("op_type", list(ARITH))
@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32, np.int64])
@given(data=st.data())
@settings(max_examples=15)
def test_arith_same_shape(op_type, dtype, data):
    shape = data.draw(shapes(0, 4, 0, 4))
    a = data.draw(arrays(shape, dtype))
    b = data.draw(arrays(shape, dtype))
    if op_type == "Div":
        b = _nonzero(b) if np.dtype(dtype).kind == "f" else np.where(b == 0, 3, b).astype(dtype)
    op = CreateOperator(op_type, ["A", "B"], ["C"])
    assert_reference_checks(op, [a, b], lambda a, b: _ref(op_type, a, b))


@pytest.mark.parametrize("op_type", list(ARITH))
@given(data=st.data())
@settings(max_examples=20)
def test_arith_numpy_broadcast(op_type, data):
    op, a, b = _numpy_case(data, op_type, np.float32, 4)
    assert_reference_checks(op, [a, b], lambda a, b: _ref(op_type, a, b))


@pytest.mark.parametrize("op_type", list(ARITH))
@given(data=st.data())
@settings(max_examples=20)
def test_arith_legacy_broadcast(op_type, data):
    op, a, b, axis = _legacy_case(data, op_type, np.float32)
    assert_reference_checks(op, [a, b], lambda a, b: _ref(op_type, a, _legacy_ref_b(a, b, axis)))


def test_legacy_broadcast_ignores_outer_ones_of_b():
    a = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    b = np.arange(3, dtype=np.float32).reshape(1, 3, 1)
    op = CreateOperator("Add", ["A", "B"], ["C"], broadcast=1, axis=0)
    assert_reference_checks(op, [a, b], lambda a, b: a + b.reshape(1, 3, 1))


@pytest.mark.parametrize("order,axis", [("NCHW", 1), ("NHWC", 3)])
def test_axis_str_with_order(order, axis):
    a = np.random.RandomState(0).randn(2, 3, 4, 3).astype(np.float32)
    b = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    op = CreateOperator("Mul", ["A", "B"], ["C"], broadcast=1, axis_str="C", order=order)
    shape = [1, 1, 1, 1]
    shape[axis] = 3
    assert_reference_checks(op, [a, b], lambda a, b: a * b.reshape(shape))


@pytest.mark.parametrize("op_type", list(ARITH))
def test_arith_in_place(op_type):
    rng = np.random.RandomState(1)
    a = rng.randn(3, 4).astype(np.float32)
    b = _nonzero(rng.randn(3, 4).astype(np.float32))
    op = CreateOperator(op_type, ["A", "B"], ["A"])
    assert_reference_checks(op, [a, b], lambda a, b: _ref(op_type, a, b))
    if op_type != "Div":
        op = CreateOperator(op_type, ["A", "B"], ["B"])
        assert_reference_checks(op, [a, b], lambda a, b: _ref(op_type, a, b))
        # legacy in place on A with a broadcast B
        op = CreateOperator(op_type, ["A", "B"], ["A"], broadcast=1)
        assert_reference_checks(op, [a, b[0]], lambda a, b: _ref(op_type, a, b))


def test_div_in_place_on_b_is_refused():
    ws = Workspace()
    with pytest.raises(SchemaError, match=r"Div.*does not allow"):
        create_operator(CreateOperator("Div", ["A", "B"], ["B"]), ws)


def test_legacy_in_place_on_b_is_refused():
    ws = Workspace()
    with pytest.raises(SchemaError, match=r"Add.*only A may be computed in place"):
        create_operator(CreateOperator("Add", ["A", "B"], ["B"], broadcast=1), ws)


def test_in_place_that_would_grow_is_an_error():
    op = CreateOperator("Add", ["A", "B"], ["A"], name="grow")
    with pytest.raises(ShapeError, match=r'Add "grow".*in place on A'):
        run_op_on(op, [np.ones(3, np.float32), np.ones((2, 3), np.float32)])


def test_int_division_truncates_toward_zero():
    a = np.array([7, -7, 7, -7, 6], dtype=np.int32)
    b = np.array([2, 2, -2, -2, 3], dtype=np.int32)
    (c,) = run_op_on(CreateOperator("Div", ["A", "B"], ["C"]), [a, b])
    np.testing.assert_array_equal(c, [3, -3, -3, 3, 2])


# -- errors -----------------------------------------------------------------------------------------


def test_shape_mismatch_names_op_and_shapes():
    op = CreateOperator("Add", ["X", "Y"], ["Z"], name="adder")
    with pytest.raises(ShapeError, match=r'Add "adder".*\[2, 3\].*\[4\]'):
        run_op_on(op, [np.ones((2, 3), np.float32), np.ones(4, np.float32)])


def test_legacy_mismatch_names_op_and_shapes():
    op = CreateOperator("Mul", ["X", "Y"], ["Z"], broadcast=1, axis=0)
    with pytest.raises(ShapeError, match=r"Mul.*mismatch.*\[2, 3\].*\[3\]"):
        run_op_on(op, [np.ones((2, 3), np.float32), np.ones(3, np.float32)])
    op = CreateOperator("Mul", ["X", "Y"], ["Z"], broadcast=1)
    with pytest.raises(ShapeError, match=r"Mul.*more dimensions"):
        run_op_on(op, [np.ones(3, np.float32), np.ones((2, 3), np.float32)])


def test_dtype_mismatch_names_blobs():
    op = CreateOperator("Sub", ["X", "Y"], ["Z"])
    with pytest.raises(TypeMismatchError, match=r"Sub.*'X'.*float32.*'Y'.*float64"):
        run_op_on(op, [np.ones(3, np.float32), np.ones(3, np.float64)])


def test_bool_arith_is_refused():
    with pytest.raises(TypeMismatchError, match=r"Add.*'X'.*bool"):
        run_op_on(CreateOperator("Add", ["X", "Y"], ["Z"]), [np.ones(3, bool), np.ones(3, bool)])


@pytest.mark.parametrize(
    "kwargs,msg",
    [
        ({"axis": 1}, "unless broadcast=1"),
        ({"broadcast": 1, "axis": 1, "axis_str": "C"}, "not both"),
        ({"broadcast": 1, "axis_str": "Q"}, "one letter of order"),
    ],
)
def test_bad_broadcast_args(kwargs, msg):
    with pytest.raises(ArgumentError, match=rf'Add "a".*{msg}'):
        create_operator(CreateOperator("Add", ["X", "Y"], ["Z"], name="a", **kwargs), Workspace())


# -- gradients --------------------------------------------------------------------------------------


@pytest.mark.parametrize("op_type", list(ARITH))
@given(data=st.data())
@settings(max_examples=8)
def test_arith_gradients_numpy_broadcast(op_type, data):
    op, a, b = _numpy_case(data, op_type, np.float64, 3)
    for i in (0, 1):
        assert_gradient_checks(op, [a, b], i, threshold=1e-3)


@pytest.mark.parametrize("op_type", list(ARITH))
@given(data=st.data())
@settings(max_examples=8)
def test_arith_gradients_legacy_broadcast(op_type, data):
    op, a, b, _ = _legacy_case(data, op_type, np.float64)
    for i in (0, 1):
        assert_gradient_checks(op, [a, b], i, threshold=1e-3)


def test_gradient_ops_run_in_place_on_dc():
    rng = np.random.RandomState(2)
    a, b, dc = rng.randn(3, 4), rng.randn(4) + 3.0, rng.randn(3, 4)
    for t, da, db in [
        ("AddGradient", dc, dc.sum(0)),
        ("SubGradient", dc, -dc.sum(0)),
        ("MulGradient", dc * b, (dc * a).sum(0)),
    ]:
        op = CreateOperator(t, ["dC", "A", "B"], ["dC", "dB"])
        assert_reference_checks(op, [dc, a, b], lambda dc, a, b, da=da, db=db: [da, db])
    c = a / b
    op = CreateOperator("DivGradient", ["dC", "A", "B", "C"], ["dC", "dB"])
    assert_reference_checks(op, [dc, a, b, c], lambda *_: [dc / b, (-dc * c / b).sum(0)])


def test_div_gradient_legacy_three_input_form():
    rng = np.random.RandomState(3)
    b, dc = rng.rand(4) + 1.0, rng.randn(3, 4)
    c = rng.randn(3, 4)
    op = CreateOperator("DivGradient", ["B", "C", "dC"], ["dA", "dB"], broadcast=1)
    assert_reference_checks(op, [b, c, dc], lambda b, c, dc: [dc / b, (-dc * c / b).sum(0)])


def test_mul_in_place_gradient_is_refused():
    op = CreateOperator("Mul", ["A", "B"], ["A"])
    with pytest.raises(GradientError, match="in-place Mul"):
        get_gradient_for_op(op, ["A_grad"])


def test_gradient_maker_conventions():
    ops, g = get_gradient_for_op(CreateOperator("Add", ["A", "B"], ["C"], broadcast=1), ["C_grad"])
    assert [o.type for o in ops] == ["AddGradient"] and list(ops[0].input) == ["C_grad", "A", "B"]
    assert g == ["A_grad", "B_grad"] and any(a.name == "broadcast" for a in ops[0].arg)
    ops, _ = get_gradient_for_op(CreateOperator("Div", ["A", "B"], ["C"]), ["C_grad"])
    assert list(ops[0].input) == ["C_grad", "A", "B", "C"]


@pytest.mark.parametrize("op_type", list(CMP) + list(LOGIC) + ["Not", "Where"])
def test_comparison_and_logic_must_not_be_differentiated(op_type):
    n = {"Not": 1, "Where": 3}.get(op_type, 2)
    op = CreateOperator(op_type, [f"I{i}" for i in range(n)], ["O"])
    with pytest.raises(GradientError, match="should not be differentiated"):
        get_gradient_for_op(op, ["O_grad"])


# -- Pow --------------------------------------------------------------------------------------------


@given(x=arrays((3, 4), np.float32, elements=st.floats(0.5, 2.0, width=32)), e=st.sampled_from([2.0, 0.5, -1.0, 3]))
@settings(max_examples=15)
def test_pow_exponent_argument(x, e):
    op = CreateOperator("Pow", ["X"], ["Y"], exponent=e)
    assert_reference_checks(op, [x], lambda x: np.power(x.astype(np.float64), e).astype(np.float32))
    assert_gradient_checks(op, [x], 0, threshold=1e-3)
    op = CreateOperator("Pow", ["X"], ["X"], exponent=e)
    assert_reference_checks(op, [x], lambda x: np.power(x.astype(np.float64), e).astype(np.float32))


@given(data=st.data())
@settings(max_examples=10)
def test_pow_tensor_exponent(data):
    (sa, sb), _ = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_side=1, max_side=3, max_dims=3))
    pos = st.floats(0.5, 2.0)
    x = data.draw(arrays(sa, np.float64, elements=pos))
    e = data.draw(arrays(sb, np.float64, elements=st.floats(-2.0, 2.0)))
    op = CreateOperator("Pow", ["X", "E"], ["Y"])
    assert_reference_checks(op, [x, e], lambda x, e: x**e)
    assert_gradient_checks(op, [x, e], 0, threshold=1e-3)
    assert_gradient_checks(op, [x, e], 1, threshold=1e-3)


def test_pow_legacy_broadcast_gradient():
    rng = np.random.RandomState(4)
    x, e = rng.rand(2, 3) + 0.5, rng.randn(3)
    op = CreateOperator("Pow", ["X", "E"], ["Y"], broadcast=1)
    assert_reference_checks(op, [x, e], lambda x, e: x**e)
    assert_gradient_checks(op, [x, e], 1, threshold=1e-3)


def test_pow_needs_exactly_one_exponent():
    with pytest.raises(ArgumentError, match="Pow.*either as argument"):
        create_operator(CreateOperator("Pow", ["X"], ["Y"]), Workspace())
    with pytest.raises(ArgumentError, match="Pow.*either as argument"):
        create_operator(CreateOperator("Pow", ["X", "E"], ["Y"], exponent=2.0), Workspace())


def test_pow_refuses_integers():
    with pytest.raises(TypeMismatchError, match="Pow.*'X'.*int32"):
        run_op_on(CreateOperator("Pow", ["X"], ["Y"], exponent=2.0), [np.ones(3, np.int32)])


# -- comparisons and logic --------------------------------------------------------------------------


@pytest.mark.parametrize("op_type", list(CMP))
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64, np.bool_])
@given(data=st.data())
@settings(max_examples=10)
def test_comparisons(op_type, dtype, data):
    (sa, sb), _ = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_side=0, max_side=4, max_dims=3))
    el = st.integers(-2, 2) if np.dtype(dtype).kind in "iu" else None
    a = data.draw(arrays(sa, dtype, elements=el))
    b = data.draw(arrays(sb, dtype, elements=el))
    op = CreateOperator(op_type, ["A", "B"], ["C"])
    assert_reference_checks(op, [a, b], CMP[op_type])


@pytest.mark.parametrize("op_type", list(CMP))
def test_comparisons_legacy_broadcast(op_type):
    a = np.array([[1, 5, 2], [9, 3, 3]], dtype=np.int64)
    b = np.array([1, 3], dtype=np.int64)
    op = CreateOperator(op_type, ["A", "B"], ["C"], broadcast=1, axis=0)
    assert_reference_checks(op, [a, b], lambda a, b: CMP[op_type](a, b[:, None]))


@pytest.mark.parametrize("op_type", list(LOGIC))
@given(data=st.data())
@settings(max_examples=15)
def test_logic(op_type, data):
    (sa, sb), _ = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_side=0, max_side=4, max_dims=3))
    a = data.draw(arrays(sa, np.bool_))
    b = data.draw(arrays(sb, np.bool_))
    op = CreateOperator(op_type, ["A", "B"], ["C"])
    assert_reference_checks(op, [a, b], LOGIC[op_type])
    if sa == np.broadcast_shapes(sa, sb):
        assert_reference_checks(CreateOperator(op_type, ["A", "B"], ["A"]), [a, b], LOGIC[op_type])


BITWISE = {"BitwiseAnd": lambda x, y: x & y, "BitwiseOr": lambda x, y: x | y, "BitwiseXor": lambda x, y: x ^ y}


@pytest.mark.parametrize("op_type", list(BITWISE))
@pytest.mark.parametrize("dtype", [np.int32, np.int64, np.bool_])
@given(data=st.data())
@settings(max_examples=10)
def test_bitwise(op_type, dtype, data):
    (sa, sb), _ = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=2, min_side=0, max_side=4, max_dims=4))
    a = data.draw(arrays(sa, dtype))
    b = data.draw(arrays(sb, dtype))

    def ref(a, b):  # element by element on Python ints (bools stay bools)
        shape = np.broadcast_shapes(a.shape, b.shape)
        x, y = np.broadcast_to(a, shape).reshape(-1), np.broadcast_to(b, shape).reshape(-1)
        return np.array([BITWISE[op_type](p.item(), q.item()) for p, q in zip(x, y)], dtype).reshape(shape)

    assert_reference_checks(CreateOperator(op_type, ["A", "B"], ["C"]), [a, b], ref)
    if sa == np.broadcast_shapes(sa, sb):
        assert_reference_checks(CreateOperator(op_type, ["A", "B"], ["A"]), [a, b], ref)
    with pytest.raises(GradientError, match="should not be differentiated"):
        get_gradient_for_op(CreateOperator(op_type, ["A", "B"], ["C"]), ["C_grad"])


def test_bitwise_refuses_float():
    with pytest.raises(TypeMismatchError, match=r"BitwiseAnd.*'A'"):
        run_op_on(CreateOperator("BitwiseAnd", ["A", "B"], ["C"]), [np.ones(2, np.float32), np.ones(2, np.float32)])


def test_logic_refuses_non_bool():
    with pytest.raises(TypeMismatchError, match=r"And.*'A'.*expected bool"):
        run_op_on(CreateOperator("And", ["A", "B"], ["C"]), [np.ones(2, np.int32), np.ones(2, np.int32)])
    with pytest.raises(TypeMismatchError, match=r"Not.*'A'.*expected bool"):
        run_op_on(CreateOperator("Not", ["A"], ["C"]), [np.ones(2, np.float32)])


@given(x=hnp.arrays(np.bool_, shapes(0, 4, 0, 4)))
@settings(max_examples=15)
def test_not(x):
    assert_reference_checks(CreateOperator("Not", ["X"], ["Y"]), [x], np.logical_not)
    assert_reference_checks(CreateOperator("Not", ["X"], ["X"]), [x], np.logical_not)


# -- Where ------------------------------------------------------------------------------------------


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
@given(data=st.data())
@settings(max_examples=15)
def test_where_broadcast(dtype, data):
    (sc, sx, sy), _ = data.draw(hnp.mutually_broadcastable_shapes(num_shapes=3, min_side=0, max_side=4, max_dims=3))
    c = data.draw(arrays(sc, np.bool_))
    x = data.draw(arrays(sx, dtype))
    y = data.draw(arrays(sy, dtype))
    assert_reference_checks(CreateOperator("Where", ["C", "X", "Y"], ["Z"]), [c, x, y], np.where)


def test_where_in_place_and_rows():
    rng = np.random.RandomState(5)
    c = rng.rand(3, 4) > 0.5
    x, y = rng.randn(3, 4).astype(np.float32), rng.randn(3, 4).astype(np.float32)
    for out in ("X", "Y"):
        assert_reference_checks(CreateOperator("Where", ["C", "X", "Y"], [out]), [c, x, y], np.where)
    rows = np.array([True, False, True])
    op = CreateOperator("Where", ["C", "X", "Y"], ["Z"], broadcast_on_rows=1)
    assert_reference_checks(op, [rows, x, y], lambda c, x, y: np.where(c[:, None], x, y))
    with pytest.raises(ShapeError, match="Where.*broadcast_on_rows"):
        run_op_on(op, [np.array([True]), x, y])


def test_where_errors():
    with pytest.raises(TypeMismatchError, match=r"Where.*'X'.*float32.*'Y'.*int32"):
        run_op_on(
            CreateOperator("Where", ["C", "X", "Y"], ["Z"]),
            [np.ones(2, bool), np.ones(2, np.float32), np.ones(2, np.int32)],
        )
    with pytest.raises(ShapeError, match=r"Where.*do not broadcast"):
        run_op_on(
            CreateOperator("Where", ["C", "X", "Y"], ["Z"]),
            [np.ones(3, bool), np.ones(2, np.float32), np.ones(2, np.float32)],
        )


# -- SumReduceLike ----------------------------------------------------------------------------------


@given(data=st.data())
@settings(max_examples=20)
def test_sum_reduce_like(data):
    a, b, axis = data.draw(legacy_pair(np.float64))
    kwargs = {} if axis is None else {"axis": axis}
    op = CreateOperator("SumReduceLike", ["A", "B"], ["C"], **kwargs)

    def ref(a, b):
        if b.size == 1:
            return a.sum().reshape(b.shape)
        bs = _legacy_ref_b(a, b, axis).shape
        bs = (1,) * (a.ndim - len(bs)) + bs
        axes = tuple(i for i in range(a.ndim) if bs[i] == 1)
        return a.sum(axis=axes).reshape(b.shape)

    assert_reference_checks(op, [a, b], ref)


def test_sum_reduce_like_axis_str():
    a = np.arange(2 * 3 * 2 * 2, dtype=np.float32).reshape(2, 3, 2, 2)
    op = CreateOperator("SumReduceLike", ["A", "B"], ["C"], axis_str="C", order="NCHW")
    assert_reference_checks(op, [a, np.zeros(3, np.float32)], lambda a, b: a.sum(axis=(0, 2, 3)))
