"""Caffe2's other brew helpers: parameters, ops and numbers (numpy references written here)."""

import numpy as np
import pytest

from framework import workspace
from framework.caffe2.python import brew
from framework.caffe2.python.model_helper import ModelHelper
from framework.errors import FrameworkError


@pytest.fixture(autouse=True)
def _fresh():
    workspace.ResetWorkspace()
    yield
    workspace.ResetWorkspace()


def _run(m, **feeds):
    for k, v in feeds.items():
        workspace.FeedBlob(k, v)
    workspace.RunNetOnce(m.param_init_net)
    workspace.RunNetOnce(m.net)


def test_instance_norm():
    m = ModelHelper("in")
    out = brew.instance_norm(m, "x", "y", dim_in=3)
    assert out == "y" and [str(p) for p in m.params] == ["y_s", "y_b"]
    assert list(m.net.Proto().op[-1].output) == ["y", "y_sm", "y_siv"]
    x = np.random.default_rng(0).standard_normal((2, 3, 4, 5)).astype(np.float32)
    _run(m, x=x)
    mean = x.mean(axis=(2, 3), keepdims=True)
    ref = (x - mean) / np.sqrt(x.var(axis=(2, 3), keepdims=True) + 1e-5)
    np.testing.assert_allclose(workspace.FetchBlob("y"), ref, rtol=1e-4, atol=1e-4)
    m2 = ModelHelper("in_test")
    brew.instance_norm(m2, "x", "z", dim_in=3, is_test=1)
    assert list(m2.net.Proto().op[-1].output) == ["z"]


def test_prelu_elementwise_linear_layer_norm():
    m = ModelHelper("p")
    brew.prelu(m, "x", "p", num_channels=3)
    brew.elementwise_linear(m, "x2", "el", dim_in=3)
    y, mean, std = brew.layer_norm(m, "x2", "ln", dim_in=3)
    x = np.random.default_rng(1).standard_normal((2, 3, 2, 2)).astype(np.float32)
    x2 = np.random.default_rng(2).standard_normal((4, 3)).astype(np.float32)
    _run(m, x=x, x2=x2)
    np.testing.assert_allclose(workspace.FetchBlob("p"), np.where(x > 0, x, 0.25 * x), rtol=1e-6)
    np.testing.assert_allclose(workspace.FetchBlob("el"), x2, rtol=1e-6)
    ref = (x2 - x2.mean(1, keepdims=True)) / np.sqrt(x2.var(1, keepdims=True) + 1e-4)
    np.testing.assert_allclose(workspace.FetchBlob(str(y)), ref, rtol=1e-4, atol=1e-4)
    assert {"p_slope", "el_w", "el_b", "ln_scale", "ln_bias"} <= {str(p) for p in m.params}


def test_conv_variants_and_group_conv_deprecated_agree():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((1, 4, 5, 5)).astype(np.float32)
    m = ModelHelper("c")
    brew.group_conv(m, "x", "g", dim_in=4, dim_out=6, kernel=3, group=2)
    brew.group_conv_deprecated(m, "x", "gd", dim_in=4, dim_out=6, kernel=3, group=2)
    brew.conv_nd(m, "x", "nd", dim_in=4, dim_out=2, kernel=[3, 3])
    brew.conv_transpose(m, "x", "ct", dim_in=4, dim_out=2, kernel=2, stride=2)
    _run(m, x=x)
    # give the deprecated form the grouped weights and compare
    w = workspace.FetchBlob("g_w")
    b = workspace.FetchBlob("g_b")
    for i in range(2):
        workspace.FeedBlob(f"gd_gconv_{i}_w", w[3 * i : 3 * i + 3])
        workspace.FeedBlob(f"gd_gconv_{i}_b", b[3 * i : 3 * i + 3])
    workspace.RunNetOnce(m.net)
    np.testing.assert_allclose(workspace.FetchBlob("gd"), workspace.FetchBlob("g"), rtol=1e-5, atol=1e-5)
    assert workspace.FetchBlob("nd").shape == (1, 2, 3, 3) and workspace.FetchBlob("ct").shape == (1, 2, 10, 10)
    assert workspace.FetchBlob("ct_w").shape == (4, 2, 2, 2)


