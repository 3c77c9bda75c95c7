"""The Int8TensorCPU bad-input matrix of test_int8_inputs.py for the DNNLOWP server ops (Quantize, Dequantize,
Int8SpatialBN...), with their own argument sets (static and dynamic output ranges, is_test, NHWC, groups,
per-row weights, dequantize_output). Each case must succeed or raise a FrameworkError on purpose and leave
the workspace unchanged."""

from __future__ import annotations

import numpy as np
import pytest

from framework.ops import all_schemas
from tests.adversarial.matrix import Case, _counts, run_case
from tests.adversarial.test_int8_inputs import FAMILIES

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


def _applicable(schema, args):
    return tuple(a for a in args if a[0] in schema.args)


def dnnlowp_cases(schema):
    n_in = _counts(schema.num_inputs)[0]
    n_out = _counts(schema.num_outputs)[0]
    for args in ARGS:
        args = _applicable(schema, args)
        for fam, make in FAMILIES.items():
            yield Case(f"all-{fam} {args}", tuple(make() for _ in range(n_in)), args, n_out, preset_outputs=True)
            for j in range(n_in if n_in > 1 else 0):
                vals = tuple(make() if k == j else FAMILIES["nhwc"]() for k in range(n_in))
                yield Case(f"in{j}-{fam} {args}", vals, args, n_out)


@pytest.mark.parametrize("op_type", DNNLOWP_OPS)
def test_dnnlowp_ops_refuse_hostile_int8_inputs_cleanly(op_type, capfd):
    schema = _SCHEMAS[op_type]
    violations, n = [], 0
    with np.errstate(all="ignore"):
        for case in dnnlowp_cases(schema):
            n += 1
            bad = run_case(schema, case)
            if bad:
                violations.append(f"  [{case.label}] {bad.splitlines()[0][:300]}")
    capfd.readouterr()
    assert n > 0
    assert not violations, f"{op_type}: {len(violations)} of {n} cases broke the rules:\n" + "\n".join(violations[:20])
