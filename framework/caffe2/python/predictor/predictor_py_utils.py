"""``caffe2.python.predictor.predictor_py_utils``: the nets and blob lists of a MetaNetDef."""

from __future__ import annotations

from typing import Any

from framework import core
from framework.errors import FrameworkError


def create_predict_net(predictor_export_meta: Any) -> Any:
    """The predict net: the given ops, inputs + parameters as external inputs, the outputs."""
    net = core.Net(predictor_export_meta.predict_net.name or "predict")
    net.Proto().op.extend(predictor_export_meta.predict_net.op)
    net.Proto().external_input.extend(predictor_export_meta.inputs + predictor_export_meta.parameters)
    net.Proto().external_output.extend(predictor_export_meta.outputs)
    if predictor_export_meta.net_type is not None:
        net.Proto().type = predictor_export_meta.net_type
    if predictor_export_meta.num_workers is not None:
        net.Proto().num_workers = predictor_export_meta.num_workers
    return net.Proto()


def create_predict_init_net(ws: Any, predictor_export_meta: Any) -> Any:
    """A net zero-filling every input and output blob, shaped from ``shapes`` or the workspace."""
    net = core.Net("predict-init")

    def zero_fill(blob: str) -> None:
        shape = predictor_export_meta.shapes.get(blob)
        if shape is None:
            if not ws.has_blob(blob):
                raise FrameworkError(
                    f"predictor export: {blob!r} is not in the workspace, but its shape is needed "
                    "(give it in PredictorExportMeta(shapes={...}) or feed it first)"
                )
            shape = ws.fetch_blob(blob).shape
        net.ConstantFill([], blob, shape=list(shape), value=0.0)

    external_blobs = predictor_export_meta.inputs + predictor_export_meta.outputs
    for blob in external_blobs:
        zero_fill(blob)
    net.Proto().external_input.extend(external_blobs)
    if predictor_export_meta.extra_init_net:
        net.AppendNet(predictor_export_meta.extra_init_net)
    return net.Proto()


def get_comp_name(string: str, name: str) -> str:
    return f"{string}_{name}" if name else string


def _ProtoMapGet(field: Any, key: str) -> Any:
    for v in field:
        if v.key == key:
            return v.value
    return None


def GetPlan(meta_net_def: Any, key: str) -> Any:
    return _ProtoMapGet(meta_net_def.plans, key)


GetPlanOriginal = GetPlan


def GetBlobs(meta_net_def: Any, key: str) -> Any:
    blobs = _ProtoMapGet(meta_net_def.blobs, key)
    return [] if blobs is None else blobs


def GetNet(meta_net_def: Any, key: str) -> Any:
    return _ProtoMapGet(meta_net_def.nets, key)


GetNetOriginal = GetNet


def GetApplicationSpecificInfo(meta_net_def: Any, key: str) -> Any:
    return _ProtoMapGet(meta_net_def.applicationSpecificInfo, key)


def ReplaceBlobs(meta_net_def: Any, blob_name: str, blob_def: Any) -> None:
    """Set the blob list ``blob_name`` (which must exist) to ``blob_def``."""
    blobs = _ProtoMapGet(meta_net_def.blobs, blob_name)
    if blobs is None:
        raise KeyError(f"ReplaceBlobs: the blob_name:{blob_name} does not exist")
    del blobs[:]
    blobs.extend(blob_def)


def AddBlobs(meta_net_def: Any, blob_name: str, blob_def: Any) -> None:
    blobs = _ProtoMapGet(meta_net_def.blobs, blob_name)
    if blobs is None:
        entry = meta_net_def.blobs.add()
        entry.key = blob_name
        blobs = entry.value
    for blob in blob_def:
        blobs.append(blob)


def AddPlan(meta_net_def: Any, plan_name: str, plan_def: Any) -> None:
    meta_net_def.plans.add(key=plan_name, value=plan_def)


def AddNet(meta_net_def: Any, net_name: str, net_def: Any) -> None:
    meta_net_def.nets.add(key=net_name, value=net_def)


def AddModelIdArg(meta_net_def: Any, net_def: Any) -> None:
    """Copy the ``model_id`` argument of the predict net, if any, to ``net_def``."""
    predict = getattr(meta_net_def, "predict_net", None)
    for arg in getattr(predict, "arg", []):
        if arg.name == "model_id":
            net_def.arg.add().CopyFrom(arg)
