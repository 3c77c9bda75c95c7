"""Write models/image_cnn/plan.pbtxt: a training plan fed by a background ImageInput pipeline.

The plan (a PlanDef, as Caffe2 training jobs were written):

1. ``init``: readers over ``data/images/{train,test}.minidb`` (``framework
   make-db images``), the parameters, the learning-rate state and a
   BlobsQueue of ``QUEUE_CAPACITY`` batches;
2. ``train`` (concurrent substeps):
   - ``prefetch``: ImageInput (scale 32, random crop 28, mirror, mean/std,
     NCHW) then SafeEnqueueBlobs into the queue, repeated until its status
     says the queue is closed (``should_stop_blob``);
   - ``learn``: ``ITERS`` runs of the train net (DequeueBlobs, the CNN, its
     gradients, momentum SGD), then CloseBlobsQueue, which ends the prefetch step;
3. ``test``: ImageInput over the test DB (centre crop, one batch of
   ``TEST_BATCH``), the CNN's forward pass and Accuracy -> ``test_accuracy``.

CNN: Conv 3x3 3->16, Relu, MaxPool 2, Conv 3x3 16->32, Relu, MaxPool 2, FC 1568->4.

Run ``python models/image_cnn/generate.py`` after editing; ``tests/training/test_image_pipeline.py``
checks the file is current and trains with it.
"""

from __future__ import annotations

import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))

from google.protobuf import text_format  # noqa: E402

from framework.caffe2.python import brew, optimizer  # noqa: E402
from framework.caffe2.python.model_helper import ModelHelper  # noqa: E402
from framework.proto.framework_pb2 import ExecutionStep, PlanDef  # noqa: E402

BATCH, ITERS, QUEUE_CAPACITY, TEST_BATCH, CLASSES = 32, 400, 4, 120, 4
MEAN, STD = [110.0, 110.0, 110.0], [70.0, 70.0, 70.0]
TRAIN_DB, TEST_DB = "data/images/train.minidb", "data/images/test.minidb"


def _image_input(net, reader, data, label, batch, is_test):
    net.ImageInput(
        [reader],
        [data, label],
        batch_size=batch,
        scale=32,
        crop=28,
        mirror=0 if is_test else 1,
        is_test=int(is_test),
        mean_per_channel=MEAN,
        std_per_channel=STD,
        order="NCHW",
        decode_threads=2,
    )


def _cnn(m, data):
    h = brew.conv(m, data, "conv1", dim_in=3, dim_out=16, kernel=3, pad=1)
    h = brew.relu(m, h, h)
    h = brew.max_pool(m, h, "pool1", kernel=2, stride=2)
    h = brew.conv(m, h, "conv2", dim_in=16, dim_out=32, kernel=3, pad=1)
    h = brew.relu(m, h, h)
    h = brew.max_pool(m, h, "pool2", kernel=2, stride=2)
    return brew.fc(m, h, "pred", dim_in=32 * 7 * 7, dim_out=CLASSES)


def build_plan(iters: int = ITERS) -> PlanDef:
    train = ModelHelper("image_cnn_train")
    init = train.param_init_net
    init.CreateDB([], ["train_reader"], db=TRAIN_DB, db_type="minidb")
    init.CreateDB([], ["test_reader"], db=TEST_DB, db_type="minidb")
    init.CreateBlobsQueue([], ["batch_queue"], capacity=QUEUE_CAPACITY, num_blobs=2)
    train.net.DequeueBlobs(["batch_queue"], ["data", "label"])
    logits = _cnn(train, "data")
    train.net.SoftmaxWithLoss([logits, "label"], ["softmax", "loss"])
    train.net.Accuracy(["softmax", "label"], ["train_accuracy"])
    train.AddGradientOperators(["loss"])
    optimizer.reset_optimizer_instance_count()  # blob names must not depend on what was built before
    optimizer.build_sgd(train, 0.05, policy="step", stepsize=150, gamma=0.5, momentum=0.9, weight_decay=1e-4)
    init.set_rand_seed(1)

    prefetch = ModelHelper("image_cnn_prefetch")
    _image_input(prefetch.net, "train_reader", "data_pre", "label_pre", BATCH, is_test=False)
    prefetch.net.SafeEnqueueBlobs(["batch_queue", "data_pre", "label_pre"], ["data_pre", "label_pre", "queue_closed"])
    close = ModelHelper("image_cnn_close")
    close.net.CloseBlobsQueue(["batch_queue"], [])

    test = ModelHelper("image_cnn_test", init_params=False)
    _image_input(test.net, "test_reader", "test_data", "test_label", TEST_BATCH, is_test=True)
    test_logits = _cnn(test, "test_data")
    test.net.Softmax([test_logits], ["test_softmax"])
    test.net.Accuracy(["test_softmax", "test_label"], ["test_accuracy"])

    nets = [init.Proto(), prefetch.net.Proto(), train.net.Proto(), close.net.Proto(), test.net.Proto()]
    names = ["init", "prefetch", "train", "close", "test"]
    for n, name in zip(nets, names):
        n.name = name
        for op in n.op:
            op.ClearField("debug_info")  # where each op was created: not part of the model
            if op.type == "ImageInput":
                op.device_option.random_seed = 7  # reproducible crops and mirrors
    nets[4].external_output.append("test_accuracy")
    plan = PlanDef(name="image_cnn", network=nets)
    plan.execution_step.add(name="init", network=["init"])
    plan.execution_step.add(
        name="train",
        concurrent_substeps=True,
        substep=[
            ExecutionStep(name="prefetch", network=["prefetch"], should_stop_blob="queue_closed"),
            ExecutionStep(
                name="learn",
                substep=[
                    ExecutionStep(name="iterate", network=["train"], num_iter=iters),
                    ExecutionStep(name="close", network=["close"]),
                ],
            ),
        ],
    )
    plan.execution_step.add(name="test", network=["test"])
    return plan


def render() -> str:
    header = "# Generated by models/image_cnn/generate.py; edit the generator, not this file.\n"
    return header + text_format.MessageToString(build_plan())


if __name__ == "__main__":
    with open(os.path.join(HERE, "plan.pbtxt"), "w") as f:
        f.write(render())
    print(f"wrote {os.path.join(HERE, 'plan.pbtxt')}")
