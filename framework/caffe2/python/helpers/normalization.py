"""``caffe2.python.helpers.normalization``: lrn, softmax,
instance_norm, spatial_bn, spatial_gn, layer_norm, moments_with_running_stats.

The brew helpers themselves (framework.brew), under the module Caffe2 defines them in; as ``brew.X`` they
apply the model's and the enclosing ``arg_scope``'s arguments.
"""

from framework.brew import instance_norm, layer_norm, lrn, moments_with_running_stats, softmax, spatial_bn, spatial_gn  # noqa: F401

__all__ = ["instance_norm", "layer_norm", "lrn", "moments_with_running_stats", "softmax", "spatial_bn", "spatial_gn"]
