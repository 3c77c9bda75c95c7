"""FloatToFusedRandRowwiseQuantized / FusedRandRowwiseQuantizedToFloat: the non-random codes bit-exact against
an element loop of Caffe2's quantize_and_compress, the documented example, unbiased random rounding."""

import struct

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.ops.testing import assert_reference_checks, run_op_on

f32 = np.float32


def ref_quantize(x, bits):
    per = 8 // bits
    rows = []
    for row in x:
        n = len(row)
        seg = -(-n // per)
        tail = (per - n % per) % per
        mn, mx = f32(np.inf), f32(-np.inf)
        for v in row:
            mn = v if v < mn else mn
            mx = v if v > mx else mx
        gap = f32((mx - mn) / f32((1 << bits) - 1.0))
        inv = f32(1.0 / (float(gap) + 1e-8))
        data = bytearray(seg)
        for b, start in enumerate(range(0, n, seg)):
            for i in range(min(seg, n - start)):
                t = f32(f32(row[start + i] - mn) * inv)
                t = min(max(t, f32(0)), f32((1 << bits) - 1))
                data[i] |= int(np.rint(t)) << (b * bits)
        rows.append(bytes([bits, tail]) + struct.pack("<ff", mn, mx) + bytes(data))
    return np.frombuffer(b"".join(rows), np.uint8).reshape(len(x), -1)


@pytest.mark.parametrize("bits", [1, 2, 4, 8])
@settings(max_examples=20, deadline=None)
@given(data=st.data())
def test_non_random_codes_are_bit_exact_and_dequantize(bits, data):
    rows, cols = data.draw(st.integers(1, 3)), data.draw(st.integers(1, 9))
    x = np.array(
        data.draw(st.lists(st.floats(-4, 4, width=32), min_size=rows * cols, max_size=rows * cols)), f32
    ).reshape(rows, cols)
    op = CreateOperator("FloatToFusedRandRowwiseQuantized", ["x"], ["q"], bitwidth=bits, random=False)
    q = assert_reference_checks(op, [x], lambda v: ref_quantize(v, bits))[0]
    y = run_op_on(CreateOperator("FusedRandRowwiseQuantizedToFloat", ["q"], ["y"]), [q])[0]
    assert y.shape == x.shape
    step = (x.max(axis=1) - x.min(axis=1)) / ((1 << bits) - 1)
    assert (np.abs(y - x) <= step[:, None] * 0.5001 + 1e-5).all()


def test_caffe2_documented_layout():
    x = np.array([[0.3, -1.4, -0.6, 0.9, 1.0]], f32)
    q = run_op_on(CreateOperator("FloatToFusedRandRowwiseQuantized", ["x"], ["q"], bitwidth=2, random=False), [x])[0]
    assert q.shape == (1, 12) and q[0, 0] == 2 and q[0, 1] == 3
    # levels [-1.4, -0.6, 0.2, 1.0]: codes 2 (0.3 -> 0.2), 0, 1, 3, 3; byte 0 = x1 | x3 << 2 | x5 << 4
    assert q[0, 10] == 2 | (1 << 2) | (3 << 4) and q[0, 11] == 0 | (3 << 2)


def test_random_rounding_is_unbiased():
    x = np.full((1, 20000), 0.3, f32)
    x[0, 0], x[0, 1] = -1.4, 1.0
    q = run_op_on(CreateOperator("FloatToFusedRandRowwiseQuantized", ["x"], ["q"], bitwidth=2), [x])[0]
    y = run_op_on(CreateOperator("FusedRandRowwiseQuantizedToFloat", ["q"], ["y"]), [q])[0]
    vals = {round(v, 3) for v in y[0, 2:].astype(float).tolist()}
    assert vals <= {0.2, 1.0}
    assert abs(float(y[0, 2:].mean()) - 0.3) < 0.02
