"""The wire schema matches Caffe2 (reference/caffe2.md §1) and the generated module is current."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from google.protobuf.descriptor import FieldDescriptor

from framework.proto import framework_pb2 as pb

ROOT = Path(__file__).resolve().parents[2]

# Typed in from reference/caffe2.md §1 (2018 schema plus "Later additions").
# "T" = optional T, "*T" = repeated T, "!T" = required T. Messages/enums by short name.
FIELDS: dict[str, dict[str, tuple[int, str]]] = {
    "ExternalDataProto": {
        "source_type": (1, "SourceType"),
        "record_id": (2, "string"),
        "offset": (3, "int64"),
        "strides": (4, "*int64"),
        "record_size": (5, "uint64"),
    },
    "TensorProto": {
        "dims": (1, "*int64"),
        "data_type": (2, "DataType"),
        "float_data": (3, "*float"),
        "int32_data": (4, "*int32"),
        "byte_data": (5, "bytes"),
        "string_data": (6, "*bytes"),
        "name": (7, "string"),
        "device_detail": (8, "DeviceOption"),
        "double_data": (9, "*double"),
        "int64_data": (10, "*int64"),
        "segment": (11, "Segment"),
        "storage_type": (12, "StorageType"),
        "raw_data": (13, "bytes"),
        "external_data": (14, "ExternalDataProto"),
    },
    "TensorProto.Segment": {"begin": (1, "!int64"), "end": (2, "!int64")},
    "QTensorProto": {
        "dims": (1, "*int64"),
        "precision": (2, "!int32"),
        "scale": (3, "!double"),
        "bias": (4, "!double"),
        "is_signed": (5, "!bool"),
        "data": (6, "*int32"),
        "name": (7, "string"),
        "data_type": (8, "DataType"),
        "scales": (9, "*double"),
        "biases": (10, "*double"),
        "axis": (11, "int32"),
        "is_multiparam": (12, "bool"),
    },
    "TensorProtos": {"protos": (1, "*TensorProto")},
    "TensorShape": {
        "dims": (1, "*int64"),
        "data_type": (2, "DataType"),
        "unknown_dims": (3, "*int32"),
        "unknown_shape": (4, "bool"),
        "name": (5, "string"),
    },
    "TensorShapes": {"shapes": (1, "*TensorShape")},
    "Argument": {
        "name": (1, "string"),
        "f": (2, "float"),
        "i": (3, "int64"),
        "s": (4, "bytes"),
        "floats": (5, "*float"),
        "ints": (6, "*int64"),
        "strings": (7, "*bytes"),
        "n": (8, "NetDef"),
        "nets": (9, "*NetDef"),
        "t": (10, "TensorProto"),
        "tensors": (11, "*TensorProto"),
        "qtensors": (12, "*QTensorProto"),
    },
    "DeviceOption": {
        "device_type": (1, "int32"),
        "device_id": (2, "int32"),  # cuda_gpu_id in 2018
        "random_seed": (3, "uint32"),
        "node_name": (4, "string"),
        "numa_node_id": (5, "int32"),
        "extra_info": (6, "*string"),
    },
    "OperatorDef": {
        "input": (1, "*string"),
        "output": (2, "*string"),
        "name": (3, "string"),
        "type": (4, "string"),
        "arg": (5, "*Argument"),
        "device_option": (6, "DeviceOption"),
        "engine": (7, "string"),
        "control_input": (8, "*string"),
        "is_gradient_op": (9, "bool"),
        "debug_info": (10, "string"),
        "domain": (11, "string"),
        "op_version": (12, "int64"),
    },
    "NetDef": {
        "name": (1, "string"),
        "op": (2, "*OperatorDef"),
        "type": (3, "string"),
        "num_workers": (4, "int32"),
        "device_option": (5, "DeviceOption"),
        "arg": (6, "*Argument"),
        "external_input": (7, "*string"),
        "external_output": (8, "*string"),
        "partition_info": (9, "*PartitionInfo"),
    },
    "PartitionInfo": {
        "name": (1, "!string"),
        "device_id": (2, "*int32"),
        "extra_info": (3, "string"),
        "backend_options": (4, "*BackendOptions"),
    },
    "ExecutionStep": {
        "name": (1, "string"),
        "substep": (2, "*ExecutionStep"),
        "network": (3, "*string"),
        "num_iter": (4, "int64"),
        "criteria_network": (5, "string"),
        "concurrent_substeps": (6, "bool"),
        "report_net": (7, "string"),
        "report_interval": (8, "int32"),
        "should_stop_blob": (9, "string"),
        "only_once": (10, "bool"),
        "run_every_ms": (11, "int64"),
        "create_workspace": (12, "bool"),
        "num_concurrent_instances": (13, "int32"),
    },
    "PlanDef": {"name": (1, "string"), "network": (2, "*NetDef"), "execution_step": (3, "*ExecutionStep")},
    "BlobProto": {
        "name": (1, "string"),
        "type": (2, "string"),
        "tensor": (3, "TensorProto"),
        "content": (4, "bytes"),
        "qtensor": (5, "QTensorProto"),
        "content_num_chunks": (6, "int32"),
        "content_chunk_id": (7, "int32"),
    },
    "DBReaderProto": {
        "name": (1, "string"),
        "source": (2, "string"),
        "db_type": (3, "string"),
        "key": (4, "string"),
    },
    "ProfDAGProto": {"name": (1, "!string"), "mean": (2, "!float"), "stddev": (3, "!float")},
    "ProfDAGProtos": {"stats": (1, "*ProfDAGProto")},
    "ModelInfo": {
        "project": (1, "string"),
        "modelClass": (2, "string"),
        "version": (3, "string"),
        "predictorType": (4, "string"),
        "modelId": (5, "string"),
    },
    "BlobsMap": {"key": (1, "!string"), "value": (2, "*string")},
    "NetsMap": {"key": (1, "!string"), "value": (2, "!NetDef")},
    "PlansMap": {"key": (1, "!string"), "value": (2, "!PlanDef")},
    "StringMap": {"key": (1, "!string"), "value": (2, "!string")},
    "MetaNetDef": {
        "blobs": (1, "*BlobsMap"),
        "nets": (2, "*NetsMap"),
        "modelInfo": (3, "ModelInfo"),
        "plans": (4, "*PlansMap"),
        "applicationSpecificInfo": (5, "*StringMap"),
    },
}

ENUMS: dict[str, dict[str, int]] = {
    "TensorProto.DataType": {
        "UNDEFINED": 0,
        "FLOAT": 1,
        "INT32": 2,
        "BYTE": 3,
        "STRING": 4,
        "BOOL": 5,
        "UINT8": 6,
        "INT8": 7,
        "UINT16": 8,
        "INT16": 9,
        "INT64": 10,
        "FLOAT16": 12,
        "DOUBLE": 13,
        "ZERO_COLLISION_HASH": 14,
    },
    "TensorProto.StorageType": {"TYPED": 1, "RAW": 2, "EXTERNAL": 3, "NO_CONTENT": 4},
    "ExternalDataProto.SourceType": {"INLINE_CONTAINER": 0, "SIMPLE_FILE": 1},
    "DeviceType": {
        "CPU": 0,
        "CUDA": 1,
        "MKLDNN": 2,
        "OPENGL": 3,
        "COMPILE_TIME_MAX_DEVICE_TYPES": 4,
        "OPENCL": 4,
        "IDEEP": 5,
        "HIP": 6,
        "FPGA": 7,
        "MSNPU": 8,
        "XLA": 9,
        "ONLY_FOR_TEST": 20901701,
    },
    "LegacyPadding": {"NOTSET": 0, "VALID": 1, "SAME": 2, "CAFFE_LEGACY_POOLING": 3},
}

_SCALARS = {
    FieldDescriptor.TYPE_DOUBLE: "double",
    FieldDescriptor.TYPE_FLOAT: "float",
    FieldDescriptor.TYPE_INT64: "int64",
    FieldDescriptor.TYPE_UINT64: "uint64",
    FieldDescriptor.TYPE_INT32: "int32",
    FieldDescriptor.TYPE_UINT32: "uint32",
    FieldDescriptor.TYPE_BOOL: "bool",
    FieldDescriptor.TYPE_STRING: "string",
    FieldDescriptor.TYPE_BYTES: "bytes",
}


def _describe(field: FieldDescriptor) -> str:
    if field.type == FieldDescriptor.TYPE_MESSAGE:
        kind = field.message_type.name
    elif field.type == FieldDescriptor.TYPE_ENUM:
        kind = field.enum_type.name
    else:
        kind = _SCALARS[field.type]
    if field.is_repeated:
        return "*" + kind
    if field.is_required:
        return "!" + kind
    return kind


def _message(path: str):
    obj = pb
    for part in path.split("."):
        obj = getattr(obj, part)
    return obj.DESCRIPTOR


@pytest.mark.parametrize("name", sorted(FIELDS))
def test_field_numbers_and_types(name):
    desc = _message(name)
    found = {f.name: (f.number, _describe(f)) for f in desc.fields}
    assert found == FIELDS[name]


@pytest.mark.parametrize("name", sorted(ENUMS))
def test_enum_values(name):
    if "." in name:
        msg, enum = name.split(".")
        desc = _message(msg).enum_types_by_name[enum]
    else:
        desc = pb.DESCRIPTOR.enum_types_by_name[name]
    assert {v.name: v.number for v in desc.values} == ENUMS[name]


def test_packing_matches_caffe2():
    # Argument's repeated numbers are not packed; TensorProto's numeric arrays are.
    arg = pb.Argument.DESCRIPTOR.fields_by_name
    assert not arg["floats"].is_packed and not arg["ints"].is_packed
    tp = pb.TensorProto.DESCRIPTOR.fields_by_name
    for f in ("float_data", "int32_data", "double_data", "int64_data"):
        assert tp[f].is_packed, f
    assert pb.QTensorProto.DESCRIPTOR.fields_by_name["data"].is_packed
    # Encoded bytes: Argument.ints=[1, 2] is two tag+varint pairs (0x30 = field 6, varint).
    assert pb.Argument(ints=[1, 2]).SerializeToString() == b"\x30\x01\x30\x02"


def test_defaults_match_caffe2():
    assert pb.TensorProto().data_type == pb.TensorProto.FLOAT
    assert pb.TensorProto().storage_type == pb.TensorProto.TYPED
    assert pb.DeviceOption().numa_node_id == -1
    assert pb.QTensorProto().data_type == pb.TensorProto.INT32
    assert pb.ModelInfo().predictorType == "SINGLE_PREDICTOR"
    assert pb.PredictorConsts().META_NET_DEF == "!!META_NET_DEF"
    assert pb.PredictorConsts().PREDICTOR_DBREADER == "!!PREDICTOR_DBREADER"
    assert pb.DESCRIPTOR.package == "caffe2"


def test_generated_module_is_current(tmp_path):
    pytest.importorskip("grpc_tools")
    out = f"--python_out={tmp_path}", f"--pyi_out={tmp_path}"
    cmd = [sys.executable, "-m", "grpc_tools.protoc", "-Iproto", *out, "proto/framework.proto"]
    done = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    for name in ("framework_pb2.py", "framework_pb2.pyi"):  # the module and the type stub the type checker reads
        fresh = (tmp_path / name).read_text()
        committed = (ROOT / "framework" / "proto" / name).read_text()
        assert fresh == committed, (
            f"framework/proto/{name} is stale; regenerate it with `python -m grpc_tools.protoc -Iproto "
            "--python_out=framework/proto --pyi_out=framework/proto proto/framework.proto`"
        )
