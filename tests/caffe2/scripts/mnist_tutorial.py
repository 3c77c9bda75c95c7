# The Caffe2 MNIST tutorial (LeNet with brew), written the way its users wrote it, against
# caffe2.python only. tests/caffe2/test_caffe2_scripts_unchanged.py runs it unchanged through
# `python -m framework.caffe2 mnist_tutorial.py ROOT_FOLDER`. MNIST itself is replaced by a
# synthetic set of 28x28 digit-like bar images written to a minidb with C.create_db, so the
# run is offline; everything else follows the tutorial (TensorProtosDBInput, brew LeNet,
# hand-written SGD with WeightedSum, bookkeeping, net_drawer, visualize, test model,
# predictor_exporter save/load).
from __future__ import absolute_import, division, print_function, unicode_literals

import os
import sys

import matplotlib

matplotlib.use("Agg")
import numpy as np
from caffe2.proto import caffe2_pb2
from caffe2.python import brew, core, model_helper, net_drawer, utils, visualize, workspace
from caffe2.python.predictor import predictor_exporter as pe
from matplotlib import pyplot

core.GlobalInit(["caffe2", "--caffe2_log_level=0"])
root_folder = sys.argv[1]
workspace.ResetWorkspace(root_folder)


def make_db(path, n, seed):
    rng = np.random.RandomState(seed)
    db = workspace.C.create_db("minidb", path, workspace.C.Mode.new)
    txn = db.new_transaction()
    for i in range(n):
        label = i % 3
        img = (rng.rand(1, 28, 28) * 40).astype(np.uint8)
        if label == 0:
            img[0, 6:22, 12:16] = 250  # vertical bar
        elif label == 1:
            img[0, 12:16, 6:22] = 250  # horizontal bar
        else:
            img[0, 6:22, 6:22][np.eye(16, dtype=bool)] = 250  # diagonal
        protos = caffe2_pb2.TensorProtos()
        label_tensor = utils.NumpyArrayToCaffe2Tensor(np.array(label, np.int32))
        protos.protos.extend([utils.NumpyArrayToCaffe2Tensor(img), label_tensor])
        txn.put("%05d" % i, protos.SerializeToString())
    txn.commit()
    db.close()


train_db = os.path.join(root_folder, "mnist-train-nchw-minidb")
test_db = os.path.join(root_folder, "mnist-test-nchw-minidb")
make_db(train_db, 192, 0)
make_db(test_db, 96, 1)


def AddInput(model, batch_size, db, db_type):
    data_uint8, label = model.TensorProtosDBInput(
        [], ["data_uint8", "label"], batch_size=batch_size, db=db, db_type=db_type
    )
    data = model.Cast(data_uint8, "data", to=core.DataType.FLOAT)
    data = model.Scale(data, data, scale=float(1.0 / 256))
    data = model.StopGradient(data, data)
    return data, label


def AddLeNetModel(model, data):
    conv1 = brew.conv(model, data, "conv1", dim_in=1, dim_out=20, kernel=5)
    pool1 = brew.max_pool(model, conv1, "pool1", kernel=2, stride=2)
    conv2 = brew.conv(model, pool1, "conv2", dim_in=20, dim_out=50, kernel=5)
    pool2 = brew.max_pool(model, conv2, "pool2", kernel=2, stride=2)
    fc3 = brew.fc(model, pool2, "fc3", dim_in=50 * 4 * 4, dim_out=500)
    relu = brew.relu(model, fc3, fc3)
    pred = brew.fc(model, relu, "pred", 500, 10)
    softmax = brew.softmax(model, pred, "softmax")
    return softmax


def AddAccuracy(model, softmax, label):
    accuracy = brew.accuracy(model, [softmax, label], "accuracy")
    return accuracy


def AddTrainingOperators(model, softmax, label):
    xent = model.LabelCrossEntropy([softmax, label], "xent")
    loss = model.AveragedLoss(xent, "loss")
    AddAccuracy(model, softmax, label)
    model.AddGradientOperators([loss])
    ITER = brew.iter(model, "iter")
    LR = model.LearningRate(ITER, "LR", base_lr=-0.1, policy="step", stepsize=1, gamma=0.999)
    ONE = model.param_init_net.ConstantFill([], "ONE", shape=[1], value=1.0)
    for param in model.params:
        param_grad = model.param_to_grad[param]
        model.WeightedSum([param, ONE, param_grad, LR], param)


