"""ResNet-18 in plain ``torch.nn`` (torchvision's architecture: 7x7/2 conv, BN, Relu, 3x3/2 max pool,
four stages of two basic blocks with 64/128/256/512 channels, 1x1/2 projection shortcuts, global
average pool, FC 1000), random weights, exported to ONNX: the model ``framework.onnx.backend.prepare``
is timed on when torchvision is not installed (11.7 M parameters, as torchvision's ``resnet18``)."""

from __future__ import annotations

from typing import Any


def resnet18(seed: int = 0) -> Any:
    """An eval-mode ``torch.nn.Module`` with torchvision ResNet-18's layers and parameter count."""
    import torch
    from torch import nn

    class Basic(nn.Module):
        def __init__(self, cin: int, cout: int, stride: int) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout)
            self.down = None
            if stride != 1 or cin != cout:
                self.down = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

        def forward(self, x: Any) -> Any:
            y = torch.relu(self.bn1(self.conv1(x)))
            y = self.bn2(self.conv2(y))
            return torch.relu(y + (x if self.down is None else self.down(x)))

    torch.manual_seed(seed)
    layers: list = [nn.Conv2d(3, 64, 7, 2, 3, bias=False), nn.BatchNorm2d(64), nn.ReLU(), nn.MaxPool2d(3, 2, 1)]
    cin = 64
    for cout, stride in ((64, 1), (128, 2), (256, 2), (512, 2)):
        layers += [Basic(cin, cout, stride), Basic(cout, cout, 1)]
        cin = cout
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 1000)]
    model = nn.Sequential(*layers)
    for m in model.modules():  # non-trivial BN statistics, so folding them is exercised
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.1, 0.1)
            m.running_var.uniform_(0.5, 1.5)
            m.weight.data.uniform_(0.5, 1.5)
            m.bias.data.uniform_(-0.1, 0.1)
    return model.eval()


def export_resnet18(path: str, seed: int = 0, opset: int = 17) -> str:
    """Write ResNet-18 (input ``data`` 1x3x224x224, output ``logits``) as an ONNX file at ``path``."""
    import torch

    model = resnet18(seed)
    x = torch.zeros(1, 3, 224, 224)
    with torch.no_grad():
        torch.onnx.export(
            model, (x,), path, input_names=["data"], output_names=["logits"], opset_version=opset, dynamo=False
        )
    return path
