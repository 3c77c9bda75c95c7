import numpy as np

from framework import core, workspace

net = core.Net("mlp")
h = net.FC(["x", "w1", "b1"], "h")
h = net.Relu(h, "h")
y = net.Softmax(net.FC([h, "w2", "b2"], "logits"), "y")

workspace.FeedBlob("x", np.random.rand(2, 4).astype(np.float32))
for name, shape in {"w1": (8, 4), "b1": (8,), "w2": (3, 8), "b2": (3,)}.items():
    workspace.FeedBlob(name, np.random.rand(*shape).astype(np.float32))
workspace.CreateNet(net)
workspace.RunNet(net)
print(workspace.FetchBlob("y"))