def test_spatial_gn_moments_matmul_concat():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((2, 4, 3, 3)).astype(np.float32)
    a, b = rng.standard_normal((2, 3)).astype(np.float32), rng.standard_normal((3, 2)).astype(np.float32)
    m = ModelHelper("g")
    brew.spatial_gn(m, "x", "gn", dim_in=4, group=2)
    sm, sv = brew.moments_with_running_stats(m, "x", "mo", dim_in=4)
    brew.mat_mul(m, ["a", "b"], "ab")
    brew.batch_mat_mul(m, ["a", "b"], "bab")
    brew.depth_concat(m, ["x", "x"], "cc")
    _run(m, x=x, a=a, b=b)
    xg = x.reshape(2, 2, -1)
    ref = ((xg - xg.mean(-1, keepdims=True)) / np.sqrt(xg.var(-1, keepdims=True) + 1e-5)).reshape(x.shape)
    np.testing.assert_allclose(workspace.FetchBlob("gn"), ref, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(workspace.FetchBlob(str(sm)), x.mean(axis=(0, 2, 3)), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(workspace.FetchBlob(str(sv)), x.var(axis=(0, 2, 3)), rtol=1e-4, atol=1e-6)
    np.testing.assert_allclose(workspace.FetchBlob("ab"), a @ b, rtol=1e-5)
    np.testing.assert_allclose(workspace.FetchBlob("bab"), a @ b, rtol=1e-5)
    assert workspace.FetchBlob("cc").shape == (2, 8, 3, 3)
    assert brew.has_helper("instance_norm") and brew.has_helper("db_input")


def test_db_input(tmp_path):
    from framework.caffe2.python import utils
    from framework.proto import caffe2_pb2

    path = str(tmp_path / "d.minidb")
    db = workspace.C.create_db("minidb", path, workspace.C.Mode.new)
    txn = db.new_transaction()
    for i in range(4):
        protos = caffe2_pb2.TensorProtos()
        protos.protos.extend([utils.NumpyArrayToCaffe2Tensor(np.full(2, i, np.float32))])
        txn.put(f"{i}", protos.SerializeToString())
    txn.commit()
    db.close()
    m = ModelHelper("db")
    brew.db_input(m, ["v"], batch_size=2, db=path, db_type="minidb")
    _run(m)
    np.testing.assert_array_equal(workspace.FetchBlob("v"), [[0, 0], [1, 1]])


def test_image_input_nchw(tmp_path):
    PIL = pytest.importorskip("PIL.Image")
    import io

    from framework.proto import caffe2_pb2

    path = str(tmp_path / "img.minidb")
    db = workspace.C.create_db("minidb", path, workspace.C.Mode.new)
    txn = db.new_transaction()
    rng = np.random.default_rng(5)
    pixels = []
    for i in range(2):
        arr = rng.integers(0, 255, size=(8, 8, 3), dtype=np.uint8)
        pixels.append(arr)
        buf = io.BytesIO()
        PIL.fromarray(arr).save(buf, format="PNG")
        protos = caffe2_pb2.TensorProtos()
        img = protos.protos.add(data_type=caffe2_pb2.TensorProto.STRING)
        img.string_data.append(buf.getvalue())
        protos.protos.add(data_type=caffe2_pb2.TensorProto.INT32, int32_data=[i])
        txn.put(str(i), protos.SerializeToString())
    txn.commit()
    db.close()
    m = ModelHelper("ii")
    reader = m.param_init_net.CreateDB([], "reader", db=path, db_type="minidb")
    data, label = brew.image_input(m, reader, ["data", "label"], batch_size=2, scale=8, crop=8, is_test=1)
    assert [o.type for o in m.net.Proto().op] == ["ImageInput", "NHWC2NCHW"]
    _run(m)
    out = workspace.FetchBlob("data")
    assert out.shape == (2, 3, 8, 8)
    np.testing.assert_array_equal(workspace.FetchBlob("label"), [0, 1])
    # ImageInput gives BGR channels (as Caffe2, decoded with OpenCV); NCHW of the NHWC output
    np.testing.assert_allclose(out, np.moveaxis(workspace.FetchBlob("data_nhwc"), -1, 1))
    np.testing.assert_allclose(out[0], np.moveaxis(pixels[0][..., ::-1], -1, 0).astype(np.float32), atol=1)


def test_concat_axis_wins_over_order_as_caffe2s_helper():
    """Caffe2's helpers.array_helpers.concat drops a given ``order`` when a (truthy) ``axis`` is given too;
    the Concat op itself refuses the pair (Caffe2's ConcatOp enforces "not both")."""
    x = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    m = ModelHelper("c", arg_scope={"order": "NHWC"})
    brew.concat(m, ["x", "x"], "c2", axis=2)
    brew.concat(m, ["x", "x"], "c1", order="NCHW", axis=1)
    (op,) = [o for o in m.net.Proto().op if o.output[0] == "c2"]
    assert [a.name for a in op.arg] == ["axis"]
    _run(m, x=x)
    np.testing.assert_array_equal(workspace.FetchBlob("c2"), np.concatenate([x, x], axis=2))
    np.testing.assert_array_equal(workspace.FetchBlob("c1"), np.concatenate([x, x], axis=1))
    bad = ModelHelper("bad")
    bad.net.Concat(["x", "x"], ["y", "y_dims"], axis=2, order="NCHW")
    with pytest.raises(FrameworkError, match="not both"):
        workspace.RunNetOnce(bad.net)
