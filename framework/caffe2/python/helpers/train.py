"""``caffe2.python.helpers.train``: iter, accuracy, add_weight_decay.

The brew helpers themselves (framework.caffe2.python.brew), under the module Caffe2 defines them in; as ``brew.X`` they
apply the model's and the enclosing ``arg_scope``'s arguments.
"""

from framework.caffe2.python.brew import accuracy, add_weight_decay, iter

__all__ = ["accuracy", "add_weight_decay", "iter"]
