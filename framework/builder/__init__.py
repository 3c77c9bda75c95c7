"""The Caffe2-style Python builders behind ``framework.core`` (import them from there).

- ``blob_reference``: ``BlobReference`` (a blob name that remembers its net),
  ``ScopedBlobReference``, ``UnknownOperatorAttributeError``;
- ``net_builder``: ``Net``, a NetDef under construction (``net.FC(...)`` sugar
  over the op registry, creation sites in ``debug_info``, gradients);
- ``clone``: NetDef copies behind ``Net.Clone`` / ``Net.ClonePartial``;
- ``steps``: ``ExecutionStep``, ``execution_step`` and ``Plan``.
"""

from framework.builder.blob_reference import BlobReference, ScopedBlobReference, UnknownOperatorAttributeError
from framework.builder.net_builder import Net
from framework.builder.steps import ExecutionStep, Plan, execution_step
from framework.ops.gradient import GradientSlice
from framework.scope import CurrentNameScope, ScopedName  # noqa: F401  (importable from here, as before)

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
