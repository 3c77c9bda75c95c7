"""``caffe2.python.memonger``: Caffe2's memory-optimization API over the planner in
``framework.net.memory_planner`` (which the inference pass uses)."""

from framework.net.memory_planner import (
    MemongerReport,
    estimate_activation_bytes,
    optimize_inference_net,
    optimize_interference,
)

__all__ = ["MemongerReport", "estimate_activation_bytes", "optimize_inference_net", "optimize_interference"]
