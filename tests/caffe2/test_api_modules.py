"""The Caffe2 Python modules beyond core/workspace: utils, cnn, dyndep, timeout_guard, tt_core,
visualize, net_drawer, predictor_exporter, test_util, gradient_checker, device_checker."""

import subprocess
import sys
import textwrap

import numpy as np
import pytest

from framework import core, workspace
from framework.caffe2.python import cnn, dyndep, net_drawer, test_util, tt_core, utils, visualize
from framework.errors import FrameworkError
from framework.proto import caffe2_pb2


@pytest.fixture(autouse=True)
def _fresh():
    workspace.ResetWorkspace()
    yield
    workspace.ResetWorkspace()


def test_utils_tensor_protos_and_layouts():
    for dt in (np.float32, np.float64, np.int32, np.int64, np.uint8, np.int8, np.int16, np.uint16, np.bool_):
        a = (np.arange(6) % 3).astype(dt).reshape(2, 3)
        t = utils.NumpyArrayToCaffe2Tensor(a, "a")
        assert t.name == "a" and list(t.dims) == [2, 3]
        back = utils.Caffe2TensorToNumpyArray(t)
        assert back.dtype == a.dtype and np.array_equal(back, a)
    x = np.arange(24).reshape(1, 2, 3, 4)
    assert utils.NCHW2NHWC(x).shape == (1, 3, 4, 2) and np.array_equal(utils.NHWC2NCHW(utils.NCHW2NHWC(x)), x)
    arg = utils.MakeArgument("r", range(3))
    assert list(arg.ints) == [0, 1, 2]
    op = core.CreateOperator("Relu", ["x"], ["y"], name="a")
    assert utils.OpAlmostEqual(op, core.CreateOperator("Relu", ["x"], ["y"], name="b"), "name")
    assert utils.ArgsToDict(core.CreateOperator("X", [], [], a=1, b=[1.0, 2.0]).arg) == {"a": 1, "b": [1.0, 2.0]}
    net = utils.TryReadProtoWithClass(caffe2_pb2.NetDef, 'name: "n" op { type: "Relu" input: "x" output: "y" }')
    assert net.name == "n" and utils.TryReadProtoWithClass(caffe2_pb2.NetDef, net.SerializeToString()) == net


def test_cnn_model_helper_builds_a_trainable_net():
    m = cnn.CNNModelHelper(order="NCHW", name="cnn")
    conv = m.Conv("data", "conv", 1, 4, 3, weight_init=m.XavierInit, bias_init=m.ConstantInit(0.1))
    relu = m.Relu(conv, "relu")
    pool = m.MaxPool(relu, "pool", kernel=2, stride=2)
    m.FC(pool, "fc", 4 * 3 * 3, 2)
    assert [o.type for o in m.net.Proto().op] == ["Conv", "Relu", "MaxPool", "FC"]
    workspace.FeedBlob("data", np.random.rand(2, 1, 8, 8).astype(np.float32))
    workspace.RunNetOnce(m.param_init_net)
    workspace.RunNetOnce(m.net)
    assert workspace.FetchBlob("fc").shape == (2, 2)
    np.testing.assert_allclose(workspace.FetchBlob("conv_b"), 0.1)
    assert m.CPU.device_type == caffe2_pb2.CPU


def test_dyndep_refuses_native_code(tmp_path, capsys):
    lib = tmp_path / "libops.so"
    lib.write_bytes(b"\x7fELF")
    with pytest.raises(FrameworkError, match="never loads native code"):
        dyndep.InitOpsLibrary(str(lib))
    assert str(lib) not in dyndep.GetImportedOpsLibraries()
    # Caffe2 ignores a path that does not exist, with this message, and returns None
    missing = str(tmp_path / "missing.so")
    assert dyndep.InitOpsLibrary(missing) is None
    assert capsys.readouterr().out == f"Ignoring {missing} as it is not a valid file.\n"
    assert missing not in dyndep.GetImportedOpsLibraries()


def test_timeout_guard():
    from framework.caffe2.python import timeout_guard

    with timeout_guard.CompleteInTimeOrDie(30.0):
        pass  # finished in time: nothing happens
    code = textwrap.dedent(
        """
        import time
        from framework.caffe2.python import timeout_guard
        try:
            with timeout_guard.CompleteInTimeOrDie(0.2):
                time.sleep(5)
        except KeyboardInterrupt:
            print("interrupted")
        """
    )
    import signal

    r = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        # a runner started in the background ignores SIGINT, and children inherit that: restore it
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert "interrupted" in r.stdout and "Call did not finish in time" in r.stderr


