"""onnx's shape inference with data propagation cannot be made to allocate without bound: a model
whose shape arithmetic (Concat of a shape with itself, Reshape by it, Shape again...) would
propagate ever longer vectors is inferred without data propagation. The hostile cases run in a child
process under an address-space limit, so a regression fails the test instead of the machine."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper, numpy_helper  # noqa: E402

from framework.onnx.shape_bound import MAX_PROPAGATED, value_bound  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

_BUILD = textwrap.dedent(
    """
    import resource, sys
    import numpy as np
    from onnx import TensorProto, helper
    resource.setrlimit(resource.RLIMIT_AS, (3 << 30, 3 << 30))
    def doubling(stages, per_stage):
        nodes, cur = [], "x"
        for s in range(stages):
            nodes.append(helper.make_node("Shape", [cur], [f"s{s}_0"]))
            for i in range(per_stage):
                nodes.append(helper.make_node("Concat", [f"s{s}_{i}"] * 2, [f"s{s}_{i + 1}"], axis=0))
            nodes.append(helper.make_node("Reshape", [cur, f"s{s}_{per_stage}"], [f"r{s}"]))
            cur = f"r{s}"
        nodes.append(helper.make_node("Identity", [cur], ["y"]))
        x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1])
        y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
        g = helper.make_graph(nodes, "g", [x], [y])
        return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])
    """
)


def _run_child(body: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=ROOT)
    code = _BUILD + textwrap.dedent(body)
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=240, env=env)


@pytest.mark.parametrize("stages,per_stage", [(1, 34), (12, 3)])
def test_doubling_shape_chain_is_bounded(stages, per_stage):
    """One Concat chain 2^34 long, or twelve stages of 8x each (every stage short, the whole 2^36):
    the importer's inference peaks under 1 GiB (it used to grow until bad_alloc: here the 3 GiB
    address-space limit of the child)."""
    r = _run_child(
        f"""
        from framework.onnx.importer import _value_infos
        types, shapes = _value_infos(doubling({stages}, {per_stage}))
        import resource
        try:  # this process's own peak: ru_maxrss keeps the forking parent's (pytest's) across exec on Linux
            peak = next(int(ln.split()[1]) >> 10 for ln in open("/proc/self/status") if ln.startswith("VmHWM:"))
        except OSError:
            peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss >> 10
        print("OK", len(types), "peak MiB", peak)
        assert peak < 1024, peak
        """
    )
    assert r.returncode == 0 and "OK" in r.stdout, r.stderr[-2000:]


def test_prepare_of_doubling_model_ends_in_a_result_or_framework_error():
    r = _run_child(
        """
        from framework.errors import FrameworkError
        from framework.onnx.backend import prepare
        import unittest
        try:
            rep = prepare(doubling(1, 34).SerializeToString())
            rep.run([np.zeros((1, 1), np.float32)])
            print("OK ran")
        except (FrameworkError, unittest.SkipTest) as e:
            print("OK", type(e).__name__)
        """
    )
    assert r.returncode == 0 and "OK" in r.stdout, r.stderr[-2000:]


def _model(nodes, inputs, outputs, inits=()):
    g = helper.make_graph(nodes, "g", inputs, outputs, initializer=list(inits))
    return helper.make_model(g, opset_imports=[helper.make_opsetid("", 17)])


def test_ordinary_shape_arithmetic_keeps_data_propagation():
    """A Shape/Gather/Concat/Reshape flatten (as exporters write it) stays under the bound, so onnx
    still propagates the values and the Reshape's output shape is known."""
    import numpy as np

    from framework.onnx.importer import _value_infos

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 3, 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    idx = numpy_helper.from_array(np.array([0], np.int64), "idx")
    minus1 = numpy_helper.from_array(np.array([-1], np.int64), "m1")
    w = numpy_helper.from_array(np.zeros((1000, 100), np.float32), "w")  # big weights do not count
    nodes = [
        helper.make_node("Shape", ["x"], ["s"]),
        helper.make_node("Gather", ["s", "idx"], ["b"], axis=0),
        helper.make_node("Concat", ["b", "m1"], ["shp"], axis=0),
        helper.make_node("Reshape", ["x", "shp"], ["y"]),
    ]
    model = _model(nodes, [x], [y], [idx, minus1, w])
    assert value_bound(model.graph) <= MAX_PROPAGATED
    _, shapes = _value_infos(model)
    assert shapes["y"] == (2, 12)


def test_bound_grows_with_self_concat():
    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [helper.make_node("Shape", ["x"], ["s0"])]
    for i in range(20):
        nodes.append(helper.make_node("Concat", [f"s{i}", f"s{i}"], [f"s{i + 1}"], axis=0))
    nodes.append(helper.make_node("Reshape", ["x", "s20"], ["y"]))
    assert value_bound(_model(nodes, [x], [y]).graph) > MAX_PROPAGATED
