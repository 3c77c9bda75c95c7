"""``caffe2.python.predictor_constants``: ``predictor_constants.META_NET_DEF`` ... the keys a
predictor export uses (PredictorConsts defaults, plus the blob-list keys of the exporter)."""

from __future__ import annotations

from framework.proto.predictor_consts_pb2 import PredictorConsts


class _Constants:
    def __init__(self) -> None:
        consts = PredictorConsts()
        for field in consts.DESCRIPTOR.fields:
            setattr(self, field.name, getattr(consts, field.name))
        # the exporter's keys for the blob lists of a MetaNetDef
        self.PARAMETERS_BLOB_TYPE = self.PARAMETERS_BLOB_TYPE_FULL
        self.INPUTS_BLOB_TYPE = "INPUTS_BLOB_TYPE"
        self.OUTPUTS_BLOB_TYPE = "OUTPUTS_BLOB_TYPE"
        self.DEFERRED_BLOB_READER = "__DEFERRED_BLOB_READER__"


predictor_constants = _Constants()
