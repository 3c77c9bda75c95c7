"""``caffe2.python.memonger``: Caffe2's memory-optimization API: the planning functions of
``memonger_plan`` (live ranges, assignments, ``optimize_interference`` returning an ``Optimization``...)
the inference-net planner of ``framework.net.memory_planner`` that the inference pass uses, and Caffe2's
greedy ``optimize_inference_fast`` (``memonger_fast``)."""

from framework.caffe2.python.memonger_fast import optimize_inference_fast
from framework.caffe2.python.memonger_plan import *  # noqa: F403
from framework.caffe2.python.memonger_plan import __all__ as _plan_all
from framework.net.memory_planner import (
    MemongerReport,
    estimate_activation_bytes,
    optimize_inference_net,
)

__all__ = [
    *_plan_all,
    "MemongerReport",
    "estimate_activation_bytes",
    "optimize_inference_fast",
    "optimize_inference_net",
]
