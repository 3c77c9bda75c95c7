"""``caffe2.python.predictor.predictor_exporter``: save a predict net with its parameters to one
DB (a MetaNetDef under ``!!META_NET_DEF``, then the parameters) and load it back.

>>> # meta = PredictorExportMeta(predict_net=net, parameters=params, inputs=["data"], outputs=["softmax"])
>>> # save_to_db("minidb", "model.minidb", meta); predict_net = prepare_prediction_net("model.minidb", "minidb")
"""

from __future__ import annotations

import collections
from typing import Any

from framework import core, workspace
from framework.caffe2.python.predictor import predictor_py_utils as utils
from framework.caffe2.python.predictor import serde
from framework.caffe2.python.predictor_constants import predictor_constants
from framework.caffe2.python.scope import CurrentDeviceScope
from framework.errors import FrameworkError
from framework.proto import caffe2_pb2, metanet_pb2

_FIELDS = (
    "predict_net, parameters, inputs, outputs, shapes, name, extra_init_net, global_init_net, net_type, num_workers, "
    "trainer_prefix"
)


class PredictorExportMeta(collections.namedtuple("PredictorExportMeta", _FIELDS)):
    """What to export: the predict net (core.Net, NetDef or PlanDef), its parameters, inputs and
    outputs (names or BlobReferences), optional ``shapes`` of inputs/outputs, a ``name`` for
    several nets in one DB, an ``extra_init_net`` (appended to the predict-init net), a ``global_init_net``
    (appended to the global-init net, which loads the parameters), ``net_type``, ``num_workers`` and a
    ``trainer_prefix`` for the train plans' names (the fields of Caffe2 2020)."""

    def __new__(
        cls,
        predict_net: Any,
        parameters: Any,
        inputs: Any,
        outputs: Any,
        shapes: Any = None,
        name: str = "",
        extra_init_net: Any = None,
        global_init_net: Any = None,
        net_type: Any = None,
        num_workers: Any = None,
        trainer_prefix: Any = None,
    ) -> PredictorExportMeta:
        inputs = [str(i) for i in inputs]
        outputs = [str(o) for o in outputs]
        parameters = [str(p) for p in parameters]
        if len(set(inputs)) != len(inputs):
            raise FrameworkError(f"PredictorExportMeta: all inputs to the predictor should be unique: {inputs}")
        for what, names in (("inputs", inputs), ("outputs", outputs)):
            both = set(parameters) & set(names)
            if both:
                raise FrameworkError(f"PredictorExportMeta: parameters and {what} must be disjoint, both: {both}")
        if isinstance(predict_net, (core.Net, core.Plan)):
            predict_net = predict_net.Proto()
        if not isinstance(predict_net, (caffe2_pb2.NetDef, caffe2_pb2.PlanDef)):
            raise FrameworkError(
                f"PredictorExportMeta: predict_net must be a Net, NetDef or PlanDef, got {predict_net!r}"
            )
        return super().__new__(
            cls, predict_net, parameters, inputs, outputs, shapes or {}, name, extra_init_net, global_init_net,
            net_type, num_workers, trainer_prefix,
        )  # fmt: skip

    def inputs_name(self) -> str:
        return utils.get_comp_name(predictor_constants.INPUTS_BLOB_TYPE, self.name)

    def outputs_name(self) -> str:
        return utils.get_comp_name(predictor_constants.OUTPUTS_BLOB_TYPE, self.name)

    def parameters_name(self) -> str:
        return utils.get_comp_name(predictor_constants.PARAMETERS_BLOB_TYPE, self.name)

    def global_init_name(self) -> str:
        return utils.get_comp_name(predictor_constants.GLOBAL_INIT_NET_TYPE, self.name)

    def predict_init_name(self) -> str:
        return utils.get_comp_name(predictor_constants.PREDICT_INIT_NET_TYPE, self.name)

    def predict_net_name(self) -> str:
        return utils.get_comp_name(predictor_constants.PREDICT_NET_TYPE, self.name)

    def train_init_plan_name(self) -> str:
        name = utils.get_comp_name(predictor_constants.TRAIN_INIT_PLAN_TYPE, self.name)
        return f"{self.trainer_prefix}_{name}" if self.trainer_prefix else name

    def train_plan_name(self) -> str:
        name = utils.get_comp_name(predictor_constants.TRAIN_PLAN_TYPE, self.name)
        return f"{self.trainer_prefix}_{name}" if self.trainer_prefix else name


def get_predictor_exporter_helper(submodelNetName: str) -> PredictorExportMeta:
    return PredictorExportMeta(core.Net(submodelNetName), [], [], [], name=submodelNetName)


