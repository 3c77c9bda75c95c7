"""``caffe2_pb2`` under its Caffe2 name: code doing ``from caffe2.proto import caffe2_pb2``
runs with ``from framework.proto import caffe2_pb2`` (the same messages and enums)."""

from framework.proto.framework_pb2 import *  # noqa: F403
from framework.proto.framework_pb2 import (
    DESCRIPTOR,  # noqa: F401
    DeviceOption,
)


def _get_cuda_gpu_id(option: DeviceOption) -> int:
    return option.device_id


# Field 2 of DeviceOption is ``cuda_gpu_id`` in Caffe2's 2018 proto and ``device_id`` since: 2018 code reads it
# under the old name (text files are rewritten by framework.proto.io, core.DeviceOption takes the old keyword).
# Read-only: protobuf's messages accept assignment to their own fields only.
DeviceOption.cuda_gpu_id = property(_get_cuda_gpu_id, doc="2018 name of device_id (field 2), read-only")
