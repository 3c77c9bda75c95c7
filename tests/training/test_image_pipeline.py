"""End to end: `framework make-db images` over a generated ImageFolder, the models/image_cnn plan
(ImageInput prefetching into a BlobsQueue in a concurrent step while the train net dequeues) trains
to a stated accuracy; a Caffe1 Datum LMDB trains the digits CNN through ImageInput(use_caffe_datum)."""

from __future__ import annotations

import importlib.util
import os
import sys
from pathlib import Path

import numpy as np
import pytest

from framework.cli import main as cli_main
from framework.core import CreateOperator
from framework.memory.workspace import Workspace
from framework.proto.framework_pb2 import NetDef

pytest.importorskip("PIL")
ROOT = Path(__file__).resolve().parents[2]


def _load(path: Path, name: str):
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)  # the repository's own scripts
    return mod


GEN = _load(ROOT / "models" / "image_cnn" / "generate.py", "image_cnn_generate")
IMAGES = _load(ROOT / "models" / "image_cnn" / "make_images.py", "image_cnn_make_images")


def test_plan_file_is_current():
    text = (ROOT / "models" / "image_cnn" / "plan.pbtxt").read_text()
    assert text == GEN.render(), "models/image_cnn/plan.pbtxt is stale: run python models/image_cnn/generate.py"


def test_make_db_images_cli(tmp_path, capsys):
    IMAGES.make_images(str(tmp_path / "shapes"), per_class=5, seed=1)
    assert cli_main(["make-db", "images", str(tmp_path / "shapes"), "--out", str(tmp_path / "db")]) == 0
    out = capsys.readouterr().out
    assert "train.minidb: 16 images" in out and "test.minidb: 4 images" in out
    assert (tmp_path / "db" / "classes.txt").read_text().split("\n")[:4] == [
        "0 cross",
        "1 disk",
        "2 hstripes",
        "3 vstripes",
    ]
    from framework.ops.io.db_input import read_tensor_protos_db

    images, labels = read_tensor_protos_db(tmp_path / "db" / "train.minidb")
    assert images.dtype == object and labels.dtype == np.int32 and sorted(set(labels.tolist())) == [0, 1, 2, 3]
    assert images.reshape(len(labels), -1)[0, 0].startswith(b"\xff\xd8")  # the JPEG bytes, stored as they are
    (tmp_path / "empty").mkdir()
    assert cli_main(["make-db", "images", str(tmp_path / "empty"), "--out", str(tmp_path / "db2")]) != 0
    assert "holds no images" in capsys.readouterr().err


@pytest.mark.slow
def test_prefetch_plan_trains_the_cnn(tmp_path):
    IMAGES.make_images(str(tmp_path / "data" / "shapes"), per_class=150, seed=0)
    assert (
        cli_main(["make-db", "images", str(tmp_path / "data" / "shapes"), "--out", str(tmp_path / "data" / "images")])
        == 0
    )
    ws = Workspace(root_folder=str(tmp_path))
    ws.run_plan(GEN.build_plan(iters=150))
    acc = float(ws.fetch_blob("test_accuracy"))
    assert acc >= 0.85, f"held-out accuracy {acc:.3f} after 150 iterations"
    assert ws.get_blob("batch_queue")._obj.closed and bool(ws.fetch_blob("queue_closed"))
    # the train net consumed exactly its 150 batches, the prefetcher made at most capacity + 2 more
    queue = ws.get_blob("batch_queue")._obj
    assert queue.reads == 150 and 150 <= queue.writes <= 150 + GEN.QUEUE_CAPACITY


@pytest.mark.slow
def test_caffe1_datum_lmdb_trains_digits_cnn_through_image_input(tmp_path):
    pytest.importorskip("sklearn")
    pytest.importorskip("lmdb")
    from framework.db.datum import encode_datum
    from framework.db.image_db import write_records

    sys.path.insert(0, str(ROOT / "examples"))
    cnn = _load(ROOT / "examples" / "train_cnn_digits.py", "example_cnn_digits")
    common = _load(ROOT / "examples" / "digits_common.py", "example_digits_common")
    data = common.load_digits_split(image=True)
    pixels = np.round(data.x_train[:, 0] * 255).astype(np.uint8)  # N x 8 x 8 gray, as Caffe's convert_imageset
    order = np.random.default_rng(0).permutation(len(pixels))
    path = str(tmp_path / "digits_train_lmdb")
    write_records(path, (encode_datum(pixels[i], int(data.y_train[i])) for i in order), "lmdb")

    init, train = cnn.build_brew()
    init.op.add().CopyFrom(CreateOperator("CreateDB", [], ["reader"], db=path, db_type="lmdb"))
    feed = CreateOperator(
        "ImageInput", ["reader"], ["data", "label"], batch_size=64, use_caffe_datum=1, color=0,
        scale=8, crop=8, is_test=1, mean=0.0, std=255.0, order="NCHW", decode_threads=2,
    )  # fmt: skip
    net = NetDef()
    net.CopyFrom(train)
    del net.op[:]
    net.op.extend([feed, *train.op])
    ws = Workspace()
    ws.run_net_once(init)
    ws.create_net(net)
    losses = []
    for _ in range(160):
        ws.run_net(net.name)
        losses.append(float(ws.fetch_blob("loss")))
    assert ws.fetch_blob("data").shape == (64, 1, 8, 8) and ws.fetch_blob("label").dtype == np.int32
    acc = common.evaluate(ws, train, data)
    assert acc >= 0.9, f"test accuracy {acc:.3f}; loss {np.mean(losses[:5]):.3f} -> {np.mean(losses[-5:]):.3f}"
    sys.path.remove(str(ROOT / "examples"))
    assert os.path.isdir(path)
