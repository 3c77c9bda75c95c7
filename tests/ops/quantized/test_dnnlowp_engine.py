"""Caffe2's DNNLOWP nets name ops by their float types with ``engine="DNNLOWP"`` (BatchPermutation,
SpatialBN, GroupNorm) or by the int8 names (Int8Quantize / Int8Dequantize run DNNLOWP's Quantize /
Dequantize): the registry's engine table routes them (run, strict shape inference, net checks), and the
ops keep their own type without an engine. Ports batch_permutation_dnnlowp_op_test."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from framework import core, workspace
from framework.core import CreateOperator
from framework.memory.workspace import Workspace
from framework.net.inference import infer_net
from framework.ops import create_operator
from framework.ops.inference import infer_op
from framework.ops.registry import engine_type
from framework.ops.schema import TensorSpec
from tests.ops.quantized.dnnlowp_refs import ref_choose, ref_quantize8

f32 = np.float32


def test_engine_table():
    assert engine_type(CreateOperator("SpatialBN", [], [], engine="DNNLOWP")) == "Int8SpatialBN"
    assert engine_type(CreateOperator("SpatialBN", [], [])) == "SpatialBN"
    assert engine_type(CreateOperator("SpatialBN", [], [], engine="CUDNN")) == "SpatialBN"
    assert engine_type(CreateOperator("Int8Quantize", [], [], engine="DNNLOWP")) == "Quantize"
    assert engine_type(CreateOperator("Int8Quantize", [], [])) == "Int8Quantize"  # QNNPACK's


@settings(max_examples=10, deadline=None)
@given(n=st.integers(1, 20), seed=st.integers(0, 2**16))
def test_caffe2_batch_permutation_dnnlowp_op_test(n, seed):
    rng = np.random.default_rng(seed)
    x = np.round(rng.random((n, 4, 5, 3)) * 255).astype(f32)
    indices = rng.permutation(n).astype(np.int32)
    net = core.Net("test_net")
    net.Proto().op.extend([
        CreateOperator("Quantize", ["X"], ["X_q"], engine="DNNLOWP"),
        CreateOperator("BatchPermutation", ["X_q", "indices"], ["Y_q"], engine="DNNLOWP"),
    ])  # fmt: skip
    workspace.ResetWorkspace()
    workspace.FeedBlob("X", x)
    workspace.FeedBlob("indices", indices)
    workspace.RunNetOnce(net)
    x_q = workspace.FetchInt8Blob("X_q").data
    y_q = workspace.FetchInt8Blob("Y_q").data
    np.testing.assert_array_equal(y_q, np.array([x_q[i] for i in indices]))
    workspace.ResetWorkspace()


def test_int8_quantize_under_dnnlowp_chooses_its_range():
    x = np.array([[-1.0, 0.5, 3.0]], f32)
    ws = Workspace()
    ws.feed_blob("X", x)
    ws.run_operator_once(CreateOperator("Int8Quantize", ["X"], ["Q"], engine="DNNLOWP"))  # no Y_scale: dynamic
    s, z = ref_choose(-1.0, 3.0)
    data, scale, zp = ws.fetch_blob("Q")
    assert (scale, zp) == (s, z) and data.tolist() == ref_quantize8(x, s, z).tolist()
    ws.run_operator_once(CreateOperator("Int8Dequantize", ["Q"], ["Y"], engine="DNNLOWP"))
    np.testing.assert_allclose(ws.fetch_blob("Y"), x, atol=s / 1.9)


def test_dnnlowp_float_types_run_and_infer_in_a_net():
    rng = np.random.default_rng(2)
    x = rng.standard_normal((2, 4, 3, 3)).astype(f32)
    params = {n: (rng.random(4) + 0.5).astype(f32) for n in ("s", "b", "m", "v")}
    net = core.Net("dnnlowp")
    net.Proto().op.extend([
        CreateOperator("Quantize", ["X"], ["X_q"], engine="DNNLOWP"),
        CreateOperator("SpatialBN", ["X_q", "s", "b", "m", "v"], ["Y_q"], is_test=1, engine="DNNLOWP"),
        CreateOperator("GroupNorm", ["Y_q", "s", "b"], ["Z_q"], group=2, engine="DNNLOWP"),
        CreateOperator("Dequantize", ["Z_q"], ["Z"], engine="DNNLOWP"),
    ])  # fmt: skip
    ws = Workspace()
    ws.feed_blob("X", x)
    for name, v in params.items():
        ws.feed_blob(name, v)
    ws.run_net_once(net.Proto())
    for name in ("Y_q", "Z_q"):
        assert ws.fetch_blob(name)[0].shape == x.shape and ws.fetch_blob(name)[0].dtype == np.uint8
    z = ws.fetch_blob("Z")
    assert z.shape == x.shape and z.dtype == np.float32
    specs = infer_net(net.Proto(), {"X": TensorSpec(x.shape, np.dtype(f32))})
    assert specs["Y_q"] == TensorSpec(x.shape, np.dtype(np.uint8)) and specs["Z"] == TensorSpec(x.shape, np.dtype(f32))
    bn = CreateOperator("SpatialBN", ["X_q", "s", "b", "m", "v"], ["Y_q"], is_test=1, engine="DNNLOWP")
    assert infer_op(bn, [TensorSpec(x.shape, np.dtype(np.uint8))] + [TensorSpec((4,), np.dtype(f32))] * 4, strict=True)[
        0
    ] == TensorSpec(x.shape, np.dtype(np.uint8))
    assert type(create_operator(bn, ws)).__name__ == "Int8SpatialBN"
