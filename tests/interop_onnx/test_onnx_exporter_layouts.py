"""The layouts torch's exporter emits reach the fused ops: small ONNX graphs built with ``onnx.helper`` give
onnxruntime's outputs through ``prepare`` / ``run``, and the net the engine runs (``rep.optimized_net``) holds
the fused op. Graph outputs are the only observable values: an intermediate that is a graph output keeps
its value and is never fused away."""

from __future__ import annotations

import collections

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

onnx = pytest.importorskip("onnx")
ort = pytest.importorskip("onnxruntime")

from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from framework.onnx import backend  # noqa: E402

F = TensorProto.FLOAT


def _model(nodes, inputs, outputs, inits):
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info(n, F, s) for n, s in inputs],
        [helper.make_tensor_value_info(n, F, s) for n, s in outputs],
        initializer=[numpy_helper.from_array(v.astype(np.float32), k) for k, v in inits.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def _ort(model, feeds):
    so = ort.SessionOptions()
    so.intra_op_num_threads = 1
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    sess = ort.InferenceSession(model.SerializeToString(), so, providers=["CPUExecutionProvider"])
    return sess.run(None, feeds)


def _run(model, feeds):
    rep = backend.prepare(model)
    got = rep.run(feeds)
    want = _ort(model, feeds)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    return rep, collections.Counter(op.type for op in rep.optimized_net.op)


def _rng(seed=0):
    return np.random.default_rng(seed)


def test_gemm_of_a_linear_layer_runs_as_fc():
    r = _rng()
    inits = {"W": r.standard_normal((5, 7)), "b": r.standard_normal(5)}
    node = helper.make_node("Gemm", ["x", "W", "b"], ["y"], transB=1)
    model = _model([node], [("x", [3, 7])], [("y", [3, 5])], inits)
    rep, types = _run(model, {"x": r.standard_normal((3, 7)).astype(np.float32)})
    assert types == {"FC": 1}


@pytest.mark.parametrize("attrs", [{"transB": 0}, {"transB": 1, "alpha": 2.0}, {"transB": 1, "beta": 0.5}])
def test_other_gemms_keep_their_own_translation(attrs):
    r = _rng(1)
    w = r.standard_normal((7, 5) if not attrs["transB"] else (5, 7))
    node = helper.make_node("Gemm", ["x", "W", "b"], ["y"], **attrs)
    model = _model([node], [("x", [3, 7])], [("y", [3, 5])], {"W": w, "b": r.standard_normal(5)})
    _, types = _run(model, {"x": r.standard_normal((3, 7)).astype(np.float32)})
    assert "FC" not in types


def _conv_block(residual_is_output=False, relu=True):
    """Conv -> Relu -> Conv -> BatchNormalization -> Add(residual x) -> Relu, as torch exports a ResNet
    basic block (torch folds BN itself unless asked not to; here it is left for our pass)."""
    r = _rng(2)
    c = 4
    inits = {
        "w1": r.standard_normal((c, c, 3, 3)) * 0.3,
        "w": r.standard_normal((c, c, 3, 3)) * 0.3,
        "scale": r.uniform(0.5, 1.5, c),
        "bias": r.uniform(-0.1, 0.1, c),
        "mean": r.uniform(-0.1, 0.1, c),
        "var": r.uniform(0.5, 1.5, c),
    }
    nodes = [
        helper.make_node("Conv", ["x", "w1"], ["c1"], pads=[1, 1, 1, 1]),
        helper.make_node("Relu", ["c1"], ["r1"]),
        helper.make_node("Conv", ["r1", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("BatchNormalization", ["c", "scale", "bias", "mean", "var"], ["bn"], epsilon=1e-5),
        helper.make_node("Add", ["bn", "x"], ["s"]),
    ]
    if relu:
        nodes.append(helper.make_node("Relu", ["s"], ["y"]))
    else:
        nodes[-1].output[0] = "y"
    # the block's output feeds the next layer (a fused sum cannot write a graph output: it is in place)
    nodes.append(helper.make_node("GlobalAveragePool", ["y"], ["out"]))
    outputs = [("out", [1, c, 1, 1])]
    if residual_is_output:
        outputs.append(("bn", [1, c, 6, 6]))
    model = _model(nodes, [("x", [1, c, 6, 6])], outputs, inits)
    return model, {"x": r.standard_normal((1, c, 6, 6)).astype(np.float32)}


def _fusion_types(net):
    return [{a.name: a.i for a in op.arg}["fusion_type"] for op in net.op if op.type == "ConvFusion"]


def test_conv_bn_add_relu_becomes_one_fused_conv():
    model, feeds = _conv_block()
    rep, types = _run(model, feeds)
    assert types == {"ConvFusion": 2, "AveragePool": 1}
    assert _fusion_types(rep.optimized_net) == [1, 3]  # Conv + Relu; Conv + Sum + Relu with BN folded


def test_conv_bn_add_without_relu_fuses_the_sum():
    model, feeds = _conv_block(relu=False)
    rep, types = _run(model, feeds)
    assert types == {"ConvFusion": 2, "AveragePool": 1}
    assert _fusion_types(rep.optimized_net) == [1, 2]


def test_the_first_conv_is_fused_with_its_relu_only_when_the_relu_input_is_unobserved():
    model, feeds = _conv_block()
    model.graph.output.append(helper.make_tensor_value_info("c1", F, [1, 4, 6, 6]))
    rep, types = _run(model, feeds)
    assert _fusion_types(rep.optimized_net) == [3] and types["Relu"] == 1 and types["Conv"] == 1


def test_an_intermediate_that_is_a_graph_output_keeps_its_value():
    model, feeds = _conv_block(residual_is_output=True)
    rep, types = _run(model, feeds)  # both outputs compared with onnxruntime
    assert "bn" in {o for op in rep.optimized_net.op for o in op.output}
    assert types["Sum"] == 1  # the observed BN output cannot be summed in place
    assert _fusion_types(rep.optimized_net) == [1]


def test_broadcasting_add_stays_an_add():
    r = _rng(3)
    nodes = [helper.make_node("Add", ["x", "b"], ["y"])]
    model = _model(nodes, [("x", [2, 3, 4])], [("y", [2, 3, 4])], {"b": r.standard_normal((3, 1))})
    rep, types = _run(model, {"x": r.standard_normal((2, 3, 4)).astype(np.float32)})
    assert types == {"Add": 1}


def test_same_shape_add_translates_to_sum_with_the_same_bits():
    r = _rng(4)
    nodes = [helper.make_node("Add", ["x", "z"], ["y"])]
    model = _model(nodes, [("x", [2, 3]), ("z", [2, 3])], [("y", [2, 3])], {})
    x, z = r.standard_normal((2, 3)).astype(np.float32), r.standard_normal((2, 3)).astype(np.float32)
    (y,) = backend.run_node(nodes[0], [x, z])
    np.testing.assert_array_equal(y, x + z)
    rep, types = _run(model, {"x": x, "z": z})
    assert types == {"Sum": 1}


def test_a_fused_sum_whose_result_is_a_graph_output_is_not_fused():
    model, feeds = _conv_block()
    model.graph.output.append(helper.make_tensor_value_info("y", F, [1, 4, 6, 6]))
    rep, types = _run(model, feeds)
    assert types["Relu"] == 1 and _fusion_types(rep.optimized_net) == [1, 2]


def test_optimized_net_runs_again_with_the_same_answer():
    model, feeds = _conv_block()
    rep = backend.prepare(model)
    first = rep.run(feeds)[0].copy()
    second = rep.run(feeds)[0]
    np.testing.assert_array_equal(first, second)


def _const(name, values):
    return helper.make_node("Constant", [], [name], value=numpy_helper.from_array(np.asarray(values, np.int64), name))


def _shuffle_unit(split_observed=False, transpose_observed=False):
    """ShuffleNet v2's unit tail as torch exports it: Concat -> Reshape(N, g, C/g, H, W) -> Transpose ->
    Reshape(N, C, H, W) -> two Slices over the channels (torch.chunk)."""
    c, h, w = 8, 3, 5
    nodes = [
        _const("s5", [1, 2, c // 2, h, w]),
        _const("s4", [1, c, h, w]),
        _const("z", [0]),
        _const("half", [c // 2]),
        _const("end", [c]),
        _const("ax", [1]),
        helper.make_node("Concat", ["a", "b"], ["cat"], axis=1),
        helper.make_node("Reshape", ["cat", "s5"], ["r5"]),
        helper.make_node("Transpose", ["r5"], ["t"], perm=[0, 2, 1, 3, 4]),
        helper.make_node("Reshape", ["t", "s4"], ["sh"]),
        helper.make_node("Slice", ["sh", "z", "half", "ax"], ["lo"]),
        helper.make_node("Slice", ["sh", "half", "end", "ax"], ["hi"]),
        helper.make_node("Relu", ["hi"], ["out_hi"]),
        helper.make_node("Relu", ["lo"], ["out_lo"]),
    ]
    outputs = [("out_lo", [1, c // 2, h, w]), ("out_hi", [1, c // 2, h, w])]
    if split_observed:
        outputs.append(("sh", [1, c, h, w]))
    if transpose_observed:
        outputs.append(("t", [1, c // 2, 2, h, w]))
    model = _model(nodes, [("a", [1, c // 2, h, w]), ("b", [1, c // 2, h, w])], outputs, {})
    r = _rng(5)
    feeds = {k: r.standard_normal((1, c // 2, h, w)).astype(np.float32) for k in ("a", "b")}
    return model, feeds


def test_shufflenet_unit_becomes_one_concat_channel_shuffle():
    model, feeds = _shuffle_unit()
    rep, types = _run(model, feeds)
    assert [op.type for op in rep.predict_net.op][:3] == ["Concat", "ChannelShuffle", "Split"]
    assert types == {"ConcatChannelShuffle": 1, "Relu": 2}


def test_observed_shuffle_output_keeps_the_split_out_of_the_fusion():
    model, feeds = _shuffle_unit(split_observed=True)
    rep, types = _run(model, feeds)
    assert types["ConcatChannelShuffle"] == 1 and types["Split"] == 1


def test_observed_transpose_keeps_the_exported_chain():
    model, feeds = _shuffle_unit(transpose_observed=True)
    rep, types = _run(model, feeds)
    assert "ChannelShuffle" not in types and types["Transpose"] == 1


def test_slices_that_do_not_cover_the_axis_stay_slices():
    c = 6
    nodes = [
        _const("z", [0]),
        _const("two", [2]),
        _const("four", [4]),
        _const("ax", [1]),
        helper.make_node("Slice", ["x", "z", "two", "ax"], ["lo"]),
        helper.make_node("Slice", ["x", "two", "four", "ax"], ["mid"]),  # channels 4..5 are left out
    ]
    model = _model(nodes, [("x", [2, c, 3])], [("lo", [2, 2, 3]), ("mid", [2, 2, 3])], {})
    rep, types = _run(model, {"x": _rng(6).standard_normal((2, c, 3)).astype(np.float32)})
    assert types == {"Slice": 2}


@pytest.mark.parametrize("order", [("x", "s"), ("s", "x")])
def test_silu_runs_as_swish(order):
    nodes = [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", list(order), ["y"])]
    model = _model(nodes, [("x", [2, 3, 4])], [("y", [2, 3, 4])], {})
    x = (_rng(7).standard_normal((2, 3, 4)) * 4).astype(np.float32)
    rep, types = _run(model, {"x": x})
    assert types == {"Swish": 1}
    np.testing.assert_allclose(rep.run({"x": x})[0], x / (1 + np.exp(-x.astype(np.float64))), rtol=1e-5, atol=1e-6)


def test_an_observed_sigmoid_is_not_fused():
    nodes = [helper.make_node("Sigmoid", ["x"], ["s"]), helper.make_node("Mul", ["x", "s"], ["y"])]
    model = _model(nodes, [("x", [2, 3])], [("y", [2, 3]), ("s", [2, 3])], {})
    _, types = _run(model, {"x": _rng(8).standard_normal((2, 3)).astype(np.float32)})
    assert types == {"Sigmoid": 1, "Mul": 1}


def test_squeeze_excitation_scale_is_not_a_swish():
    """Mul(x, Sigmoid(z)) with z another tensor (EfficientNet's SE gate) keeps Sigmoid and Mul."""
    nodes = [
        helper.make_node("GlobalAveragePool", ["x"], ["z"]),
        helper.make_node("Sigmoid", ["z"], ["s"]),
        helper.make_node("Mul", ["x", "s"], ["y"]),
    ]
    model = _model(nodes, [("x", [1, 3, 4, 4])], [("y", [1, 3, 4, 4])], {})
    _, types = _run(model, {"x": _rng(9).standard_normal((1, 3, 4, 4)).astype(np.float32)})
    assert types["Sigmoid"] == 1 and types["Mul"] == 1 and "Swish" not in types


def _dense_block(observe_first=False):
    """Two DenseNet layers as torch exports them: each concatenates all the block's features so far, then
    BatchNormalization -> Relu -> Conv makes the next features."""
    r = _rng(10)
    c, g = 4, 2
    inits = {}
    nodes = []
    feats = ["x"]
    for k in range(3):
        width = c + g * k
        if k:
            nodes.append(helper.make_node("Concat", list(feats), [f"cat{k}"], axis=1))
            src = f"cat{k}"
        else:
            src = "x"
        if k == 2:
            break
        for p, v in (("s", r.uniform(0.5, 1.5, width)), ("b", r.uniform(-0.1, 0.1, width))):
            inits[f"{p}{k}"] = v
        inits[f"m{k}"], inits[f"v{k}"] = r.uniform(-0.1, 0.1, width), r.uniform(0.5, 1.5, width)
        inits[f"w{k}"] = r.standard_normal((g, width, 3, 3)) * 0.3
        nodes += [
            helper.make_node("BatchNormalization", [src, f"s{k}", f"b{k}", f"m{k}", f"v{k}"], [f"bn{k}"]),
            helper.make_node("Relu", [f"bn{k}"], [f"r{k}"]),
            helper.make_node("Conv", [f"r{k}", f"w{k}"], [f"f{k}"], pads=[1, 1, 1, 1]),
        ]
        feats.append(f"f{k}")
    outputs = [("cat2", [1, c + 2 * g, 5, 5])] + ([("cat1", [1, c + g, 5, 5])] if observe_first else [])
    model = _model(nodes, [("x", [1, c, 5, 5])], outputs, inits)
    return model, {"x": r.standard_normal((1, c, 5, 5)).astype(np.float32)}


@pytest.mark.parametrize("observe_first", [False, True])
def test_densenet_concatenations_read_the_previous_one(observe_first):
    model, feeds = _dense_block(observe_first)
    rep, _ = _run(model, feeds)
    cats = [op for op in rep.predict_net.op if op.type == "Concat"]
    assert [list(op.input) for op in cats] == [["x", "f0"], ["cat1", "f1"]]  # nothing removed: any may be observed


def test_steady_state_runs_allocate_nothing():
    from framework.memory.allocator import memory_reporter

    model, feeds = _shuffle_unit()
    rep = backend.prepare(model)
    rep.run(feeds)
    rep.run(feeds)
    before = memory_reporter().allocations
    for _ in range(3):
        rep.run(feeds)
    assert memory_reporter().allocations == before


@settings(max_examples=15, deadline=None)
@given(
    cuts=st.lists(st.integers(1, 11), min_size=1, max_size=3, unique=True),
    axis=st.integers(0, 2),
    permute=st.randoms(use_true_random=False),
)
def test_slices_covering_an_axis_become_one_split(cuts, axis, permute):
    shape = [12, 12, 12]
    shape[(axis + 1) % 3] = 3
    shape[(axis + 2) % 3] = 2
    bounds = [0, *sorted(cuts), 12]
    nodes, outputs = [_const("ax", [axis])], []
    for k, (s, e) in enumerate(zip(bounds, bounds[1:])):
        nodes += [_const(f"s{k}", [s]), _const(f"e{k}", [e])]
        nodes.append(helper.make_node("Slice", ["x", f"s{k}", f"e{k}", "ax"], [f"p{k}"]))
        part = list(shape)
        part[axis] = e - s
        outputs.append((f"p{k}", part))
    slices = [n for n in nodes if n.op_type == "Slice"]
    permute.shuffle(slices)  # the exporter's order of the parts is free
    nodes = [n for n in nodes if n.op_type != "Slice"] + slices
    model = _model(nodes, [("x", shape)], outputs, {})
    x = _rng(11).standard_normal(shape).astype(np.float32)
    rep = backend.prepare(model)
    got = rep.run({"x": x})
    for k, (s, e) in enumerate(zip(bounds, bounds[1:])):
        np.testing.assert_array_equal(got[f"p{k}"], np.take(x, range(s, e), axis=axis))
    assert [op.type for op in rep.predict_net.op] == ["Split"]


def test_a_symbolic_batch_runs_at_any_size_through_the_optimized_net():
    model, _ = _conv_block()
    for vi in (*model.graph.input, *model.graph.output):
        vi.type.tensor_type.shape.dim[0].dim_param = "N"
    rep = backend.prepare(model)
    r = _rng(12)
    for n in (1, 3, 2):
        x = r.standard_normal((n, 4, 6, 6)).astype(np.float32)
        (got,) = rep.run({"x": x})
        (want,) = _ort(model, {"x": x})
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)
    assert _fusion_types(rep.optimized_net) == [1, 3]


def test_a_conv_reading_its_own_residual_is_not_summed_in_place():
    """Add(Conv(x), x): the fused sum would write over x while the conv reads it."""
    r = _rng(13)
    nodes = [
        helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
        helper.make_node("Add", ["c", "x"], ["s"]),
        helper.make_node("Relu", ["s"], ["y"]),
        helper.make_node("GlobalAveragePool", ["y"], ["out"]),
    ]
    model = _model(nodes, [("x", [1, 3, 5, 5])], [("out", [1, 3, 1, 1])], {"w": r.standard_normal((3, 3, 3, 3))})
    rep, types = _run(model, {"x": r.standard_normal((1, 3, 5, 5)).astype(np.float32)})
    assert types["Sum"] == 1 and "ConvFusion" not in types
