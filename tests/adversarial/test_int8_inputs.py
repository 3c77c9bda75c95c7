"""The bad-input matrix for the int8 ops with Int8TensorCPU inputs (matrix.py feeds plain Tensors only, which
every int8 op refuses at once): empty, rank-0, rank-1, rank-5, zero-sized spatial dims, int32 codes where
uint8 is expected, zero points outside uint8, NaN / zero / huge scales, mixed with float tensors, and hostile
arguments. Each case must succeed or raise a FrameworkError on purpose and leave the workspace unchanged."""

from __future__ import annotations

import math

import numpy as np
import pytest

from framework.memory.int8_tensor import Int8TensorCPU
from framework.ops import all_schemas
from tests.adversarial.matrix import Case, _counts, run_case

# Caffe2's caffe2/operators/quantized/ ops (the dnnlowp server's Int8* ops live elsewhere).
INT8_OPS = [
    "Int8Quantize", "Int8Dequantize", "Int8GivenTensorFill", "Int8GivenIntTensorFill", "Int8Relu", "Int8LeakyRelu",
    "Int8Sigmoid", "Int8Softmax", "Int8Add", "Int8AddRelu", "Int8Sum", "Int8SumRelu", "Int8Flatten", "Int8Reshape",
    "Int8Transpose", "Int8Slice", "Int8Concat", "Int8ChannelShuffle", "Int8MaxPool", "Int8MaxPoolRelu",
    "Int8AveragePool", "Int8AveragePoolRelu", "Int8ResizeNearest", "Int8FC", "Int8Conv", "Int8ConvRelu",
    "Int8ConvTranspose", "Int8RoIAlign",
]  # fmt: skip
_SCHEMAS = {s.type: s for s in all_schemas()}


def q(shape, dtype=np.uint8, scale=0.5, zp=3):
    data = (np.arange(math.prod(shape)) % 251).astype(dtype).reshape(shape)
    t = Int8TensorCPU.from_numpy(data, 1.0, zp if -(2**31) <= zp < 2**31 else 0)
    t.scale = scale  # bypass the float32 rounding to reach NaN / inf / 0
    t.zero_point = zp
    return t


FAMILIES = {
    "nhwc": lambda: q((1, 4, 4, 2)),
    "empty_batch": lambda: q((0, 4, 4, 2)),
    "zero_spatial": lambda: q((1, 0, 0, 2)),
    "rank0": lambda: q(()),
    "rank1": lambda: q((5,)),
    "rank5": lambda: q((1, 2, 1, 2, 3)),
    "int32_codes": lambda: q((1, 4, 4, 2), np.int32),
    "zp_300": lambda: q((1, 4, 4, 2), zp=300),
    "zp_negative": lambda: q((1, 4, 4, 2), zp=-5),
    "nan_scale": lambda: q((1, 4, 4, 2), scale=float("nan")),
    "zero_scale": lambda: q((1, 4, 4, 2), scale=0.0),
    "huge_scale": lambda: q((1, 4, 4, 2), scale=3e38),
    "float_tensor": lambda: np.ones((1, 4, 4, 2), np.float32),
}

BASE_ARGS = [
    (("Y_scale", 0.5), ("Y_zero_point", 3), ("order", b"NHWC"), ("kernel", 2)),
    (("Y_scale", 1 / 256), ("Y_zero_point", 0)),
    (("kernel", 1000), ("order", b"NHWC"), ("Y_scale", 0.5), ("Y_zero_point", 3)),
    (("pad", 10**9), ("order", b"NHWC"), ("kernel", 1), ("Y_scale", 0.5), ("Y_zero_point", 3)),
    (("shape", [10**6, 10**6]), ("Y_scale", 0.5), ("Y_zero_point", 3)),
    (("width_scale", 1e9), ("height_scale", 1e9), ("Y_scale", 0.5), ("Y_zero_point", 3)),
    (("pooled_h", 10**6), ("pooled_w", 10**6), ("sampling_ratio", 10**6), ("Y_scale", 0.5), ("Y_zero_point", 3)),
]


def _applicable(schema, args):
    return tuple(a for a in args if a[0] in schema.args)


def int8_cases(schema, arg_sets=None):
    """Cases of hostile Int8TensorCPU inputs for ``schema`` under each argument set (default BASE_ARGS):
    every input of one family, then one input of each family with the others well-formed."""
    n_in = _counts(schema.num_inputs)[0]
    n_out = _counts(schema.num_outputs)[0]
    for args in BASE_ARGS if arg_sets is None else arg_sets:
        args = _applicable(schema, args)
        for fam, make in FAMILIES.items():
            yield Case(f"all-{fam} {args}", tuple(make() for _ in range(n_in)), args, n_out, preset_outputs=True)
            if n_in > 1:
                for j in range(n_in):
                    vals = tuple(make() if k == j else FAMILIES["nhwc"]() for k in range(n_in))
                    yield Case(f"in{j}-{fam} {args}", vals, args, n_out)


def assert_cases_clean(op_type, cases, capfd) -> None:
    """Every case succeeds or raises a FrameworkError on purpose, leaving the workspace unchanged."""
    violations, n = [], 0
    with np.errstate(all="ignore"):
        for case in cases:
            n += 1
            bad = run_case(_SCHEMAS[op_type], case)
            if bad:
                violations.append(f"  [{case.label}] {bad.splitlines()[0][:300]}")
    capfd.readouterr()
    assert n > 0
    assert not violations, f"{op_type}: {len(violations)} of {n} cases broke the rules:\n" + "\n".join(violations[:20])


@pytest.mark.parametrize("op_type", INT8_OPS)
def test_int8_ops_refuse_hostile_int8_inputs_cleanly(op_type, capfd):
    assert_cases_clean(op_type, int8_cases(_SCHEMAS[op_type]), capfd)


def test_every_int8_op_is_registered():
    missing = [t for t in INT8_OPS if t not in _SCHEMAS]
    assert not missing, missing
