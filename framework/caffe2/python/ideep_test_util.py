"""``caffe2.python.ideep_test_util``: hypothesis device strategies that add the IDEEP (MKL-DNN) device.

As Caffe2's module, ``device_options`` always lists the IDEEP device after the CPU ones; Caffe2's IDEEP
tests skip themselves on ``workspace.C.use_mkldnn``, which is False on this CPU-only build."""

from __future__ import annotations

from typing import Any

import hypothesis.strategies as st

from framework.caffe2.python import hypothesis_test_util as hu
from framework.proto.caffe2_pb2 import IDEEP, DeviceOption

cpu_do = hu.cpu_do
ideep_do = DeviceOption(device_type=IDEEP)
device_options = list(hu.device_options) + [ideep_do]


def device_checker_device_options() -> Any:
    return st.just(device_options)


def gradient_checker_device_option() -> Any:
    return st.sampled_from(device_options)


gcs = dict(gc=gradient_checker_device_option(), dc=device_checker_device_options())
gcs_cpu_only = dict(gc=st.sampled_from([cpu_do]), dc=st.just([cpu_do]))
gcs_ideep_only = dict(gc=st.sampled_from([ideep_do]), dc=st.just([ideep_do]))
gcs_cpu_ideep = dict(gc=st.sampled_from([cpu_do, ideep_do]), dc=st.just([cpu_do, ideep_do]))
