"""``caffe2.python.predictor.mobile_exporter`` is ``framework.predictor.mobile_exporter`` (the same module
object): the init/predict pair writer is engine code the CLI's export uses too."""

import sys

import framework.predictor.mobile_exporter as _module

sys.modules[__name__] = _module
