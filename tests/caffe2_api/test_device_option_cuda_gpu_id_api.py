"""DeviceOption's field 2 under its 2018 name: Caffe2 2018 code reads ``option.cuda_gpu_id`` (the same
field as ``device_id``, as the two protos number it)."""

from framework.proto import caffe2_pb2


def test_cuda_gpu_id_reads_field_2():
    option = caffe2_pb2.DeviceOption()
    option.ParseFromString(b"\x08\x00\x10\x03")  # device_type 0, field 2 = 3
    assert option.cuda_gpu_id == 3
    assert caffe2_pb2.DeviceOption().cuda_gpu_id == 0
    option.device_id = 1
    assert option.cuda_gpu_id == 1
