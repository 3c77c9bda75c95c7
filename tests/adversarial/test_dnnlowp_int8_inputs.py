"""The Int8TensorCPU bad-input matrix of test_int8_inputs.py for the DNNLOWP server ops (Quantize, Dequantize,
Int8SpatialBN...), with their own argument sets (static and dynamic output ranges, is_test, NHWC, groups,
per-row weights, dequantize_output). Each case must succeed or raise a FrameworkError on purpose and leave
the workspace unchanged."""

from __future__ import annotations

import pytest

from framework.ops import all_schemas
from tests.adversarial.test_int8_inputs import assert_cases_clean, int8_cases

DNNLOWP_OPS = [
    "Quantize", "Dequantize", "Int8QuantSchemeBlobFill", "Int8GenQuantParams", "Int8BatchPermutation",
    "Int8SpatialBN", "Int8SpatialBNRelu", "Int8GroupNorm", "Int8FCRelu", "Int8FCPackWeight", "Int8ConvPackWeight",
]  # fmt: skip
_SCHEMAS = {s.type: s for s in all_schemas()}

ARGS = [
    (("is_test", 1), ("order", b"NHWC"), ("group", 2), ("Y_scale", 0.5), ("Y_zero_point", 3)),
    (("is_test", 1), ("order", b"NHWC"), ("group", 1), ("dequantize_output", 1), ("quantize_channelwise", 1)),
    (("is_test", 1), ("followed_by", b"Relu"), ("in_scale", 0.25), ("axis", 3), ("axis_w", 3)),
    (("is_test", 1), ("Y_scale", 1e-30), ("Y_zero_point", 255), ("epsilon", 1e30), ("activation_precision", 3)),
]


@pytest.mark.parametrize("op_type", DNNLOWP_OPS)
def test_dnnlowp_ops_refuse_hostile_int8_inputs_cleanly(op_type, capfd):
    assert_cases_clean(op_type, int8_cases(_SCHEMAS[op_type], ARGS), capfd)
