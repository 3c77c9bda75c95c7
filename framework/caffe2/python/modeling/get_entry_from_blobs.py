"""``GetEntryFromBlobs``: add one entry (or one row) of some 2-D blobs to a net (Caffe2 2020's
``caffe2.python.modeling.get_entry_from_blobs``).

For each blob ``b``: ``b[i1, i2]`` (``Slice`` of row ``i1``, then of column ``i2``) as blob
``b_{i1}_{i2}``, or with ``i2 = -1`` the whole row ``i1`` (``Copy``) as ``b_{i1}_all``.
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from framework.caffe2.python.modeling.net_modifier import NetModifier, publish, require_defined
from framework.errors import FrameworkError

__all__ = ["GetEntryFromBlobs"]


class GetEntryFromBlobs(NetModifier):
    def __init__(self, blobs: Sequence[Any], logging_frequency: int, i1: int = 0, i2: int = 0) -> None:
        self._blobs = list(blobs)
        self._logging_frequency = logging_frequency
        self._i1, self._i2 = i1, i2
        self._field_name_suffix = f"_{i1}_{i2}" if i2 >= 0 else f"_{i1}_all"

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

        i1, i2 = self._i1, self._i2
        if i1 < 0:
            raise FrameworkError(f"GetEntryFromBlobs: row index {i1} is out of range")
        for name in self._blobs:
            blob = core.BlobReference(str(name))
            require_defined(net, blob)
            row = net.Slice([blob], starts=[i1, 0], ends=[i1 + 1, -1])
            out_name = net.NextScopedBlob(prefix=str(blob) + self._field_name_suffix)
            if i2 == -1:
                entry = net.Copy([row], [out_name])
            else:
                entry = net.Slice([row], out_name, starts=[0, i2], ends=[-1, i2 + 1])
            if self._logging_frequency >= 1:
                net.Print(entry, [], every_n=self._logging_frequency)
            if modify_output_record:
                publish(net, str(blob) + self._field_name_suffix, schema.Scalar(np.float32, entry))

    def field_name_suffix(self) -> str:
        return self._field_name_suffix
