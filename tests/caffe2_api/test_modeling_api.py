"""``framework.caffe2.python.modeling``: parameter info and sharing, initializers, and the net passes,
each checked against numpy written from Caffe2's semantics."""

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework import core, workspace
from framework.caffe2.python import brew, scope
from framework.caffe2.python.model_helper import ModelHelper
from framework.caffe2.python.modeling.compute_histogram_for_blobs import ComputeHistogramForBlobs
from framework.caffe2.python.modeling.compute_norm_for_blobs import ComputeNormForBlobs
from framework.caffe2.python.modeling.compute_statistics_for_blobs import ComputeStatisticsForBlobs
from framework.caffe2.python.modeling.get_entry_from_blobs import GetEntryFromBlobs
from framework.caffe2.python.modeling.gradient_clipping import GradientClipping
from framework.caffe2.python.modeling.initializers import (
    ExternalInitializer,
    Initializer,
    PseudoFP16Initializer,
    ReversePseudoFP16Initializer,
    update_initializer,
)
from framework.caffe2.python.modeling.parameter_info import ParameterInfo, ParameterType
from framework.caffe2.python.modeling.parameter_sharing import ParameterSharing, parameter_sharing_context
from framework.caffe2.python.optimizer_context import UseOptimizer
from framework.errors import FrameworkError, ModelError, NetError
from framework.ops.gradient import GradientSlice
from framework.proto.framework_pb2 import TensorProto


@pytest.fixture(autouse=True)
def _fresh():
    workspace.ResetWorkspace()
    yield
    workspace.ResetWorkspace()


def _feed_param_model(values):
    """A model whose net reads blob 'x' (fed) and has 'x' as an output of a Copy, so modifiers can see it."""
    model = ModelHelper("m")
    model.net.AddExternalInput("x_in")
    model.net.Copy("x_in", "x")
    workspace.FeedBlob("x_in", values)
    return model


def test_parameter_info_fields():
    info = ParameterInfo(3, core.BlobReference("emb"), shape=[4, 2], length=0)
    assert (info.name, info.size, info.length, info.grad_type()) == ("emb", 8, 1, None)
    info.grad = core.BlobReference("emb_grad")
    assert info.grad_type() == ParameterType.DENSE
    info.grad = GradientSlice("i", "v")
    assert info.grad_type() == ParameterType.SPARSE
    info.optimizer = "a"
    with pytest.raises(FrameworkError, match="already been set"):
        info.optimizer = "b"


def test_parameter_sharing_resolves_longest_prefix_recursively():
    get = parameter_sharing_context.get_parameter_name
    with ParameterSharing({"b": "a"}):
        with scope.NameScope("b"):
            assert get("w") == "a/w"
            with ParameterSharing({"inner": ""}), scope.NameScope("inner"):
                assert get("w") == "a/w"
            with scope.NameScope("other"):
                assert get("w") == "a/other/w"
        with scope.NameScope("c"):
            assert get("w") == "c/w"
    with scope.NameScope("b"):
        assert get("w") == "b/w"  # popped
    with pytest.raises(FrameworkError, match="prefix"):
        with ParameterSharing({"a": "a/b"}):
            pass


def test_shared_params_are_created_once_and_shapes_must_match():
    model = ModelHelper("m")
    with scope.NameScope("a"):
        brew.fc(model, "x", "out", 3, 2)
    with ParameterSharing({"b": "a"}), scope.NameScope("b"):
        y = brew.fc(model, "x", "out", 3, 2)
    assert str(y) == "b/out"
    assert sorted(model._parameters_info) == ["a/out_b", "a/out_w"]
    assert [op.input[1] for op in model.net.Proto().op] == ["a/out_w", "a/out_w"]
    with pytest.raises(ModelError, match="shape"):
        brew.fc(model, "x", "a/out", 4, 2)
    with pytest.raises(AssertionError):  # Caffe2 programs catch an AssertionError here
        model.create_param("a/out_w", [9], Initializer("ConstantFill"))


