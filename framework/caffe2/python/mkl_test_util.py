"""``caffe2.python.mkl_test_util``: hypothesis device strategies that add the MKL-DNN device.

Without MKL-DNN (this build: ``workspace.C.has_mkldnn`` is False) ``device_options`` is the CPU list
of ``hypothesis_test_util``, as on a Caffe2 built without it; the ``*_mkl_*`` strategies still name
the MKL-DNN device, and Caffe2's MKL tests skip themselves on ``has_mkldnn``."""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st

from framework.caffe2 import c_extension as _C
from framework.caffe2.python import hypothesis_test_util as hu
from framework.proto.caffe2_pb2 import MKLDNN, DeviceOption

cpu_do = hu.cpu_do
gpu_do = hu.gpu_do
mkl_do = DeviceOption(device_type=MKLDNN)
device_options = list(hu.device_options) + ([mkl_do] if _C.has_mkldnn else [])


def device_checker_device_options() -> Any:
    return st.just(device_options)


def gradient_checker_device_option() -> Any:
    return st.sampled_from(device_options)


gcs = dict(gc=gradient_checker_device_option(), dc=device_checker_device_options())
gcs_cpu_only = dict(gc=st.sampled_from([cpu_do]), dc=st.just([cpu_do]))
gcs_gpu_only = dict(gc=st.sampled_from([gpu_do]), dc=st.just([gpu_do]))
gcs_mkl_only = dict(gc=st.sampled_from([mkl_do]), dc=st.just([mkl_do]))
gcs_cpu_mkl = dict(gc=st.sampled_from([cpu_do, mkl_do]), dc=st.just([cpu_do, mkl_do]))
