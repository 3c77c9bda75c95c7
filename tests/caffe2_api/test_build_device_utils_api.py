"""caffe2.python.build / hip_test_util / mkl_test_util / core.C: the answers of a CPU-only Caffe2."""

import hypothesis.strategies as st
from hypothesis import given

import framework.caffe2 as hook
from framework.proto import caffe2_pb2


def _import(name):
    hook.install()
    import importlib

    return importlib.import_module(name)


def test_build_reports_schemas_and_a_cpu_build():
    build = _import("caffe2.python.build")
    assert build.CAFFE2_NO_OPERATOR_SCHEMA is False
    opts = build.build_options
    assert opts["USE_CUDA"] == "OFF" and opts["USE_MKLDNN"] == "OFF" and opts["USE_ROCM"] == "OFF"
    assert all(isinstance(k, str) and isinstance(v, str) for k, v in opts.items())


def test_run_in_hip_only_for_a_hip_device():
    hip = _import("caffe2.python.hip_test_util")
    cpu = caffe2_pb2.DeviceOption()
    hip_do = caffe2_pb2.DeviceOption(device_type=caffe2_pb2.HIP)
    cuda = caffe2_pb2.DeviceOption(device_type=caffe2_pb2.CUDA)
    assert not hip.run_in_hip(cpu, [cpu, cuda])
    assert hip.run_in_hip(hip_do, [cpu])
    assert hip.run_in_hip(cpu, [cpu, hip_do])


def test_mkl_test_util_without_mkldnn():
    mu = _import("caffe2.python.mkl_test_util")
    hu = _import("caffe2.python.hypothesis_test_util")
    assert mu.mkl_do.device_type == caffe2_pb2.MKLDNN
    # no MKL-DNN in this build: its device is not among the generated ones
    assert [d.device_type for d in mu.device_options] == [d.device_type for d in hu.device_options]
    assert set(mu.gcs) == {"gc", "dc"} and set(mu.gcs_cpu_mkl) == {"gc", "dc"}


@given(data=st.data())
def test_mkl_gcs_draw_cpu_devices(data):
    mu = _import("caffe2.python.mkl_test_util")
    gc = data.draw(mu.gcs["gc"])
    dc = data.draw(mu.gcs["dc"])
    assert gc.device_type == caffe2_pb2.CPU and all(d.device_type != caffe2_pb2.MKLDNN for d in dc)


def test_ideep_test_util_lists_the_ideep_device():
    iu = _import("caffe2.python.ideep_test_util")
    hu = _import("caffe2.python.hypothesis_test_util")
    assert [d.device_type for d in iu.device_options] == [d.device_type for d in hu.device_options] + [caffe2_pb2.IDEEP]
    assert set(iu.gcs_cpu_ideep) == {"gc", "dc"} and iu.ideep_do.device_type == caffe2_pb2.IDEEP
    # this build has no MKL-DNN: Caffe2's IDEEP tests skip on it
    assert _import("caffe2.python.workspace").C.use_mkldnn is False


def test_core_c_is_the_extension_module():
    core = _import("caffe2.python.core")
    workspace = _import("caffe2.python.workspace")
    assert core.C is workspace.C
    dbs = core.C.registered_dbs()
    assert {"minidb", "MiniDB", "protodb"} <= set(dbs)
    assert isinstance(core.C.builtin_cpu_supports_avx2(), bool)
    with open("/proc/cpuinfo") as f:
        assert core.C.builtin_cpu_supports_avx2() == (" avx2" in f.read())


def test_core_workspace_is_the_workspace_module():
    core = _import("caffe2.python.core")
    assert core.workspace is _import("caffe2.python.workspace")
    import pytest

    with pytest.raises(AttributeError, match="no_such_thing"):
        core.no_such_thing
