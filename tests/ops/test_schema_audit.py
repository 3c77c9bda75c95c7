"""Schema-wide checks over every registered op type: inference degrades to UNKNOWN on unknown
inputs, inputs/outputs/arguments are documented, the heavy ops have cost functions that give the
textbook FLOP counts, and every fill honours shape / extra_shape / input_as_shape as Caffe2's
FillerOp does."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.errors import ArgumentError
from framework.memory.workspace import Workspace
from framework.ops import all_schemas, create_operator, get_schema
from framework.ops.arguments import parse_args
from framework.ops.inference import infer_op
from framework.ops.schema import UNKNOWN, Cost, TensorSpec, _count_ok
from framework.ops.testing import assert_reference_checks, run_op_on

F32 = np.dtype(np.float32)
# A plausible value per argument kind, for the arguments a schema marks as required.
_DUMMY = {"float": 1.0, "int": 1, "bool": 0, "string": "x", "floats": [1.0], "ints": [1], "strings": ["a"]}
_SCHEMAS = [s for s in all_schemas() if not s.type.startswith("_")]


def _counts(spec, hi=12):  # YellowFin takes 10 inputs
    ok = [n for n in range(hi) if _count_ok(spec, n)]
    return sorted({ok[0], ok[-1]} | set(ok[:2])) if ok else []


def _required_kwargs(schema):
    kw = {a.name: _DUMMY[a.kind] for a in schema.args.values() if a.required and a.kind in _DUMMY}
    if "kernel" in schema.args:  # conv/pool: a kernel size is a required argument in all but name
        kw["kernel"] = 1
    return kw


@pytest.mark.parametrize("op_type", [s.type for s in _SCHEMAS])
@pytest.mark.parametrize("spec", [UNKNOWN, TensorSpec(None, F32)], ids=["unknown", "dtype-only"])
def test_inference_degrades_on_unknown_inputs(op_type, spec):
    """strict=True: an inference function must not raise when it cannot tell, and must give one
    spec per output."""
    schema = get_schema(op_type)
    kw = _required_kwargs(schema)
    n_ins, n_outs = _counts(schema.num_inputs), _counts(schema.num_outputs)
    assert n_ins and n_outs, f"{op_type}: no valid input/output count below 10"
    for n_in in n_ins:
        for n_out in n_outs:
            op = CreateOperator(op_type, [f"i{k}" for k in range(n_in)], [f"o{k}" for k in range(n_out)], **kw)
            outs = infer_op(op, [spec] * n_in, strict=True)
            assert len(outs) == n_out, f"{op_type} ({n_in} in, {n_out} out): {len(outs)} specs"
            assert all(isinstance(o, TensorSpec) for o in outs), f"{op_type}: {outs}"


def test_every_op_documents_its_inputs_outputs_and_arguments():
    bad = []
    for s in _SCHEMAS:
        for what, docs, spec in (("inputs", s.inputs, s.num_inputs), ("outputs", s.outputs, s.num_outputs)):
            valid = [n for n in range(12) if _count_ok(spec, n)]
            most = max(valid or [0])
            variadic = most >= 9  # a repeated pattern (Sum's inputs, Split's outputs): one doc suffices
            need = 1 if variadic else most
            if len(docs) < need:
                bad.append(f"{s.type}: {len(docs)} {what} documented, up to {most} accepted")
            bad += [f"{s.type}: {what[:-1]} '{n}' has an empty doc" for n, d in docs if not d.strip()]
        bad += [f"{s.type}: argument '{a.name}' has no doc" for a in s.args.values() if not a.doc.strip()]
    assert not bad, "\n".join(bad)


def test_layer_norm_gradient_refuses_mismatched_affine_arity():
    op = CreateOperator("LayerNormGradient", ["dY", "Y", "m", "s", "X"], ["dX", "dg", "db"], name="lng")
    with pytest.raises(ArgumentError, match=r'LayerNormGradient "lng".*5 inputs and 1 output'):
        create_operator(op, Workspace())


# -- cost functions of the heavy ops ----------------------------------------------------------------
HEAVY = ["FC", "FCTransposed", "MatMul", "BatchMatMul", "Conv", "ConvTranspose"]


@pytest.mark.parametrize("op_type", HEAVY)
def test_heavy_ops_have_cost_functions(op_type):
    assert get_schema(op_type).cost is not None


def _cost(op, specs) -> Cost:
    schema = get_schema(op.type)
    args = parse_args(schema, op.arg, op.type, len(op.input), len(op.output))
    outs = infer_op(op, specs, strict=True)
    return schema.cost(args, specs, outs), outs


def _spec(*shape, dtype=F32):
    return TensorSpec(tuple(shape), np.dtype(dtype))


@settings(max_examples=25)
@given(
    m=st.integers(1, 64), k=st.integers(1, 64), n=st.integers(1, 64), dtype=st.sampled_from([np.float32, np.float64])
)
def test_fc_cost_formula(m, k, n, dtype):
    item = np.dtype(dtype).itemsize
    for op_type, w in (("FC", _spec(n, k, dtype=dtype)), ("FCTransposed", _spec(k, n, dtype=dtype))):
        op = CreateOperator(op_type, ["X", "W", "b"], ["Y"])
        cost, _ = _cost(op, [_spec(m, k, dtype=dtype), w, _spec(n, dtype=dtype)])
        assert cost.flops == 2 * m * k * n + m * n  # GEMM + bias add
        assert cost.params_bytes == (k * n + n) * item
        assert cost.bytes_moved == (m * k + k * n + n + m * n) * item


@settings(max_examples=25)
@given(
    m=st.integers(1, 16),
    k=st.integers(1, 16),
    n=st.integers(1, 16),
    ta=st.booleans(),
    tb=st.booleans(),
    batch=st.lists(st.integers(1, 3), max_size=2),
)
def test_matmul_and_batch_matmul_cost_formula(m, k, n, ta, tb, batch):
    a = (k, m) if ta else (m, k)
    b = (n, k) if tb else (k, n)
    op = CreateOperator("MatMul", ["A", "B"], ["Y"], trans_a=int(ta), trans_b=int(tb))
    cost, _ = _cost(op, [_spec(*a), _spec(*b)])
    assert cost.flops == 2 * m * k * n
    assert cost.bytes_moved == (m * k + k * n + m * n) * 4
    op = CreateOperator("BatchMatMul", ["A", "B"], ["Y"], trans_a=int(ta), trans_b=int(tb))
    cost, _ = _cost(op, [_spec(*batch, *a), _spec(*batch, *b)])
    nb = math.prod(batch)
    assert cost.flops == 2 * nb * m * k * n
    assert cost.bytes_moved == nb * (m * k + k * n + m * n) * 4


@settings(max_examples=30)
@given(
    n=st.integers(1, 4),
    cg=st.integers(1, 4),
    mg=st.integers(1, 4),
    group=st.integers(1, 3),
    k=st.integers(1, 3),
    stride=st.integers(1, 2),
    pad=st.integers(0, 1),
    hw=st.integers(3, 9),
    order=st.sampled_from(["NCHW", "NHWC"]),
    bias=st.booleans(),
)
def test_conv_cost_formula(n, cg, mg, group, k, stride, pad, hw, order, bias):
    c, m = cg * group, mg * group
    oh = (hw + 2 * pad - k) // stride + 1
    x = _spec(n, c, hw, hw) if order == "NCHW" else _spec(n, hw, hw, c)
    w = _spec(m, cg, k, k) if order == "NCHW" else _spec(m, k, k, cg)
    ins = [x, w] + ([_spec(m)] if bias else [])
    op = CreateOperator(
        "Conv", ["X", "W", "b"][: len(ins)], ["Y"], kernel=k, stride=stride, pad=pad, group=group, order=order
    )
    cost, (y,) = _cost(op, ins)
    ny = n * m * oh * oh
    assert math.prod(y.shape) == ny
    assert cost.flops == 2 * ny * cg * k * k + (ny if bias else 0)
    params = m * cg * k * k + (m if bias else 0)
    assert cost.params_bytes == params * 4
    assert cost.bytes_moved == (n * c * hw * hw + ny + params) * 4


@settings(max_examples=30)
@given(
    n=st.integers(1, 3),
    c=st.integers(1, 4),
    m=st.integers(1, 4),
    k=st.integers(1, 4),
    stride=st.integers(1, 3),
    hw=st.integers(1, 6),
    order=st.sampled_from(["NCHW", "NHWC"]),
    bias=st.booleans(),
)
def test_conv_transpose_cost_formula(n, c, m, k, stride, hw, order, bias):
    oh = (hw - 1) * stride + k
    x = _spec(n, c, hw, hw) if order == "NCHW" else _spec(n, hw, hw, c)
    w = _spec(c, m, k, k) if order == "NCHW" else _spec(c, k, k, m)
    ins = [x, w] + ([_spec(m)] if bias else [])
    op = CreateOperator("ConvTranspose", ["X", "W", "b"][: len(ins)], ["Y"], kernel=k, stride=stride, order=order)
    cost, (y,) = _cost(op, ins)
    ny = n * m * oh * oh
    assert math.prod(y.shape) == ny
    assert cost.flops == 2 * (n * c * hw * hw) * m * k * k + (ny if bias else 0)
    params = c * m * k * k + (m if bias else 0)
    assert cost.params_bytes == params * 4
    assert cost.bytes_moved == (n * c * hw * hw + ny + params) * 4


@pytest.mark.parametrize("op_type", ["Conv", "ConvTranspose", "FC", "MatMul", "BatchMatMul"])
def test_cost_of_unknown_shapes_is_zero_not_an_error(op_type):
    schema = get_schema(op_type)
    n_in = 3 if op_type in ("Conv", "ConvTranspose", "FC") else 2
    kw = {"kernel": 3} if "Conv" in op_type else {}
    op = CreateOperator(op_type, ["a", "b", "c"][:n_in], ["Y"], **kw)
    args = parse_args(schema, op.arg, op_type, n_in, 1)
    assert schema.cost(args, [UNKNOWN] * n_in, [UNKNOWN]) == Cost()


# -- fills: shape, extra_shape, input_as_shape, for every fill -------------------------------------
FILLS = {
    "ConstantFill": ({"value": 2.0}, lambda shape: np.full(shape, 2.0, np.float32)),
    "UniformFill": ({"min": 1.0, "max": 1.0 + 1e-7}, None),
    "UniformIntFill": ({"min": 3, "max": 4}, None),
    "GaussianFill": ({"mean": 0.0, "std": 1.0}, None),
    "XavierFill": ({}, None),
    "MSRAFill": ({}, None),
    "RangeFill": ({}, lambda shape: np.arange(math.prod(shape), dtype=np.float32).reshape(shape)),
}


@pytest.mark.parametrize("op_type", list(FILLS))
@settings(max_examples=10)
@given(
    shape=st.lists(st.integers(1, 3), min_size=2, max_size=3),
    extra=st.lists(st.integers(1, 3), max_size=2),
)
def test_fill_shape_extra_shape_and_input_as_shape(op_type, shape, extra):
    kwargs, expect = FILLS[op_type]
    dtype = np.int32 if op_type == "UniformIntFill" else np.float32
    # 1. shape argument
    (y,) = run_op_on(CreateOperator(op_type, [], ["Y"], shape=shape, **kwargs), [])
    assert y.shape == tuple(shape) and y.dtype == dtype
    # 2. the input's shape, plus extra_shape
    like = np.zeros(shape, np.float64)
    op = CreateOperator(op_type, ["X"], ["Y"], extra_shape=extra, **kwargs)
    ref = (lambda x: [expect(tuple(shape) + tuple(extra))]) if expect else (lambda x: [])
    (y,) = assert_reference_checks(op, [like], ref)
    assert y.shape == tuple(shape) + tuple(extra) and y.dtype == dtype
    # 3. input_as_shape: the input's values are the shape (inference cannot know them)
    op = CreateOperator(op_type, ["S"], ["Y"], input_as_shape=1, extra_shape=extra, **kwargs)
    s = np.array(shape, np.int64)
    (y,) = assert_reference_checks(
        op, [s], (lambda s: [expect(tuple(shape) + tuple(extra))]) if expect else (lambda s: []), check_inference=False
    )
    assert y.shape == tuple(shape) + tuple(extra) and y.dtype == dtype
    (spec,) = infer_op(op, [TensorSpec(s.shape, s.dtype)], strict=True)
    assert spec.shape is None and spec.dtype == dtype
