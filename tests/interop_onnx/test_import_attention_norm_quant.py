"""The ONNX backend's translators of the transformer, normalization, loss and quantization ops
(framework/onnx/import_attention.py, import_norm.py, import_quant.py) on one-node models, against
onnx's ReferenceEvaluator (an independent numpy implementation of the ONNX spec)."""

from __future__ import annotations

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")

from onnx import helper  # noqa: E402
from onnx.reference import ReferenceEvaluator  # noqa: E402

from framework.onnx import backend  # noqa: E402


def _model(node, feeds, opset, n_out=None):
    vis = [
        helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape) for k, v in feeds.items()
    ]
    outs = [helper.make_empty_tensor_value_info(o) for o in node.output if o]
    graph = helper.make_graph([node], "g", vis, outs)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def _agree(node, feeds, opset, rtol=1e-4, atol=1e-5):
    model = _model(node, feeds, opset)
    want = ReferenceEvaluator(model).run(None, feeds)
    got = backend.prepare(model).run(feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype, (g.shape, w.shape, g.dtype, w.dtype)
        np.testing.assert_allclose(g.astype(np.float64), w.astype(np.float64), rtol=rtol, atol=atol)


rng = np.random.default_rng(0)


def _f(*shape, dtype=np.float32):
    return rng.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("three_d", [False, True])
def test_attention_with_cache_mask_and_qk_output(three_d):
    if three_d:
        feeds = {"Q": _f(2, 3, 16), "K": _f(2, 4, 8), "V": _f(2, 4, 6)}
        attrs = {"q_num_heads": 4, "kv_num_heads": 2}
    else:
        feeds = {"Q": _f(2, 4, 3, 4), "K": _f(2, 2, 4, 4), "V": _f(2, 2, 4, 3)}
        attrs = {}
    pk, pv = (_f(2, 2, 2, 4), _f(2, 2, 2, 3)) if three_d else (_f(2, 2, 2, 4), _f(2, 2, 2, 3))
    feeds |= {"mask": rng.random((3, 5)) > 0.3, "past_key": pk, "past_value": pv}
    node = helper.make_node(
        "Attention",
        ["Q", "K", "V", "mask", "past_key", "past_value"],
        ["Y", "pk", "", "qk"],
        is_causal=1,
        softcap=2.0,
        qk_matmul_output_mode=2,
        **attrs,
    )
    _agree(node, feeds, 23)


def test_attention_float16_and_window():
    feeds = {
        "Q": _f(1, 2, 4, 8, dtype=np.float16),
        "K": _f(1, 2, 6, 8, dtype=np.float16),
        "V": _f(1, 2, 6, 8, dtype=np.float16),
    }
    _agree(
        helper.make_node("Attention", ["Q", "K", "V"], ["Y"], left_window_size=1, is_causal=1), feeds, 25, 1e-3, 1e-3
    )


@pytest.mark.parametrize("op", ["NegativeLogLikelihoodLoss", "SoftmaxCrossEntropyLoss"])
def test_losses(op):
    feeds = {"x": _f(3, 5, 2), "t": np.array([[0, 4], [2, 1], [3, 3]], np.int64), "w": _f(5) ** 2}
    outs = ["loss", "logp"] if op == "SoftmaxCrossEntropyLoss" else ["loss"]
    _agree(helper.make_node(op, ["x", "t", "w"], outs, ignore_index=3, reduction="mean"), feeds, 13)


def test_normalizations():
    x = _f(2, 4, 3, 3)
    _agree(
        helper.make_node("LayerNormalization", ["x", "s", "b"], ["y", "m", "inv"], axis=2),
        {"x": x, "s": _f(3, 3), "b": _f(3, 3)},
        17,
    )
    _agree(
        helper.make_node("RMSNormalization", ["x", "s"], ["y"], axis=1, epsilon=1e-3), {"x": x, "s": _f(4, 1, 3)}, 23
    )
    _agree(
        helper.make_node("GroupNormalization", ["x", "s", "b"], ["y"], num_groups=2),
        {"x": x, "s": _f(4), "b": _f(4)},
        21,
    )


def test_quantization_translators():
    x = _f(2, 3, 4) * 50
    scale, zp = np.abs(_f(3)) + 0.5, np.array([3, 0, 250], np.uint8)
    _agree(helper.make_node("QuantizeLinear", ["x", "s", "z"], ["y"], axis=1), {"x": x, "s": scale, "z": zp}, 21)
    q = np.random.default_rng(1).integers(0, 255, (2, 3, 4)).astype(np.uint8)
    _agree(helper.make_node("DequantizeLinear", ["q", "s", "z"], ["y"], axis=1), {"q": q, "s": scale, "z": zp}, 21)
    _agree(helper.make_node("DynamicQuantizeLinear", ["x"], ["y", "s", "z"]), {"x": x}, 11)
    a, b = q[0], q[1].T.copy()
    feeds = {
        "a": a,
        "sa": np.float32(0.1),
        "za": np.uint8(3),
        "b": b,
        "sb": np.float32(0.2),
        "zb": np.uint8(9),
        "sy": np.float32(3.0),
        "zy": np.uint8(1),
    }
    _agree(helper.make_node("QLinearMatMul", list(feeds), ["y"]), feeds, 21)
    _agree(helper.make_node("MatMulInteger", ["a", "b", "", "zb"], ["y"]), {"a": a, "b": b, "zb": np.uint8(9)}, 10)


def test_transformer_translators():
    x = _f(2, 2, 3, 8)
    feeds = {"x": x, "c": _f(2, 3, 2), "s": _f(2, 3, 2)}
    _agree(
        helper.make_node("RotaryEmbedding", ["x", "c", "s"], ["y"], rotary_embedding_dim=4, interleaved=1), feeds, 23
    )
    feeds = {"q": _f(2, 3, 8), "k": _f(2, 3, 4), "v": _f(2, 3, 6), "d": -np.abs(_f(2, 3, 2)), "b": _f(2, 3, 1) ** 2}
    _agree(
        helper.make_node("LinearAttention", ["q", "k", "v", "", "d", "b"], ["y", "st"], q_num_heads=4, kv_num_heads=2),
        feeds,
        27,
    )
    feeds = {"x": _f(2, 3, 5), "w": _f(3, 1, 3), "p": _f(2, 3, 2)}
    _agree(helper.make_node("CausalConvWithState", ["x", "w", "", "p"], ["y", "st"], activation="silu"), feeds, 27)
    _agree(helper.make_node("SwiGLU", ["a", "b"], ["y"], alpha=0.7), {"a": _f(3, 4), "b": _f(3, 4)}, 28)


def test_conv_integer_and_pool_translators():
    g = np.random.default_rng(2)
    x, w = g.integers(0, 255, (1, 2, 5, 5)).astype(np.uint8), g.integers(0, 255, (3, 2, 2, 2)).astype(np.uint8)
    feeds = {"x": x, "w": w, "xz": np.uint8(7), "wz": np.array([1, 200, 3], np.uint8)}
    _agree(helper.make_node("ConvInteger", ["x", "w", "xz", "wz"], ["y"], pads=[1, 0, 1, 0], strides=[2, 1]), feeds, 10)
    f = {"x": _f(1, 2, 7, 6)}
    _agree(
        helper.make_node(
            "AveragePool",
            ["x"],
            ["y"],
            kernel_shape=[3, 2],
            dilations=[2, 1],
            pads=[1, 1, 1, 0],
            ceil_mode=1,
            count_include_pad=1,
            strides=[2, 2],
        ),
        f,
        19,
    )
    _agree(helper.make_node("MaxPool", ["x"], ["y"], kernel_shape=[2, 3], auto_pad="SAME_LOWER"), f, 12)
    ct = {"x": _f(1, 1, 3, 3), "w": _f(1, 2, 3, 3)}
    _agree(helper.make_node("ConvTranspose", ["x", "w"], ["y"], strides=[3, 2], output_shape=[10, 8]), ct, 17)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_flex_attention_of_the_preview_domain(dtype):
    gqa = 2 if dtype == np.float32 else 1
    feeds = {"Q": _f(1, 2 * gqa, 3, 8, dtype=dtype), "K": _f(1, 2, 5, 8, dtype=dtype), "V": _f(1, 2, 5, 6, dtype=dtype)}
    node = helper.make_node("FlexAttention", ["Q", "K", "V"], ["Y"], domain="ai.onnx.preview", scale=0.3)
    elem = helper.np_dtype_to_tensor_dtype(np.dtype(dtype))
    vis = [helper.make_tensor_value_info(k, elem, v.shape) for k, v in feeds.items()]
    graph = helper.make_graph([node], "g", vis, [helper.make_empty_tensor_value_info("Y")])
    opsets = [helper.make_opsetid("", 26), helper.make_opsetid("ai.onnx.preview", 1)]
    model = helper.make_model(graph, opset_imports=opsets)
    (want,) = ReferenceEvaluator(model).run(None, feeds)
    (got,) = backend.prepare(model).run(feeds)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_dilated_conv_transpose_and_float16_conv():
    ct = {"x": _f(1, 2, 4, 3), "w": _f(2, 3, 2, 3)}
    _agree(
        helper.make_node("ConvTranspose", ["x", "w"], ["y"], dilations=[2, 3], strides=[2, 1], pads=[1, 0, 0, 1]),
        ct,
        17,
    )
    f16 = {"x": _f(1, 2, 5, 5, dtype=np.float16), "w": _f(3, 2, 3, 3, dtype=np.float16)}
    _agree(helper.make_node("Conv", ["x", "w"], ["y"], pads=[1, 1, 1, 1]), f16, 17, rtol=2e-3, atol=2e-3)


def test_qlinear_conv_per_channel():
    g = np.random.default_rng(4)
    feeds = {
        "x": g.integers(0, 255, (1, 2, 5, 5)).astype(np.uint8),
        "xs": np.float32(0.02),
        "xz": np.uint8(9),
        "w": g.integers(0, 255, (3, 2, 2, 2)).astype(np.uint8),
        "ws": np.array([0.01, 0.03, 0.002], np.float32),
        "wz": np.uint8(120),
        "ys": np.float32(0.7),
        "yz": np.uint8(5),
    }
    _agree(helper.make_node("QLinearConv", list(feeds), ["y"], pads=[1, 1, 0, 0]), feeds, 10)


def test_flex_attention_with_score_and_prob_mods():
    from onnx import numpy_helper

    feeds = {"Q": _f(1, 2, 3, 4), "K": _f(1, 2, 5, 4), "V": _f(1, 2, 5, 3)}
    cap = numpy_helper.from_array(np.array(1.5, np.float32), "cap")
    score_mod = helper.make_graph(
        [
            helper.make_node("Div", ["s", "cap"], ["t"]),
            helper.make_node("Tanh", ["t"], ["u"]),
            helper.make_node("Mul", ["u", "cap"], ["s_out"]),
        ],
        "score_mod",
        [helper.make_tensor_value_info("s", onnx.TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("s_out", onnx.TensorProto.FLOAT, None)],
        initializer=[cap],
    )
    half = numpy_helper.from_array(np.array(0.5, np.float32), "half")
    prob_mod = helper.make_graph(
        [helper.make_node("Mul", ["p", "half"], ["p_out"])],
        "prob_mod",
        [helper.make_tensor_value_info("p", onnx.TensorProto.FLOAT, None)],
        [helper.make_tensor_value_info("p_out", onnx.TensorProto.FLOAT, None)],
        initializer=[half],
    )
    node = helper.make_node(
        "FlexAttention", ["Q", "K", "V"], ["Y"], domain="ai.onnx.preview", score_mod=score_mod, prob_mod=prob_mod
    )
    vis = [helper.make_tensor_value_info(k, onnx.TensorProto.FLOAT, v.shape) for k, v in feeds.items()]
    graph = helper.make_graph([node], "g", vis, [helper.make_empty_tensor_value_info("Y")])
    opsets = [helper.make_opsetid("", 26), helper.make_opsetid("ai.onnx.preview", 1)]
    model = helper.make_model(graph, opset_imports=opsets)
    (want,) = ReferenceEvaluator(model).run(None, feeds)
    (got,) = backend.prepare(model).run(feeds)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
