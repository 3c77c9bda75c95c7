"""A DLRM-style ranking model written with Caffe2's layers API: dense features through FC + Relu,
id-list features through SparseLookup, their pairwise dot products, a top FC, BatchLRLoss, Adagrad
via ``optimizer.build_adagrad``; it trains to a lower loss, and its predict net (from
``generate_predict_net``) gives the trained model's probabilities in Python and through
``framework predict``."""

from __future__ import annotations

import os
import subprocess
import sys

import numpy as np
import pytest

from framework import workspace
from framework.caffe2.python import layer_model_helper, layer_model_instantiator, optimizer, schema
from framework.predictor.export_pair import init_net_from_workspace, write_net

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DIM = 8
LIMITS = {"cat_0": 20, "cat_1": 30}


def _ids(limit: int) -> schema.List:
    return schema.List(schema.Scalar(np.int64, metadata=schema.Metadata(categorical_limit=limit)))


def build_model() -> tuple[layer_model_helper.LayerModelHelper, schema.Field]:
    features = schema.Struct(
        ("dense", schema.Scalar((np.float32, (4,)))),
        ("sparse", schema.Struct(*[(name, _ids(limit)) for name, limit in LIMITS.items()])),
    )
    extra = schema.Struct(("label", schema.Scalar(np.float32)))
    model = layer_model_helper.LayerModelHelper("dlrm", features, extra)
    x = model.input_feature_schema
    bottom = model.Relu(model.FC(x.dense, DIM), 1)
    embeddings = [model.SparseLookup(x.sparse[name], [DIM], "Sum") for name in LIMITS]
    fields = [("dense", bottom)] + [(f"emb_{i}", e) for i, e in enumerate(embeddings)]
    stacked = model.Concat(schema.Struct(*fields), axis=1, add_axis=1)
    n = len(fields)
    interactions = model.PairwiseDotProduct(schema.Struct(("all_embeddings", stacked)), n * n)
    top = model.Concat(schema.Struct(("dense", bottom), ("interactions", interactions)))
    logit = model.FC(top, 1)
    model.output_schema = schema.Struct(("prediction", model.Sigmoid(logit, 1)))
    loss = model.BatchLRLoss(schema.Struct(("label", model.trainer_extra_schema.label), ("logit", logit)))
    model.add_loss(loss)
    return model, loss


def make_batch(rng: np.random.RandomState, n: int) -> list[np.ndarray]:
    """Features and a label that depends on both the dense and the sparse features."""
    dense = rng.randn(n, 4).astype(np.float32)
    columns = [dense]
    odd_first = None
    for limit in LIMITS.values():
        lengths = rng.randint(1, 4, n).astype(np.int32)
        values = rng.randint(0, limit, lengths.sum()).astype(np.int64)
        if odd_first is None:
            odd_first = values[np.r_[0, np.cumsum(lengths)[:-1]]] % 2
        columns += [lengths, values]
    label = ((dense[:, 0] > 0) ^ (odd_first == 1)).astype(np.float32)
    return columns + [label]


def reference_prediction(params: dict[str, np.ndarray], batch: list[np.ndarray]) -> np.ndarray:
    """The model's forward pass in numpy, from the trained parameters."""
    dense, l0, v0, l1, v1 = batch[:5]
    bottom = np.maximum(dense @ params["fc/w"].T + params["fc/b"], 0)

    def pooled(table: np.ndarray, lengths: np.ndarray, values: np.ndarray) -> np.ndarray:
        starts = np.r_[0, np.cumsum(lengths)[:-1]]
        return np.stack([table[values[s : s + k]].sum(0) for s, k in zip(starts, lengths)])

    e0 = pooled(params["sparse_lookup/w"], l0, v0)
    e1 = pooled(params["sparse_lookup_auto_0/w"], l1, v1)
    stacked = np.stack([bottom, e0, e1], axis=1)
    inter = np.einsum("bik,bjk->bij", stacked, stacked).reshape(len(dense), -1)
    top = np.concatenate([bottom, inter], axis=1)
    logit = top @ params["fc_auto_0/w"].T + params["fc_auto_0/b"]
    return 1 / (1 + np.exp(-logit))


