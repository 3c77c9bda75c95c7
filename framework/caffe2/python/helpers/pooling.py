"""``caffe2.python.helpers.pooling``: max_pool, average_pool, max_pool_with_index.

The brew helpers themselves (framework.caffe2.python.brew), under the module Caffe2 defines them in; as ``brew.X`` they
apply the model's and the enclosing ``arg_scope``'s arguments.
"""

from framework.caffe2.python.brew import average_pool, max_pool, max_pool_with_index

__all__ = ["average_pool", "max_pool", "max_pool_with_index"]
