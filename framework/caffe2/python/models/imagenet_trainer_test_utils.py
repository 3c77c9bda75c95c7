"""``caffe2.python.models.imagenet_trainer_test_utils``: the memonger checks Caffe2 runs on its ImageNet
model builders (resnet50, shufflenet), on the CPU with a batch of 4 images of 3x227x227 under name scope
``gpu_0``.

- ``test_shared_grads(with_shapes, create_model, conv_blob, last_out_blob, data_blob='gpu_0/data',
  label_blob='gpu_0/label', num_labels=1000)``: builds the training net, shares gradient (and activation)
  blobs with ``memonger.share_grad_blobs`` (shapes from ``InferShapesAndTypes`` when ``with_shapes``; the
  gradient of ``conv_blob`` is never shared), runs the original and the shared net on the same data and
  returns ``[(blobs after, blobs before), (last output before, after), (conv_blob's gradient before,
  after)]``.
- ``test_forward_only(create_model, last_out_blob, data_blob='gpu_0/data', num_labels=1000)``: the same for
  an inference net through ``memonger.optimize_inference_for_dag``; returns ``[(blobs after, blobs
  before), number of "_shared" blobs, (last output before, after)]``.
- ``test_forward_only_fast_simplenet(...)``: as ``test_forward_only`` with ``memonger.optimize_inference_fast``
  (inputs, the last output and every external input kept).
- ``has_blob(proto, name)``, ``count_blobs(proto)``, ``count_shared_blobs(proto)``: blob counts of a NetDef.
"""

from __future__ import annotations

import time
from typing import Any, Callable

import numpy as np

from framework.caffe2.python import cnn, core, memonger, workspace

_SHAPE = (4, 3, 227, 227)


def _blobs(proto: Any) -> set[str]:
    return {b for op in proto.op for b in list(op.input) + list(op.output)}


def has_blob(proto: Any, needle: str) -> bool:
    return needle in _blobs(proto)


def count_blobs(proto: Any) -> int:
    return len(_blobs(proto))


def count_shared_blobs(proto: Any) -> int:
    return sum(1 for b in _blobs(proto) if "_shared" in b)


def _model(create_model: Callable, data_blob: str, num_labels: int, label_blob: str | None) -> tuple:
    model = cnn.CNNModelHelper(order="NCHW", name="test", cudnn_exhaustive_search=True)
    with core.NameScope("gpu_0"):
        data = model.net.AddExternalInput(data_blob)
        if label_blob is None:
            out = create_model(model, data, num_input_channels=3, num_labels=num_labels, is_test=True)
        else:
            label = model.net.AddExternalInput(label_blob)
            out = create_model(model, data, num_input_channels=3, num_labels=num_labels, label=label, is_test=False)
    return model, out


def test_shared_grads(
    with_shapes: bool,
    create_model: Callable,
    conv_blob: str,
    last_out_blob: str,
    data_blob: str = "gpu_0/data",
    label_blob: str = "gpu_0/label",
    num_labels: int = 1000,
) -> list:
    model, (_softmax, loss) = _model(create_model, data_blob, num_labels, label_blob)
    param_to_grad = model.AddGradientOperators([loss])
    shapes, _types = workspace.InferShapesAndTypes(
        [model.param_init_net, model.net], {data_blob: list(_SHAPE), label_blob: [_SHAPE[0]]}
    )
    count_before = count_blobs(model.net.Proto())
    optim_proto = memonger.share_grad_blobs(
        model.net,
        ["gpu_0/loss"],
        set(model.param_to_grad.values()),
        "gpu_0/",
        share_activations=True,
        dont_share_blobs={str(param_to_grad[conv_blob])},
        blob_shapes=shapes if with_shapes else None,
    )
    count_after = count_blobs(optim_proto)

    workspace.RunNetOnce(model.param_init_net)
    workspace.FeedBlob(data_blob, np.random.rand(*_SHAPE).astype(np.float32))
    workspace.FeedBlob(label_blob, (np.random.rand(_SHAPE[0]) * num_labels).astype(np.int32))
    workspace.RunNetOnce(model.net)
    model.net.Proto().type = "dag"
    model.net.Proto().num_workers = 4
    loss1 = workspace.FetchBlob(last_out_blob)
    grad1 = workspace.FetchBlob(param_to_grad[conv_blob])
    workspace.FeedBlob(param_to_grad[conv_blob], np.array([0.0]))  # the shared net must write it again

    workspace.RunNetOnce(optim_proto)
    return [
        (count_after, count_before),
        (loss1, workspace.FetchBlob(last_out_blob)),
        (grad1, workspace.FetchBlob(param_to_grad[conv_blob])),
    ]


def _run_inference(model: Any, optim_proto: Any, data_blob: str, last_out_blob: str, dag: bool) -> tuple:
    workspace.RunNetOnce(model.param_init_net)
    workspace.FeedBlob(data_blob, np.random.rand(*_SHAPE).astype(np.float32))
    if not dag:
        model.net.Proto().type = "simple"
    workspace.RunNetOnce(model.net)
    if dag:
        model.net.Proto().type = "dag"
        model.net.Proto().num_workers = 4
    before = workspace.FetchBlob(last_out_blob)
    workspace.RunNetOnce(optim_proto)
    return before, workspace.FetchBlob(last_out_blob)


def test_forward_only(
    create_model: Callable, last_out_blob: str, data_blob: str = "gpu_0/data", num_labels: int = 1000
) -> list:
    model, _ = _model(create_model, data_blob, num_labels, None)
    count_before = count_blobs(model.net.Proto())
    optim_proto = memonger.optimize_inference_for_dag(model.net, [data_blob], "gpu_0/")
    results = _run_inference(model, optim_proto, data_blob, last_out_blob, dag=True)
    return [(count_blobs(optim_proto), count_before), count_shared_blobs(optim_proto), results]


def test_forward_only_fast_simplenet(
    create_model: Callable, last_out_blob: str, data_blob: str = "gpu_0/data", num_labels: int = 1000
) -> list:
    model, _ = _model(create_model, data_blob, num_labels, None)
    count_before = count_blobs(model.net.Proto())
    start = time.time()
    keep = {data_blob, last_out_blob} | set(model.net.Proto().external_input)
    optim_proto = memonger.optimize_inference_fast(model.net.Proto(), keep)
    print(f"Optimization took {time.time() - start} secs")
    results = _run_inference(model, optim_proto, data_blob, last_out_blob, dag=False)
    return [(count_blobs(optim_proto), count_before), count_shared_blobs(optim_proto), results]
