"""``caffe2.python.helpers.normalization``: lrn, softmax,
instance_norm, spatial_bn, spatial_gn, layer_norm, moments_with_running_stats.

The brew helpers themselves (framework.caffe2.python.brew), under the module Caffe2 defines them in; as ``brew.X`` they
apply the model's and the enclosing ``arg_scope``'s arguments.
"""

from framework.caffe2.python.brew import (
    instance_norm,
    layer_norm,
    lrn,
    moments_with_running_stats,
    softmax,
    spatial_bn,
    spatial_gn,
)

__all__ = ["instance_norm", "layer_norm", "lrn", "moments_with_running_stats", "softmax", "spatial_bn", "spatial_gn"]
