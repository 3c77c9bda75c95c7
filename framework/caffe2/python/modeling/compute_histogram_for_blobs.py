"""``ComputeHistogramForBlobs``: add a normalized histogram of some blobs to a net (Caffe2's
``caffe2.python.modeling.compute_histogram_for_blobs``).

For each blob ``b``: ``Cast`` to float, ``AccumulateHistogram`` over ``num_buckets`` equal buckets
of ``[lower_bound, upper_bound)`` plus one underflow and one overflow bucket, then the current
(or, with ``accumulate``, the running) counts ``Cast`` to float and ``NormalizeL1``-ed: field
``<b>_curr_normalized_hist`` (``<b>_acc_normalized_hist``) of ``num_buckets + 2`` floats.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from framework.caffe2.python.modeling.net_modifier import NetModifier, publish, require_defined
from framework.errors import FrameworkError
from framework.proto.framework_pb2 import TensorProto

__all__ = ["ComputeHistogramForBlobs"]


class ComputeHistogramForBlobs(NetModifier):
    def __init__(
        self,
        blobs: Sequence[Any],
        logging_frequency: int,
        num_buckets: int = 30,
        lower_bound: float = 0.0,
        upper_bound: float = 1.0,
        accumulate: bool = False,
    ) -> None:
        self._num_buckets = int(num_buckets)
        if self._num_buckets <= 0:
            raise FrameworkError(f"ComputeHistogramForBlobs: num_buckets must be > 0, got {num_buckets}")
        self._blobs = list(blobs)
        self._logging_frequency = logging_frequency
        self._accumulate = accumulate
        self._field_name_suffix = "_acc_normalized_hist" if accumulate else "_curr_normalized_hist"
        self._lower_bound = float(lower_bound)
        self._upper_bound = float(upper_bound)

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
            as_float = net.Cast(blob, net.NextScopedBlob(prefix=f"{blob}_float"), to=TensorProto.FLOAT)
            curr, acc = net.AccumulateHistogram(
                [as_float],
                [net.NextScopedBlob(prefix=f"{blob}_curr_hist"), net.NextScopedBlob(prefix=f"{blob}_acc_hist")],
                num_buckets=self._num_buckets,
                lower_bound=self._lower_bound,
                upper_bound=self._upper_bound,
            )
            counts = acc if self._accumulate else curr
            hist = net.Cast(counts, net.NextScopedBlob(prefix=f"{blob}_cast_hist"), to=TensorProto.FLOAT)
            normalized = net.NormalizeL1(hist, net.NextScopedBlob(prefix=str(blob) + self._field_name_suffix))
            if self._logging_frequency >= 1:
                net.Print(normalized, [], every_n=self._logging_frequency)
            if modify_output_record:
                scalar = schema.Scalar((np.float32, (self._num_buckets + 2,)), normalized)
                publish(net, str(blob) + self._field_name_suffix, scalar)

    def field_name_suffix(self) -> str:
        return self._field_name_suffix
