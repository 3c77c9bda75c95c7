"""ImageInput against Pillow + numpy references written here: decode (PNG: exact), BGR order,
scale/minsize/warp, centre and random crops, mirroring, per-channel mean/std, grayscale, raw and
Datum records, bounding boxes, label types, additional outputs, layouts, decode errors, arguments."""

from __future__ import annotations

import io

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from framework.core import CreateOperator
from framework.db.datum import Datum, encode_datum
from framework.db.image_db import write_records
from framework.errors import FrameworkError
from framework.memory.workspace import Workspace
from framework.ops import create_operator
from framework.ops.testing import assert_inferred_shapes
from framework.proto.framework_pb2 import TensorProto, TensorProtos

Image = pytest.importorskip("PIL.Image")


def png(rgb: np.ndarray) -> bytes:
    buf = io.BytesIO()
    Image.fromarray(rgb).save(buf, format="PNG")
    return buf.getvalue()


def record(image_proto: TensorProto, label_proto: TensorProto, *more: TensorProto) -> bytes:
    rec = TensorProtos()
    rec.protos.extend([image_proto, label_proto, *more])
    return rec.SerializeToString()


def encoded(data: bytes) -> TensorProto:
    return TensorProto(data_type=TensorProto.STRING, string_data=[data], dims=[1])


def int_label(*v: int) -> TensorProto:
    return TensorProto(data_type=TensorProto.INT32, int32_data=list(v), dims=[len(v)] if len(v) != 1 else [])


def float_label(*v: float) -> TensorProto:
    return TensorProto(data_type=TensorProto.FLOAT, float_data=list(v), dims=[len(v)])


def run_image_input(tmp_path, values, n_out=2, seed=3, **args):
    tmp_path.mkdir(parents=True, exist_ok=True)
    path = str(tmp_path / "images.minidb")
    write_records(path, values, "minidb")
    ws = Workspace()
    ws.run_operator_once(CreateOperator("CreateDB", [], ["reader"], db=path, db_type="minidb"))
    outs = ["data", "label"] + [f"extra{i}" for i in range(n_out - 2)]
    op_def = CreateOperator("ImageInput", ["reader"], outs, **args)
    op_def.device_option.random_seed = seed
    op = create_operator(op_def, ws)
    op.run()
    return ws, op, op_def, [ws.fetch_blob(o) for o in outs]


def ref_scale(img: np.ndarray, target: int, scale_mode: str, warp=False) -> np.ndarray:
    """The reference resize: Pillow BOX to shrink, BILINEAR to enlarge; sizes by Caffe2's formula."""
    h, w = img.shape[:2]
    if warp:
        sh = sw = target
    elif h > w:
        sh, sw = int(np.float32(h) * np.float32(target) / np.float32(w)), target
    else:
        sh, sw = target, int(np.float32(w) * np.float32(target) / np.float32(h))
    if scale_mode == "minsize" and not (sh > h or sw > w):
        return img
    if (sh, sw) == (h, w):
        return img
    f = Image.Resampling.BOX if sh <= h and sw <= w else Image.Resampling.BILINEAR
    out = np.asarray(Image.fromarray(img.squeeze(-1) if img.shape[2] == 1 else img).resize((sw, sh), f))
    return out.reshape(sh, sw, -1)


@settings(max_examples=12, deadline=None)
@given(
    sizes=st.lists(st.tuples(st.integers(6, 20), st.integers(6, 20)), min_size=1, max_size=4),
    crop=st.integers(3, 6),
    extra=st.integers(0, 4),
    mode=st.sampled_from(["scale", "minsize"]),
    warp=st.booleans(),
)
def test_centre_crop_matches_pillow_numpy_reference(tmp_path_factory, sizes, crop, extra, mode, warp):
    rng = np.random.default_rng(len(sizes) * 7 + crop)
    imgs = [rng.integers(0, 256, (h, w, 3), dtype=np.uint8) for h, w in sizes]
    values = [record(encoded(png(im)), int_label(i)) for i, im in enumerate(imgs)]
    mean, std = [10.0, 20.0, 30.0], [2.0, 4.0, 8.0]
    target = crop + extra
    _, _, op_def, (data, label) = run_image_input(
        tmp_path_factory.mktemp("c"),
        values,
        batch_size=len(imgs),
        crop=crop,
        is_test=1,
        warp=int(warp),
        mean_per_channel=mean,
        std_per_channel=std,
        **{mode: target},
        decode_threads=2,
    )
    for i, im in enumerate(imgs):
        bgr = im[:, :, ::-1]
        s = ref_scale(np.ascontiguousarray(bgr), target, mode, warp)
        y, x = (s.shape[0] - crop) // 2, (s.shape[1] - crop) // 2
        want = (s[y : y + crop, x : x + crop].astype(np.float32) - np.float32(mean)) / np.float32(std)
        np.testing.assert_allclose(data[i], want, rtol=1e-6, atol=1e-5)
    assert data.shape == (len(imgs), crop, crop, 3) and data.dtype == np.float32
    np.testing.assert_array_equal(label, np.arange(len(imgs), dtype=np.int32))
    assert_inferred_shapes(op_def, [np.zeros(1)], [data, label], require_known=False)


