"""``caffe2.python.models``: model builders (``resnet``: ResNet-50, ResNeXt and the CIFAR-style 32x32 ResNet)."""
