"""Hostile ONNX models and inputs: every one ends in an OnnxImportError (or ResourceLimitError) naming
what is wrong, before any large allocation; a prepared rep is safe to run from several threads; the
CLI answers a user error (exit 2) and `convert` never writes through a symlink."""

from __future__ import annotations

import os
import subprocess
import sys
import threading

import numpy as np
import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from framework.errors import FrameworkError, ResourceLimitError  # noqa: E402
from framework.memory.allocator import set_allocation_limit  # noqa: E402
from framework.onnx.backend import prepare  # noqa: E402
from framework.onnx.importer import OnnxImportError  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _model(nodes, inputs, outputs, inits=(), opset=17):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])


def _relu_model():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, [2, 3])
    return _model([helper.make_node("Relu", ["x"], ["y"])], [x], [y])


def _add_init_model(init):
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, None)
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    return _model([helper.make_node("Add", ["x", init.name], ["y"])], [x], [y], [init])


@pytest.fixture
def small_limit():
    old = set_allocation_limit(64 << 20)
    yield
    set_allocation_limit(old)


def test_constant_of_shape_huge_is_refused_before_allocating(small_limit):
    shape = numpy_helper.from_array(np.array([1 << 20, 1 << 21], np.int64), "s")
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    m = _model([helper.make_node("ConstantOfShape", ["s"], ["y"])], [], [y], [shape])
    with pytest.raises(ResourceLimitError, match="ConstantOfShape"):
        prepare(m)


def test_constant_of_shape_negative_dims_refused():
    shape = numpy_helper.from_array(np.array([-1, 4], np.int64), "s")
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    m = _model([helper.make_node("ConstantOfShape", ["s"], ["y"])], [], [y], [shape])
    with pytest.raises(OnnxImportError, match="negative"):
        prepare(m)


def test_initializer_negative_dims_refused():
    t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[-1, 4], float_data=[1.0, 2.0, 3.0, 4.0])
    with pytest.raises(OnnxImportError, match="'w'.*negative"):
        prepare(_add_init_model(t))


def test_initializer_huge_dims_refused_before_shape_inference(small_limit):
    t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[1 << 30, 1 << 10])
    with pytest.raises(ResourceLimitError, match="'w'"):
        prepare(_add_init_model(t))


@pytest.mark.parametrize(
    "tensor",
    [
        TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[3], float_data=[1.0, 2.0]),  # data size != dims
        TensorProto(name="w", data_type=999, dims=[1], raw_data=b"\0\0\0\0"),  # unknown data_type
        TensorProto(name="w", data_type=TensorProto.STRING, dims=[1], string_data=[b"\xff\xfe"]),  # not UTF-8
    ],
    ids=["size", "dtype", "utf8"],
)
def test_malformed_initializer_is_onnx_import_error(tensor):
    with pytest.raises(OnnxImportError, match="'w'"):
        prepare(_add_init_model(tensor))


@pytest.mark.parametrize("data", [b"garbage\xff\xff\x01", b""], ids=["garbage", "empty"])
def test_prepare_bad_bytes(data):
    with pytest.raises(OnnxImportError, match="ONNX model bytes"):
        prepare(data)


def test_empty_model_refused(tmp_path):
    p = tmp_path / "empty.onnx"
    p.write_bytes(b"")
    with pytest.raises(OnnxImportError, match="empty"):
        prepare(str(p))
    with pytest.raises(OnnxImportError, match="no graph outputs"):
        prepare(helper.make_model(helper.make_graph([], "g", [], [])))


def test_run_with_wrong_inputs():
    rep = prepare(_relu_model())
    x = np.ones((2, 3), np.float32)
    with pytest.raises(OnnxImportError, match="2 inputs given"):
        rep.run([x, x])
    with pytest.raises(OnnxImportError, match="not inputs"):
        rep.run({"zz": x})
    with pytest.raises(OnnxImportError, match="'x' holds object objects"):
        rep.run([object()])
    (y,) = rep.run([x])  # the rep still works
    np.testing.assert_array_equal(y, x)


def test_rep_is_thread_safe():
    rep = prepare(_relu_model())
    errors = []

    def worker(k: int) -> None:
        x = np.full((2, 3), float(k), np.float32)
        for _ in range(200):
            (y,) = rep.run([x])
            if not np.array_equal(y, x):
                errors.append((k, y))
                return

    threads = [threading.Thread(target=worker, args=(k,)) for k in range(1, 5)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors


def _cli(*args, cwd):
    env = dict(os.environ, OPENBLAS_NUM_THREADS="1", PYTHONPATH=ROOT)
    return subprocess.run(
        [sys.executable, "-m", "framework", *args], capture_output=True, text=True, cwd=cwd, env=env, timeout=300
    )


@pytest.mark.parametrize("content", [b"", b"garbage\xff\xff\x01"], ids=["empty", "garbage"])
def test_cli_convert_bad_onnx_is_user_error(tmp_path, content):
    (tmp_path / "m.onnx").write_bytes(content)
    r = _cli("convert", "m.onnx", "--to", "caffe2", "-o", "out", cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert "m.onnx" in r.stderr and "internal error" not in r.stderr
    assert not (tmp_path / "out").exists()


def test_cli_convert_malformed_initializer_is_user_error(tmp_path):
    t = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[3], float_data=[1.0, 2.0])
    onnx.save(_add_init_model(t), str(tmp_path / "m.onnx"))
    r = _cli("convert", "m.onnx", "--to", "caffe2", "-o", "out", cwd=tmp_path)
    assert r.returncode == 2, r.stderr
    assert "'w'" in r.stderr and "internal error" not in r.stderr


def test_cli_convert_does_not_follow_tmp_symlink(tmp_path):
    (tmp_path / "net.pbtxt").write_text('name: "n" op { input: "x" output: "y" type: "Relu" } external_input: "x"')
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me")
    os.symlink(victim, tmp_path / "out.onnx.tmp")
    r = _cli("convert", "net.pbtxt", "--to", "onnx", "-o", "out.onnx", "--shape", "x=2,3", cwd=tmp_path)
    assert r.returncode == 0, r.stderr
    assert victim.read_text() == "keep me"
    assert onnx.load(str(tmp_path / "out.onnx")).graph.node
    assert [p for p in os.listdir(tmp_path) if p.endswith(".tmp") and p != "out.onnx.tmp"] == []


def test_errors_are_framework_errors():
    assert issubclass(OnnxImportError, FrameworkError)


def test_loop_scan_outputs_bounded_in_total(small_limit):
    """Each iteration's scan output is small (1 MiB); their stack over 10^6 iterations is not."""
    block = numpy_helper.from_array(np.ones(1 << 18, np.float32), "blk")
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("Constant", [], ["row"], value=block),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("row", TensorProto.FLOAT, [1 << 18]),
        ],
    )
    inits = [
        numpy_helper.from_array(np.array(1_000_000, np.int64), "M"),
        numpy_helper.from_array(np.array(True), "c"),
    ]
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    m = _model([helper.make_node("Loop", ["M", "c"], ["y"], body=body)], [], [y], inits)
    with pytest.raises(FrameworkError, match="ResourceLimitError.*scan outputs after 6[0-9] iterations"):
        prepare(m).run([])
