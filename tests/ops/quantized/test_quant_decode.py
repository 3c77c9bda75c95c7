"""QuantDecode / QuantDecodeGradient / MPSCNNQuantDecode: look-ups against an element loop, Caffe2's
documented example, the codebook gradient against central differences and against an element-loop
accumulation, the run-once mode, empty codes, and the errors."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import FrameworkError, GradientError, SchemaError, ShapeError, TypeMismatchError
from framework.memory.workspace import Workspace
from framework.ops import create_operator, get_gradient_for_op
from framework.ops.testing import assert_gradient_checks, assert_reference_checks, run_op_on

CODE_TYPES = [np.uint8, np.uint16, np.int32]


def ref_decode(book, *codes):
    flat = [float(v) for v in book.reshape(-1)]
    return [np.array([flat[int(c)] for c in cs.reshape(-1)], book.dtype).reshape(cs.shape) for cs in codes]


def ref_decode_grad(book, codes, grads):
    out = np.zeros(book.size, np.float32)
    for cs, gs in zip(codes, grads):
        for c, g in zip(cs.reshape(-1), gs.reshape(-1)):
            out[int(c)] = np.float32(out[int(c)] + g)
    return out.reshape(book.shape)


def _codes(data, n, size_max=5):
    shape = tuple(data.draw(st.lists(st.integers(0, size_max), min_size=0, max_size=3)))
    dt = data.draw(st.sampled_from(CODE_TYPES))
    return np.array(
        data.draw(st.lists(st.integers(0, n - 1), min_size=int(np.prod(shape)), max_size=int(np.prod(shape)))), dt
    ).reshape(shape)


@settings(max_examples=30, deadline=None)
@given(
    data=st.data(),
    n_out=st.integers(1, 3),
    book_shape=st.sampled_from([(1,), (4,), (2, 3), (7,)]),
    book_type=st.sampled_from([np.float32, np.float64]),
)
def test_decode_matches_element_loop(data, n_out, book_shape, book_type):
    book = np.array(
        data.draw(
            st.lists(st.floats(-5, 5, width=32), min_size=int(np.prod(book_shape)), max_size=int(np.prod(book_shape)))
        ),
        book_type,
    ).reshape(book_shape)
    codes = [_codes(data, book.size) for _ in range(n_out)]
    op = CreateOperator("QuantDecode", ["book"] + [f"c{k}" for k in range(n_out)], [f"d{k}" for k in range(n_out)])
    assert_reference_checks(op, [book, *codes], ref_decode, threshold=0)


def test_caffe2_documented_example():
    book = np.array([1.5, 2.5, 3.5], np.float32)
    op = CreateOperator("QuantDecode", ["cb", "c0", "c1"], ["d0", "d1"])
    d0, d1 = run_op_on(op, [book, np.array([0, 1, 1, 2], np.uint8), np.array([2, 0, 0], np.int32)])
    np.testing.assert_array_equal(d0, [1.5, 2.5, 2.5, 3.5])
    np.testing.assert_array_equal(d1, [3.5, 1.5, 1.5])


@settings(max_examples=20, deadline=None)
@given(data=st.data(), n_out=st.integers(1, 3))
def test_gradient_of_the_codebook(data, n_out):
    book = np.array(data.draw(st.lists(st.floats(-2, 2, width=32), min_size=5, max_size=5)), np.float32)
    codes = [_codes(data, 5, 4) for _ in range(n_out)]
    op = CreateOperator("QuantDecode", ["book"] + [f"c{k}" for k in range(n_out)], [f"d{k}" for k in range(n_out)])
    assert_gradient_checks(op, [book, *codes], 0, outputs_with_grads=range(n_out))  # a float64 codebook
    grads = [
        np.array(data.draw(st.lists(st.floats(-3, 3, width=32), min_size=c.size, max_size=c.size)), np.float32).reshape(
            c.shape
        )
        for c in codes
    ]
    gop = CreateOperator(
        "QuantDecodeGradient",
        ["book", *[f"c{k}" for k in range(n_out)], *[f"g{k}" for k in range(n_out)]],
        ["book_grad"],
    )
    assert_reference_checks(
        gop, [book, *codes, *grads], lambda b, *rest: ref_decode_grad(b, rest[:n_out], rest[n_out:]), threshold=1e-6
    )


def test_gradient_maker_follows_caffe2():
    op = CreateOperator("QuantDecode", ["cb", "c0", "c1"], ["d0", "d1"])
    ops, g_in = get_gradient_for_op(op, ["d0_grad", "d1_grad"])
    assert [o.type for o in ops] == ["QuantDecodeGradient"]
    assert list(ops[0].input) == ["cb", "c0", "c1", "d0_grad", "d1_grad"] and list(ops[0].output) == ["cb_grad"]
    assert g_in == ["cb_grad", None, None]
    with pytest.raises(GradientError, match="d1"):
        get_gradient_for_op(op, ["d0_grad", None])  # Caffe2's maker needs every output's gradient
    with pytest.raises(GradientError):
        get_gradient_for_op(CreateOperator("MPSCNNQuantDecode", ["cb", "c0"], ["d0"]), ["d0_grad"])


def test_gradient_shape_can_differ_if_sizes_match():
    """Caffe2 checks the gradient's element count only."""
    book, codes, g = np.ones(3, np.float32), np.array([[0, 2], [2, 2]], np.uint8), np.arange(4, dtype=np.float32)
    (out,) = run_op_on(CreateOperator("QuantDecodeGradient", ["b", "c", "g"], ["gb"]), [book, codes, g])
    np.testing.assert_array_equal(out, [0.0, 0.0, 6.0])


