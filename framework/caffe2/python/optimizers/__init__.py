"""The optimizer classes behind ``framework.caffe2.python.optimizer`` (Caffe2's ``caffe2.python.optimizer``), by family:
``base`` (bookkeeping, learning rate, counters), ``sgd`` (plain, momentum, multi-precision, fp16),
``adagrad`` (Adagrad, row-wise, decayed, WnGrad, Adadelta, FTRL), ``moments`` (Adam, RmsProp, YellowFin).
Import them from ``framework.caffe2.python.optimizer``."""