def test_initializers_build_the_fill_ops_and_copies():
    net = core.Net("init")
    Initializer("ConstantFill", value=2.0).create_param(core.BlobReference("c"), net, [2])
    fp16 = PseudoFP16Initializer("ConstantFill", value=1.5).create_param("h", net, [3])
    rev = ReversePseudoFP16Initializer("ConstantFill", value=0.25).create_param("r", net, [1])
    ext = ExternalInitializer().create_param("e", net, [1])
    workspace.RunNetOnce(net)
    assert str(fp16.blob) == "h" and str(fp16.blob_copy[TensorProto.FLOAT]) == "h_fp32"
    assert workspace.FetchBlob("h").dtype == np.float16 and workspace.FetchBlob("h_fp32").dtype == np.float32
    np.testing.assert_array_equal(workspace.FetchBlob("h"), np.full(3, 1.5, np.float16))
    assert str(rev.blob_copy[TensorProto.FLOAT16]) == "r_fp16" and workspace.FetchBlob("r").dtype == np.float32
    assert str(ext.blob) == "e" and len(net.Proto().op) == 5  # fill, fill+cast, fill+cast
    with pytest.raises(FrameworkError, match="cannot change"):
        Initializer("XavierFill").update("ConstantFill", {})


def test_update_initializer_takes_a_class_or_the_defaults():
    init = update_initializer(None, None, ("XavierFill", {}))
    assert (type(init), init.operator_name) == (Initializer, "XavierFill")
    init = update_initializer(PseudoFP16Initializer, ("GaussianFill", {"std": 0.5}), ("XavierFill", {}))
    assert type(init) is PseudoFP16Initializer and init.operator_kwargs == {"std": 0.5}
    model = ModelHelper("m")
    brew.fc(model, "x", "f", 1, 1, WeightInitializer=Initializer, weight_init=("ConstantFill", {"value": 3.0}))
    workspace.RunNetOnce(model.param_init_net)
    assert workspace.FetchBlob("f_w").tolist() == [[3.0]]


def test_use_optimizer_sets_param_optimizers_by_tag():
    model = ModelHelper("m")
    with UseOptimizer({"WEIGHT": "w_opt", "DEFAULT": "d_opt"}):
        brew.fc(model, "x", "a", 2, 2)
        with UseOptimizer({"BIAS": "b_opt"}):
            brew.fc(model, "a", "b", 2, 2)
    brew.fc(model, "b", "c", 2, 2)
    opt = {k: v.optimizer for k, v in model._parameters_info.items()}
    assert opt == {"a_w": "w_opt", "a_b": "d_opt", "b_w": "w_opt", "b_b": "b_opt", "c_w": None, "c_b": None}


@settings(max_examples=10, deadline=None, derandomize=True)
@given(rows=st.integers(1, 4), cols=st.integers(1, 4), p=st.sampled_from([1, 2]), avg=st.booleans())
def test_compute_norm_matches_numpy(rows, cols, p, avg):
    workspace.ResetWorkspace()
    x = np.random.RandomState(rows * 7 + cols).randn(rows, cols).astype(np.float32)
    model = _feed_param_model(x)
    ComputeNormForBlobs(["x"], logging_frequency=0, p=p, compute_averaged_norm=avg)(model.net)
    workspace.RunNetOnce(model.net)
    name = "x" + ("_averaged" if avg else "") + f"_l{p}_norm"
    expected = np.abs(x).sum() if p == 1 else (x.astype(np.float64) ** 2).sum()  # LpNorm's p=2 is squared
    if avg:
        expected /= x.size
    np.testing.assert_allclose(workspace.FetchBlob(name), [expected], rtol=1e-5)
    assert model.net.output_record().field_names() == [name]


def test_compute_norm_of_one_row():
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    model = _feed_param_model(x)
    ComputeNormForBlobs(["x"], logging_frequency=0, p=1, row_index=1)(model.net)
    workspace.RunNetOnce(model.net)
    assert workspace.FetchBlob("x_row_1_l1_norm").tolist() == [12.0]
    with pytest.raises(FrameworkError, match="row index"):
        ComputeNormForBlobs(["x"], 0, row_index=-1)