def _tt_matrix(cores, inp, out, ranks):
    """Rebuild the (prod(inp), prod(out)) matrix from matrix_to_tt's layout (last core first,
    each [inp_i, r_{i+1}, r_i, out_i])."""
    d = len(inp)
    sizes = [inp[i] * out[i] * ranks[i] * ranks[i + 1] for i in range(d)]
    ends = np.cumsum(sizes)
    parts = []
    for i in range(d):
        hi = cores.size - (ends[i] - sizes[i])
        core = cores[hi - sizes[i] : hi].reshape(inp[i], ranks[i + 1], ranks[i], out[i])
        parts.append(core.transpose(2, 0, 3, 1))  # r_i, inp_i, out_i, r_{i+1}
    full = parts[0]
    for p in parts[1:]:
        full = np.tensordot(full, p, axes=([-1], [0]))
    full = full.reshape([s for i in range(d) for s in (inp[i], out[i])])
    order = [2 * i for i in range(d)] + [2 * i + 1 for i in range(d)]
    return full.transpose(order).reshape(int(np.prod(inp)), int(np.prod(out)))


def test_tt_core():
    rng = np.random.default_rng(0)
    inp, out = [2, 3], [2, 2]
    w = rng.standard_normal((6, 4))
    ranks = [1, 4, 1]  # full rank: exact
    cores = tt_core.matrix_to_tt(w, inp, out, ranks)
    # Caffe2 decomposes W^T, its elements read as a (prod(inp), prod(out)) tensor
    np.testing.assert_allclose(_tt_matrix(cores, inp, out, ranks), w.T.reshape(6, 4), atol=1e-5)
    with pytest.raises(AssertionError):
        tt_core.matrix_to_tt(w.T, inp, out, ranks)
    # the TT op (written independently from Caffe2's tt_linear_op) with the cores of a square W is the FC's X W^T
    inp3, out3, ranks3 = [2, 2, 2], [2, 2, 2], [1, 4, 4, 1]
    w3 = rng.standard_normal((8, 8)).astype(np.float32)
    x = rng.standard_normal((1, 8)).astype(np.float32)
    workspace.FeedBlob("X", x)
    workspace.FeedBlob("b", np.zeros(8, np.float32))
    workspace.FeedBlob("cores", tt_core.matrix_to_tt(w3, inp3, out3, ranks3))
    tt = core.CreateOperator("TT", ["X", "b", "cores"], ["Y"], inp_sizes=inp3, out_sizes=out3, tt_ranks=ranks3)
    workspace.RunOperatorOnce(tt)
    np.testing.assert_allclose(workspace.FetchBlob("Y"), x @ w3.T, atol=1e-4)
    init = tt_core.init_tt_cores(inp, out, [1, 2, 1])
    assert init.dtype == np.float32 and init.size == 2 * 2 * 2 + 3 * 2 * 2
    np.testing.assert_array_equal(init, tt_core.init_tt_cores(inp, out, [1, 2, 1]))  # seeded


def test_visualize_tiles_and_draws(tmp_path):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    from matplotlib import pyplot

    batch = np.random.rand(5, 1, 4, 4)
    img = visualize.PatchVisualizer(gap=1).ShowMultiple(visualize.ChannelLast(batch))
    assert img.shape == (2 * 5 - 1, 3 * 5 - 1)  # 5 patches: 3 columns, 2 rows
    np.testing.assert_array_equal(img[5:9, 0:4], batch[3, 0])  # row 1, column 0
    assert visualize.NCHW.ShowMultiple(batch) is None
    pyplot.savefig(tmp_path / "x.png")
    assert visualize.ChannelFirst(visualize.ChannelLast(batch)).shape == batch.shape


def test_net_drawer_graphs():
    net = core.Net("g")
    net.Relu("x", "y")
    net.Sigmoid("y", "z")
    g = net_drawer.GetPydotGraph(net, "named", rankdir="TB")
    assert g.to_string().startswith('digraph "named"') and "rankdir=TB" in g.to_string()
    minimal = net_drawer.GetPydotGraphMinimal(net.Proto().op).to_string()
    assert "op0 -> op1" in minimal and "ellipse" not in minimal


def test_test_util_helpers():
    a = test_util.rand_array(2, 3)
    assert a.dtype == np.float32 and a.shape == (2, 3) and np.all(np.abs(a) <= 0.5)
    assert test_util.str_compare(b"x", "x") and test_util.numOps(core.Net("n")) == 0
    case = test_util.TestCase()
    case._testMethodName = "setUp"
    case.setUp()
    assert isinstance(case.ws, workspace.C.Workspace) and case.ws is not workspace.C()


def test_net_gradient_checker():
    from framework.caffe2.python import gradient_checker

    net = core.Net("ngc")
    net.Tanh("x", "t")
    net.Mul(["t", "t"], "y")
    x = np.random.default_rng(1).standard_normal((2, 3)).astype(np.float32)
    mean_err, max_err = gradient_checker.NetGradientChecker.Check(net, ["y"], {"x": x}, "x", step_size=1e-3)
    assert max_err < 0.05


def test_device_checker():
    from framework.caffe2.python import device_checker
    from framework.caffe2.python.hypothesis_test_util import cpu_do, cuda_do

    dc = device_checker.DeviceChecker(0.01, [cpu_do, cuda_do])
    assert dc.CheckSimple(core.CreateOperator("Relu", ["x"], ["y"]), [np.ones(3, np.float32)], [0])
    net = core.Net("dc")
    net.Relu("x", "y")
    assert dc.CheckNet(net.Proto(), {"x": np.ones(2, np.float32)})