def _global_init_net(meta: PredictorExportMeta) -> Any:
    net = core.Net("global-init")
    net.Load([predictor_constants.PREDICTOR_DBREADER], meta.parameters)
    net.Proto().external_input.extend([predictor_constants.PREDICTOR_DBREADER])
    net.Proto().external_output.extend(meta.parameters)
    if meta.global_init_net:
        net.AppendNet(meta.global_init_net)
    utils.AddModelIdArg(meta, net.Proto())
    return net.Proto()


def get_meta_net_def(predictor_export_meta: PredictorExportMeta, ws: Any = None) -> Any:
    """The MetaNetDef of an export: predict-init, global-init and predict nets, blob lists."""
    ws = ws or workspace.C.Workspace.current
    meta = predictor_export_meta
    meta_net_def = metanet_pb2.MetaNetDef()
    utils.AddNet(meta_net_def, meta.predict_init_name(), utils.create_predict_init_net(ws, meta))
    utils.AddNet(meta_net_def, meta.global_init_name(), _global_init_net(meta))
    utils.AddNet(meta_net_def, meta.predict_net_name(), utils.create_predict_net(meta))
    utils.AddBlobs(meta_net_def, meta.parameters_name(), meta.parameters)
    utils.AddBlobs(meta_net_def, meta.inputs_name(), meta.inputs)
    utils.AddBlobs(meta_net_def, meta.outputs_name(), meta.outputs)
    return meta_net_def


def set_model_info(meta_net_def: Any, project_str: str, model_class_str: str, version: str) -> None:
    meta_net_def.modelInfo.project = project_str
    meta_net_def.modelInfo.modelClass = model_class_str
    meta_net_def.modelInfo.version = version


def save_to_db(db_type: str, db_destination: str, predictor_export_meta: PredictorExportMeta) -> None:
    """Write the MetaNetDef (first) and the parameters of the current workspace to one DB."""
    meta_net_def = get_meta_net_def(predictor_export_meta)
    workspace.FeedBlob(predictor_constants.META_NET_DEF, serde.serialize_protobuf_struct(meta_net_def))
    blobs_to_save = [predictor_constants.META_NET_DEF] + predictor_export_meta.parameters
    op = core.CreateOperator("Save", blobs_to_save, [], absolute_path=True, db=db_destination, db_type=db_type)
    workspace.RunOperatorOnce(op)


def load_from_db(filename: str, db_type: str, device_option: Any = None) -> Any:
    """The MetaNetDef of an export; leaves a DB reader ``!!PREDICTOR_DBREADER`` in the workspace."""
    create_db = core.CreateOperator(
        "CreateDB", [], [core.BlobReference(predictor_constants.PREDICTOR_DBREADER)], db=filename, db_type=db_type
    )
    workspace.RunOperatorOnce(create_db)
    load_meta = core.CreateOperator(
        "Load",
        [core.BlobReference(predictor_constants.PREDICTOR_DBREADER)],
        [core.BlobReference(predictor_constants.META_NET_DEF)],
    )
    workspace.RunOperatorOnce(load_meta)
    blob = workspace.FetchBlob(predictor_constants.META_NET_DEF)
    meta_net_def = serde.deserialize_protobuf_struct(
        blob if isinstance(blob, bytes) else str(blob).encode("utf-8"), metanet_pb2.MetaNetDef
    )
    if device_option is None:
        device_option = CurrentDeviceScope()
    if device_option is not None:
        for kv in meta_net_def.nets:
            for op in kv.value.op:
                op.device_option.CopyFrom(device_option)
    return meta_net_def


def prepare_prediction_net(filename: str, db_type: str, device_option: Any = None) -> Any:
    """Load an export into the current workspace (parameters, zero-filled inputs/outputs) and
    return its predict net, created in the workspace."""
    meta_net_def = load_from_db(filename, db_type, device_option)
    nets = {}
    for key in (
        predictor_constants.GLOBAL_INIT_NET_TYPE,
        predictor_constants.PREDICT_INIT_NET_TYPE,
        predictor_constants.PREDICT_NET_TYPE,
    ):
        nets[key] = utils.GetNet(meta_net_def, key)
        if nets[key] is None:
            raise FrameworkError(
                f"{filename}: the MetaNetDef has no net {key!r} (nets: {[n.key for n in meta_net_def.nets]})"
            )
    workspace.RunNetOnce(nets[predictor_constants.GLOBAL_INIT_NET_TYPE])
    workspace.RunNetOnce(nets[predictor_constants.PREDICT_INIT_NET_TYPE])
    predict_net = core.Net(nets[predictor_constants.PREDICT_NET_TYPE])
    workspace.CreateNet(predict_net)
    return predict_net
