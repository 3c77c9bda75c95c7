"""``caffe2.python.helpers.elementwise_linear``: elementwise_linear.

The brew helpers themselves (framework.caffe2.python.brew), under the module Caffe2 defines them in; as ``brew.X`` they
apply the model's and the enclosing ``arg_scope``'s arguments.
"""

from framework.caffe2.python.brew import elementwise_linear

__all__ = ["elementwise_linear"]
