"""``caffe2.python.helpers.conv``: conv, conv_nd, conv_transpose, group_conv, group_conv_deprecated.

The brew helpers themselves (framework.caffe2.python.brew), under the module Caffe2 defines them in; as ``brew.X`` they
apply the model's and the enclosing ``arg_scope``'s arguments.
"""

from framework.caffe2.python.brew import conv, conv_nd, conv_transpose, group_conv, group_conv_deprecated

__all__ = ["conv", "conv_nd", "conv_transpose", "group_conv", "group_conv_deprecated"]
