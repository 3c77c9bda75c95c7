"""``caffe2.python.utils``: Caffe2's helpers for arguments, TensorProtos and layouts.

``MakeArgument`` is this framework's ``make_argument`` (Caffe2's rules: float -> f, int/bool
-> i, str/bytes -> s, NetDef -> n, messages serialized, any iterable of one kind -> a list).
"""

from __future__ import annotations

import copy
import functools
import sys
from typing import Any, Callable

import numpy as np
from google.protobuf import text_format
from google.protobuf.message import DecodeError

from framework.proto import caffe2_pb2
from framework.proto.args import make_argument

OPTIMIZER_ITERATION_NAME = "optimizer_iteration"
ITERATION_MUTEX_NAME = "iteration_mutex"

MakeArgument = make_argument

_TO_PROTO = {
    np.dtype(np.float32): (caffe2_pb2.TensorProto.FLOAT, "float_data"),
    np.dtype(np.float64): (caffe2_pb2.TensorProto.DOUBLE, "double_data"),
    np.dtype(np.int32): (caffe2_pb2.TensorProto.INT32, "int32_data"),
    np.dtype(np.int16): (caffe2_pb2.TensorProto.INT16, "int32_data"),
    np.dtype(np.uint16): (caffe2_pb2.TensorProto.UINT16, "int32_data"),
    np.dtype(np.int8): (caffe2_pb2.TensorProto.INT8, "int32_data"),
    np.dtype(np.uint8): (caffe2_pb2.TensorProto.UINT8, "int32_data"),
    np.dtype(np.int64): (caffe2_pb2.TensorProto.INT64, "int64_data"),
    np.dtype(np.bool_): (caffe2_pb2.TensorProto.BOOL, "int32_data"),
}
_FROM_PROTO = {code: (dt, field) for dt, (code, field) in _TO_PROTO.items()}


def OpAlmostEqual(op_a: Any, op_b: Any, ignore_fields: Any = None) -> bool:
    """Two ops equal except for the fields ``ignore_fields``."""
    ignore_fields = ignore_fields or []
    if not isinstance(ignore_fields, list):
        ignore_fields = [ignore_fields]

    def clean(op: Any) -> Any:
        op = copy.deepcopy(op)
        for field in ignore_fields:
            if op.HasField(field):
                op.ClearField(field)
        return op

    return clean(op_a) == clean(op_b)


def Caffe2TensorToNumpyArray(tensor: Any) -> np.ndarray:
    """A TensorProto's typed data as a numpy array (float, double, int8..int64, uint8/16, bool)."""
    if tensor.data_type not in _FROM_PROTO:
        raise RuntimeError(f"Tensor data type not supported yet: {tensor.data_type}")
    dt, field = _FROM_PROTO[tensor.data_type]
    return np.asarray(getattr(tensor, field)).astype(dt).reshape(tuple(tensor.dims))


def NumpyArrayToCaffe2Tensor(arr: np.ndarray, name: str | None = None) -> Any:
    """A TensorProto with the typed field Caffe2 uses for ``arr``'s dtype."""
    arr = np.asarray(arr)
    if arr.dtype not in _TO_PROTO:
        raise RuntimeError(f"Numpy data type not supported yet: {arr.dtype}")
    code, field = _TO_PROTO[arr.dtype]
    tensor = caffe2_pb2.TensorProto()
    tensor.dims.extend(arr.shape)
    if name:
        tensor.name = name
    tensor.data_type = code
    flat = arr.flatten()
    getattr(tensor, field).extend((flat.astype(np.int32) if arr.dtype == np.bool_ else flat).tolist())
    return tensor


def CaffeBlobToNumpyArray(blob: Any) -> np.ndarray:
    """A Caffe1 BlobProto (old num/channels/height/width or new shape) as float32."""
    if blob.num != 0:
        return np.asarray(blob.data, dtype=np.float32).reshape(blob.num, blob.channels, blob.height, blob.width)
    return np.asarray(blob.data, dtype=np.float32).reshape(blob.shape.dim)


def TryReadProtoWithClass(cls: Any, s: Any) -> Any:
    """Parse ``s`` as text format, else as binary (DecodeError when neither)."""
    obj = cls()
    try:
        text_format.Parse(s if isinstance(s, str) else s.decode("utf-8"), obj)
        return obj
    except (text_format.ParseError, UnicodeDecodeError):
        obj.ParseFromString(s if isinstance(s, bytes) else s.encode("utf-8"))
        return obj


