"""``ComputeStatisticsForBlobs``: add min, max, mean and standard deviation of some blobs to a net
(Caffe2's ``caffe2.python.modeling.compute_statistics_for_blobs``).

For each blob ``b``: ``Cast`` to float, ``Summarize`` (``[min, max, mean, std]``) into
``b_summary``, printed every ``logging_frequency`` runs, published as field ``<b>_summary``.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from framework.caffe2.python.modeling.net_modifier import NetModifier, publish, require_defined
from framework.proto.framework_pb2 import TensorProto

__all__ = ["ComputeStatisticsForBlobs"]


class ComputeStatisticsForBlobs(NetModifier):
    def __init__(self, blobs: Sequence[Any], logging_frequency: int) -> None:
        self._blobs = list(blobs)
        self._logging_frequency = logging_frequency
        self._field_name_suffix = "_summary"

    def modify_net(
        self,
        net: Any,
        init_net: Any = None,
        grad_map: Any = None,
        blob_to_device: Any = None,
        modify_output_record: bool = True,
    ) -> None:
        from framework import core
        from framework.caffe2.python import schema

        for name in self._blobs:
            blob = core.BlobReference(str(name))
            require_defined(net, blob)
            as_float = net.Cast(blob, to=TensorProto.FLOAT)
            stats = net.Summarize(as_float, net.NextScopedBlob(prefix=str(blob) + self._field_name_suffix), to_file=0)
            # Caffe2 prints unconditionally here (every_n must be >= 1 for Print).
            net.Print(stats, [], every_n=max(1, int(self._logging_frequency)))
            if modify_output_record:
                publish(net, str(blob) + self._field_name_suffix, schema.Scalar((np.float32, (1,)), stats))

    def field_name_suffix(self) -> str:
        return self._field_name_suffix
