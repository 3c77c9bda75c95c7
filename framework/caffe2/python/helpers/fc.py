"""``caffe2.python.helpers.fc``: fc
(Caffe2's packed_fc, fc_decomp, fc_prune and fc_sparse need the PackedFC, FC_Decomp, FC_Prune and FC_Sparse
ops, which this framework does not have).

The brew helpers themselves (framework.caffe2.python.brew), under the module Caffe2 defines them in; as ``brew.X`` they
apply the model's and the enclosing ``arg_scope``'s arguments.
"""

from framework.caffe2.python.brew import fc

__all__ = ["fc"]