@pytest.fixture
def trained(tmp_path):
    workspace.ResetWorkspace()
    model, loss = build_model()
    model.AddGradientOperators(model.loss.field_blobs())
    optimizer.build_adagrad(model, base_learning_rate=0.2)
    assert any(op.type == "SparseAdagrad" for op in model.net.Proto().op)  # embeddings get sparse updates
    rng = np.random.RandomState(0)
    record = model.input_feature_schema + model.trainer_extra_schema
    model.store_seed(17)
    model.apply_seed(model.param_init_net)  # the same initial parameters whatever ran before
    workspace.RunNetOnce(model.param_init_net)
    schema.FeedRecord(record, make_batch(rng, 32))
    workspace.CreateNet(model.net)
    losses = []
    for _ in range(100):
        schema.FeedRecord(record, make_batch(rng, 32))
        workspace.RunNet(model.net.Proto().name)
        losses.append(float(workspace.FetchBlob(str(loss()))))
    return model, losses, rng


def test_dlrm_trains_to_a_lower_loss(trained):
    _, losses, _ = trained
    assert np.mean(losses[-10:]) < 0.7 * np.mean(losses[:10]), losses


def test_dlrm_predict_net_matches_numpy_and_runs_through_cli(trained, tmp_path):
    model, _, rng = trained
    predict_net = layer_model_instantiator.generate_predict_net(model)
    proto = predict_net.Proto()
    assert not {"BatchLRLoss", "SigmoidCrossEntropyWithLogits"} & {op.type for op in proto.op}
    assert [str(b) for b in predict_net.output_record().field_blobs()] == list(proto.external_output)
    feature_blobs = [str(b) for b in model.input_feature_schema.field_blobs()]
    params = [b for b in proto.external_input if b not in feature_blobs]
    assert sorted(params) == sorted(["fc/w", "fc/b", "sparse_lookup/w", "sparse_lookup_auto_0/w", "fc_auto_0/w",
                                     "fc_auto_0/b"])  # fmt: skip
    trained_params = {p: workspace.FetchBlob(p) for p in params}
    batch = make_batch(rng, 6)
    expected = reference_prediction(trained_params, batch)

    schema.FeedRecord(model.input_feature_schema, batch[:5])
    workspace.RunNetOnce(predict_net)
    got = workspace.FetchBlob(proto.external_output[0])
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)

    # export the pair and predict from the command line
    init = init_net_from_workspace(workspace.C(), params)
    write_net(init, tmp_path / "init_net")
    write_net(proto, tmp_path / "predict_net")
    inputs = []
    for name, value in zip(feature_blobs, batch[:5]):
        np.save(tmp_path / f"{name.replace(':', '_')}.npy", value)
        inputs += ["--input", f"{name}={tmp_path / (name.replace(':', '_') + '.npy')}"]
    out = tmp_path / "preds.npy"
    proc = subprocess.run(
        [sys.executable, "-m", "framework", "predict", "--init", str(tmp_path / "init_net.pb"), "--net",
         str(tmp_path / "predict_net.pb"), *inputs, "--save", str(out)],
        capture_output=True, text=True, cwd=ROOT, env=dict(os.environ, OPENBLAS_NUM_THREADS="1"), timeout=300,
    )  # fmt: skip
    assert proc.returncode == 0, " ".join(proc.args) + proc.stdout + proc.stderr
    np.testing.assert_allclose(np.load(out), expected, rtol=1e-4, atol=1e-5)


def test_inference_pass_leaves_a_concat_of_non_conv_outputs():
    """The Concat-chain rewrite once indexed a second input of every producer (Relu has one)."""
    from framework.net.optimize import optimize_inference
    from framework.proto.framework_pb2 import NetDef

    net = NetDef()
    for spec in (
        'type: "Relu" input: "a" output: "ra"',
        'type: "Relu" input: "b" output: "rb"',
        'type: "Concat" input: "ra" input: "rb" output: "y" output: "y_dims" arg { name: "axis" i: 1 }',
    ):
        from google.protobuf import text_format

        text_format.Parse(spec, net.op.add())
    net.external_input.extend(["a", "b"])
    net.external_output.append("y")
    ws = workspace.C()
    a, b = np.array([[-1.0, 2.0]], np.float32), np.array([[3.0, -4.0]], np.float32)
    ws.feed_blob("a", a)
    ws.feed_blob("b", b)
    ws.run_net_once(optimize_inference(net, ws, outputs=["y"]))
    np.testing.assert_array_equal(ws.fetch_blob("y"), np.maximum(np.concatenate([a, b], 1), 0))