def test_histogram_matches_numpy_and_accumulates():
    x = np.array([[-1.0, 0.05, 0.15], [0.95, 1.0, 0.5]], np.float32)
    model = _feed_param_model(x)
    mod = ComputeHistogramForBlobs(["x"], logging_frequency=0, num_buckets=10, accumulate=True)
    mod(model.net)
    workspace.CreateNet(model.net)
    workspace.RunNet(model.net)
    workspace.RunNet(model.net)
    # buckets: [-inf, 0), [0, .1) ... [.9, 1), [1, inf); twice the same data leaves the normalized counts
    counts = np.zeros(12)
    counts[0] += 1
    for v in (0.05, 0.15, 0.95, 0.5):
        counts[1 + int(v * 10)] += 1
    counts[11] += 1
    np.testing.assert_allclose(workspace.FetchBlob("x_acc_normalized_hist"), counts / counts.sum(), rtol=1e-6)
    assert mod.field_name_suffix() == "_acc_normalized_hist"
    with pytest.raises(FrameworkError, match="num_buckets"):
        ComputeHistogramForBlobs(["x"], 1, num_buckets=0)


def test_statistics_and_entries_match_numpy():
    x = np.array([[1.0, 2.0, 6.0], [3.0, -4.0, 0.5]], np.float32)
    model = _feed_param_model(x)
    ComputeStatisticsForBlobs(["x"], logging_frequency=1000)(model.net)
    GetEntryFromBlobs(["x"], logging_frequency=0, i1=1, i2=2)(model.net)
    GetEntryFromBlobs(["x"], logging_frequency=0, i1=0, i2=-1)(model.net)
    workspace.RunNetOnce(model.net)
    stats = workspace.FetchBlob("x_summary")
    np.testing.assert_allclose(stats, [x.min(), x.max(), x.mean(), x.std(ddof=1)], rtol=1e-5)
    assert workspace.FetchBlob("x_1_2").tolist() == [[0.5]]
    assert workspace.FetchBlob("x_0_all").tolist() == [[1.0, 2.0, 6.0]]
    assert model.net.output_record().field_names() == ["x_summary", "x_1_2", "x_0_all"]


def test_modifier_refuses_an_undefined_blob():
    with pytest.raises(NetError, match="not defined"):
        ComputeNormForBlobs(["nope"], 1)(core.Net("n"))


def _clip_model(g, w):
    model = ModelHelper("clip")
    for name, v in (("g_in", g), ("w_in", w)):
        model.net.AddExternalInput(name)
        workspace.FeedBlob(name, v)
    model.net.Copy("g_in", "g")
    model.net.Copy("w_in", "w")
    return model


@pytest.mark.parametrize("norm_type", ["l1_norm", "l2_norm"])
@pytest.mark.parametrize("use_param_norm", [False, True])
def test_gradient_clipping_by_norm_matches_numpy(norm_type, use_param_norm):
    g = np.array([3.0, -4.0, 1.0], np.float32)
    w = np.array([0.5, 0.5, 2.0], np.float32)
    model = _clip_model(g, w)
    GradientClipping("by_norm", norm_type, clip_threshold=0.5, use_parameter_norm=use_param_norm,
                     compute_norm_ratio=True)(model.net, grad_map={"w": "g"})  # fmt: skip
    workspace.RunNetOnce(model.net)
    norm = (lambda v: np.abs(v).sum()) if norm_type == "l1_norm" else np.linalg.norm
    threshold = 0.5 * (norm(w) if use_param_norm else 1.0)
    expected = g * threshold / max(threshold, norm(g))
    np.testing.assert_allclose(workspace.FetchBlob("g"), expected, rtol=1e-5)
    if use_param_norm:
        np.testing.assert_allclose(workspace.FetchBlob("w_norm_ratio"), [norm(g) / norm(w)], rtol=1e-5)


def test_gradient_clipping_by_value_include_exclude_and_sparse():
    g = np.array([3.0, -4.0, 0.25], np.float32)
    model = _clip_model(g, g)
    grad_map = {"w": "g", "emb": GradientSlice("idx", "vals"), "v": "g_in"}
    GradientClipping("by_value", clip_max=1.0, clip_min=-2.0, blobs_to_exclude=["v"])(model.net, grad_map=grad_map)
    workspace.RunNetOnce(model.net)
    assert workspace.FetchBlob("g").tolist() == [1.0, -2.0, 0.25]
    assert [op.type for op in model.net.Proto().op] == ["Copy", "Copy", "Clip"]
    with pytest.raises(FrameworkError, match="unknown method"):
        GradientClipping("by_magic")
    with pytest.raises(FrameworkError, match="grad_map"):
        GradientClipping("by_value")(model.net)
