"""Every exportable op, on random shapes and arguments, gives our engine's outputs in onnxruntime
and in onnx's ReferenceEvaluator."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")

from framework.core import CreateOperator
from framework.memory.workspace import Workspace
from framework.onnx import exportable_op_types
from framework.proto.framework_pb2 import NetDef
from tests.interop_onnx.export_cases import ALIASES, CASES
from tests.interop_onnx.helpers import check_export

SEEDS = range(6)


def _net(op_type, n_in, args, n_out):
    ins = [f"in{i}" for i in range(n_in)]
    outs = [f"out{i}" for i in range(n_out)]
    op = CreateOperator(op_type, ins, outs, **args)
    return NetDef(name=f"one_{op_type}", op=[op], external_input=ins, external_output=outs)


@pytest.mark.parametrize("op_type", sorted(CASES))
def test_op_exports_with_caffe2_semantics(op_type):
    for seed in SEEDS:
        rng = np.random.default_rng(seed * 7919 + sum(map(ord, op_type)))
        inputs, args, n_out = CASES[op_type](rng)
        net = _net(op_type, len(inputs), args, n_out)
        feeds = {f"in{i}": v for i, v in enumerate(inputs)}
        try:
            check_export(net, Workspace(), feeds)
        except AssertionError as e:
            raise AssertionError(f"{op_type} seed {seed} args {args} shapes {[v.shape for v in inputs]}: {e}") from e


def test_every_converter_has_a_case():
    missing = [t for t in exportable_op_types() if t not in CASES and t not in ALIASES]
    assert not missing, f"converters without a generated test case: {missing}"
