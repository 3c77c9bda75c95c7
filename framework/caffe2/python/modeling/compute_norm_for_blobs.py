"""``ComputeNormForBlobs``: add the Lp norm of some blobs to a net (Caffe2's
``caffe2.python.modeling.compute_norm_for_blobs``).

For each blob ``b``: ``LpNorm(b) -> b_l{p}_norm`` (``b_averaged_l{p}_norm`` with
``compute_averaged_norm``, the norm divided by the element count), printed every
``logging_frequency`` runs when that is >= 1, and published in the net's output record
as field ``<b><suffix>``. ``row_index`` (Caffe2 2020) takes the norm of that row only
(``Slice`` of the first dimension).
"""

from __future__ import annotations

from typing import Any, Sequence

import numpy as np

from framework.caffe2.python.modeling.net_modifier import NetModifier, publish, require_defined
from framework.errors import FrameworkError

__all__ = ["ComputeNormForBlobs"]


class ComputeNormForBlobs(NetModifier):
    """Norms of ``blobs`` (p = 1 or 2) computed by the net on every run."""

    def __init__(
        self,
        blobs: Sequence[Any],
        logging_frequency: int,
        p: int = 2,
        compute_averaged_norm: bool = False,
        row_index: int | None = None,
    ) -> None:
        if p not in (1, 2):
            raise FrameworkError(f"ComputeNormForBlobs: p must be 1 or 2, got {p}")
        if row_index is not None and row_index < 0:
            raise FrameworkError(f"ComputeNormForBlobs: {row_index} is not a valid row index (must be >= 0)")
        self._blobs = list(blobs)
        self._logging_frequency = logging_frequency
        self._p = p
        self._compute_averaged_norm = compute_averaged_norm
        self.row_index = row_index
        self._field_name_suffix = ("_averaged" if compute_averaged_norm else "") + f"_l{p}_norm"

    def modify_net(
        self,
        net: Any,
        init_net: Any = None,
        grad_map: Any = None,
        blob_to_device: Any = None,
        modify_output_record: bool = True,
    ) -> None:
        from framework import core

        for name in self._blobs:
            blob = core.BlobReference(str(name))
            require_defined(net, blob)
            source = blob
            if self.row_index is not None:
                row = self.row_index
                source = net.Slice(
                    [blob], net.NextScopedBlob(prefix=f"{blob}_row_{row}"), starts=[row, 0], ends=[row + 1, -1]
                )
            norm = net.LpNorm(
                source,
                net.NextScopedBlob(prefix=str(source) + self._field_name_suffix),
                p=self._p,
                average=self._compute_averaged_norm,
            )
            if self._logging_frequency >= 1:
                net.Print(norm, [], every_n=self._logging_frequency)
            if modify_output_record:
                from framework.caffe2.python import schema

                publish(net, str(source) + self._field_name_suffix, schema.Scalar((np.float32, (1,)), norm))

    def field_name_suffix(self) -> str:
        return self._field_name_suffix