def GetContentFromProto(obj: Any, function_map: dict) -> Any:
    for cls, func in function_map.items():
        if type(obj) is cls:
            return func(obj)
    return None


def GetContentFromProtoString(s: Any, function_map: dict) -> Any:
    for cls, func in function_map.items():
        try:
            return func(TryReadProtoWithClass(cls, s))
        except DecodeError:
            continue
    raise DecodeError("Cannot find a fit protobuffer class.")


def ConvertProtoToBinary(proto_class: Any, filename: str, out_filename: str) -> None:
    """A text-format file of ``proto_class`` written as binary."""
    with open(filename) as f:
        proto = TryReadProtoWithClass(proto_class, f.read())
    with open(out_filename, "wb") as f:
        f.write(proto.SerializeToString())


def GetGPUMemoryUsageStats() -> dict:
    """No GPU here: zero usage."""
    return {"total_by_gpu": np.zeros(0), "max_by_gpu": np.zeros(0), "total": 0, "max_total": 0}


def ResetBlobs(blobs: Any) -> None:
    from framework import core, workspace

    workspace.RunOperatorOnce(
        core.CreateOperator("Free", list(blobs), list(blobs), device_option=core.DeviceOption(caffe2_pb2.CPU))
    )


class DebugMode:
    """``DebugMode.run(main)``: drop into pdb on an unhandled exception."""

    @classmethod
    def run(cls, func: Callable) -> Any:
        try:
            return func()
        except KeyboardInterrupt:
            raise
        except Exception:
            import pdb

            print('Entering interactive debugger. Type "bt" to print the full stacktrace.')
            print(sys.exc_info()[1])
            pdb.post_mortem()
            sys.exit(1)


def raiseIfNotEqual(a: Any, b: Any, msg: str) -> None:
    if a != b:
        raise Exception(f"{msg}. {a} != {b}")


def debug(f: Callable) -> Callable:
    @functools.wraps(f)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        return DebugMode.run(lambda: f(*args, **kwargs))

    return wrapper


def BuildUniqueMutexIter(
    init_net: Any,
    net: Any,
    iter: Any = None,
    iter_mutex: Any = None,
    iter_val: int = 0,
) -> Any:
    """An int64 iteration counter in ``init_net`` advanced by AtomicIter in ``net`` (once per net)."""
    from framework import core

    iter = iter if iter is not None else OPTIMIZER_ITERATION_NAME
    iter_mutex = iter_mutex if iter_mutex is not None else ITERATION_MUTEX_NAME
    if init_net.BlobIsDefined(iter):
        return init_net.GetBlobRef(iter)
    # on the CPU whatever the enclosing device scope, marked as Caffe2 2020 marks it
    with core.DeviceScope(core.DeviceOption(caffe2_pb2.CPU, extra_info=["device_type_override:cpu"])):
        iteration = init_net.ConstantFill([], iter, shape=[1], value=iter_val, dtype=core.DataType.INT64)
        mutex = init_net.CreateMutex([], [iter_mutex])
        net.AtomicIter([mutex, iteration], [iteration])
    return iteration


def EnumClassKeyVals(cls: type) -> dict:
    """The upper-case string attributes of ``cls`` (distinct values)."""
    enum: dict[str, str] = {}
    for k in dir(cls):
        if k == k.upper():
            v = getattr(cls, k)
            if isinstance(v, str):
                assert v not in enum.values(), f"Failed to resolve {cls} as Enum: duplicate entries for {v}"
                enum[k] = v
    return enum


def ArgsToDict(args: Any) -> dict:
    """Arguments as {name: value} (the set field; None when none is set)."""
    from framework.ops.arg_reader import ArgReader

    return ArgReader(list(args), where="arguments").as_dict()


def NHWC2NCHW(tensor: np.ndarray) -> np.ndarray:
    assert tensor.ndim >= 1
    return tensor.transpose((0, tensor.ndim - 1) + tuple(range(1, tensor.ndim - 1)))


def NCHW2NHWC(tensor: np.ndarray) -> np.ndarray:
    assert tensor.ndim >= 2
    return tensor.transpose((0,) + tuple(range(2, tensor.ndim)) + (1,))
