"""``caffe2.python.helpers.array_helpers``: concat, depth_concat.

The brew helpers themselves (framework.caffe2.python.brew), under the module Caffe2 defines them in; as ``brew.X`` they
apply the model's and the enclosing ``arg_scope``'s arguments.
"""

from framework.caffe2.python.brew import concat, depth_concat

__all__ = ["concat", "depth_concat"]