def test_empty_codes_and_empty_codebook():
    op = CreateOperator("QuantDecode", ["cb", "c0"], ["d0"])
    assert_reference_checks(op, [np.ones(2, np.float32), np.zeros((0, 3), np.uint8)], ref_decode)
    assert_reference_checks(op, [np.zeros(0, np.float32), np.zeros((0,), np.int32)], ref_decode)
    gop = CreateOperator("QuantDecodeGradient", ["cb", "c0", "g0"], ["gcb"])
    out = run_op_on(gop, [np.ones(2, np.float32), np.zeros(0, np.uint16), np.zeros(0, np.float32)])[0]
    np.testing.assert_array_equal(out, [0.0, 0.0])


def test_mpscnn_decodes_once():
    ws = Workspace()
    ws.feed_blob("cb", np.array([1.0, 2.0], np.float32))
    ws.feed_blob("c", np.array([1, 0, 1], np.uint8))
    op = create_operator(CreateOperator("MPSCNNQuantDecode", ["cb", "c"], ["d"]), ws)
    op.run()
    np.testing.assert_array_equal(ws.fetch_blob("d"), [2.0, 1.0, 2.0])
    ws.feed_blob("cb", np.array([5.0, 6.0], np.float32))
    op.run()
    np.testing.assert_array_equal(ws.fetch_blob("d"), [2.0, 1.0, 2.0])  # constants: not decoded again
    ws.feed_blob("c", np.array([0, 0], np.uint8))
    op.run()  # departure: a changed codes shape decodes again (Caffe2 would leave unset memory)
    np.testing.assert_array_equal(ws.fetch_blob("d"), [5.0, 5.0])
    ref = CreateOperator("MPSCNNQuantDecode", ["cb", "c"], ["d"])
    assert_reference_checks(ref, [np.array([3.0], np.float32), np.zeros((2, 2), np.int32)], ref_decode)


def test_errors_name_op_and_blob():
    book = np.array([1.0, 2.0, 3.0], np.float32)
    with pytest.raises(ShapeError, match=r"QuantDecode.*'c0'.*index 3"):
        run_op_on(CreateOperator("QuantDecode", ["cb", "c0"], ["d0"]), [book, np.array([0, 3], np.uint8)])
    with pytest.raises(ShapeError, match=r"'c0'.*index -1"):
        run_op_on(CreateOperator("QuantDecode", ["cb", "c0"], ["d0"]), [book, np.array([-1], np.int32)])
    with pytest.raises(TypeMismatchError, match="'c0'.*int64"):
        run_op_on(CreateOperator("QuantDecode", ["cb", "c0"], ["d0"]), [book, np.array([0], np.int64)])
    with pytest.raises(TypeMismatchError, match="'cb'.*float16"):
        run_op_on(
            CreateOperator("QuantDecode", ["cb", "c0"], ["d0"]), [book.astype(np.float16), np.array([0], np.uint8)]
        )
    with pytest.raises(SchemaError, match="QuantDecode"):
        run_op_on(
            CreateOperator("QuantDecode", ["cb", "c0", "c1"], ["d0"]),
            [book, np.zeros(1, np.uint8), np.zeros(1, np.uint8)],
        )
    gop = CreateOperator("QuantDecodeGradient", ["cb", "c0", "g0"], ["gcb"])
    with pytest.raises(ShapeError, match="'g0'.*2 elements"):
        run_op_on(gop, [book, np.zeros(3, np.uint8), np.zeros(2, np.float32)])
    with pytest.raises(TypeMismatchError, match="'g0'.*float32.*float64"):
        run_op_on(gop, [book, np.zeros(2, np.uint8), np.zeros(2, np.float64)])
    with pytest.raises(ShapeError, match="'c0'.*index 7"):
        run_op_on(gop, [book, np.array([7], np.uint8), np.zeros(1, np.float32)])
    with pytest.raises(FrameworkError):
        run_op_on(CreateOperator("QuantDecodeGradient", ["cb", "c0"], ["gcb"]), [book, np.zeros(1, np.uint8)])
