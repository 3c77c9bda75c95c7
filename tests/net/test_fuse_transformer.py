"""framework/net/fuse_transformer.py: MatMul + bias -> FC/FCTransposed, GELU's erf chain -> Gelu and the
attention chain -> ScaledDotProductAttention fire on hand-written chains (operands in either order) and on
a small torch-exported encoder, keep the outputs, and leave a chain alone when an intermediate is
observable or read elsewhere."""

from __future__ import annotations

import collections
import math

import numpy as np
import pytest

from framework.core import CreateOperator
from framework.memory.workspace import Workspace
from framework.net.optimize import optimize_inference
from framework.proto.framework_pb2 import NetDef

RNG = np.random.default_rng(7)


def f32(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def _net(ops, inputs, outputs):
    net = NetDef(name="t")
    net.op.extend(ops)
    net.external_input.extend(inputs)
    net.external_output.extend(outputs)
    return net


def _run(net, ws, outputs, optimize):
    net2 = optimize_inference(net, ws, outputs=outputs, share_buffers=False) if optimize else net
    w2 = Workspace()
    for k in ws.blobs():
        w2.feed_blob(k, ws.fetch_blob(k))
    w2.create_net(net2).run()
    return [w2.fetch_blob(o).copy() for o in outputs], collections.Counter(op.type for op in net2.op)


def _gelu_ws():
    ws = Workspace()
    ws.feed_blob("h", f32(3, 5, 8) * 3)
    for name, v in (("sqrt2", math.sqrt(2.0)), ("inv", 1 / math.sqrt(2.0)), ("one", 1.0), ("half", 0.5)):
        ws.feed_blob(name, np.array(v, np.float32))
    return ws


def _gelu_ref(h):
    from math import erfc

    d = h.astype(np.float64)
    return (0.5 * d * np.vectorize(erfc)(-d / math.sqrt(2.0))).astype(np.float32)


GELU_CHAINS = {
    "div, (h*g)*0.5": [
        CreateOperator("Div", ["h", "sqrt2"], ["e"]),
        CreateOperator("Erf", ["e"], ["f"]),
        CreateOperator("Add", ["f", "one"], ["g"]),
        CreateOperator("Mul", ["h", "g"], ["p"]),
        CreateOperator("Mul", ["p", "half"], ["y"]),
    ],
    "mul, (0.5*h)*g, swapped operands": [
        CreateOperator("Mul", ["inv", "h"], ["e"]),
        CreateOperator("Erf", ["e"], ["f"]),
        CreateOperator("Add", ["one", "f"], ["g"]),
        CreateOperator("Mul", ["half", "h"], ["hh"]),
        CreateOperator("Mul", ["g", "hh"], ["y"]),
    ],
}


@pytest.mark.parametrize("chain", sorted(GELU_CHAINS))
def test_gelu_chain_becomes_one_op(chain):
    ws = _gelu_ws()
    net = _net(GELU_CHAINS[chain], ["h"], ["y"])
    (plain,), _ = _run(net, ws, ["y"], optimize=False)
    (fused,), types = _run(net, ws, ["y"], optimize=True)
    assert types == {"Gelu": 1}
    np.testing.assert_allclose(fused, plain, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(fused, _gelu_ref(ws.fetch_blob("h")), rtol=2e-7, atol=1e-30)


@pytest.mark.parametrize("observable", ["f", "g", "p"])
def test_gelu_chain_with_an_observable_intermediate_stays(observable):
    ws = _gelu_ws()
    net = _net(GELU_CHAINS["div, (h*g)*0.5"], ["h"], ["y"])
    _, types = _run(net, ws, ["y", observable], optimize=True)
    assert "Gelu" not in types and types["Erf"] == 1


def test_gelu_chain_with_a_second_reader_or_wrong_constant_stays():
    ws = _gelu_ws()
    ops = list(GELU_CHAINS["div, (h*g)*0.5"]) + [CreateOperator("Relu", ["g"], ["r"])]
    _, types = _run(_net(ops, ["h"], ["y", "r"]), ws, ["y", "r"], optimize=True)
    assert "Gelu" not in types
    ws.feed_blob("half", np.array(0.25, np.float32))
    _, types = _run(_net(GELU_CHAINS["div, (h*g)*0.5"], ["h"], ["y"]), ws, ["y"], optimize=True)
    assert "Gelu" not in types


@pytest.mark.parametrize("trans_b", [0, 1])
@pytest.mark.parametrize("bias_first", [False, True])
def test_matmul_and_bias_become_fc(trans_b, bias_first):
    ws = Workspace()
    ws.feed_blob("x", f32(2, 7, 6))
    ws.feed_blob("W", f32(5, 6) if trans_b else f32(6, 5))
    ws.feed_blob("b", f32(5))
    ops = [
        CreateOperator("BatchMatMul", ["x", "W"], ["m"], broadcast=1, trans_b=trans_b),
        CreateOperator("Add", ["b", "m"] if bias_first else ["m", "b"], ["y"]),
    ]
    (plain,), _ = _run(_net(ops, ["x"], ["y"]), ws, ["y"], optimize=False)
    (fused,), types = _run(_net(ops, ["x"], ["y"]), ws, ["y"], optimize=True)
    assert types == {("FC" if trans_b else "FCTransposed"): 1}
    np.testing.assert_allclose(fused, plain, rtol=1e-5, atol=1e-5)
    w = ws.fetch_blob("W")
    ref = ws.fetch_blob("x") @ (w.T if trans_b else w) + ws.fetch_blob("b")
    np.testing.assert_allclose(fused, ref, rtol=1e-5, atol=1e-5)


def test_matmul_with_computed_weight_or_observable_product_stays():
    ws = Workspace()
    ws.feed_blob("x", f32(4, 6))
    ws.feed_blob("W0", f32(6, 5))
    ws.feed_blob("b", f32(5))
    computed = [
        CreateOperator("Relu", ["W0"], ["W"]),
        CreateOperator("BatchMatMul", ["x", "W"], ["m"], broadcast=1),
        CreateOperator("Add", ["m", "b"], ["y"]),
    ]
    _, types = _run(_net(computed, ["x"], ["y"]), ws, ["y"], optimize=True)
    assert "FCTransposed" not in types
    product = computed[1:]
    product[0] = CreateOperator("BatchMatMul", ["x", "W0"], ["m"], broadcast=1)
    _, types = _run(_net(product, ["x"], ["y"]), ws, ["y", "m"], optimize=True)
    assert "FCTransposed" not in types and types["BatchMatMul"] == 1


def test_exported_encoder_fuses_and_keeps_its_output():
    torch = pytest.importorskip("torch")
    onnx = pytest.importorskip("onnx")
    from bench.transformer_models import onnx_bytes
    from framework.onnx import backend

    torch.manual_seed(0)
    layer = torch.nn.TransformerEncoderLayer(16, 2, 32, dropout=0.0, activation="gelu", batch_first=True)
    mod = torch.nn.TransformerEncoder(layer, 2, enable_nested_tensor=False).eval()
    x = torch.randn(2, 5, 16)
    rep = backend.prepare(onnx.load_from_string(onnx_bytes(mod, x)))
    (want,) = rep.run({"x": x.numpy()})
    ws, _, predict, _ = rep._cache[None]
    opt = optimize_inference(predict, ws, outputs=list(predict.external_output))
    types = collections.Counter(op.type for op in opt.op)
    assert types["Gelu"] == 2 and "Erf" not in types
    assert types["ScaledDotProductAttention"] == 2 and "Softmax" not in types
    assert types["FCTransposed"] + types["FC"] >= 6
    assert "ExpandDims" not in types and "Squeeze" not in types
    ws.create_net(opt, overwrite=True).run()
    got = ws.fetch_blob(predict.external_output[0])
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    with torch.no_grad():
        np.testing.assert_allclose(got, mod(x).numpy(), rtol=1e-4, atol=1e-4)


def _attention_ws(mask_shape=(5, 6)):
    ws = Workspace()
    ws.feed_blob("q", f32(2, 3, 5, 4))
    ws.feed_blob("k", f32(2, 3, 6, 4))
    ws.feed_blob("v", f32(2, 3, 6, 2))
    ws.feed_blob("mask", f32(*mask_shape))
    ws.feed_blob("s1", np.array(0.5, np.float32))
    ws.feed_blob("s2", np.array(0.7, np.float32))
    ws.feed_blob("d", np.array(1.3, np.float32))
    return ws


ATTENTION = [
    CreateOperator("Transpose", ["k"], ["kt"], axes=[0, 1, 3, 2]),
    CreateOperator("Mul", ["q", "s1"], ["qs"]),
    CreateOperator("Mul", ["s2", "kt"], ["ks"]),
    CreateOperator("BatchMatMul", ["qs", "ks"], ["scores"], broadcast=1),
    CreateOperator("Div", ["scores", "d"], ["scaled"]),
    CreateOperator("Add", ["mask", "scaled"], ["masked"]),
    CreateOperator("Softmax", ["masked"], ["probs"], axis=3),
    CreateOperator("BatchMatMul", ["probs", "v"], ["y"], broadcast=1),
]


def test_attention_chain_becomes_one_op():
    ws = _attention_ws()
    net = _net(ATTENTION, ["q", "k", "v"], ["y"])
    (plain,), _ = _run(net, ws, ["y"], optimize=False)
    (fused,), types = _run(net, ws, ["y"], optimize=True)
    assert types == {"ScaledDotProductAttention": 1}  # the K^T Transpose went into it too
    np.testing.assert_allclose(fused, plain, rtol=1e-5, atol=1e-6)
    q, k, v, m = (ws.fetch_blob(b).astype(np.float64) for b in ("q", "k", "v", "mask"))
    s = q @ np.swapaxes(k, -1, -2) * (0.5 * 0.7 / 1.3) + m
    p = np.exp(s - s.max(axis=-1, keepdims=True))
    np.testing.assert_allclose(fused, (p / p.sum(axis=-1, keepdims=True)) @ v, rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("observable", ["scores", "masked", "probs"])
def test_attention_chain_with_an_observable_intermediate_stays(observable):
    ws = _attention_ws()
    _, types = _run(_net(ATTENTION, ["q", "k", "v"], ["y"]), ws, ["y", observable], optimize=True)
    assert "ScaledDotProductAttention" not in types and types["Softmax"] == 1


@pytest.mark.parametrize("observable", [None, "e"])
def test_head_split_becomes_one_transpose(observable):
    ws = Workspace()
    ws.feed_blob("a", f32(3, 4, 3, 5))
    ops = [
        CreateOperator("ExpandDims", ["a"], ["e"], dims=[0]),
        CreateOperator("Transpose", ["e"], ["t"], axes=[3, 1, 2, 0, 4]),
        CreateOperator("Squeeze", ["t"], ["y"], dims=[3]),
    ]
    outs = ["y"] + ([observable] if observable else [])
    (plain, *_), _ = _run(_net(ops, ["a"], outs), ws, outs, optimize=False)
    (fused, *_), types = _run(_net(ops, ["a"], outs), ws, outs, optimize=True)
    assert types == ({"Transpose": 1} if observable is None else {"ExpandDims": 1, "Transpose": 1, "Squeeze": 1})
    np.testing.assert_array_equal(fused, plain)
    np.testing.assert_array_equal(fused, ws.fetch_blob("a").transpose(2, 0, 1, 3))