def test_random_crops_and_mirrors_are_windows_of_the_scaled_image_and_seeded(tmp_path):
    rng = np.random.default_rng(0)
    im = rng.integers(0, 256, (12, 16, 3), dtype=np.uint8)
    values = [record(encoded(png(im)), int_label(0))] * 24
    args = dict(batch_size=24, crop=7, scale=10, mirror=1, decode_threads=4)
    _, _, _, (data, _) = run_image_input(tmp_path, values, **args)
    s = ref_scale(np.ascontiguousarray(im[:, :, ::-1]), 10, "scale").astype(np.float32)
    windows = {}
    for y in range(s.shape[0] - 6):
        for x in range(s.shape[1] - 6):
            w = s[y : y + 7, x : x + 7]
            windows[("plain", y, x)] = w
            windows[("mirror", y, x)] = w[:, ::-1]
    kinds = set()
    for img in data:
        match = [k for k, w in windows.items() if np.array_equal(w, img)]
        assert match, "an output is no window of the scaled image"
        kinds.add(match[0][0])
    assert kinds == {"plain", "mirror"}  # 24 draws of p=1/2
    _, _, _, (again, _) = run_image_input(tmp_path / "b", values, **{**args, "decode_threads": 1})
    np.testing.assert_array_equal(again, data)  # same seed, any thread count


def test_grayscale_nchw_float16_gpu_path_and_raw_bytes_with_boxes(tmp_path):
    rng = np.random.default_rng(1)
    im = rng.integers(0, 256, (10, 10, 3), dtype=np.uint8)
    gray_ref = np.asarray(Image.fromarray(im).convert("L")).astype(np.float32)
    values = [record(encoded(png(im)), float_label(0.5))]
    _, _, op_def, (data, label) = run_image_input(
        tmp_path,
        values,
        batch_size=1,
        crop=10,
        scale=10,
        color=0,
        is_test=1,
        use_gpu_transform=1,
        output_type="FLOAT16",
        mean=100.0,
        std=50.0,
    )
    assert data.shape == (1, 1, 10, 10) and data.dtype == np.float16 and label.dtype == np.float32
    np.testing.assert_allclose(data[0, 0], ((gray_ref - 100) / 50).astype(np.float16), rtol=1e-3)
    op_def = CreateOperator(
        "ImageInput", ["r"], ["d", "l"], batch_size=1, crop=10, scale=10, color=0, use_gpu_transform=1, output_type=12
    )
    assert_inferred_shapes(op_def, [np.zeros(1)], [data, label], require_known=False)
    # raw BYTE HWC (BGR as stored) with a per-record box, and the default box argument
    raw = rng.integers(0, 256, (9, 11, 3), dtype=np.uint8)
    img_proto = TensorProto(data_type=TensorProto.BYTE, dims=[9, 11, 3], byte_data=raw.tobytes())
    box = TensorProto(data_type=TensorProto.INT32, int32_data=[1, 2, 5, 6], dims=[4])
    values = [record(img_proto, int_label(4), box), record(img_proto, int_label(5))]
    _, _, _, (data, label) = run_image_input(
        tmp_path / "raw",
        values,
        batch_size=2,
        crop=5,
        minsize=5,
        is_test=1,
        order="NCHW",
        bounding_ymin=0,
        bounding_xmin=0,
        bounding_height=7,
        bounding_width=7,
    )
    np.testing.assert_array_equal(data[0], raw[1:6, 2:8][:5, :5].transpose(2, 0, 1).astype(np.float32)[:, :, :])
    np.testing.assert_array_equal(data[1], raw[:7, :7][1:6, 1:6].transpose(2, 0, 1).astype(np.float32))
    assert label.tolist() == [4, 5]


def test_label_types_and_additional_outputs(tmp_path):
    im = encoded(png(np.zeros((4, 4, 3), np.uint8)))
    common = dict(batch_size=2, crop=4, scale=4, is_test=1)
    sparse = [record(im, int_label(1, 3)), record(im, int_label(0))]
    _, _, _, (_, lab) = run_image_input(tmp_path / "s", sparse, label_type=1, num_labels=4, **common)
    np.testing.assert_array_equal(lab, [[0, 1, 0, 1], [1, 0, 0, 0]])
    assert lab.dtype == np.int32
    dense = [record(im, float_label(0.1, 0.2, 0.3)), record(im, float_label(1, 2, 3))]
    _, _, _, (_, lab) = run_image_input(tmp_path / "d", dense, label_type=5, num_labels=3, **common)
    np.testing.assert_allclose(lab, [[0.1, 0.2, 0.3], [1, 2, 3]])
    weighted = [record(im, int_label(2, 0), float_label(0.5, 2.0)), record(im, int_label(1), float_label(3.0))]
    _, _, _, (_, lab) = run_image_input(tmp_path / "w", weighted, label_type=3, num_labels=3, **common)
    np.testing.assert_allclose(lab, [[2.0, 0, 0.5], [0, 3.0, 0]])
    assert lab.dtype == np.float32
    extra = TensorProto(data_type=TensorProto.INT64, int64_data=[7, 8], dims=[2])
    extra_f = TensorProto(data_type=TensorProto.FLOAT, float_data=[1.5], dims=[1])
    with_extra = [record(im, int_label(1), extra, extra_f)] * 2
    _, _, op_def, outs = run_image_input(tmp_path / "e", with_extra, n_out=4, output_sizes=[2, 1], **common)
    np.testing.assert_array_equal(outs[2], [[7, 8], [7, 8]])
    assert outs[2].dtype == np.int64 and outs[3].tolist() == [[1.5], [1.5]]
    assert_inferred_shapes(op_def, [np.zeros(1)], outs, require_known=False)
    with pytest.raises(FrameworkError, match=r"sparse label indices \[5\].*num_labels=4"):
        run_image_input(tmp_path / "bad", [record(im, int_label(5))] * 2, label_type=1, num_labels=4, **common)
    with pytest.raises(FrameworkError, match="dense label must hold num_labels=3"):
        run_image_input(tmp_path / "bad2", [record(im, float_label(1.0))] * 2, label_type=2, num_labels=3, **common)


