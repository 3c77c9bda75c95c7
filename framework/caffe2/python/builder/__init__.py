"""The Caffe2-style Python builders behind ``framework.core`` (import them from there).

- ``blob_reference``: ``BlobReference`` (a blob name that remembers its net),
  ``ScopedBlobReference``, ``UnknownOperatorAttributeError``;
- ``net_builder``: ``Net``, a NetDef under construction (``net.FC(...)`` sugar
  over the op registry, creation sites in ``debug_info``, gradients);
- ``clone``: NetDef copies behind ``Net.Clone`` / ``Net.ClonePartial``;
- ``steps``: ``ExecutionStep``, ``execution_step`` and ``Plan``.
"""

from framework.caffe2.python.builder.blob_reference import (
    BlobReference,
    ScopedBlobReference,
    UnknownOperatorAttributeError,
)
from framework.caffe2.python.builder.net_builder import Net
from framework.caffe2.python.builder.steps import ExecutionStep, Plan, execution_step
from framework.caffe2.python.scope import CurrentNameScope, ScopedName  # noqa: F401  (importable from here, as before)
from framework.ops.gradient import GradientSlice

__all__ = [
    "BlobReference",
    "ExecutionStep",
    "GradientSlice",
    "Net",
    "Plan",
    "ScopedBlobReference",
    "UnknownOperatorAttributeError",
    "execution_step",
]