def AddBookkeepingOperators(model):
    model.Print("accuracy", [], to_file=1)
    model.Print("loss", [], to_file=1)
    for param in model.params:
        model.Summarize(param, [], to_file=1)
        model.Summarize(model.param_to_grad[param], [], to_file=1)


arg_scope = {"order": "NCHW"}
train_model = model_helper.ModelHelper(name="mnist_train", arg_scope=arg_scope)
data, label = AddInput(train_model, batch_size=32, db=train_db, db_type="minidb")
softmax = AddLeNetModel(train_model, data)
AddTrainingOperators(train_model, softmax, label)
AddBookkeepingOperators(train_model)

test_model = model_helper.ModelHelper(name="mnist_test", arg_scope=arg_scope, init_params=False)
data, label = AddInput(test_model, batch_size=48, db=test_db, db_type="minidb")
softmax = AddLeNetModel(test_model, data)
AddAccuracy(test_model, softmax, label)

deploy_model = model_helper.ModelHelper(name="mnist_deploy", arg_scope=arg_scope, init_params=False)
AddLeNetModel(deploy_model, "data")

graph = net_drawer.GetPydotGraph(train_model.net.Proto().op, "mnist", rankdir="LR")
assert "LabelCrossEntropy" in graph.to_string()
graph = net_drawer.GetPydotGraphMinimal(train_model.net.Proto().op, "mnist", rankdir="LR", minimal_dependency=True)
with open(os.path.join(root_folder, "train_net.pbtxt"), "w") as fid:
    fid.write(str(train_model.net.Proto()))

workspace.RunNetOnce(train_model.param_init_net)
workspace.CreateNet(train_model.net, overwrite=True)
total_iters = 40
accuracy = np.zeros(total_iters)
loss = np.zeros(total_iters)
for i in range(total_iters):
    workspace.RunNet(train_model.net)
    accuracy[i] = workspace.blobs["accuracy"]
    loss[i] = workspace.blobs["loss"]

pyplot.plot(loss, "b")
pyplot.plot(accuracy, "r")
pyplot.legend(("Loss", "Accuracy"), loc="upper right")
pyplot.savefig(os.path.join(root_folder, "curves.png"))

pyplot.figure()
data = workspace.FetchBlob("data")
_ = visualize.NCHW.ShowMultiple(data)
pyplot.savefig(os.path.join(root_folder, "data.png"))
pyplot.figure()
softmax = workspace.FetchBlob("softmax")
_ = pyplot.plot(softmax[0], "ro")
pyplot.title("Prediction for the first image")
conv = workspace.FetchBlob("conv1")
shape = list(conv.shape)
shape[1] = 1
conv = conv[:, 15, :, :].reshape(shape)
_ = visualize.NCHW.ShowMultiple(conv)
pyplot.savefig(os.path.join(root_folder, "conv1.png"))

workspace.RunNetOnce(test_model.param_init_net)
workspace.CreateNet(test_model.net, overwrite=True)
test_accuracy = np.zeros(2)
for i in range(2):
    workspace.RunNet(test_model.net.Proto().name)
    test_accuracy[i] = workspace.FetchBlob("accuracy")
print("train loss %.4f -> %.4f" % (loss[:5].mean(), loss[-5:].mean()))
print("test_accuracy: %f" % test_accuracy.mean())

# deploy: save the parameters with the predict net, load them into a fresh workspace
pe_meta = pe.PredictorExportMeta(
    predict_net=deploy_model.net.Proto(),
    parameters=[str(b) for b in deploy_model.params],
    inputs=["data"],
    outputs=["softmax"],
)
pe.save_to_db("minidb", os.path.join(root_folder, "mnist_model.minidb"), pe_meta)
print("The deploy model is saved to: " + root_folder + "/mnist_model.minidb")

blob = workspace.FetchBlob("data")
expected = workspace.FetchBlob("softmax")
workspace.ResetWorkspace(root_folder)
print("The blobs in the workspace after reset: {}".format(workspace.Blobs()))
predict_net = pe.prepare_prediction_net(os.path.join(root_folder, "mnist_model.minidb"), "minidb")
print("The blobs in the workspace after loading the model: {}".format(workspace.Blobs()))
workspace.FeedBlob("data", blob)
workspace.RunNetOnce(predict_net)
softmax = workspace.FetchBlob("softmax")
print("Shape of softmax: ", softmax.shape)
curr_pred, curr_conf = max(enumerate(softmax[0]), key=lambda x: x[1])
print("Prediction: ", curr_pred)
print("max abs difference to the test net: %g" % np.abs(softmax - expected).max())
print("DONE")