def test_caffe_datum_raw_and_encoded(tmp_path):
    rng = np.random.default_rng(2)
    raw = rng.integers(0, 256, (6, 6, 3), dtype=np.uint8)
    enc = Datum(encoded=True, data=png(raw[:, :, ::-1]), label=9)  # PNG of RGB = raw read as BGR
    values = [encode_datum(raw, label=3), enc.SerializeToString()]
    _, _, _, (data, label) = run_image_input(
        tmp_path, values, batch_size=2, crop=6, scale=6, is_test=1, use_caffe_datum=1
    )
    np.testing.assert_array_equal(data[0], raw.astype(np.float32))
    np.testing.assert_array_equal(data[1], raw.astype(np.float32))
    assert label.tolist() == [3, 9] and label.dtype == np.int32
    gray = encode_datum(rng.integers(0, 256, (6, 6), dtype=np.uint8), label=1)
    _, _, _, (data, _) = run_image_input(
        tmp_path / "g", [gray], batch_size=1, crop=6, scale=6, is_test=1, use_caffe_datum=1, color=1
    )
    assert np.array_equal(data[0, :, :, 0], data[0, :, :, 2])  # GRAY2BGR replicates


def test_decode_errors_follow_max_decode_error_ratio(tmp_path, caplog):
    good = record(encoded(png(np.full((4, 4, 3), 200, np.uint8))), int_label(1))
    bad = record(encoded(b"not an image at all"), int_label(2))
    _, _, _, (data, label) = run_image_input(tmp_path, [good, bad], batch_size=2, crop=4, minsize=4, is_test=1)
    assert (data[0] == 200).all() and (data[1] == 0).all() and label.tolist() == [1, 2]
    assert "failed to decode" in caplog.text
    with pytest.raises(FrameworkError, match="max_decode_error_ratio"):
        run_image_input(tmp_path / "x", [good, bad], batch_size=2, crop=4, minsize=4, max_decode_error_ratio=0.4)


def test_argument_and_input_errors(tmp_path):
    ws = Workspace()
    ok = dict(batch_size=2, crop=4, scale=4)
    for bad, msg in [
        (dict(batch_size=0), "batch_size"),
        (dict(scale=-1), "one and only one of scale or minsize"),
        (dict(minsize=8), "one and only one"),
        (dict(crop=-1), "crop"),
        (dict(scale=3), "no smaller than the crop"),
        (dict(mean_per_channel=[1.0, 2.0], std_per_channel=[1.0, 2.0]), "1 or 3 values"),
        (dict(std=0.0), "non-zero"),
        (dict(label_type=1), "num_labels"),
        (dict(label_type=9), "label_type 9"),
        (dict(use_caffe_datum=1, label_type=2, num_labels=2), "single integer label"),
        (dict(random_scale=[5, 4]), "random_scale"),
        (dict(order="NCWH"), "order"),
    ]:
        with pytest.raises(FrameworkError, match=msg):
            create_operator(CreateOperator("ImageInput", ["r"], ["d", "l"], **{**ok, **bad}), ws)
    with pytest.raises(FrameworkError, match="db argument"):
        create_operator(CreateOperator("ImageInput", [], ["d", "l"], **ok), ws)
    ws.feed_blob("r", np.zeros(2))
    with pytest.raises(FrameworkError, match=r"ImageInput.*'r'.*expected a DB reader"):
        create_operator(CreateOperator("ImageInput", ["r"], ["d", "l"], **ok), ws).run()
    # old form: the op opens its own reader from 'db'
    path = str(tmp_path / "own.minidb")
    write_records(path, [record(encoded(png(np.zeros((4, 4, 3), np.uint8))), int_label(1))], "minidb")
    op = create_operator(CreateOperator("ImageInput", [], ["d", "l"], db=path, db_type="minidb", **ok), ws)
    op.run()
    assert ws.fetch_blob("d").shape == (2, 4, 4, 3) and ws.fetch_blob("l").tolist() == [1, 1]
